// Time as UTC text: the one formatter every room uses for a timestamp a
// person or a test reads.
//
//   FormatUtc(t, "%Y-%m-%dT%H:%M:%E*SZ")   -> "2026-11-21T22:35:00.25Z"
//   FormatUtc(t, "%Y-%m-%dT%H:%M:%E1SZ")   -> "2026-11-21T22:35:00.2Z"
//   FormatUtc(t, "%a, %d %b %Y %H:%M:%S +0000")  (a mail Date header)
//
// gmtime_r and strftime, never absl's time zones: absl loads zones lazily
// behind a lock that Debian's abseil hides from ThreadSanitizer, and rules,
// reports and notifications are formatted on several threads. Thread-safe.

#ifndef DEBUGPLANE_BASE_UTC_TIME_H_
#define DEBUGPLANE_BASE_UTC_TIME_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace debugplane::base {

// `time` in UTC, written with strftime's `format` (in the C locale's month
// and day names), plus absl::FormatTime's seconds with a fraction:
//   %E<n>S  seconds and n (1-9) fraction digits, always written ("05.250");
//   %E*S    seconds and as many fraction digits as needed, none (and no
//           ".") for whole seconds ("05.25", "05").
// The fraction is truncated (towards the infinite past, as absl does).
// Times out of gmtime's range read "infinite-future" / "infinite-past"
// (absl's words for its infinite times).
std::string FormatUtc(absl::Time time, absl::string_view format);

}  // namespace debugplane::base

#endif  // DEBUGPLANE_BASE_UTC_TIME_H_
