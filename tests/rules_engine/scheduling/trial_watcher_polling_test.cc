// TrialWatcher's list polling, for stores without change notification
// (object storage): probes follow the watcher's Clock (a FakeClock here, no
// sleeping), fast while data arrives, backing off while idle, within a cap
// of list requests per job per minute. The store is the real local store
// seen through a wrapper that offers no notification (as S3 does not) and
// counts list requests, or fails them as an unreachable store does.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/scheduling/trial_watcher.h"
#include "tests/rules_engine/local_store.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/support/wait_until.h"

namespace debugplane::rules_engine {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;

constexpr absl::Duration kPatience = absl::Seconds(10);

// A local store without change notification: every directory is polled.
class UnwatchableStore final : public testing::LocalStoreWrapper {
 public:
  UnwatchableStore(std::shared_ptr<objectstore::ObjectStore> local,
                   std::shared_ptr<base::Clock> clock)
      : LocalStoreWrapper(std::move(local)), clock_(std::move(clock)) {}

  absl::StatusOr<objectstore::ListResult> List(
      const objectstore::ListOptions& options) const override {
    absl::MutexLock lock(&mu_);
    list_times_.push_back(clock_->Now());
    if (unreachable_) return absl::UnavailableError("http://127.0.0.1:1 is unreachable");
    return LocalStoreWrapper::List(options);
  }

  void set_unreachable(bool unreachable) {
    absl::MutexLock lock(&mu_);
    unreachable_ = unreachable;
  }
  std::vector<absl::Time> list_times() const {
    absl::MutexLock lock(&mu_);
    return list_times_;
  }

 private:
  const std::shared_ptr<base::Clock> clock_;
  mutable absl::Mutex mu_;
  mutable std::vector<absl::Time> list_times_ ABSL_GUARDED_BY(mu_);
  bool unreachable_ ABSL_GUARDED_BY(mu_) = false;
};

class TrialWatcherPollingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto local = objectstore::LocalObjectStore::Open(dir_.path().string());
    ASSERT_TRUE(local.ok()) << local.status();
    local_ = *local;
    store_ = std::make_shared<UnwatchableStore>(local_, clock_);
    fs::create_directories(dir_.path() / "trial");
  }

  std::unique_ptr<TrialWatcher> MakeWatcher(ListPolling policy = {}) {
    return std::make_unique<TrialWatcher>(
        TrialWatcherOptions{
            .poll_interval = absl::InfiniteDuration(), .clock = clock_, .list_polling = policy},
        [this](const std::string& job) {
          absl::MutexLock lock(&mu_);
          wakes_.push_back({job, clock_->Now()});
        },
        [] {});
  }

  WatchedOutputs Trial() { return {.trial = objectstore::StoreLocation{store_, "trial"}}; }

  // Moves the clock to `job`'s next probe and waits (real time, bounded)
  // until it has run and set the one after; returns the interval to it.
  absl::Duration RunProbe(TrialWatcher& watcher, const std::string& job) {
    const std::optional<absl::Time> due = watcher.next_probe(job);
    EXPECT_TRUE(due.has_value());
    if (!due.has_value()) return absl::ZeroDuration();
    clock_->Advance(*due - clock_->Now());
    std::optional<absl::Time> next;
    ::debugplane::testing::WaitUntil(
        [&] {
          next = watcher.next_probe(job);
          return next.has_value() && *next != *due;
        },
        kPatience);
    EXPECT_TRUE(next.has_value() && *next != *due) << "the probe did not run";
    return next.value_or(*due) - clock_->Now();
  }

  void AddIndexFile(int step) {
    const fs::path dir = dir_.path() / "trial" / "index" / "000000000";
    fs::create_directories(dir);
    char name[64];
    std::snprintf(name, sizeof(name), "%012d_worker_0.json", step);
    std::ofstream(dir / name) << "{}";
  }

  int WakeCount() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(wakes_.size());
  }
  std::vector<absl::Time> WakeTimes() {
    absl::MutexLock lock(&mu_);
    std::vector<absl::Time> times;
    for (const auto& wake : wakes_) times.push_back(wake.second);
    return times;
  }

  ScopedTempDir dir_;
  std::shared_ptr<base::FakeClock> clock_ = std::make_shared<base::FakeClock>();
  std::shared_ptr<objectstore::ObjectStore> local_;
  std::shared_ptr<UnwatchableStore> store_;
  absl::Mutex mu_;
  std::vector<std::pair<std::string, absl::Time>> wakes_ ABSL_GUARDED_BY(mu_);
};

