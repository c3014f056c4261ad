// ObjectStore: where training output is read from, as objects under keys.
// One interface for a local data root (local_object_store.h) and an
// S3-compatible bucket (s3_object_store.h); readers and rules never touch
// the file system.
//
// Keys are '/'-separated names relative to the store's root, as S3 keys are:
// "job/tensors/index/000000000/000000000005_worker_0.json". A key has no
// leading '/', no empty, "." or ".." component and no NUL byte (ValidateKey).
// A "prefix" is the start of keys; "directories" exist only as the common
// prefixes of a delimited listing ("job/tensors/index/000000000/").
//
// Errors, for every store:
//   NOT_FOUND          no such object, or no such "directory" to list in
//                      (a store without directories lists nothing instead)
//   UNAVAILABLE        the store cannot be reached or read right now (I/O
//                      errors, no descriptors, a network failure): try again
//   PERMISSION_DENIED  the store refuses the key: no permission, or (local)
//                      a symbolic link on the way, which is never followed
//   DATA_LOSS          the store returned damaged data
//   INVALID_ARGUMENT   the key is not a valid key (ValidateKey)
// Messages name the object the way a person finds it (Describe(key): the
// file's path, or s3://bucket/key) and never quote object contents.
//
// Every implementation is thread-safe.

#ifndef DEBUGPLANE_OBJECTSTORE_OBJECT_STORE_H_
#define DEBUGPLANE_OBJECTSTORE_OBJECT_STORE_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"

namespace debugplane::objectstore {

// One object of a listing (or of Stat).
struct ObjectEntry {
  std::string key;
  uint64_t size = 0;
  // When it was last written, where the store says so cheaply (local: the
  // file's mtime; S3: LastModified); InfinitePast otherwise.
  absl::Time modified = absl::InfinitePast();
};

struct ListOptions {
  // Only keys that start with this ("" for all). With a delimiter it is
  // normally a "directory" ending in the delimiter ("job/index/").
  std::string prefix;
  // Only keys (and common prefixes) that sort strictly after this (S3's
  // StartAfter); "" for no bound. Bytewise order.
  std::string start_after;
  // "" for every key under `prefix` (recursive), or "/" for one level: keys
  // with a '/' after the prefix are rolled up into common_prefixes
  // ("job/index/000000000/"). No other delimiter is supported.
  std::string delimiter;
  // At most this many objects plus common prefixes (S3 caps it at 1000).
  size_t max_keys = 1000;
};

struct ListResult {
  // Sorted by key (bytewise), as S3 lists.
  std::vector<ObjectEntry> objects;
  // Sorted; each ends with the delimiter. Empty without a delimiter.
  std::vector<std::string> common_prefixes;
  // More keys follow: list again with start_after = next_start_after.
  bool truncated = false;
  std::string next_start_after;
};

// The most one ReadRangeInto may ask for: every read of training output is
// bounded by a limit fit for its kind (ReadLimit), far below this; a longer
// `length` is a caller's bug (INVALID_ARGUMENT), never an allocation sized
// from a file.
inline constexpr uint64_t kMaxReadBytes = uint64_t{256} << 20;  // 256 MiB

// How much of one object a reader may keep in memory, and what kind of
// object it is, for the error when the object is larger: "a tensor index
// file". Readers define one per kind of file, in their headers.
struct ReadLimit {
  uint64_t max_bytes = 0;  // At most kMaxReadBytes.
  absl::string_view what;  // Static text.
};

// "<described> is 107374182400 bytes; <what> may have at most 16 MiB
// (16777216 bytes)" as RESOURCE_EXHAUSTED: what readers say about an object
// over its limit. `size` 0 when unknown ("more than ..." then).
absl::Status OverReadLimitError(absl::string_view described, uint64_t size, const ReadLimit& limit);

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // Objects and (with a delimiter) common prefixes under options.prefix,
  // after options.start_after, at most options.max_keys of them, in key
  // order. An empty result is not an error. NOT_FOUND when the store knows
  // that the "directory" part of the prefix (up to its last '/') does not
  // exist; stores without directories return an empty result instead, so
  // callers treat both alike unless they report which.
  virtual absl::StatusOr<ListResult> List(const ListOptions& options) const = 0;

