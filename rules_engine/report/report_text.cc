#include "rules_engine/report/report_text.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "base/utc_time.h"
#include "rules_engine/report/profiler_report.h"

namespace debugplane::rules_engine {
namespace profiler_report_internal {
namespace {

// "2.50" -> "2.5", "3.00" -> "3": a formatted number without trailing zeros.
std::string TrimZeros(std::string number) {
  const size_t dot = number.find('.');
  if (dot == std::string::npos) return number;
  size_t end = number.find_last_not_of('0');
  if (end == dot) --end;
  return number.substr(0, end + 1);
}

// The names of the drawn dimensions (as in the profiler's files).
constexpr std::pair<MetricDimension, const char*> kDimensionNames[] = {
    {MetricDimension::kCpuUtilization, "CPUUtilization"},
    {MetricDimension::kGpuUtilization, "GPUUtilization"},
    {MetricDimension::kGpuMemoryUtilization, "GPUMemoryUtilization"},
    {MetricDimension::kMemoryUsedPercent, "MemoryUsedPercent"},
    {MetricDimension::kIoWaitPercentage, "I/OWaitPercentage"},
};

}  // namespace

// A rule verdict's name in the report, and where the findings table lists
// it: issues first, then errors, undecided, clean.
struct StatusText {
  RuleVerdict::Kind kind;
  const char* name;
  int display_rank;
};
constexpr StatusText kStatuses[] = {
    {RuleVerdict::Kind::kIssuesFound, "IssuesFound", 0},
    {RuleVerdict::Kind::kError, "Error", 1},
    {RuleVerdict::Kind::kContinue, "InProgress", 2},
    {RuleVerdict::Kind::kNoIssuesFound, "NoIssuesFound", 3},
};

std::string EscapeHtml(absl::string_view text) {
  return absl::StrReplaceAll(
      text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}, {"'", "&#39;"}});
}

std::string SvgNumber(double value) {
  if (!std::isfinite(value)) return "0";
  const double rounded = std::round(value * 10) / 10;
  if (rounded == std::floor(rounded)) return absl::StrCat(static_cast<int64_t>(rounded));
  return absl::StrFormat("%.1f", rounded);
}

std::string FormatDurationUs(double us) {
  if (us <= 0) return "0";
  if (us < 1000) return absl::StrCat(TrimZeros(absl::StrFormat("%.0f", us)), " µs");
  if (us < 10'000) return absl::StrCat(TrimZeros(absl::StrFormat("%.2f", us / 1e3)), " ms");
  if (us < 1'000'000) return absl::StrCat(TrimZeros(absl::StrFormat("%.1f", us / 1e3)), " ms");
  if (us < 60e6) return absl::StrCat(TrimZeros(absl::StrFormat("%.2f", us / 1e6)), " s");
  return absl::StrCat(TrimZeros(absl::StrFormat("%.1f", us / 60e6)), " min");
}

std::string FormatSpan(double seconds) {
  if (seconds < 120) return absl::StrFormat("%.0f s", seconds);
  if (seconds < 2 * 3600) return absl::StrFormat("%.0f min", seconds / 60);
  if (seconds < 2 * 86400) return absl::StrFormat("%.1f h", seconds / 3600);
  return absl::StrFormat("%.1f days", seconds / 86400);
}

std::string FormatCount(int64_t count) {
  const std::string digits = absl::StrCat(count < 0 ? -count : count);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return count < 0 ? "-" + out : out;
}

absl::Time TimeOfSeconds(double seconds) {
  return absl::FromUnixMicros(static_cast<int64_t>(std::llround(seconds * 1e6)));
}

std::string FormatRfc3339(absl::Time time) { return base::FormatUtc(time, "%Y-%m-%dT%H:%M:%E*SZ"); }

std::string DimensionName(MetricDimension dimension) {
  for (const auto& [known, name] : kDimensionNames) {
    if (known == dimension) return name;
  }
  return "Other";
}

int StatusDisplayRank(RuleVerdict::Kind kind) {
  for (const StatusText& status : kStatuses) {
    if (status.kind == kind) return status.display_rank;
  }
  return 4;
}

}  // namespace profiler_report_internal

std::string ProfilerRuleStatusName(RuleVerdict::Kind kind) {
  for (const profiler_report_internal::StatusText& status : profiler_report_internal::kStatuses) {
    if (status.kind == kind) return status.name;
  }
  return "Error";
}

}  // namespace debugplane::rules_engine