TEST_F(TrialWatcherPollingTest, FastWhileDataArrivesBackingOffWhileIdle) {
  auto watcher = MakeWatcher();
  EXPECT_TRUE(watcher->Update("job", Trial()));
  EXPECT_TRUE(watcher->ListPolled("job"));
  EXPECT_EQ(watcher->next_probe("job"), clock_->Now() + absl::Milliseconds(150));

  // Idle: the interval doubles up to 5 s, and nothing wakes the job.
  std::vector<absl::Duration> idle;
  for (int i = 0; i < 7; ++i) idle.push_back(RunProbe(*watcher, "job"));
  EXPECT_EQ(idle, (std::vector<absl::Duration>{absl::Milliseconds(300), absl::Milliseconds(600),
                                               absl::Milliseconds(1200), absl::Milliseconds(2400),
                                               absl::Milliseconds(4800), absl::Seconds(5),
                                               absl::Seconds(5)}));
  EXPECT_EQ(WakeCount(), 0);

  // A new step's index file: the job is woken and probed fast again.
  AddIndexFile(1);
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(150));
  EXPECT_EQ(WakeCount(), 1);
  AddIndexFile(2);
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(150));
  EXPECT_EQ(WakeCount(), 2);
  // Nothing more: backing off again, no wake.
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(300));
  EXPECT_EQ(WakeCount(), 2);

  // training_job_end.ts in the trial directory is a change too.
  std::ofstream(dir_.path() / "trial" / "training_job_end.ts") << "";
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(150));
  EXPECT_EQ(WakeCount(), 3);
}

TEST_F(TrialWatcherPollingTest, AtMostASecondApartForAMinuteAfterData) {
  // A training that writes a step every few seconds is still arriving: its
  // next step must not wait for an idle job's 5 s.
  auto watcher = MakeWatcher();
  ASSERT_TRUE(watcher->Update("job", Trial()));
  AddIndexFile(1);
  ASSERT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(150));
  const absl::Time data_seen = clock_->Now();
  std::vector<absl::Duration> intervals;
  while (clock_->Now() < data_seen + absl::Seconds(58))
    intervals.push_back(RunProbe(*watcher, "job"));
  EXPECT_EQ(std::vector<absl::Duration>(intervals.begin(), intervals.begin() + 4),
            (std::vector<absl::Duration>{absl::Milliseconds(300), absl::Milliseconds(600),
                                         absl::Seconds(1), absl::Seconds(1)}));
  EXPECT_EQ(*std::max_element(intervals.begin(), intervals.end()), absl::Seconds(1));
  // A minute after the data: backing off to the idle interval.
  std::vector<absl::Duration> after;
  absl::Duration interval = absl::ZeroDuration();
  while (interval <= absl::Seconds(1)) interval = RunProbe(*watcher, "job");
  EXPECT_GE(clock_->Now() - data_seen, absl::Seconds(60));
  after.push_back(interval);
  after.push_back(RunProbe(*watcher, "job"));
  after.push_back(RunProbe(*watcher, "job"));
  EXPECT_EQ(after,
            (std::vector<absl::Duration>{absl::Seconds(2), absl::Seconds(4), absl::Seconds(5)}));
}

TEST_F(TrialWatcherPollingTest, OneMoreWakeASecondAfterTheDataStops) {
  // The scheduler records a rule's progress at the end of a look, at most
  // once a second: the look after the last burst must come.
  auto watcher = MakeWatcher();
  ASSERT_TRUE(watcher->Update("job", Trial()));
  AddIndexFile(1);
  RunProbe(*watcher, "job");
  ASSERT_EQ(WakeCount(), 1);
  for (int i = 0; i < 6; ++i) RunProbe(*watcher, "job");  // About 9 s of the clock.
  const std::vector<absl::Time> wakes = WakeTimes();
  ASSERT_EQ(wakes.size(), 2u);
  EXPECT_GE(wakes[1] - wakes[0], absl::Seconds(1));
  EXPECT_LT(wakes[1] - wakes[0], absl::Milliseconds(1500));
}

TEST_F(TrialWatcherPollingTest, ListRequestsPerJobStayWithinTheCapInEveryMinute) {
  ListPolling policy;
  policy.max_list_requests_per_minute = 20;
  auto watcher = MakeWatcher(policy);
  ASSERT_TRUE(watcher->Update("job", Trial()));
  const absl::Time start = clock_->Now();
  // Data keeps arriving for three minutes: without the cap the job would be
  // listed twice every 150 ms (800 requests a minute).
  for (int step = 0; clock_->Now() < start + absl::Minutes(3); ++step) {
    AddIndexFile(step);
    RunProbe(*watcher, "job");
  }
  const std::vector<absl::Time> times = store_->list_times();
  for (size_t i = 0; i < times.size(); ++i) {
    const auto window_end =
        std::lower_bound(times.begin() + i, times.end(), times[i] + absl::Minutes(1));
    EXPECT_LE(window_end - (times.begin() + i), 20) << "in the minute from request " << i;
  }
  // The cap is used, not undercut: about 20 a minute.
  EXPECT_GE(times.size(), 56u);
  EXPECT_LE(times.size(), 62u);
  EXPECT_EQ(watcher->list_requests(), static_cast<int64_t>(times.size()));
}

