// libFuzzer target: reading a rule's StatusDetails for the dashboard
// (rules_engine/insights/rule_insights.h, ParseRuleDetails).
//   scripts/fuzz.sh rule_details_fuzzer

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "rules_engine/insights/rule_insights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  const auto found = debugplane::rules_engine::insights::ParseRuleDetails(text);
  if (found.message != text) std::abort();
  if (found.tensor.size() > text.size()) std::abort();
  if (found.step.has_value() && *found.step < 0) std::abort();
  return 0;
}
