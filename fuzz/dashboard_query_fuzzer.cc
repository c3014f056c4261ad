// libFuzzer target: the query strings of the dashboard's data routes
// (service/dashboard/insights_query.h): every parameter parser, and the
// system query's result, which must satisfy what the store requires.
//   scripts/fuzz.sh dashboard_query_fuzzer

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "service/dashboard/insights_query.h"

namespace dashboard = debugplane::service::dashboard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  debugplane::rules_engine::insights::SystemQuery system;
  if (dashboard::ParseSystemQuery(text, &system).ok()) {
    if (system.width < 1 || system.width > dashboard::kMaxWidth) std::abort();
    if (system.range.start && system.range.end && *system.range.start > *system.range.end) {
      std::abort();
    }
  }
  debugplane::rules_engine::insights::TimeRange range;
  int width = 0;
  (void)dashboard::ParseFrameworkQuery(text, &range, &width);
  debugplane::v1::GetTensorValuesRequest tensor;
  if (dashboard::ParseTensorQuery(text, "job", &tensor).ok()) {
    if (tensor.tensor_name().empty() || tensor.max_points() < 1) std::abort();
  }
  return 0;
}