TEST_F(TrialWatcherPollingTest, AQuietJobIsWokenForTimeDrivenRules) {
  auto watcher = MakeWatcher();
  ASSERT_TRUE(watcher->Update("job", Trial()));
  const absl::Time start = clock_->Now();
  while (clock_->Now() < start + absl::Seconds(65)) RunProbe(*watcher, "job");
  // One wake at the first probe 30 s after the watch, one 30 s after that.
  const std::vector<absl::Time> wakes = WakeTimes();
  ASSERT_EQ(wakes.size(), 2u);
  EXPECT_GE(wakes[0] - start, absl::Seconds(30));
  EXPECT_LT(wakes[0] - start, absl::Seconds(35));
  EXPECT_GE(wakes[1] - wakes[0], absl::Seconds(30));
  EXPECT_LT(wakes[1] - wakes[0], absl::Seconds(35));
}

TEST_F(TrialWatcherPollingTest, AStoreThatComesBackWakesTheJob) {
  auto watcher = MakeWatcher();
  ASSERT_TRUE(watcher->Update("job", Trial()));
  store_->set_unreachable(true);
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(300));
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(600));  // Backing off.
  EXPECT_EQ(WakeCount(), 0);
  // Back, with nothing new: the job is woken all the same (its reader may
  // have stopped at the outage) and probed fast.
  store_->set_unreachable(false);
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(150));
  EXPECT_EQ(WakeCount(), 1);
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(300));
  EXPECT_EQ(WakeCount(), 1);
}

TEST_F(TrialWatcherPollingTest, ProfilerOutputIsProbedForNewObjects) {
  auto watcher = MakeWatcher();
  fs::create_directories(dir_.path() / "profiler" / "system" / "incremental" / "2026112410");
  ASSERT_TRUE(watcher->Update(
      "job", WatchedOutputs{.profiler = objectstore::StoreLocation{store_, "profiler"}}));
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(300));
  std::ofstream(dir_.path() / "profiler" / "system" / "incremental" / "2026112410" /
                "1764000000.algo-1.json")
      << "{}\n";
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(150));
  EXPECT_EQ(WakeCount(), 1);
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(300));
  std::ofstream(dir_.path() / "profiler" / "system" / "incremental" / "2026112410" /
                "1764000060.algo-1.json")
      << "{}\n";
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(150));
  EXPECT_EQ(WakeCount(), 2);
}

TEST_F(TrialWatcherPollingTest, LocalStoresAreNotListPolledAndDroppedJobsAreNotProbed) {
  auto watcher = MakeWatcher();
  ASSERT_TRUE(watcher->Update(
      "local", WatchedOutputs{.trial = objectstore::StoreLocation{local_, "trial"}}));
  EXPECT_FALSE(watcher->ListPolled("local"));
  EXPECT_FALSE(watcher->next_probe("local").has_value());
  ASSERT_TRUE(watcher->Update("remote", Trial()));
  ASSERT_TRUE(watcher->next_probe("remote").has_value());
  watcher->Drop("remote");
  EXPECT_FALSE(watcher->ListPolled("remote"));
  EXPECT_FALSE(watcher->next_probe("remote").has_value());
  EXPECT_FALSE(watcher->ListPolled("unknown"));
}

// On object storage the trace roots are probed like the profiler output:
// a new trace object below one wakes the job.
TEST_F(TrialWatcherPollingTest, TraceRootsAreProbedForNewTraces) {
  auto watcher = MakeWatcher();
  fs::create_directories(dir_.path() / "profiler");
  fs::create_directories(dir_.path() / "tb");
  ASSERT_TRUE(watcher->Update(
      "job", WatchedOutputs{.profiler = objectstore::StoreLocation{store_, "profiler"},
                            .traces = {objectstore::StoreLocation{store_, "tb"}}}));
  EXPECT_TRUE(watcher->ListPolled("job"));
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(300));
  EXPECT_EQ(WakeCount(), 0);
  fs::create_directories(dir_.path() / "tb" / "run");
  std::ofstream(dir_.path() / "tb" / "run" / "w.1764000000.pt.trace.json") << "{}";
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(150));
  EXPECT_EQ(WakeCount(), 1);
}

}  // namespace
TEST_F(TrialWatcherPollingTest, TensorBoardEventFileGrowingInPlaceWakesTheJob) {
  // Event files grow in place (their keys do not change): the whole listing
  // is compared, sizes included, run directories at any depth.
  auto watcher = MakeWatcher();
  ASSERT_TRUE(watcher->Update("job", {.tensorboard = objectstore::StoreLocation{store_, "tb"}}));
  EXPECT_TRUE(watcher->ListPolled("job"));
  const fs::path file = dir_.path() / "tb" / "runs" / "a" / "events.out.tfevents.1.h.1.0";
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::app) << "first record";
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(150));
  EXPECT_EQ(WakeCount(), 1);
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(300));  // Nothing new.
  EXPECT_EQ(WakeCount(), 1);
  std::ofstream(file, std::ios::app) << "second record";
  EXPECT_EQ(RunProbe(*watcher, "job"), absl::Milliseconds(150));
  EXPECT_EQ(WakeCount(), 2);
}

}  // namespace debugplane::rules_engine
