// Which phase of training a framework event belongs to (forward, backward,
// data loading), from its category (the timeline's process_name) or name:
// shared by OverallFrameworkMetrics and the dashboard's insights so both
// classify events the same way.

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_FRAMEWORK_PHASE_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_FRAMEWORK_PHASE_H_

#include "absl/strings/string_view.h"
#include "rules_engine/profiler/framework_event.h"

namespace debugplane::rules_engine {

enum class FrameworkPhase { kNone, kForward, kBackward, kData };

// Whether `s` (a category or an event name) is data loading: it contains
// DataIterator, DataLoader, dataset:: or GetNext.
bool IsDataLoading(absl::string_view s);

// The phase of a category (or, for events without one, of a name): data
// loading as above; "...SubModuleInternal" categories are nested inside
// their phase's events and count as none (so phase totals do not count
// them twice); then "Forward..." and "Backward...".
FrameworkPhase PhaseOfCategory(absl::string_view category);

// The phase of event `e`: its category's (its name's when it has none), or
// data loading when its name says so.
FrameworkPhase PhaseOfEvent(const FrameworkEvent& e);

// "forward", "backward", "dataloader", "other".
absl::string_view FrameworkPhaseName(FrameworkPhase phase);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_FRAMEWORK_PHASE_H_
