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
#include "rules_engine/scheduling/evaluation_scheduler.h"
#include "tests/core/test_util.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

using ::debugplane::testing::CallSync;
using ::debugplane::testing::ScopedTempDir;
using H = core::TrainingJobHandler;
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

constexpr absl::Duration kPatience = absl::Seconds(30);

class BacklogThreadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto manager = ::debugplane::testing::OpenTestManager(dir_.path());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    options_.data_roots.push_back(dir_.path());
    options_.clock = clock_;
  }
  void TearDown() override {
    scheduler_.reset();
    manager_.reset();
  }
  void StartScheduler() {
    scheduler_ = std::make_unique<EvaluationScheduler>(manager_.get(), options_);
    scheduler_->Start();
  }

  void CreateJob(const std::string& name, const std::string& trial, const std::string& rule,
                 const std::map<std::string, std::string>& parameters = {}) {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(name);
    request.set_role_arn("arn:aws:iam::111122223333:role/Test");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
    request.mutable_debug_hook_config()->set_s3_output_path(trial);
    auto* config = request.add_debug_rule_configurations();
    config->set_rule_configuration_name(rule);
    config->set_rule_evaluator_image("builtin");
    (*config->mutable_rule_parameters())["rule_to_invoke"] = rule;
    for (const auto& [key, value] : parameters) (*config->mutable_rule_parameters())[key] = value;
    auto created =
        CallSync<v1::CreateTrainingJobResponse>(*manager_, &H::CreateTrainingJob, request);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  v1::DebugRuleEvaluationStatus Rule(const std::string& job, const std::string& rule) {
    // The record is held while its statuses are read: the commit thread
    // may publish a newer one and drop this one meanwhile.
    const std::shared_ptr<const core::JobRecord> record = manager_->GetJob(job);
    for (const auto& status : record->debug_rule_evaluation_statuses()) {
      if (status.rule_configuration_name() == rule) return status;
    }
    ADD_FAILURE() << "no rule " << rule << " in " << job;
    return {};
  }

  // Waits (real time, bounded) until the rule is terminal.
  v1::DebugRuleEvaluationStatus WaitForRule(const std::string& job, const std::string& rule) {
    const absl::Time deadline = absl::Now() + kPatience;
    while (absl::Now() < deadline) {
      v1::DebugRuleEvaluationStatus status = Rule(job, rule);
      if (core::IsTerminal(status.rule_evaluation_status())) return status;
      absl::SleepFor(absl::Milliseconds(5));
    }
    ADD_FAILURE() << rule << " of " << job << " never ended";
    return {};
  }

  ScopedTempDir dir_;
  std::shared_ptr<base::FakeClock> clock_ = std::make_shared<base::FakeClock>();
  EvaluationSchedulerOptions options_;
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<EvaluationScheduler> scheduler_;
};

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
  const absl::Time deadline = absl::Now() + kPatience;
  while (count_nice() < 2 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
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
