#include "base/deadline_timer.h"

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::core {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Records the keys the timer fires, in order.
class Fired {
 public:
  void Add(const std::string& key) {
    absl::MutexLock lock(&mu_);
    keys_.push_back(key);
    added_.SignalAll();
  }
  // Blocks (Add signals; no polling; at most 10 s) until `count` keys fired;
  // returns them all.
  std::vector<std::string> WaitForKeys(size_t count) {
    absl::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (keys_.size() < count && absl::Now() < deadline) {
      added_.WaitWithTimeout(&mu_, deadline - absl::Now());
    }
    return keys_;
  }
  std::vector<std::string> keys() {
    absl::MutexLock lock(&mu_);
    return keys_;
  }

 private:
  absl::Mutex mu_;
  absl::CondVar added_;
  std::vector<std::string> keys_ ABSL_GUARDED_BY(mu_);
};

class DeadlineTimerTest : public ::testing::Test {
 protected:
  std::shared_ptr<base::FakeClock> clock_ = std::make_shared<base::FakeClock>();
  const absl::Time t0_ = clock_->Now();
  Fired fired_;
  base::DeadlineTimer timer_{clock_, [this](const std::string& key) { fired_.Add(key); }};
};

TEST_F(DeadlineTimerTest, FiresWhenTheClockReachesTheDeadlineEarliestFirst) {
  timer_.Set("late", t0_ + absl::Seconds(20));
  timer_.Set("early", t0_ + absl::Seconds(10));
  EXPECT_EQ(timer_.DeadlineOf("early"), t0_ + absl::Seconds(10));
  clock_->Advance(absl::Seconds(9));
  // Not due: the timer only looked at the clock again. Real time, on purpose
  // (here and below): a firing that must not happen leaves nothing to wait
  // on, so the test gives it 20 ms to happen.
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_THAT(fired_.keys(), IsEmpty());
  clock_->Advance(absl::Seconds(11));
  EXPECT_THAT(fired_.WaitForKeys(2), ElementsAre("early", "late"));
  EXPECT_FALSE(timer_.DeadlineOf("early").has_value());
}

TEST_F(DeadlineTimerTest, APassedDeadlineFiresAtOnce) {
  timer_.Set("past", t0_ - absl::Seconds(1));
  EXPECT_THAT(fired_.WaitForKeys(1), ElementsAre("past"));
}

TEST_F(DeadlineTimerTest, SettingAgainReplacesAndCancelRemoves) {
  timer_.Set("moved", t0_ + absl::Seconds(5));
  timer_.Set("moved", t0_ + absl::Seconds(30));
  timer_.Set("cancelled", t0_ + absl::Seconds(5));
  timer_.Cancel("cancelled");
  timer_.Set("marker", t0_ + absl::Seconds(10));
  clock_->Advance(absl::Seconds(10));
  EXPECT_THAT(fired_.WaitForKeys(1), ElementsAre("marker"));
  clock_->Advance(absl::Seconds(20));
  EXPECT_THAT(fired_.WaitForKeys(2), ElementsAre("marker", "moved"));
}

TEST_F(DeadlineTimerTest, ACallbackMaySetTheNextDeadline) {
  Fired fired;
  base::DeadlineTimer timer(clock_, [&](const std::string& key) {
    if (key == "first") timer.Set("second", clock_->Now() + absl::Seconds(1));
    fired.Add(key);
  });
  timer.Set("first", t0_);
  EXPECT_THAT(fired.WaitForKeys(1), ElementsAre("first"));
  clock_->Advance(absl::Seconds(1));
  EXPECT_THAT(fired.WaitForKeys(2), ElementsAre("first", "second"));
}

TEST_F(DeadlineTimerTest, ShutdownDropsEveryDeadline) {
  timer_.Set("never", t0_ + absl::Seconds(1));
  timer_.Shutdown();
  timer_.Set("ignored", t0_);
  clock_->Advance(absl::Seconds(5));
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_THAT(fired_.keys(), IsEmpty());
  timer_.Shutdown();  // Idempotent.
}

TEST(DeadlineTimerSystemClockTest, FiresInRealTime) {
  Fired fired;
  base::DeadlineTimer timer(base::SystemClock(), [&](const std::string& key) { fired.Add(key); });
  const absl::Time start = absl::Now();
  timer.Set("soon", start + absl::Milliseconds(50));
  EXPECT_THAT(fired.WaitForKeys(1), ElementsAre("soon"));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
}

}  // namespace
}  // namespace debugplane::core
