// The report's texts: escaping for HTML, numbers, durations, counts and
// times as people read them on the page and in the JSON summary. Internal
// to rules_engine/report/.

#ifndef DEBUGPLANE_RULES_ENGINE_REPORT_REPORT_TEXT_H_
#define DEBUGPLANE_RULES_ENGINE_REPORT_REPORT_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rules_engine/profiler/system_metrics_reader.h"
#include "rules_engine/rule/rule.h"

namespace debugplane::rules_engine::profiler_report_internal {

// `text` safe inside HTML text and attribute values: & < > " ' as entities.
std::string EscapeHtml(absl::string_view text);

// An SVG coordinate or length to one decimal, without ".0" ("12", "12.5");
// 0 for a non-finite value. Enough for the screen, keeps the page small.
std::string SvgNumber(double value);

// "850 µs", "6.25 ms", "303.1 ms", "1.5 s", "2.5 min"; round values without
// ".0" (axis ticks); "0" for none.
std::string FormatDurationUs(double us);

// A time span: "90 s", "45 min", "3.5 h", "2.0 days".
std::string FormatSpan(double seconds);

// Digits grouped by thousands: "1,234,567".
std::string FormatCount(int64_t count);

// `seconds` since the epoch (rounded to the microsecond) as an absl::Time.
absl::Time TimeOfSeconds(double seconds);

// RFC 3339 in UTC with as many fraction digits as needed:
// "2026-11-21T22:35:00.25Z".
std::string FormatRfc3339(absl::Time time);

// The dimension's name in the profiler's files ("CPUUtilization",
// "I/OWaitPercentage", ...); "Other" for kOther.
std::string DimensionName(MetricDimension dimension);

// Where the findings table lists a finding of this status: 0 (IssuesFound)
// first, then Error, InProgress, NoIssuesFound.
int StatusDisplayRank(RuleVerdict::Kind kind);

}  // namespace debugplane::rules_engine::profiler_report_internal

#endif  // DEBUGPLANE_RULES_ENGINE_REPORT_REPORT_TEXT_H_
