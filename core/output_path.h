// Where a job's output paths point, and whether the server may use them.

#ifndef DEBUGPLANE_CORE_OUTPUT_PATH_H_
#define DEBUGPLANE_CORE_OUTPUT_PATH_H_

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "objectstore/local_object_store.h"
#include "objectstore/object_store.h"

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

// The stores the server reads output from: one LocalObjectStore per data
// root, opened once, and the one place that maps a job's output path (or
// other_trials path) to a store and a key prefix in it. Every read through
// those stores is confined to its root (no ".." and no symbolic link is
// followed below it), however the directories change after the path was
// checked at CreateTrainingJob.
//
// Thread-safe (immutable after construction).
class DataRootStores {
 public:
  // Opens a store for each of `data_roots` (absolute directories, as the
  // server canonicalized them). A root that cannot be opened is kept with
  // its error, which paths into it resolve to.
  explicit DataRootStores(std::vector<std::filesystem::path> data_roots,
                          objectstore::LocalObjectStore::Options options = {});

  const std::vector<std::filesystem::path>& data_roots() const { return data_roots_; }

  // Where the server reads the output at `uri` (an output path of the API,
  // as ResolveOutputPath takes it): the store of the data root the path lies
  // in (the innermost one when roots nest) and the path below that root as
  // the key prefix ("" for the root itself). Only the path's text is
  // examined, with ResolveOutputPath's rules (no file system access: the
  // store confines every read instead).
  //
  // Errors (messages say what is wrong without naming the field; callers add
  // it): INVALID_ARGUMENT as ResolveOutputPath's (a relative path, "..",
  // outside the data roots, a bad URI); UNIMPLEMENTED for s3:// and https://
  // ("... is in object storage, which this server does not read yet"); the
  // root store's open error.
  absl::StatusOr<objectstore::StoreLocation> Resolve(absl::string_view uri) const;

 private:
  struct Root {
    std::filesystem::path path;  // Lexically normal, no trailing separator.
    std::shared_ptr<objectstore::LocalObjectStore> store;
    absl::Status open_error;  // Why store is null.
  };
  std::vector<std::filesystem::path> data_roots_;
  std::vector<Root> roots_;
};

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_OUTPUT_PATH_H_
