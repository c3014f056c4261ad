// TrialReader::ReadNewSteps within a ReadBudget: a backlog (a trial whose
// every step is pending at once) is read in bounded calls that together
// return exactly what one unbounded call returns.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rules_engine/smdebug/trial_reader.h"
#include "tests/rules_engine/local_store.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

using testing::TrialWriter;

bool All(const std::string&, const TrialInfo&) { return true; }

// The local store, counting the index files and event files read and the
// listings made (the reader's units of work).
class CountingStore : public testing::LocalStoreWrapper {
 public:
  using LocalStoreWrapper::LocalStoreWrapper;
  absl::StatusOr<objectstore::ListResult> List(
      const objectstore::ListOptions& options) const override {
    ++lists;
    return LocalStoreWrapper::List(options);
  }
  absl::Status ReadRangeInto(absl::string_view key, uint64_t offset, uint64_t length,
                             std::string* out) const override {
    if (absl::StartsWith(key, "index/")) ++index_reads;
    if (absl::StartsWith(key, "events/")) ++event_reads;
    return LocalStoreWrapper::ReadRangeInto(key, offset, length, out);
  }

  mutable std::atomic<int> lists{0};
  mutable std::atomic<int> index_reads{0};
  mutable std::atomic<int> event_reads{0};
};

std::shared_ptr<CountingStore> OpenCounting(const std::string& dir) {
  return testing::WrapLocal<CountingStore>(dir);
}

// A clock that moves on by `tick` every time it is read: a budget's deadline
// then falls after a known number of reads, whatever the machine's speed.
struct TickingClock {
  absl::Time time = absl::FromUnixSeconds(1'000'000);
  absl::Duration tick = absl::Milliseconds(1);
  absl::Time Now() {
    const absl::Time now = time;
    time += tick;
    return now;
  }
};

// Steps compared by everything a rule sees.
void ExpectSameSteps(const std::vector<Step>& got, const std::vector<Step>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("step index ", i));
    EXPECT_EQ(got[i].global_step, want[i].global_step);
    EXPECT_EQ(got[i].mode, want[i].mode);
    EXPECT_EQ(got[i].mode_step, want[i].mode_step);
    ASSERT_EQ(got[i].tensors.size(), want[i].tensors.size());
    for (size_t t = 0; t < got[i].tensors.size(); ++t) {
      EXPECT_EQ(got[i].tensors[t].name, want[i].tensors[t].name);
      EXPECT_EQ(got[i].tensors[t].worker, want[i].tensors[t].worker);
      EXPECT_EQ(got[i].tensors[t].dtype, want[i].tensors[t].dtype);
      EXPECT_EQ(got[i].tensors[t].shape, want[i].tensors[t].shape);
      EXPECT_EQ(got[i].tensors[t].values, want[i].tensors[t].values);
    }
  }
}

// Two workers, `steps` steps; worker_1 skips every seventh step.
std::string WriteTwoWorkerTrial(const std::string& name, int64_t steps) {
  const std::string dir = testing::FreshTempDir(absl::StrCat("reader_budget_", name));
  TrialWriter w0(dir, "worker_0", 2);
  TrialWriter w1(dir, "worker_1", 2);
  for (int64_t step = 0; step < steps; ++step) {
    const double x = static_cast<double>(step);
    w0.AddStep(step, Mode::kTrain, step,
               {{"loss_output_0", {}, {x}}, {"gradient/fc1.weight", {2, 2}, {x, 1, 2, 3}}});
    if (step % 7 != 3) {
      w1.AddStep(step, Mode::kTrain, step,
                 {{"loss_output_0", {}, {-x}}, {"gradient/fc1.weight", {2, 2}, {3, 2, 1, x}}});
    }
  }
  return dir;
}

std::vector<Step> ReadUnbounded(const std::string& dir) {
  TrialReader reader(objectstore::StoreLocation{OpenCounting(dir), ""});
  reader.SetTrainingEnded();
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All);
  EXPECT_TRUE(steps.ok()) << steps.status();
  EXPECT_TRUE(reader.finished());
  EXPECT_FALSE(reader.stopped_at_budget());
  return steps.ok() ? *std::move(steps) : std::vector<Step>();
}