  // Bytes [offset, offset + length) of the object at `key`, fewer at its end
  // (none when `offset` is at or past it), into `*out` (replacing its
  // content, reusing its capacity); never more than `length` bytes are
  // kept, whatever the object's size or the store's answer. A file still
  // being appended to is read up to its size when the read starts.
  // INVALID_ARGUMENT if `length` is over kMaxReadBytes.
  virtual absl::Status ReadRangeInto(absl::string_view key, uint64_t offset, uint64_t length,
                                     std::string* out) const = 0;

  // The object's size (and modified time, if cheap). NOT_FOUND if there is no
  // such object (a "directory" is not an object).
  virtual absl::StatusOr<ObjectEntry> Stat(absl::string_view key) const = 0;

  // How a person finds `key` in this store, for messages: "/data/job/x.json"
  // for a local store rooted at /data, "s3://bucket/job/x.json" for S3.
  // Describe("") names the store's root.
  virtual std::string Describe(absl::string_view key) const = 0;

  // A descriptor of the local directory `prefix` (a key naming a
  // "directory", "" for the root), opened with the same confinement as every
  // read, for change notification by inotify (change_notifier.h). Stores
  // that are not a local file system return UNIMPLEMENTED (the default):
  // their changes are polled for.
  virtual absl::StatusOr<base::UniqueFd> OpenDirectoryForWatch(absl::string_view prefix) const;

  // True when each Stat is a request to a remote service (S3's HEAD): a
  // reader looking for many objects of one prefix then asks one listing of
  // it instead (a page holds up to 1000 keys with their sizes). False (the
  // default) where Stat is a local system call, cheaper than a listing.
  virtual bool StatIsARoundTrip() const { return false; }

  // The whole object if it has at most limit.max_bytes bytes; else
  // OverReadLimitError naming it (Describe(key)), its size and the limit,
  // having read no more than limit.max_bytes + 1 bytes. There is no
  // unbounded whole-object read: a file's size is training's data, and a
  // sparse 100 GB file costs its writer nothing.
  absl::StatusOr<std::string> ReadAtMost(absl::string_view key, const ReadLimit& limit) const;
  absl::Status ReadAtMostInto(absl::string_view key, const ReadLimit& limit,
                              std::string* out) const;
  // ReadRangeInto into a new string.
  absl::StatusOr<std::string> ReadRange(absl::string_view key, uint64_t offset,
                                        uint64_t length) const;
  // Every page of List (options.max_keys per page) until the listing is
  // complete or `limit` entries (objects plus common prefixes) were
  // gathered; then `truncated` says whether more were left.
  absl::StatusOr<ListResult> ListAll(ListOptions options,
                                     size_t limit = std::numeric_limits<size_t>::max()) const;
};

// A place in a store: the keys under `prefix` ("" for the whole store).
// What a job's output path resolves to (core/jobs/output_path.h).
struct StoreLocation {
  std::shared_ptr<const ObjectStore> store;
  std::string prefix;  // A key without a trailing '/', or "".

  // The key of `relative` ("index/000000000") under the prefix.
  std::string Key(absl::string_view relative) const;
  // Key(relative) + "/": the prefix that lists inside that "directory"
  // ("" when that is the store's root itself).
  std::string DirectoryPrefix(absl::string_view relative = "") const;
  // store->Describe(prefix): "/data/job/tensors".
  std::string Describe() const;
  // A location below this one.
  StoreLocation Below(absl::string_view relative) const;
};

// OK if `key` is a valid key: not empty, not longer than 4096 bytes, no
// leading or doubled '/', no "." or ".." component, no NUL byte; a trailing
// '/' is allowed only when `allow_trailing_slash` (list prefixes).
// INVALID_ARGUMENT naming the key otherwise.
absl::Status ValidateKey(absl::string_view key, bool allow_trailing_slash = false);

// Same for a list prefix, which may also be "" (the whole store) or end in
// part of a name ("job/index/00000").
absl::Status ValidatePrefix(absl::string_view prefix);

}  // namespace debugplane::objectstore

#endif  // DEBUGPLANE_OBJECTSTORE_OBJECT_STORE_H_
