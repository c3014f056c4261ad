#include "base/periodic_thread.h"

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/clock.h"
#include "gtest/gtest.h"

namespace debugplane::base {
namespace {

// Counts the passes; waits (real time, bounded) for a count.
class Passes {
 public:
  void Add() {
    absl::MutexLock lock(&mu_);
    ++count_;
  }
  bool WaitFor(int count) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return count_ >= count; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(10));
  }
  int count() {
    absl::MutexLock lock(&mu_);
    return count_;
  }

 private:
  absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(PeriodicThreadTest, RunsAPassAtOnceThenOneEveryIntervalOfTheClock) {
  auto clock = std::make_shared<FakeClock>();
  Passes passes;
  std::vector<absl::Time> started;  // Written by the thread before Add.
  PeriodicThread thread(clock, absl::Minutes(1), [&] {
    started.push_back(clock->Now());
    passes.Add();
  });
  thread.Start();
  ASSERT_TRUE(passes.WaitFor(1));
  clock->Advance(absl::Seconds(59));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(passes.count(), 1);
  // The interval counts from the end of the pass, which the thread reads
  // after the pass has signalled: the clock may already be 59 s on. So move
  // the clock a second at a time until the second pass, and check it came
  // no sooner than an interval after the first.
  for (int second = 0; second < 120 && passes.count() < 2; ++second) {
    clock->Advance(absl::Seconds(1));
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_TRUE(passes.WaitFor(2));
  thread.Shutdown();
  ASSERT_GE(started.size(), 2u);
  EXPECT_GE(started[1] - started[0], absl::Minutes(1));
}

TEST(PeriodicThreadTest, ShutdownIsIdempotentAndStartAfterItDoesNothing) {
  auto clock = std::make_shared<FakeClock>();
  Passes passes;
  PeriodicThread thread(clock, absl::Minutes(1), [&passes] { passes.Add(); });
  EXPECT_FALSE(thread.stopping());
  thread.Shutdown();
  thread.Shutdown();
  EXPECT_TRUE(thread.stopping());
  thread.Start();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(passes.count(), 0);
}

}  // namespace
}  // namespace debugplane::base
