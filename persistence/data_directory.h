// DataDirectory: the server's claim on its data directory.
//
// One data directory belongs to one server process at a time: two servers on
// the same database would each serve their own in-memory view of it (one
// accepting a duplicate Create, the other losing an acknowledged Stop). Open()
// therefore takes an exclusive lock on `<dir>/LOCK` (a POSIX record lock, so
// the kernel releases it when the process dies, kill -9 included) and keeps
// it until the object is destroyed.

#ifndef DEBUGPLANE_PERSISTENCE_DATA_DIRECTORY_H_
#define DEBUGPLANE_PERSISTENCE_DATA_DIRECTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace debugplane::persistence {

class DataDirectory {
 public:
  // Creates `path` (and its parents) if missing, checks that this process can
  // create files in it, and locks it.
  // Errors, each naming the directory and what to do:
  //   FAILED_PRECONDITION: another process holds the lock (its PID is named),
  //     the directory is on a read-only file system, or this user may not
  //     write in it (permission denied, with the user id);
  //   INVALID_ARGUMENT: `path` exists and is not a directory;
  //   UNAVAILABLE: any other failure to create, probe or lock it.
  static absl::StatusOr<std::unique_ptr<DataDirectory>> Open(const std::string& path);

  // Releases the lock.
  ~DataDirectory();

  DataDirectory(const DataDirectory&) = delete;
  DataDirectory& operator=(const DataDirectory&) = delete;

  const std::string& path() const { return path_; }

 private:
  DataDirectory(std::string path, int lock_fd) : path_(std::move(path)), lock_fd_(lock_fd) {}

  const std::string path_;
  const int lock_fd_;  // Open on <path>/LOCK, holding the write lock.
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_DATA_DIRECTORY_H_
