// Group commit of the job manager with clients that wait for each reply
// (TrainingJobManagerOptions::max_group_wait), over SQLite: the arrival order
// driven step by step through a gated storage and a fake clock, and a lone
// caller over a write latency added as a slow disk's fsync would.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/clock.h"
#include "core/manager/training_job_manager.h"
#include "gtest/gtest.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::core {
namespace {

using ::debugplane::testing::ScopedTempDir;

// Real storage whose every write takes at least `latency` longer.
class SlowStorage final : public persistence::Storage {
 public:
  SlowStorage(std::unique_ptr<persistence::Storage> base, absl::Duration latency)
      : base_(std::move(base)), latency_(latency) {}
  absl::Status Write(const persistence::WriteBatch& batch) override {
    absl::SleepFor(latency_);
    return base_->Write(batch);
  }
  absl::Status ForEachJob(
      const std::function<absl::Status(const persistence::JobRow&)>& visit) override {
    return base_->ForEachJob(visit);
  }

 private:
  const std::unique_ptr<persistence::Storage> base_;
  const absl::Duration latency_;
};

v1::CreateTrainingJobRequest JobRequest(const std::string& name) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
  return request;
}

class GroupCommitTest : public ::testing::Test {
 protected:
  static constexpr absl::Duration kWriteLatency = absl::Milliseconds(40);

  std::unique_ptr<TrainingJobManager> Open(const std::string& db, absl::Duration max_group_wait) {
    auto sqlite = persistence::SqliteStorage::Open((dir_.path() / db).string());
    EXPECT_TRUE(sqlite.ok()) << sqlite.status();
    if (!sqlite.ok()) return nullptr;
    TrainingJobManagerOptions options;
    options.max_group_wait = max_group_wait;
    auto manager = TrainingJobManager::Create(
        std::make_unique<SlowStorage>(*std::move(sqlite), kWriteLatency), std::move(options));
    EXPECT_TRUE(manager.ok()) << manager.status();
    return manager.ok() ? *std::move(manager) : nullptr;
  }

