// Listing smdebug's hour-partitioned profiler output:
// <dir>/<YYYYMMDDHH>/<file>, as both system metrics
// (system/incremental) and framework timelines (framework/pevents) are kept.

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_HOUR_DIRECTORIES_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_HOUR_DIRECTORIES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "objectstore/object_store.h"

namespace debugplane::rules_engine {

struct HourFile {
  std::string relative;  // "<hour>/<file name>".
  std::string name;      // "<file name>".
  std::string key;       // The object's key in the store.
  uint64_t size = 0;     // At listing time.
};

// The objects of every hour "directory" under `dir` whose name `accept`s,
// in reading order: hour directories sorted by name, then file names sorted
// (smdebug names both so that this is time order). Objects directly in `dir`
// are not hour files and are left out.
//
// Errors: NOT_FOUND if `dir` does not exist (no data yet); the store's other
// errors (a symbolic link in the listing: PERMISSION_DENIED naming it). An
// hour directory removed between the listings is skipped.
absl::StatusOr<std::vector<HourFile>> ListHourFiles(
    const objectstore::StoreLocation& dir, absl::FunctionRef<bool(absl::string_view name)> accept);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_HOUR_DIRECTORIES_H_
