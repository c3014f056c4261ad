#include "persistence/data_directory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace debugplane::persistence {
namespace {

namespace fs = std::filesystem;

// What a failed creation in the directory means for the person starting the
// server: the errno's own text ("No such file or directory" for a path under
// /proc, say) does not tell them what to change.
absl::Status ExplainWriteError(int error, const std::string& path, absl::string_view doing) {
  switch (error) {
    case EROFS:
      return absl::FailedPreconditionError(absl::StrCat("data directory ", path,
                                                        " is on a read-only file system (", doing,
                                                        "); give --data-dir a writable directory"));
    case EACCES:
    case EPERM:
      return absl::FailedPreconditionError(
          absl::StrCat("data directory ", path, ": permission denied for user id ", geteuid(), " (",
                       doing, "); give this user write access to it, or another --data-dir"));
    case ENOSPC:
    case EDQUOT:
      return absl::FailedPreconditionError(absl::StrCat(
          "data directory ", path, ": no space left (", doing, "); free space or move it"));
    default:
      return absl::UnavailableError(
          absl::StrCat("data directory ", path, ": ", doing, ": ", std::strerror(error)));
  }
}

// Creates and removes a file in `path`: the one test of writability that
// holds for every reason (permissions, read-only mounts, ACLs, quotas).
absl::Status ProbeWritable(const std::string& path) {
  const std::string probe = absl::StrCat(path, "/.write-probe-", getpid());
  const int fd = open(probe.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ExplainWriteError(errno, path, "creating a file in it");
  close(fd);
  unlink(probe.c_str());
  return absl::OkStatus();
}

// The PID the current holder wrote into the lock file, or 0 if unreadable.
long HolderPid(int fd) {
  char buffer[32] = {};
  const ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
  long pid = 0;
  if (n <= 0 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(buffer, n)), &pid)) {
    return 0;
  }
  return pid;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataDirectory>> DataDirectory::Open(const std::string& path) {
  std::error_code error;
  if (fs::exists(path, error) && !fs::is_directory(path, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("data directory ", path, " exists and is not a directory"));
  }
  fs::create_directories(path, error);
  if (error) return ExplainWriteError(error.value(), path, "creating it");
  if (absl::Status writable = ProbeWritable(path); !writable.ok()) return writable;

  const std::string lock_path = absl::StrCat(path, "/LOCK");
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ExplainWriteError(errno, path, "opening LOCK");
  // An open-file-description lock: it also excludes a second DataDirectory
  // in this process (a plain POSIX lock would not), and the kernel drops it
  // with the last descriptor, so a killed server leaves no stale lock.
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (fcntl(fd, F_OFD_SETLK, &lock) != 0) {
    const int lock_error = errno;
    if (lock_error == EAGAIN || lock_error == EACCES) {
      const long holder = HolderPid(fd);
      close(fd);
      return absl::FailedPreconditionError(absl::StrCat(
          "data directory ", path, " is in use by another debugplane-server",
          holder > 0 ? absl::StrCat(" (PID ", holder, ")") : std::string(), ", which holds ",
          lock_path, "; stop it first, or give this server another --data-dir"));
    }
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot lock ", lock_path, ": ", std::strerror(lock_error)));
  }
  // For the next server's message; the lock, not this text, is what excludes.
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    const int write_error = errno;
    close(fd);
    return ExplainWriteError(write_error, path, "writing LOCK");
  }
  return std::unique_ptr<DataDirectory>(new DataDirectory(path, fd));
}

DataDirectory::~DataDirectory() { close(lock_fd_); }

}  // namespace debugplane::persistence
