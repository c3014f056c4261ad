// Listing smdebug's hour-partitioned profiler output:
// <dir>/<YYYYMMDDHH>/<file>, as both system metrics
// (system/incremental) and framework timelines (framework/pevents) are kept.

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_HOUR_DIRECTORIES_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_HOUR_DIRECTORIES_H_

#include <cstdint>
#include <optional>
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

// What a reader knows of its hour-partitioned directory from its listings:
// whether the directory exists, and why the last listing failed. Not
// thread-safe (one reader's).
class HourFileListing {
 public:
  // ListHourFiles(dir, accept). On failure returns nullopt and records it:
  // the directory exists unless NOT_FOUND, and an error message other than
  // the last one reported goes to `report` as "<label>: <message>".
  std::optional<std::vector<HourFile>> List(const objectstore::StoreLocation& dir,
                                            absl::string_view label,
                                            absl::FunctionRef<bool(absl::string_view name)> accept,
                                            absl::FunctionRef<void(std::string)> report);

  // False before a listing found the directory (no data yet).
  bool directory_exists() const { return directory_exists_; }
  // Why the last listing failed; empty if it did not.
  const std::string& error() const { return error_; }

 private:
  bool directory_exists_ = false;
  std::string error_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_HOUR_DIRECTORIES_H_
