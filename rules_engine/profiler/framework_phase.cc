#include "rules_engine/profiler/framework_phase.h"

#include <iterator>

#include "absl/strings/match.h"

namespace debugplane::rules_engine {

bool IsDataLoading(absl::string_view s) {
  for (const char* marker : {"DataIterator", "DataLoader", "dataset::", "GetNext"}) {
    if (absl::StrContains(s, marker)) return true;
  }
  return false;
}

FrameworkPhase PhaseOfCategory(absl::string_view c) {
  if (IsDataLoading(c)) return FrameworkPhase::kData;
  if (absl::StrContains(c, "SubModuleInternal")) return FrameworkPhase::kNone;
  if (absl::StartsWith(c, "Forward")) return FrameworkPhase::kForward;
  if (absl::StartsWith(c, "Backward")) return FrameworkPhase::kBackward;
  return FrameworkPhase::kNone;
}

FrameworkPhase PhaseOfEvent(const FrameworkEvent& e) {
  FrameworkPhase phase = PhaseOfCategory(e.category.empty() ? e.name : e.category);
  if (phase == FrameworkPhase::kNone && IsDataLoading(e.name)) phase = FrameworkPhase::kData;
  return phase;
}

absl::string_view FrameworkPhaseName(FrameworkPhase phase) {
  // In the order of FrameworkPhase.
  static constexpr absl::string_view kNames[] = {"other", "forward", "backward", "dataloader"};
  const auto index = static_cast<size_t>(phase);
  return index < std::size(kNames) ? kNames[index] : "other";
}

}  // namespace debugplane::rules_engine
