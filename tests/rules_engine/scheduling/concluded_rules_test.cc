// A rule whose evaluation concluded is not started again by the commits that
// still show it InProgress: its progress is written ahead of its verdict, and
// that commit reaches the scheduler after the evaluation ended. Starting it
// again read the whole trial a second time (every index and event file: on
// S3 a second GET of each object) until the verdict's commit arrived.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/rules_engine/scheduling/scheduler_test_fixture.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

class ConcludedRulesTest : public testing::SchedulerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(SchedulerTest::SetUp());
    options_.poll_interval = absl::Milliseconds(50);
    options_.on_data_read = [this](const std::string& job, int64_t last_step) {
      absl::MutexLock lock(&mu_);
      reads_[job].push_back(last_step);
    };
    StartScheduler();
  }

  // The last step read by each turn of `job` that read data, in order.
  std::vector<int64_t> Reads(const std::string& job) {
    absl::MutexLock lock(&mu_);
    return reads_[job];
  }

  absl::Mutex mu_;
  std::map<std::string, std::vector<int64_t>> reads_ ABSL_GUARDED_BY(mu_);
};

TEST_F(ConcludedRulesTest, ATrialReadToItsVerdictIsNotReadAgain) {
  constexpr int kSteps = 40;
  constexpr int kJobs = 4;
  for (int j = 0; j < kJobs; ++j) {
    const std::string trial = (dir_.path() / ("trial" + std::to_string(j))).string();
    testing::TrialWriter writer(trial);
    for (int step = 0; step < kSteps; ++step) {
      writer.AddStep(step, Mode::kTrain, step,
                     {{"CrossEntropyLoss_output_0", {}, {1.0 / (1 + step)}}});
    }
    writer.EndTraining();  // One worker: the trial ends here.
    CreateJob("job" + std::to_string(j), trial, "ExplodingTensor");
  }
  for (int j = 0; j < kJobs; ++j) {
    const std::string job = "job" + std::to_string(j);
    EXPECT_EQ(WaitForRule(job, "ExplodingTensor").rule_evaluation_status(),
              v1::RuleEvaluationStatus::NoIssuesFound);
  }
  // Time for a stray evaluation to start and read (it did within
  // milliseconds: the progress commit follows the verdict's turn).
  absl::SleepFor(absl::Milliseconds(300));
  for (int j = 0; j < kJobs; ++j) {
    const std::string job = "job" + std::to_string(j);
    SCOPED_TRACE(job);
    const std::vector<int64_t> reads = Reads(job);
    ASSERT_FALSE(reads.empty());
    // One evaluation, reading forward: a second one starts again below.
    for (size_t i = 1; i < reads.size(); ++i) EXPECT_GT(reads[i], reads[i - 1]) << "turn " << i;
    EXPECT_EQ(reads.back(), kSteps - 1);
  }
  EXPECT_EQ(scheduler_->active_jobs(), 0u);
}

}  // namespace
}  // namespace debugplane::rules_engine
