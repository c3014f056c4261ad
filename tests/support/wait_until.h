// Polling for a condition that another thread or process makes true.
//
// The one polling helper of the tests. Use it where the code under test has
// no clock the test can advance and no notification to wait on: a worker
// thread that publishes a record, a real server or agent process, a file
// another process writes. Where the code takes a base::Clock, advance a
// base::FakeClock instead of waiting for real time to pass.

#ifndef DEBUGPLANE_TESTS_SUPPORT_WAIT_UNTIL_H_
#define DEBUGPLANE_TESTS_SUPPORT_WAIT_UNTIL_H_

#include <algorithm>
#include <string_view>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace debugplane::testing {

// How long a test waits by default for something that normally takes
// milliseconds: generous, so that a loaded or sanitized build does not fail.
inline constexpr absl::Duration kDefaultPatience = absl::Seconds(30);

// How long WaitUntil sleeps between calls: it starts short, so that what
// happens at once is seen at once, and doubles up to the longest.
inline constexpr absl::Duration kFirstPollInterval = absl::Microseconds(250);
inline constexpr absl::Duration kLongestPollInterval = absl::Milliseconds(10);

// Calls `done()` until it returns true, or until `timeout` (real time) has
// passed and a last call still returns false; sleeps between calls (see
// above). Returns whether `done()` became true. `done` may have side effects
// (e.g. keep the last state it read, for the caller's failure message).
template <typename Predicate>
bool WaitUntil(Predicate&& done, absl::Duration timeout = kDefaultPatience) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration interval = kFirstPollInterval;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(interval);
    interval = std::min(interval * 2, kLongestPollInterval);
  }
  return done();
}

// WaitUntil for an assertion: EXPECT_TRUE(WaitedFor("the rule to end", ...))
// fails with "waited <timeout> for the rule to end" when `done()` never
// became true.
template <typename Predicate>
::testing::AssertionResult WaitedFor(std::string_view what, Predicate&& done,
                                     absl::Duration timeout = kDefaultPatience) {
  if (WaitUntil(done, timeout)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "waited " << absl::FormatDuration(timeout) << " for " << what;
}

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SUPPORT_WAIT_UNTIL_H_
