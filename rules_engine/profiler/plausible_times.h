// Which times in a job's profiler output are believed: a training job
// writes the timestamps of its system metrics and framework events itself,
// so one line with "Timestamp": 1e300 (or 0) must not stretch every series,
// chart and duration of the job to the end of time. A consumer of the
// readers (the dashboard's InsightsStore, the rules engine's profiler
// evaluation) passes each batch through one PlausibleTimes per job, which
// drops what is implausible and counts it for the status or view.
//
// A time t (epoch seconds) is plausible when all of these hold:
//   - 2000-01-01T00:00:00Z <= t (kEarliest: before any smdebug profiler);
//   - t <= now + kFutureSlack (1 day: clocks of training hosts drift, but
//     not by days), with `now` from the caller's Clock;
//   - |t - anchor| <= kMaxDistance (30 days, beyond SageMaker's longest
//     training job of 28 days), where the anchor is the median time of the
//     first batch that had any time passing the two bounds above: one
//     outlier among a job's first samples does not move the median, and a
//     job replayed long after it ran (tests, evaluation after the fact) is
//     judged against its own samples, not against `now`.
// A framework event is kept when its start and end are both plausible (a
// duration of centuries is as implausible as a start in 1970); an
// implausible timeline start (start_time_since_epoch_in_micros) is cleared to
// -1, unknown, and counted. Samples with a non-finite time or value are
// dropped as well.
//
// Not thread-safe (one per job, used under the owner's lock).

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_PLAUSIBLE_TIMES_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_PLAUSIBLE_TIMES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rules_engine/profiler/framework_event.h"
#include "rules_engine/profiler/system_metrics_reader.h"

namespace debugplane::rules_engine {

class PlausibleTimes {
 public:
  static constexpr double kEarliest = 946684800;  // 2000-01-01T00:00:00Z.
  static constexpr double kFutureSlack = 24 * 3600.0;
  static constexpr double kMaxDistance = 30 * 24 * 3600.0;

  // Removes the points with an implausible timestamp or a non-finite value
  // (keeping the order of the rest) and counts them.
  void FilterMetrics(std::vector<SystemMetricPoint>* points, absl::Time now);
  // Removes the events whose start or end is implausible and counts them;
  // clears (and counts) implausible timeline starts of the rest.
  void FilterEvents(std::vector<FrameworkEvent>* events, absl::Time now);

  int64_t skipped_metrics() const { return skipped_metrics_; }
  int64_t skipped_events() const { return skipped_events_; }
  int64_t cleared_timeline_starts() const { return cleared_timeline_starts_; }
  // The anchor (see above) once set.
  std::optional<double> anchor() const { return anchor_; }

  // "" when nothing was skipped; otherwise one line for a status or a view,
  // e.g. "skipped 6 system metric samples and 2 framework events with
  // implausible times (first: 1e+300): times must lie between 2000-01-01
  // and a day from now, within 30 days of the job's other samples".
  std::string Summary() const;

 private:
  // Whether `t` passes the bounds that need no anchor.
  static bool WithinBounds(double t, double now_seconds);
  bool Plausible(double t, double now_seconds) const;
  // Sets the anchor from `times` (those within the bounds) if none is set.
  void Anchor(std::vector<double> times, double now_seconds);
  void NoteSkipped(double t);

  std::optional<double> anchor_;
  int64_t skipped_metrics_ = 0;
  int64_t skipped_events_ = 0;
  int64_t cleared_timeline_starts_ = 0;
  std::optional<double> first_skipped_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_PLAUSIBLE_TIMES_H_
