// Listing smdebug's hour-partitioned profiler output:
// <dir>/<YYYYMMDDHH>/<file>, as both system metrics
// (system/incremental) and framework timelines (framework/pevents) are kept.

#ifndef DEBUGPLANE_RULES_ENGINE_HOUR_DIRECTORIES_H_
#define DEBUGPLANE_RULES_ENGINE_HOUR_DIRECTORIES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace debugplane::rules_engine {

struct HourFile {
  std::string relative;  // "<hour>/<file name>".
  std::string name;      // "<file name>".
  uint64_t size = 0;     // At listing time; 0 if it could not be read.
};

// The regular files of every hour directory under `dir` whose name
// `accept`s, in reading order: hour directories sorted by name, then file
// names sorted (smdebug names both so that this is time order). A missing
// or unreadable directory lists nothing (no data yet is not an error).
std::vector<HourFile> ListHourFiles(const std::string& dir,
                                    absl::FunctionRef<bool(absl::string_view name)> accept);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_HOUR_DIRECTORIES_H_
