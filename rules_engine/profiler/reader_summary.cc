#include "rules_engine/profiler/reader_summary.h"

#include "absl/strings/str_cat.h"

namespace debugplane::rules_engine {

void AppendSkippedAndFirstError(std::string& summary, int64_t malformed, absl::string_view unit,
                                const std::vector<std::string>& errors) {
  if (malformed > 0) {
    absl::StrAppend(&summary, ", ", malformed, " malformed ", unit, malformed == 1 ? "" : "s",
                    " skipped");
    if (!errors.empty()) absl::StrAppend(&summary, " (first: ", errors.front(), ")");
  } else if (!errors.empty()) {
    absl::StrAppend(&summary, " (", errors.front(), ")");
  }
}

}  // namespace debugplane::rules_engine
