#include "rules_engine/profiler/plausible_times.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace debugplane::rules_engine {

namespace {

constexpr double kMicros = 1e6;

double Seconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

std::string Plural(int64_t n, absl::string_view one, absl::string_view many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

}  // namespace

bool PlausibleTimes::WithinBounds(double t, double now_seconds) {
  return std::isfinite(t) && t >= kEarliest && t <= now_seconds + kFutureSlack;
}

bool PlausibleTimes::Plausible(double t, double now_seconds) const {
  return WithinBounds(t, now_seconds) &&
         (!anchor_.has_value() || std::fabs(t - *anchor_) <= kMaxDistance);
}

void PlausibleTimes::Anchor(std::vector<double> times, double now_seconds) {
  if (anchor_.has_value()) return;
  times.erase(std::remove_if(times.begin(), times.end(),
                             [now_seconds](double t) { return !WithinBounds(t, now_seconds); }),
              times.end());
  if (times.empty()) return;
  auto middle = times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2);
  std::nth_element(times.begin(), middle, times.end());
  anchor_ = *middle;
}

void PlausibleTimes::NoteSkipped(double t) {
  if (!first_skipped_.has_value()) first_skipped_ = t;
}

void PlausibleTimes::FilterMetrics(std::vector<SystemMetricPoint>* points, absl::Time now) {
  const double now_seconds = Seconds(now);
  if (!anchor_.has_value()) {
    std::vector<double> times;
    times.reserve(points->size());
    for (const SystemMetricPoint& p : *points) times.push_back(p.timestamp);
    Anchor(std::move(times), now_seconds);
  }
  auto skipped = [&](const SystemMetricPoint& p) {
    const bool plausible = Plausible(p.timestamp, now_seconds);
    if (plausible && std::isfinite(p.value)) return false;
    if (!plausible) NoteSkipped(p.timestamp);
    ++skipped_metrics_;
    return true;
  };
  points->erase(std::remove_if(points->begin(), points->end(), skipped), points->end());
}

void PlausibleTimes::FilterEvents(std::vector<FrameworkEvent>* events, absl::Time now) {
  const double now_seconds = Seconds(now);
  // The reader bounds start_us and duration_us by 2^53 each: no overflow.
  auto start = [](const FrameworkEvent& e) { return static_cast<double>(e.start_us) / kMicros; };
  auto end = [](const FrameworkEvent& e) {
    return static_cast<double>(e.start_us) / kMicros + static_cast<double>(e.duration_us) / kMicros;
  };
  if (!anchor_.has_value()) {
    std::vector<double> times;
    times.reserve(events->size());
    for (const FrameworkEvent& e : *events) times.push_back(start(e));
    Anchor(std::move(times), now_seconds);
  }
  auto skipped = [&](const FrameworkEvent& e) {
    const double s = start(e), t = end(e);
    if (e.duration_us >= 0 && Plausible(s, now_seconds) && Plausible(t, now_seconds)) {
      return false;
    }
    NoteSkipped(Plausible(s, now_seconds) ? t : s);
    ++skipped_events_;
    return true;
  };
  events->erase(std::remove_if(events->begin(), events->end(), skipped), events->end());
  for (FrameworkEvent& e : *events) {
    if (e.timeline_start_us < 0) continue;
    const double t = static_cast<double>(e.timeline_start_us) / kMicros;
    if (Plausible(t, now_seconds)) continue;
    NoteSkipped(t);
    ++cleared_timeline_starts_;
    e.timeline_start_us = -1;  // Unknown, as for a file without one.
  }
}

std::string PlausibleTimes::Summary() const {
  if (skipped_metrics_ == 0 && skipped_events_ == 0 && cleared_timeline_starts_ == 0) return "";
  std::string what;
  if (skipped_metrics_ > 0) {
    what = Plural(skipped_metrics_, "system metric sample", "system metric samples");
  }
  if (skipped_events_ > 0) {
    absl::StrAppend(&what, what.empty() ? "" : " and ",
                    Plural(skipped_events_, "framework event", "framework events"));
  }
  if (cleared_timeline_starts_ > 0) {
    absl::StrAppend(&what, what.empty() ? "" : " and ",
                    Plural(cleared_timeline_starts_, "framework timeline start time",
                           "framework timeline start times"));
  }
  return absl::StrCat("skipped ", what, " with implausible times (first: ",
                      first_skipped_.has_value() ? absl::StrCat(*first_skipped_) : "?",
                      "): times must lie between 2000-01-01 and a day from now, within ",
                      static_cast<int>(kMaxDistance / 86400),
                      " days of the job's other samples, and values must be finite");
}

}  // namespace debugplane::rules_engine
