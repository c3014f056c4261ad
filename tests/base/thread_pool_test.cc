#include "base/thread_pool.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/support/wait_until.h"

namespace debugplane::core {
namespace {

TEST(ThreadPoolTest, RunsTasksOnItsWorkersInOrderOnOneWorker) {
  const std::thread::id caller = std::this_thread::get_id();
  absl::Mutex mu;
  std::vector<int> order;
  std::set<std::thread::id> threads;
  absl::Notification last;
  // After what its tasks use: destroyed (its workers joined) before it.
  base::ThreadPool pool(1, "test-pool");
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(pool.Schedule([&, i] {
      absl::MutexLock lock(&mu);
      order.push_back(i);
      threads.insert(std::this_thread::get_id());
      if (i == 99) last.Notify();
    }));
  }
  ASSERT_TRUE(last.WaitForNotificationWithTimeout(absl::Seconds(10)));
  absl::MutexLock lock(&mu);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_NE(*threads.begin(), caller);
}

TEST(ThreadPoolTest, ABlockedTaskLeavesTheOtherWorkersRunning) {
  absl::Notification release;
  absl::Notification blocked;
  absl::Notification ran;
  // After the notifications: its workers are joined before they go (a
  // worker may still be inside release.WaitForNotification at the end).
  base::ThreadPool pool(2, "test-pool");
  ASSERT_TRUE(pool.Schedule([&] {
    blocked.Notify();
    release.WaitForNotification();
  }));
  ASSERT_TRUE(blocked.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(pool.Schedule([&] { ran.Notify(); }));
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  release.Notify();
}

TEST(ThreadPoolTest, ShutdownRunsWhatIsQueuedThenRefusesNewTasks) {
  base::ThreadPool pool(1, "test-pool");
  absl::Notification release;
  ASSERT_TRUE(pool.Schedule([&] { release.WaitForNotification(); }));
  std::atomic<int> ran{0};
  std::atomic<int> refused_inside{0};
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(pool.Schedule([&] {
      ++ran;
      // Tasks scheduled by a task during Shutdown are refused, not lost.
      if (!pool.Schedule([&] { ++ran; })) ++refused_inside;
    }));
  }
  std::thread shutdown([&] { pool.Shutdown(); });
  // Shutdown has started (the first task still blocks the one worker).
  ::debugplane::testing::WaitUntil([&] { return !pool.Schedule([] {}); });
  release.Notify();
  shutdown.join();
  EXPECT_EQ(ran.load(), 10);
  EXPECT_EQ(refused_inside.load(), 10);
  EXPECT_FALSE(pool.Schedule([&] { ++ran; }));
  pool.Shutdown();  // Idempotent.
  EXPECT_EQ(ran.load(), 10);
}

}  // namespace
}  // namespace debugplane::core
