// TrialWatcher: the polling pass follows its Clock (a FakeClock here: no
// sleeping), and changes in a job's trial wake that job, also when the trial
// directory is created after the watch.

#include "rules_engine/scheduling/trial_watcher.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/support/wait_until.h"

namespace debugplane::rules_engine {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;

// Upper bound on waiting for a watcher thread; the test passes long before.
constexpr absl::Duration kPatience = absl::Seconds(10);

// The jobs the watcher woke, in order.
class Wakes {
 public:
  void Add(const std::string& job) {
    absl::MutexLock lock(&mu_);
    jobs_.push_back(job);
  }
  bool Contains(const std::string& job) {
    absl::MutexLock lock(&mu_);
    return std::find(jobs_.begin(), jobs_.end(), job) != jobs_.end();
  }
  // Blocks until `job` was woken (Add wakes it, no polling); false after
  // kPatience.
  bool WaitUntilWoken(const std::string& job) {
    absl::MutexLock lock(&mu_);
    const auto woken = [&] {
      mu_.AssertHeld();
      return std::find(jobs_.begin(), jobs_.end(), job) != jobs_.end();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&woken), kPatience);
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> jobs_ ABSL_GUARDED_BY(mu_);
};

TEST(TrialWatcherTest, PollsOncePerIntervalOfItsClock) {
  auto clock = std::make_shared<base::FakeClock>();
  const absl::Time start = clock->Now();
  absl::Mutex mu;
  int polls = 0;
  TrialWatcher watcher(
      TrialWatcherOptions{.poll_interval = absl::Seconds(30), .clock = clock},
      [](const std::string&) {},
      [&] {
        absl::MutexLock lock(&mu);
        ++polls;
      });
  ASSERT_EQ(watcher.next_poll(), start + absl::Seconds(30));

  clock->Advance(absl::Seconds(29));
  EXPECT_EQ(watcher.next_poll(), start + absl::Seconds(30));  // Not due: unchanged.

  clock->Advance(absl::Seconds(1));
  // The pass runs on the timer thread and schedules the next one.
  ::debugplane::testing::WaitUntil([&] { return watcher.next_poll() == start + absl::Seconds(60); },
                                   kPatience);
  EXPECT_EQ(watcher.next_poll(), start + absl::Seconds(60));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(polls, 1);
}

TEST(TrialWatcherTest, NoPollingWithAnInfiniteInterval) {
  TrialWatcher watcher(
      TrialWatcherOptions{.poll_interval = absl::InfiniteDuration(),
                          .clock = std::make_shared<base::FakeClock>()},
      [](const std::string&) {}, [] { ADD_FAILURE() << "polled"; });
  EXPECT_FALSE(watcher.next_poll().has_value());
}

class TrialWatcherChangesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = objectstore::LocalObjectStore::Open(dir_.path().string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *store;
  }
  objectstore::StoreLocation At(const std::string& prefix) { return {store_, prefix}; }

  ScopedTempDir dir_;
  std::shared_ptr<objectstore::ObjectStore> store_;
  Wakes wakes_;
  TrialWatcher watcher_{TrialWatcherOptions{.poll_interval = absl::InfiniteDuration(),
                                            .clock = std::make_shared<base::FakeClock>()},
                        [this](const std::string& job) { wakes_.Add(job); }, [] {}};
};

TEST_F(TrialWatcherChangesTest, NewIndexFileWakesTheJob) {
  fs::create_directories(dir_.path() / "a" / "index" / "000000000");
  EXPECT_TRUE(watcher_.Update("job-a", WatchedOutputs{.trial = At("a")}));
  EXPECT_FALSE(watcher_.Update("job-a", WatchedOutputs{.trial = At("a")}));  // Nothing new.
  std::ofstream(dir_.path() / "a" / "index" / "000000000" / "000000000001_worker_0.json") << "{}";
  EXPECT_TRUE(wakes_.WaitUntilWoken("job-a"));
}

TEST_F(TrialWatcherChangesTest, TrialCreatedLaterIsHeardThroughItsParent) {
  fs::create_directories(dir_.path() / "jobs");
  EXPECT_TRUE(watcher_.Update("job-b", WatchedOutputs{.trial = At("jobs/b")}));
  fs::create_directories(dir_.path() / "jobs" / "b");
  EXPECT_TRUE(wakes_.WaitUntilWoken("job-b"));
}

TEST_F(TrialWatcherChangesTest, DroppedJobIsNotWoken) {
  fs::create_directories(dir_.path() / "c" / "index");
  fs::create_directories(dir_.path() / "d" / "index");
  ASSERT_TRUE(watcher_.Update("job-c", WatchedOutputs{.trial = At("c")}));
  ASSERT_TRUE(watcher_.Update("job-d", WatchedOutputs{.trial = At("d")}));
  watcher_.Drop("job-c");
  std::ofstream(dir_.path() / "c" / "index" / "x") << "1";
  std::ofstream(dir_.path() / "d" / "index" / "x") << "1";
  // The two files are heard in order (one inotify queue); job-c's would
  // come first.
  ASSERT_TRUE(wakes_.WaitUntilWoken("job-d"));
  EXPECT_FALSE(wakes_.Contains("job-c"));
}

// A PyTorch trace written whole into the profiler output's
// framework/pytorch/<node>/ wakes the job (no polling pass here).
TEST_F(TrialWatcherChangesTest, PyTorchTraceInTheProfilerOutputWakesTheJob) {
  fs::create_directories(dir_.path() / "p" / "framework" / "pytorch" / "algo-2");
  ASSERT_TRUE(watcher_.Update("job-p", WatchedOutputs{.profiler = At("p")}));
  std::ofstream(dir_.path() / "p" / "framework" / "pytorch" / "algo-2" / "w.1.pt.trace.json")
      << "{}";
  EXPECT_TRUE(wakes_.WaitUntilWoken("job-p"));
}

// TensorBoardOutputConfig's path: a trace in a run directory below it wakes
// the job; without a profiler output the trace roots are not watched.
TEST_F(TrialWatcherChangesTest, PyTorchTraceUnderATraceRootWakesTheJob) {
  fs::create_directories(dir_.path() / "p2");
  fs::create_directories(dir_.path() / "tb" / "run-1");
  fs::create_directories(dir_.path() / "tb-unwatched" / "run-1");
  ASSERT_TRUE(
      watcher_.Update("job-tb", WatchedOutputs{.profiler = At("p2"), .traces = {At("tb")}}));
  ASSERT_FALSE(watcher_.Update("job-none", WatchedOutputs{.traces = {At("tb-unwatched")}}));
  std::ofstream(dir_.path() / "tb-unwatched" / "run-1" / "w.1.pt.trace.json") << "{}";
  std::ofstream(dir_.path() / "tb" / "run-1" / "w.1.pt.trace.json.gz") << "x";
  ASSERT_TRUE(wakes_.WaitUntilWoken("job-tb"));
  EXPECT_FALSE(wakes_.Contains("job-none"));
}

}  // namespace
}  // namespace debugplane::rules_engine
