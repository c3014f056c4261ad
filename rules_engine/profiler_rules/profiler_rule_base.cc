#include "rules_engine/profiler_rules/profiler_rule_base.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "base/utc_time.h"

namespace debugplane::rules_engine::profiler_rules_internal {
namespace {

// OnEnd()'s Error when none of the primary input was read.
const char* NothingReadError(ProfilerRuleBase::Input input) {
  switch (input) {
    case ProfilerRuleBase::Input::kSystemMetrics:
      return "no system metrics were read (the profiler's system/incremental directory is "
             "missing or empty)";
    case ProfilerRuleBase::Input::kFrameworkEvents:
      return "no framework events were read (the profiler's framework/pevents directory is "
             "missing or holds no complete event, and no PyTorch profiler trace "
             "(*.pt.trace.json) was found: is framework profiling enabled? PyTorch 2 jobs "
             "profile with debugplane_profiler or torch.profiler)";
  }
  return "";
}

std::string Cut(std::string details) {
  if (details.size() > kMaxDetails) details.resize(kMaxDetails);
  return details;
}

}  // namespace

RuleVerdict Issues(std::string details) { return RuleVerdict::Issues(Cut(std::move(details))); }
RuleVerdict NoIssues(std::string details) { return RuleVerdict::NoIssues(Cut(std::move(details))); }

void CommonParameters(RuleParameterReader& p) { p.Int("scan_interval_us", 60000000, 1); }

double PercentParameter(RuleParameterReader& p, absl::string_view name, double default_value) {
  return p.Float(name, default_value, 0, 100);
}

std::string FormatTimestamp(double seconds) {
  if (!std::isfinite(seconds) || std::fabs(seconds) > 1e15) return absl::StrCat(seconds);
  const int64_t tenths = std::llround(seconds * 10);
  return base::FormatUtc(absl::FromUnixMillis(tenths * 100), "%Y-%m-%dT%H:%M:%E1SZ");
}

std::string FormatTimestampMicros(int64_t us) {
  // The milliseconds of `us` truncated towards zero, then the second
  // borrowed from when negative (as these texts always have).
  int64_t seconds = us / 1000000;
  int64_t millis = (us % 1000000) / 1000;
  if (millis < 0) millis += 1000, --seconds;
  return base::FormatUtc(absl::FromUnixSeconds(seconds) + absl::Milliseconds(millis),
                         "%Y-%m-%dT%H:%M:%E3SZ");
}

std::string FormatPercent(double value) { return absl::StrFormat("%.1f%%", value); }

void AppendPart(std::string* out, absl::string_view part) {
  if (out->size() >= kMaxDetails) return;
  absl::StrAppend(out, out->empty() ? "" : "; ", part);
}

RuleVerdict ProfilerRuleBase::OnEnd() {
  if (done_) return final_;
  const int64_t primary_seen = primary_ == Input::kSystemMetrics ? points_seen_ : events_seen_;
  if (primary_seen == 0) return Conclude(RuleVerdict::Error(NothingReadError(primary_)));
  return Conclude(End());
}

ProfilerRuleFinding ProfilerRuleBase::Finding() const {
  ProfilerRuleFinding finding;
  finding.rule = name();
  finding.parameters = parameters_;
  finding.datapoints = points_seen_ + events_seen_;
  finding.violations = Violations();
  finding.flagged_steps = FlaggedSteps();
  if (done_) {
    finding.status = final_.kind;
    finding.details = final_.details;
  } else if (primary_ == Input::kSystemMetrics && points_seen_ == 0) {
    // The system rules' Progress() describes series seen; the framework
    // rules' says what they wait for (MaxInitializationTime may know the
    // training start from system metrics before any event).
    finding.details = "no system metrics yet";
  } else {
    finding.details = Cut(Progress());
  }
  return finding;
}

}  // namespace debugplane::rules_engine::profiler_rules_internal
