// WatchHub on its own: a fake watcher records what it is told; no manager,
// no storage.

#include "core/manager/watch_hub.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::core {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1800000000);

// Records every callback as a line: "record <status>", "event <kinds>",
// "end <code>".
class RecordingWatcher final : public JobWatcher {
 public:
  void OnRecord(std::shared_ptr<const v1::DescribeTrainingJobResponse> job) override {
    Add(absl::StrCat("record ", JobStatusName(job->training_job_status())));
  }
  void OnEvent(std::shared_ptr<const v1::WatchTrainingJobResponse> event) override {
    std::string kinds;
    for (const auto& change : event->changes()) {
      absl::StrAppend(&kinds, v1::StatusChange::Kind_Name(change.kind()), ";");
    }
    Add(absl::StrCat("event ", kinds));
  }
  void OnEnd(absl::Status status) override {
    Add(absl::StrCat("end ", absl::StatusCodeToString(status.code())));
  }

  // Waits until `count` callbacks were made; returns them all.
  std::vector<std::string> WaitFor(size_t count) {
    absl::MutexLock lock(&mu_);
    const auto enough = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return calls_.size() >= count;
    };
    mu_.Await(absl::Condition(&enough));
    return calls_;
  }
  std::vector<std::string> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  void Add(std::string call) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(std::move(call));
  }
  absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

std::shared_ptr<const JobRecord> Job(JobStatus status) {
  auto job = std::make_shared<JobRecord>();
  job->set_training_job_name("job");
  job->set_training_job_status(status);
  job->set_secondary_status(v1::SecondaryStatus::Training);
  return job;
}

class WatchHubTest : public ::testing::Test {
 protected:
  WatchHub hub_{/*delivery_threads=*/2, std::make_shared<base::FakeClock>(),
                [this](const std::shared_ptr<JobWatch>& watch) {
                  ++unwatched_;
                  WatchHub::Detach(*watch);
                }};
  std::atomic<int> unwatched_{0};
};

TEST_F(WatchHubTest, InitialStateFirstThenNewsInCommitOrder) {
  RecordingWatcher watcher;
  auto running = Job(v1::TrainingJobStatus::InProgress);
  std::shared_ptr<JobWatch> watch = WatchHub::NewWatch(&watcher, "job", running, false);
  WatchHub::WatchList watches = {watch};
  WatchHub::WatchesToDrain to_drain;
  // Queued before the initial state is delivered: it waits for it.
  EXPECT_EQ(WatchHub::QueueNews("job", watches, running, running, kT0, nullptr, to_drain),
            nullptr);
  EXPECT_TRUE(to_drain.empty()) << "the registering thread is the drainer still";
  hub_.DeliverInitialState(watch);
  auto stopped = Job(v1::TrainingJobStatus::Stopped);
  WatchHub::QueueNews("job", watches, running, stopped, kT0, nullptr, to_drain);
  hub_.StartDrains(to_drain);
  const std::vector<std::string> calls = watcher.WaitFor(6);
  ASSERT_EQ(calls.size(), 6u);
  EXPECT_EQ(calls[0], "record InProgress");
  EXPECT_EQ(calls[1], "event KIND_INITIAL_STATE;");
  EXPECT_EQ(calls[2], "record InProgress") << "no event: the status did not move";
  EXPECT_EQ(calls[3], "record Stopped");
  EXPECT_THAT(calls[4], ::testing::HasSubstr("KIND_JOB_STATUS"));
  EXPECT_EQ(calls[5], "end OK");
  EXPECT_TRUE(watches.empty()) << "a settled job's streams are over";
}

TEST_F(WatchHubTest, QueuedNewsJoinTheScheduledDrain) {
  RecordingWatcher watcher;
  auto running = Job(v1::TrainingJobStatus::InProgress);
  std::shared_ptr<JobWatch> watch = WatchHub::NewWatch(&watcher, "job", running, false);
  hub_.DeliverInitialState(watch);
  WatchHub::WatchList watches = {watch};
  WatchHub::WatchesToDrain to_drain;
  for (int i = 0; i < 3; ++i) {
    WatchHub::QueueNews("job", watches, running, running, kT0, nullptr, to_drain);
  }
  EXPECT_EQ(to_drain.size(), 1u) << "one drain takes everything queued on the watch";
  hub_.StartDrains(to_drain);
  EXPECT_EQ(watcher.WaitFor(5).size(), 5u);
}

