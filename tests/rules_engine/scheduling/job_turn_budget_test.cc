// JobEvaluator::Turn within its time slice over a backlog: the reader is
// given the turn's deadline, so neither the index pass over every pending
// step nor a batch of steps runs past it (fairness, issue 10).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/scheduling/job_evaluation.h"
#include "tests/core/test_util.h"
#include "tests/rules_engine/local_store.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

using ::debugplane::testing::CallSync;
using ::debugplane::testing::ScopedTempDir;
using testing::TrialWriter;

// The local store, counting the index and event files read: the reader's
// units of work.
class CountingStore : public testing::LocalStoreWrapper {
 public:
  using LocalStoreWrapper::LocalStoreWrapper;
  absl::Status ReadRangeInto(absl::string_view key, uint64_t offset, uint64_t length,
                             std::string* out) const override {
    if (absl::StartsWith(key, "index/") || absl::StartsWith(key, "events/")) ++units;
    return LocalStoreWrapper::ReadRangeInto(key, offset, length, out);
  }

  mutable std::atomic<int> units{0};
};

// Moves on by a millisecond every time it is read: a turn's deadline then
// falls after a known number of reads of the clock, whatever the machine's
// speed or load.
class TickingClock final : public base::Clock {
 public:
  absl::Time Now() const override {
    return absl::FromUnixSeconds(1'700'000'000) + absl::Milliseconds(ticks_++);
  }
  absl::Duration RealTimeUntil(absl::Time deadline) const override {
    return std::max(absl::ZeroDuration(), deadline - Now());
  }
  int64_t AddJumpListener(std::function<void()>) override { return 1; }
  void RemoveJumpListener(int64_t) override {}

 private:
  mutable std::atomic<int64_t> ticks_{0};
};

TEST(JobTurnBudgetTest, EveryTurnOverABacklogStaysWithinItsSlice) {
  constexpr int kSteps = 200;
  ScopedTempDir dir;
  const std::string trial = (dir.path() / "trial").string();
  {
    TrialWriter writer(trial);
    for (int step = 0; step < kSteps; ++step) {
      writer.AddStep(step, Mode::kTrain, step,
                     {{"CrossEntropyLoss_output_0", {}, {static_cast<double>(step)}}});
    }
  }
  auto manager = ::debugplane::testing::OpenTestManager(dir.path());
  ASSERT_TRUE(manager.ok()) << manager.status();
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name("replay");
  request.set_role_arn("arn:aws:iam::111122223333:role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_debug_hook_config()->set_s3_output_path(trial);
  auto* config = request.add_debug_rule_configurations();
  config->set_rule_configuration_name("ExplodingTensor");
  config->set_rule_evaluator_image("builtin");
  (*config->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
  ASSERT_TRUE((CallSync<v1::CreateTrainingJobResponse>(
                   **manager, &core::TrainingJobHandler::CreateTrainingJob, request))
                  .ok());
  const std::shared_ptr<const core::JobRecord> job = (*manager)->GetJob("replay");
  ASSERT_NE(job, nullptr);

  auto clock = std::make_shared<TickingClock>();
  RuleStatusRecorder recorder(manager->get(), RuleStatusRecorderOptions{});
  const ReportWriter reports(ReportWriterOptions{});
  const JobEvaluator evaluator(manager->get(), &recorder, &reports,
                               JobEvaluatorOptions{.clock = clock,
                                                   .progress_interval = absl::InfiniteDuration(),
                                                   .max_steps_per_turn = 100000,
                                                   .turn_time_slice = absl::Milliseconds(3)});

  std::shared_ptr<CountingStore> store = testing::WrapLocal<CountingStore>(trial);
  JobEvaluation evaluation;
  evaluation.job_name = "replay";
  evaluation.trial = objectstore::StoreLocation{store, ""};
  evaluation.reader = std::make_unique<TrialReader>(*evaluation.trial);
  absl::StatusOr<std::unique_ptr<Rule>> rule =
      CreateBuiltinRule("ExplodingTensor", RuleParameters{});
  ASSERT_TRUE(rule.ok()) << rule.status();
  evaluation.rules.push_back({"ExplodingTensor", *std::move(rule)});

  // The slice is 3 ticks; the turn reads the clock once for its deadline,
  // the reader before each unit after its first, the turn after each read:
  // at most 3 units a turn. One unbounded read would do 400 (200 index files,
  // 200 steps) in the first turn.
  int turns = 0;
  int64_t last_step = -1;
  for (; turns < 1000; ++turns) {
    const int before = store->units.load();
    const TurnResult result = evaluator.Turn(evaluation, *job, /*finishing=*/false, {});
    const int units = store->units.load() - before;
    EXPECT_GE(units, result.more_data ? 1 : 0) << "turn " << turns;
    EXPECT_LE(units, 3) << "turn " << turns;
    // Steps evaluated in order, none skipped.
    EXPECT_GE(evaluation.rules[0].last_step, last_step);
    last_step = evaluation.rules[0].last_step;
    if (!result.more_data) break;
  }
  EXPECT_EQ(last_step, kSteps - 1);
  EXPECT_EQ(evaluation.reader->summary().steps_seen, kSteps);
  EXPECT_EQ(store->units.load(), 2 * kSteps);  // Each file read once.
  EXPECT_GE(turns, 2 * kSteps / 3);
  EXPECT_FALSE(evaluation.rules[0].done);  // All finite; training goes on.
  recorder.Shutdown();
}

}  // namespace
}  // namespace debugplane::rules_engine