TEST(ReaderBudgetTest, StepBudgetReturnsTheUnboundedStepsInOrderAcrossCalls) {
  constexpr int64_t kSteps = 37;
  constexpr size_t kBudget = 5;
  const std::string dir = WriteTwoWorkerTrial("steps", kSteps);
  const std::vector<Step> want = ReadUnbounded(dir);
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));

  TrialReader reader(objectstore::StoreLocation{OpenCounting(dir), ""});
  reader.SetTrainingEnded();
  std::vector<Step> got;
  int calls = 0;
  for (; calls < 100 && !reader.finished(); ++calls) {
    absl::StatusOr<std::vector<Step>> steps =
        reader.ReadNewSteps(All, ReadBudget{.max_steps = kBudget});
    ASSERT_TRUE(steps.ok()) << steps.status();
    ASSERT_LE(steps->size(), kBudget);
    // Stopped at the budget exactly while steps remain.
    EXPECT_EQ(reader.stopped_at_budget(), !reader.finished()) << "call " << calls;
    for (Step& step : *steps) got.push_back(std::move(step));
  }
  EXPECT_TRUE(reader.finished());
  EXPECT_EQ(calls, (kSteps + kBudget - 1) / kBudget);
  ExpectSameSteps(got, want);
  EXPECT_EQ(reader.summary().steps_seen, kSteps);
}

TEST(ReaderBudgetTest, DeadlineBoundsTheIndexPassAndEveryCallKeepsItsPlace) {
  // Every index file pending at once: an unbounded first call would parse
  // them all before returning a step.
  constexpr int64_t kSteps = 60;
  const std::string dir = testing::FreshTempDir("reader_budget_deadline");
  {
    TrialWriter writer(dir);
    for (int64_t step = 0; step < kSteps; ++step) {
      writer.AddStep(step, Mode::kTrain, step,
                     {{"loss_output_0", {}, {static_cast<double>(step)}}});
    }
    writer.EndTraining();
  }
  const std::vector<Step> want = ReadUnbounded(dir);
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));

  std::shared_ptr<CountingStore> store = OpenCounting(dir);
  TrialReader reader(objectstore::StoreLocation{store, ""});
  TickingClock clock;
  // A budget of 3 ticks: a call does at most 4 units (the budget is checked
  // before each unit once one is done, and the clock ticks at each check).
  constexpr int kUnitsPerCall = 4;
  const auto budget = [&clock] {
    return ReadBudget{.deadline = clock.time + absl::Milliseconds(3),
                      .now = [&clock] { return clock.Now(); }};
  };

  absl::StatusOr<std::vector<Step>> first = reader.ReadNewSteps(All, budget());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->empty());  // Still in the index pass.
  EXPECT_EQ(store->index_reads.load(), kUnitsPerCall);
  EXPECT_TRUE(reader.stopped_at_budget());

  std::vector<Step> got;
  int calls = 1;
  for (; calls < 1000 && !reader.finished(); ++calls) {
    const int index_before = store->index_reads.load();
    const int events_before = store->event_reads.load();
    absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All, budget());
    ASSERT_TRUE(steps.ok()) << steps.status();
    const int units =
        store->index_reads.load() - index_before + store->event_reads.load() - events_before;
    EXPECT_GE(units, 1) << "call " << calls;              // Every call makes progress...
    EXPECT_LE(units, kUnitsPerCall) << "call " << calls;  // ...within its budget.
    for (Step& step : *steps) got.push_back(std::move(step));
  }
  EXPECT_TRUE(reader.finished());
  ExpectSameSteps(got, want);
  // Each index file and each event file read once: the calls went on from
  // where the previous one stopped.
  EXPECT_EQ(store->index_reads.load(), kSteps);
  EXPECT_EQ(store->event_reads.load(), kSteps);
  EXPECT_EQ(calls, 2 * kSteps / kUnitsPerCall);
}

TEST(ReaderBudgetTest, NewFilesAreListedOnceTheBacklogIsRead) {
  const std::string dir = testing::FreshTempDir("reader_budget_new_files");
  TrialWriter writer(dir);
  for (int64_t step = 0; step < 10; ++step) {
    writer.AddStep(step, Mode::kTrain, step, {{"loss_output_0", {}, {1.0}}});
  }
  std::shared_ptr<CountingStore> store = OpenCounting(dir);
  TrialReader reader(objectstore::StoreLocation{store, ""});
  absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All, ReadBudget{.max_steps = 4});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 4u);
  EXPECT_TRUE(reader.stopped_at_budget());
  // Written while the backlog is read: returned after it, in order.
  writer.AddStep(10, Mode::kTrain, 10, {{"loss_output_0", {}, {2.0}}});
  writer.EndTraining();
  std::vector<int64_t> seen;
  for (const Step& step : *got) seen.push_back(step.global_step);
  for (int call = 0; call < 10 && !reader.finished(); ++call) {
    got = reader.ReadNewSteps(All, ReadBudget{.max_steps = 4});
    ASSERT_TRUE(got.ok()) << got.status();
    for (const Step& step : *got) seen.push_back(step.global_step);
  }
  EXPECT_TRUE(reader.finished());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
}

}  // namespace
}  // namespace debugplane::rules_engine