TEST_F(WatchHubTest, DoneRunsOnceEveryWatcherHasTheNews) {
  RecordingWatcher first, second;
  auto running = Job(v1::TrainingJobStatus::InProgress);
  auto a = WatchHub::NewWatch(&first, "job", running, false);
  auto b = WatchHub::NewWatch(&second, "job", running, false);
  hub_.DeliverInitialState(a);
  hub_.DeliverInitialState(b);
  WatchHub::WatchList watches = {a, b};
  WatchHub::WatchesToDrain to_drain;
  absl::Notification done;
  EXPECT_EQ(WatchHub::QueueNews("job", watches, running, running, kT0,
                                [&](absl::Status status) {
                                  EXPECT_TRUE(status.ok());
                                  EXPECT_EQ(first.calls().size(), 3u);
                                  EXPECT_EQ(second.calls().size(), 3u);
                                  done.Notify();
                                },
                                to_drain),
            nullptr);
  hub_.StartDrains(to_drain);
  done.WaitForNotification();
}

TEST_F(WatchHubTest, WithoutWatchesDoneIsHandedBack) {
  WatchHub::WatchList none;
  WatchHub::WatchesToDrain to_drain;
  bool ran = false;
  DoneCallback done = WatchHub::QueueNews("job", none, nullptr, Job(v1::TrainingJobStatus::InProgress),
                                          kT0, [&](absl::Status) { ran = true; }, to_drain);
  ASSERT_NE(done, nullptr);
  std::move(done)(absl::OkStatus());
  EXPECT_TRUE(ran);
}

TEST_F(WatchHubTest, DeletionEndsTheStreamWithNotFound) {
  RecordingWatcher watcher;
  auto done_job = Job(v1::TrainingJobStatus::InProgress);
  auto watch = WatchHub::NewWatch(&watcher, "job", done_job, false);
  hub_.DeliverInitialState(watch);
  WatchHub::WatchList watches = {watch};
  WatchHub::WatchesToDrain to_drain;
  WatchHub::QueueNews("job", watches, done_job, nullptr, kT0, nullptr, to_drain);
  hub_.StartDrains(to_drain);
  EXPECT_EQ(watcher.WaitFor(3).back(), "end NOT_FOUND");
  EXPECT_TRUE(watches.empty());
}

TEST_F(WatchHubTest, DetachedWatchIsNotCalledButCompletionsCount) {
  RecordingWatcher watcher;
  auto running = Job(v1::TrainingJobStatus::InProgress);
  auto watch = WatchHub::NewWatch(&watcher, "job", running, false);
  hub_.DeliverInitialState(watch);
  WatchHub::Detach(*watch);
  WatchHub::WatchList watches = {watch};
  WatchHub::WatchesToDrain to_drain;
  absl::Notification done;
  WatchHub::QueueNews("job", watches, running, running, kT0,
                      [&](absl::Status) { done.Notify(); }, to_drain);
  hub_.StartDrains(to_drain);
  done.WaitForNotification();
  EXPECT_EQ(watcher.calls().size(), 2u) << "only the initial state";
}

TEST_F(WatchHubTest, RegistrationUnwatchesWhileTheHubLives) {
  RecordingWatcher watcher;
  auto watch = WatchHub::NewWatch(&watcher, "job", Job(v1::TrainingJobStatus::InProgress), false);
  hub_.DeliverInitialState(watch);
  hub_.MakeRegistration(watch).reset();
  EXPECT_EQ(unwatched_.load(), 1);
}

TEST(WatchHubLifetimeTest, RegistrationOutlivingTheHubOnlyDetaches) {
  RecordingWatcher watcher;
  int unwatched = 0;
  std::unique_ptr<WatchRegistration> registration;
  std::shared_ptr<JobWatch> watch;
  {
    WatchHub hub(1, std::make_shared<base::FakeClock>(),
                 [&](const std::shared_ptr<JobWatch>&) { ++unwatched; });
    watch = WatchHub::NewWatch(&watcher, "job", Job(v1::TrainingJobStatus::InProgress), false);
    hub.DeliverInitialState(watch);
    registration = hub.MakeRegistration(watch);
  }
  registration.reset();
  EXPECT_EQ(unwatched, 0);
  absl::MutexLock lock(&watch->mu);
  EXPECT_TRUE(watch->detached);
}

TEST_F(WatchHubTest, ShutdownEndsEveryWatch) {
  RecordingWatcher watcher;
  auto watch = WatchHub::NewWatch(&watcher, "job", Job(v1::TrainingJobStatus::InProgress), false);
  hub_.DeliverInitialState(watch);
  WatchHub::WatchList watches = {watch};
  WatchHub::WatchesToDrain to_drain;
  WatchHub::EndAll(watches, absl::UnavailableError("the server is shutting down"), to_drain);
  hub_.StartDrains(to_drain);
  hub_.Shutdown();
  EXPECT_EQ(watcher.calls().back(), "end UNAVAILABLE");
  EXPECT_TRUE(watches.empty());
}

}  // namespace
}  // namespace debugplane::core
