// Where a job's output paths point, and whether the server may use them.

#ifndef DEBUGPLANE_CORE_JOBS_OUTPUT_PATH_H_
#define DEBUGPLANE_CORE_JOBS_OUTPUT_PATH_H_

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "metrics/object_store_metrics.h"
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
// s3:// paths resolve to the store of their bucket, made by a
// BucketStoreFactory (the server's S3 configuration) once per bucket.
//
// Thread-safe.
class DataRootStores {
 public:
  // The store of object-storage bucket `bucket` (the host part of
  // "s3://bucket/prefix"), or why there is none (the message names the
  // bucket and the cause: no credentials, a bad endpoint). Called at most
  // once per bucket while it succeeds; a failure is not kept, so a fixed
  // configuration (credentials file written later) takes effect. Must not
  // block on the network: reads report the store's reachability.
  using BucketStoreFactory =
      std::function<absl::StatusOr<std::shared_ptr<const objectstore::ObjectStore>>(
          absl::string_view bucket)>;

  // Opens a store for each of `data_roots` (absolute directories, as the
  // server canonicalized them). A root that cannot be opened is kept with
  // its error, which paths into it resolve to. Without `bucket_stores`,
  // s3:// paths resolve to UNIMPLEMENTED. With `metrics`, every store
  // resolved to counts its requests there (objectstore/metered_object_store.h:
  // kind "local" for data roots, "s3" for buckets); it must outlive this
  // object.
  explicit DataRootStores(std::vector<std::filesystem::path> data_roots,
                          objectstore::LocalObjectStore::Options options = {},
                          BucketStoreFactory bucket_stores = nullptr,
                          metrics::ObjectStoreMetrics* metrics = nullptr);

  const std::vector<std::filesystem::path>& data_roots() const { return data_roots_; }

  // Where the server reads the output at `uri` (an output path of the API,
  // as ResolveOutputPath takes it): the store of the data root the path lies
  // in (the innermost one when roots nest) and the path below that root as
  // the key prefix ("" for the root itself). Only the path's text is
  // examined, with ResolveOutputPath's rules (no file system access: the
  // store confines every read instead).
  //
  // "s3://bucket/a/b/" resolves to the bucket's store and the prefix "a/b"
  // ("" for the bucket itself).
  //
  // Errors (messages say what is wrong without naming the field; callers add
  // it): INVALID_ARGUMENT as ResolveOutputPath's (a relative path, "..",
  // outside the data roots, a bad URI) or for an s3:// prefix that is not a
  // valid key; UNIMPLEMENTED for https:// and, without a bucket factory,
  // s3:// ("... is in object storage, which this server is not configured to
  // read"); the root store's open error; the bucket factory's error.
  absl::StatusOr<objectstore::StoreLocation> Resolve(absl::string_view uri) const;

 private:
  absl::StatusOr<objectstore::StoreLocation> ResolveObjectStore(absl::string_view uri) const;
  absl::StatusOr<std::shared_ptr<const objectstore::ObjectStore>> BucketStore(
      absl::string_view bucket) const;

  struct Root {
    std::filesystem::path path;  // Lexically normal, no trailing separator.
    std::shared_ptr<objectstore::LocalObjectStore> store;
    std::shared_ptr<const objectstore::ObjectStore> reader;  // `store`, metered if asked.
    absl::Status open_error;                                 // Why store is null.
  };
  std::vector<std::filesystem::path> data_roots_;
  std::vector<Root> roots_;
  const BucketStoreFactory bucket_store_factory_;
  metrics::ObjectStoreMetrics* const metrics_;
  mutable absl::Mutex buckets_mutex_;
  mutable std::map<std::string, std::shared_ptr<const objectstore::ObjectStore>, std::less<>>
      buckets_ ABSL_GUARDED_BY(buckets_mutex_);
};

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_OUTPUT_PATH_H_
