// Backlog threads: a job whose turn stopped at its budget (a trial replayed
// from the start) goes on in turns on threads of lower CPU priority, and
// the workers serve the other jobs' new steps meanwhile (fairness, issue 10).

#include <dirent.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/rules_engine/scheduling/scheduler_test_fixture.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

using testing::TrialWriter;

// The nice value of every thread of this process (/proc/self/task/*/stat).
std::vector<int> ThreadNiceValues() {
  std::vector<int> values;
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return values;
  while (const dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream file(absl::StrCat("/proc/self/task/", entry->d_name, "/stat"));
    std::stringstream text;
    text << file.rdbuf();
    const std::string stat = text.str();
    // After the command name in parentheses: state is field 3, nice field 19.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
    int nice;
    if (fields.size() > 16 && absl::SimpleAtoi(fields[16], &nice)) values.push_back(nice);
  }
  closedir(tasks);
  return values;
}

class BacklogThreadsTest : public testing::FakeClockSchedulerTest {};

TEST_F(BacklogThreadsTest, BacklogThreadsRunAtTheirNiceValue) {
  options_.worker_threads = 1;
  options_.backlog_threads = 2;
  options_.backlog_nice = 7;
  const auto count_nice = [] {
    const std::vector<int> values = ThreadNiceValues();
    return std::count(values.begin(), values.end(), 7);
  };
  ASSERT_EQ(count_nice(), 0);  // The test itself runs at another nice value.
  StartScheduler();
  // Each thread lowers its own priority as it starts.
  ::debugplane::testing::WaitUntil([&] { return count_nice() >= 2; });
  EXPECT_EQ(count_nice(), 2);
}

// One worker, one backlog thread: the replay's first turn (on the worker)
// stops at 4 steps and the rest is read on the backlog thread, each step
// once (the rule concludes on all 300 steps), while the other job's NaN step
// is found by the worker.
TEST_F(BacklogThreadsTest, ABacklogIsReadWholeOnItsThreadWhileTheWorkerServesOthers) {
  constexpr int kReplaySteps = 300;
  options_.worker_threads = 1;
  options_.backlog_threads = 1;
  options_.max_steps_per_turn = 4;
  options_.turn_time_slice = absl::InfiniteDuration();  // The step bound alone.
  options_.poll_interval = absl::InfiniteDuration();
  {
    TrialWriter replay((dir_.path() / "replay").string());
    for (int step = 0; step < kReplaySteps; ++step) {
      replay.AddStep(step, Mode::kTrain, step, {{"CrossEntropyLoss_output_0", {}, {0.5}}});
    }
    replay.EndTraining();
    TrialWriter nan((dir_.path() / "nan").string());
    nan.AddStep(0, Mode::kTrain, 0,
                {{"CrossEntropyLoss_output_0", {}, {std::numeric_limits<double>::quiet_NaN()}}});
  }
  CreateJob("a-replay", (dir_.path() / "replay").string(), "ExplodingTensor");
  CreateJob("b-nan", (dir_.path() / "nan").string(), "ExplodingTensor");
  StartScheduler();
  EXPECT_EQ(WaitForRule("b-nan", "ExplodingTensor").rule_evaluation_status(),
            v1::RuleEvaluationStatus::IssuesFound);
  const v1::DebugRuleEvaluationStatus replay = WaitForRule("a-replay", "ExplodingTensor");
  EXPECT_EQ(replay.rule_evaluation_status(), v1::RuleEvaluationStatus::NoIssuesFound)
      << replay.status_details();
  EXPECT_EQ(replay.last_evaluated_step(), kReplaySteps - 1);
  EXPECT_THAT(replay.status_details(), ::testing::HasSubstr(absl::StrCat(kReplaySteps, " steps")));
}

}  // namespace
}  // namespace debugplane::rules_engine
