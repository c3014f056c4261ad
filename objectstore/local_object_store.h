// LocalObjectStore: an ObjectStore over one local directory (a server
// --data-root), confined to it.
//
// Every file and directory is opened relative to a descriptor of the root
// directory, never by an absolute path: with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS) where the kernel has it (Linux 5.6+), otherwise by an
// equivalent walk, one component at a time, each opened with
// openat(O_NOFOLLOW) relative to the previous one. A symbolic link anywhere
// below the root (a file, a directory, a directory swapped for a link after a
// job was created) is refused, never followed:
//   PERMISSION_DENIED "/data/job/tensors is a symbolic link; debugplane does
//   not follow links inside a data root"
// so nothing outside the root is read, listed or watched, whatever is
// created inside it later. (The root itself is opened once, by its path, when
// the store is opened: it is the server's configuration.)
//
// Objects are regular files; directories are "directories" (common
// prefixes). Listings hold regular files and directories; other kinds
// (FIFOs, sockets, devices) are left out, and a symbolic link in a listed
// range fails the listing, naming it. Reads never block on a FIFO. A
// recursive listing (no delimiter) more than 128 directories deep is
// FAILED_PRECONDITION.
//
// Thread-safe: no state changes after Open.

#ifndef DEBUGPLANE_OBJECTSTORE_LOCAL_OBJECT_STORE_H_
#define DEBUGPLANE_OBJECTSTORE_LOCAL_OBJECT_STORE_H_

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "objectstore/object_store.h"
#include "base/unique_fd.h"

namespace debugplane::objectstore {

class LocalObjectStore final : public ObjectStore {
 public:
  // How paths below the root are resolved.
  enum class Resolution {
    kAuto,     // openat2 where the kernel has it, else the walk.
    kOpenat2,  // openat2 only (Open fails where the kernel lacks it).
    kWalk,     // The component-by-component walk (what kAuto falls back to).
  };
  struct Options {
    Resolution resolution = Resolution::kAuto;
  };

  // Opens the store rooted at the directory `root` (an absolute path; links
  // in it are followed, once, here). NOT_FOUND if it does not exist,
  // FAILED_PRECONDITION if it is not a directory, UNIMPLEMENTED if
  // (kOpenat2) the kernel has no openat2, PERMISSION_DENIED, UNAVAILABLE
  // otherwise.
  static absl::StatusOr<std::shared_ptr<LocalObjectStore>> Open(const std::string& root,
                                                                Options options);
  static absl::StatusOr<std::shared_ptr<LocalObjectStore>> Open(const std::string& root);

  absl::StatusOr<ListResult> List(const ListOptions& options) const override;
  absl::Status ReadRangeInto(absl::string_view key, uint64_t offset, uint64_t length,
                             std::string* out) const override;
  absl::StatusOr<ObjectEntry> Stat(absl::string_view key) const override;
  // root + "/" + key, escaped for messages.
  std::string Describe(absl::string_view key) const override;
  absl::StatusOr<base::UniqueFd> OpenDirectoryForWatch(absl::string_view prefix) const override;

  // The root directory as given to Open (without a trailing '/').
  const std::string& root() const { return root_; }
  // Whether paths are resolved with openat2 (false: the walk).
  bool uses_openat2() const { return use_openat2_; }

 private:
  LocalObjectStore(std::string root, base::UniqueFd root_fd, bool use_openat2);

  // Opens `key` ("" for the root) with `flags` (O_NOFOLLOW and O_CLOEXEC are
  // added), confined as the file comment says. Errors as the interface says;
  // a link on the way is PERMISSION_DENIED naming it. With O_PATH the opened
  // file is stat'ed (a last component that is a link is opened itself):
  // into `*path_stat` if not null.
  absl::StatusOr<base::UniqueFd> OpenBeneath(absl::string_view key, int flags,
                                       struct stat* path_stat = nullptr) const;
  absl::StatusOr<base::UniqueFd> OpenWithOpenat2(absl::string_view key, int flags) const;
  absl::StatusOr<base::UniqueFd> OpenByWalk(absl::string_view key, int flags) const;
  // The error for `err` from opening `key`: names the first symbolic link on
  // the way if there is one.
  absl::Status OpenError(int err, absl::string_view key) const;
  // The error for errno (read first) from `what` ("read") on `key`.
  absl::Status ErrnoError(absl::string_view what, absl::string_view key) const;
  // The walk of one listing (local_object_store.cc).
  class Lister;
  // Lists the directory `dir` (a key, "" for the root; opened) into `out`
  // (see List).
  absl::Status ListDirectory(int dir_fd, const std::string& dir_key, const ListOptions& options,
                             bool recursive, ListResult* out) const;

  const std::string root_;
  const base::UniqueFd root_fd_;  // O_PATH | O_DIRECTORY.
  const bool use_openat2_;
};

// A StoreLocation for a local path that need not be in a data root, for
// tools, benchmarks and tests: a LocalObjectStore rooted at the longest
// existing ancestor directory of `path` (lexically: no links are resolved
// below it), with the rest as the prefix. `path` need not exist yet. Errors:
// INVALID_ARGUMENT for a relative path or one with "..", and Open's.
absl::StatusOr<StoreLocation> OpenLocalPath(const std::string& path,
                                            LocalObjectStore::Options options = {});

}  // namespace debugplane::objectstore

#endif  // DEBUGPLANE_OBJECTSTORE_LOCAL_OBJECT_STORE_H_
