// Where a job's output paths point, and whether the server may use them.

#ifndef DEBUGPLANE_CORE_OUTPUT_PATH_H_
#define DEBUGPLANE_CORE_OUTPUT_PATH_H_

#include <filesystem>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

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
// cannot lead outside the roots. The path itself need not exist yet.
//
// Returns the location, or INVALID_ARGUMENT whose message says what is wrong
// (not a URI of a known scheme, relative, "..", outside the data roots, a
// symlink escape) without naming the field: callers add it.
absl::StatusOr<OutputLocation> ResolveOutputPath(
    absl::string_view uri, const std::vector<std::filesystem::path>& data_roots);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_OUTPUT_PATH_H_
