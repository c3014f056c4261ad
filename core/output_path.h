// Where a job's output paths point, and whether the server may use them.

#ifndef DEBUGPLANE_CORE_OUTPUT_PATH_H_
#define DEBUGPLANE_CORE_OUTPUT_PATH_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace debugplane::core {

// A validated output location.
struct OutputLocation {
  enum class Kind { kObjectStore, kLocal };
  Kind kind = Kind::kLocal;
  // For kObjectStore: the URI as given (s3://bucket/prefix or https://...).
  // For kLocal: the absolute, lexically normal path on this machine.
  std::string location;
};

// Parses and checks an output path of the API: "s3://bucket[/prefix]",
// "https://host/...", "file:///abs/path" or "/abs/path".
//
// Local paths must lie within one of `data_roots` (absolute, canonical
// directories): a path with a ".." component is refused, and the longest
// existing prefix of the path is resolved with realpath so that a symlink
// cannot lead outside the roots. The path itself need not exist yet. The path
// as given must be inside a root too (an alias of a root from outside is
// refused), and a dangling or looping symlink on the way is refused: writing
// through it would create its target, wherever that is.
//
// Any URI longer than 1024 characters (the S3Uri limit) or containing a
// control character (NUL included) is refused. s3:// needs a bucket and
// https:// a host; object-store keys are not interpreted (".." is literal).
//
// Returns the location, or INVALID_ARGUMENT whose message says what is wrong
// (not a URI of a known scheme, relative, "..", outside the data roots, a
// symlink escape) without naming the field: callers add it.
absl::StatusOr<OutputLocation> ResolveOutputPath(
    absl::string_view uri, const std::vector<std::filesystem::path>& data_roots);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_OUTPUT_PATH_H_
