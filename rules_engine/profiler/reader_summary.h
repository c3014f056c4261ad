// What the profiler readers' Summary() lines share: how much was skipped as
// malformed and the first problem met.

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_READER_SUMMARY_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_READER_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace debugplane::rules_engine {

// Appends to `summary` ", <malformed> malformed <unit>s skipped (first:
// <errors[0]>)" when `malformed` > 0 (the unit singular for one), else
// " (<errors[0]>)" when there are errors, else nothing.
void AppendSkippedAndFirstError(std::string& summary, int64_t malformed, absl::string_view unit,
                                const std::vector<std::string>& errors);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_READER_SUMMARY_H_
