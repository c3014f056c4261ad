// A Clock that never jumps: the monotonic clock (CLOCK_MONOTONIC through
// std::chrono::steady_clock), for deadlines that must not move when the
// system time is set (a lease kept by a replica, see
// rules_engine/scheduling/lease_keeper.h). Its Now() is not a date: only
// differences between its readings mean anything.

#ifndef DEBUGPLANE_BASE_STEADY_CLOCK_H_
#define DEBUGPLANE_BASE_STEADY_CLOCK_H_

#include <memory>

#include "base/clock.h"

namespace debugplane::base {

// The same object on every call. Thread-safe.
std::shared_ptr<Clock> SteadyClock();

}  // namespace debugplane::base

#endif  // DEBUGPLANE_BASE_STEADY_CLOCK_H_