  // `callers` threads each create `rounds` jobs, one after the other. (A
  // std::promise, not CallSync's absl::Notification: sixteen threads
  // waiting at once make absl's deadlock detector race in ways TSan sees
  // but cannot attribute.)
  static void CreateInClosedLoop(TrainingJobManager& manager, int callers, int rounds) {
    std::vector<std::thread> threads;
    for (int c = 0; c < callers; ++c) {
      threads.emplace_back([&manager, c, rounds] {
        for (int r = 0; r < rounds; ++r) {
          const v1::CreateTrainingJobRequest request = JobRequest(absl::StrCat("c", c, "-", r));
          v1::CreateTrainingJobResponse response;
          std::promise<absl::Status> done;
          manager.CreateTrainingJob(request, &response,
                                    [&done](absl::Status status) { done.set_value(status); });
          const absl::Status status = done.get_future().get();
          EXPECT_TRUE(status.ok()) << status;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
  }

  ScopedTempDir dir_;
};

// What the committer did, as the test sees it: each storage write (its size)
// in order, each time a thread consulted the clock before waiting for it (the
// deadline it waited for), and each acknowledged change. Writes are held at a
// gate until the test admits them, so the test decides when a group is
// acknowledged.
class CommitterEvents {
 public:
  // Records a write of `changes` and blocks until the test admits it.
  void OnWrite(size_t changes) {
    absl::MutexLock lock(&mu_);
    write_sizes_.push_back(changes);
    changed_.SignalAll();
    while (admitted_ == 0) changed_.Wait(&mu_);
    if (admitted_ != std::numeric_limits<int>::max()) --admitted_;
  }
  void OnClockWait(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    wait_deadlines_.push_back(deadline);
    changed_.SignalAll();
  }
  void OnAcknowledged() {
    absl::MutexLock lock(&mu_);
    ++acknowledged_;
    changed_.SignalAll();
  }
  // Lets one held (or the next) write through.
  void AdmitWrite() {
    absl::MutexLock lock(&mu_);
    ++admitted_;
    changed_.SignalAll();
  }
  // Lets every write through from now on.
  void AdmitAllWrites() {
    absl::MutexLock lock(&mu_);
    admitted_ = std::numeric_limits<int>::max();
    changed_.SignalAll();
  }
  // Blocks until write number `count` (from 1) has started.
  void AwaitWrites(size_t count) {
    Await([&] { return write_sizes_.size() >= count; }, "write started");
  }
  // Blocks until `count` changes have been acknowledged.
  void AwaitAcknowledged(int count) {
    Await([&] { return acknowledged_ >= count; }, "changes acknowledged");
  }
  // Blocks until either write number `count` has started (returns true) or
  // a thread waits for the clock to reach `deadline` (returns false).
  bool AwaitWriteOrWaitFor(size_t count, absl::Time deadline) {
    bool wrote = false;
    Await(
        [&] {
          wrote = write_sizes_.size() >= count;
          return wrote || std::find(wait_deadlines_.begin(), wait_deadlines_.end(), deadline) !=
                              wait_deadlines_.end();
        },
        "write started or group wait");
    return wrote;
  }
  std::vector<size_t> write_sizes() const {
    absl::MutexLock lock(&mu_);
    return write_sizes_;
  }

 private:
  // Waits for `done` (called under mu_); a failure after 30 s, so that a
  // broken committer fails the test instead of hanging it.
  template <typename Done>
  void Await(Done done, const char* what) {
    absl::MutexLock lock(&mu_);
    const absl::Time until = absl::Now() + absl::Seconds(30);
    while (!done()) {
      if (changed_.WaitWithTimeout(&mu_, until - absl::Now()) && !done()) {
        ADD_FAILURE() << "timed out waiting for: " << what;
        return;
      }
    }
  }

  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  std::vector<size_t> write_sizes_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> wait_deadlines_ ABSL_GUARDED_BY(mu_);
  int acknowledged_ ABSL_GUARDED_BY(mu_) = 0;
  int admitted_ ABSL_GUARDED_BY(mu_) = 0;
};

// A base::FakeClock whose waiters are reported to CommitterEvents.
class ObservedClock final : public base::Clock {
 public:
  explicit ObservedClock(CommitterEvents* events) : events_(events) {}
  absl::Time Now() const override { return clock_.Now(); }
  absl::Duration RealTimeUntil(absl::Time deadline) const override {
    events_->OnClockWait(deadline);
    return clock_.RealTimeUntil(deadline);
  }
  int64_t AddJumpListener(std::function<void()> listener) override {
    return clock_.AddJumpListener(std::move(listener));
  }
  void RemoveJumpListener(int64_t id) override { clock_.RemoveJumpListener(id); }
  void Advance(absl::Duration delta) { clock_.Advance(delta); }

 private:
  CommitterEvents* const events_;
  base::FakeClock clock_;
};

// Real storage behind the gate; every write takes kWriteTime by the clock.
class GatedStorage final : public persistence::Storage {
 public:
  static constexpr absl::Duration kWriteTime = absl::Seconds(10);

  GatedStorage(std::unique_ptr<persistence::Storage> base, ObservedClock* clock,
               CommitterEvents* events)
      : base_(std::move(base)), clock_(clock), events_(events) {}
  absl::Status Write(const persistence::WriteBatch& batch) override {
    clock_->Advance(kWriteTime);
    events_->OnWrite(batch.size());
    return base_->Write(batch);
  }
  absl::Status ForEachJob(
      const std::function<absl::Status(const persistence::JobRow&)>& visit) override {
    return base_->ForEachJob(visit);
  }

 private:
  const std::unique_ptr<persistence::Storage> base_;
  ObservedClock* const clock_;
  CommitterEvents* const events_;
};

// Closed-loop callers (each sends its next change once its previous one is
// acknowledged), whose changes reach the committer in the order that splits
// them into alternating halves when it does not wait: after each
// acknowledged group, the callers come back one at a time, the first while
// the committer is free. The test drives every step (writes through a gate,
// time by a fake clock, arrivals only after the committer has shown what it
// does), so the outcome does not depend on scheduling.
class ReturningCallersTest : public ::testing::Test {
 protected:
  static constexpr int kCallers = 16;
  static constexpr int kRounds = 6;

  void Open(absl::Duration max_group_wait) {
    auto sqlite = persistence::SqliteStorage::Open((dir_.path() / "jobs.db").string());
    ASSERT_TRUE(sqlite.ok()) << sqlite.status();
    clock_ = std::make_shared<ObservedClock>(&events_);
    TrainingJobManagerOptions options;
    options.max_group_wait = max_group_wait;
    options.clock = clock_;
    auto manager = TrainingJobManager::Create(
        std::make_unique<GatedStorage>(*std::move(sqlite), clock_.get(), &events_),
        std::move(options));
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    for (int c = 0; c < kCallers; ++c) {
      std::promise<absl::Status> created;
      const v1::CreateTrainingJobRequest request = JobRequest(Name(c));
      v1::CreateTrainingJobResponse response;
      events_.AdmitWrite();
      manager_->CreateTrainingJob(request, &response,
                                  [&created](absl::Status s) { created.set_value(s); });
      ASSERT_TRUE(created.get_future().get().ok());
    }
    setup_writes_ = events_.write_sizes().size();
    // No group wait of the set-up's writes is pending any more (and the
    // jobs' default MaxRuntimeInSeconds, a day, is far off).
    clock_->Advance(absl::Minutes(1));
  }

  static std::string Name(int caller) { return absl::StrCat("caller-", caller); }

  // Queues caller `c`'s progress report of `step` (queued when this returns).
  void Report(int c, int64_t step) {
    v1::ReportTrainingStatusRequest request;
    request.set_training_job_name(Name(c));
    request.set_event(v1::ReportTrainingStatusRequest::EVENT_PROGRESS);
    request.set_current_step(step);
    auto response = std::make_shared<v1::ReportTrainingStatusResponse>();
    manager_->ReportTrainingStatus(request, response.get(), [this, response, c](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      {
        absl::MutexLock lock(&callers_mu_);
        returned_.push_back(c);
      }
      events_.OnAcknowledged();
    });
  }

  // Caller 0 reports steps 1 to kRounds + 1, the others 1 to kRounds, each
  // once its previous report is acknowledged; caller 0 starts alone. Returns
  // the sizes of the writes they took.
  std::vector<size_t> RunClosedLoop() {
    std::vector<int64_t> next_step(kCallers, 1);
    auto last_step = [](int c) { return c == 0 ? kRounds + 1 : kRounds; };
    int sent = 0;
    auto send = [&](int c) {
      Report(c, next_step[c]++);
      ++sent;
    };
    size_t writes = setup_writes_;
    size_t written = 0;  // Changes in the writes started so far.
    send(0);
    events_.AwaitWrites(++writes);
    for (int c = 1; c < kCallers; ++c) send(c);
    while (true) {
      written += events_.write_sizes().back();
      // If the committer waits for returning callers, until half a write
      // after the acknowledgement (the fake clock stands still meanwhile).
      const absl::Time group_deadline = clock_->Now() + GatedStorage::kWriteTime / 2;
      events_.AdmitWrite();
      events_.AwaitAcknowledged(static_cast<int>(written));
      std::vector<int> back;
      {
        absl::MutexLock lock(&callers_mu_);
        for (int c : returned_) {
          if (next_step[c] <= last_step(c)) back.push_back(c);
        }
        returned_.clear();
      }
      if (sent == static_cast<int>(written) && back.empty()) break;  // All done.
      // What the committer does before any caller comes back...
      if (static_cast<size_t>(sent) > written) {
        events_.AwaitWriteOrWaitFor(writes + 1, group_deadline);
      } else if (!back.empty()) {
        // ...or with the first one back.
        send(back.front());
        back.erase(back.begin());
        events_.AwaitWriteOrWaitFor(writes + 1, group_deadline);
      }
      for (int c : back) send(c);
      events_.AwaitWrites(++writes);
      if (::testing::Test::HasFailure()) break;
    }
    std::vector<size_t> sizes = events_.write_sizes();
    sizes.erase(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(setup_writes_));
    return sizes;
  }

  // A failed test may leave a write held: the manager's shutdown needs it.
  void TearDown() override { events_.AdmitAllWrites(); }

  ScopedTempDir dir_;
  CommitterEvents events_;
  std::shared_ptr<ObservedClock> clock_;
  absl::Mutex callers_mu_;
  std::vector<int> returned_ ABSL_GUARDED_BY(callers_mu_);  // Acknowledged, in order.
  size_t setup_writes_ = 0;
  // Last: destroyed (shut down) first.
  std::unique_ptr<TrainingJobManager> manager_;
};

TEST_F(ReturningCallersTest, ShareOneWritePerRoundInsteadOfAlternating) {
  Open(absl::Hours(1));  // Bounded by half a write: 5 s of the fake clock.
  ASSERT_NE(manager_, nullptr);
  const std::vector<size_t> sizes = RunClosedLoop();
  // Caller 0's first report alone, then every caller's next report in one
  // write (one fsync) per round.
  std::vector<size_t> expected(kRounds + 1, kCallers);
  expected[0] = 1;
  EXPECT_EQ(sizes, expected);
  // The set-up's Creates, then every report.
  EXPECT_EQ(manager_->commit_stats().changes, kCallers + kCallers * kRounds + 1);
}

// The same arrivals without the wait: the callers split into halves that
// alternate, two writes per round (what the test above rules out).
TEST_F(ReturningCallersTest, WithoutTheWaitCallersAlternateInTwoWritesPerRound) {
  Open(absl::ZeroDuration());
  ASSERT_NE(manager_, nullptr);
  const std::vector<size_t> sizes = RunClosedLoop();
  std::vector<size_t> expected;
  for (int round = 0; round <= kRounds; ++round) {
    expected.push_back(1);
    if (round < kRounds) expected.push_back(kCallers - 1);
  }
  EXPECT_EQ(sizes, expected);
}

TEST_F(GroupCommitTest, ALoneCallerNeverWaits) {
  auto manager = Open("lone.db", absl::Milliseconds(100));
  ASSERT_NE(manager, nullptr);
  CreateInClosedLoop(*manager, /*callers=*/1, /*rounds=*/6);
  const TrainingJobManager::CommitStats stats = manager->commit_stats();
  EXPECT_EQ(stats.writes, 6);
  // Its next change is the one expected: the committer starts at once.
  EXPECT_EQ(stats.waiting, absl::ZeroDuration());
}

// The replies run on a thread of their own, in write order: a caller slow
// to take its reply (a gRPC Finish, a slow client) holds neither the next
// group's write nor, before its own, anybody else's reply out of order.
TEST_F(GroupCommitTest, ACallerSlowToTakeItsReplyDoesNotHoldTheNextWrite) {
  auto manager = Open("slow_reply.db", absl::ZeroDuration());
  ASSERT_NE(manager, nullptr);
  std::promise<void> in_first_reply;
  std::promise<void> release_first_reply;
  std::shared_future<void> released = release_first_reply.get_future().share();
  std::atomic<int> replies{0};
  std::promise<int> second_reply_position;
  const v1::CreateTrainingJobRequest first = JobRequest("first");
  const v1::CreateTrainingJobRequest second = JobRequest("second");
  v1::CreateTrainingJobResponse first_response, second_response;
  manager->CreateTrainingJob(first, &first_response, [&](absl::Status status) {
    EXPECT_TRUE(status.ok()) << status;
    in_first_reply.set_value();
    released.wait();
    ++replies;
  });
  in_first_reply.get_future().wait();
  manager->CreateTrainingJob(second, &second_response, [&](absl::Status status) {
    EXPECT_TRUE(status.ok()) << status;
    second_reply_position.set_value(++replies);
  });
  // The second change is written while the first reply is still being taken.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (manager->commit_stats().writes < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_EQ(manager->commit_stats().writes, 2);
  EXPECT_EQ(replies.load(), 0);
  release_first_reply.set_value();
  EXPECT_EQ(second_reply_position.get_future().get(), 2);
  v1::DescribeTrainingJobRequest describe;
  describe.set_training_job_name("second");
  EXPECT_TRUE(manager->DescribeTrainingJobEncoded(describe).ok());
}

}  // namespace
}  // namespace debugplane::core
