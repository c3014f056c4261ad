#include "rules_engine/trial_storage.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace debugplane::rules_engine {
namespace {

absl::Status ErrnoStatus(int err, absl::string_view what, const std::string& path) {
  const std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::UnavailableError(msg);
}

// Closes the descriptor on every return path.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads up to `length` bytes at `offset` (pread: no shared file position,
// so concurrent readers of one storage need no lock).
absl::StatusOr<std::string> PreadAll(int fd, const std::string& path, uint64_t offset,
                                     uint64_t length) {
  std::string out;
  out.resize(length);
  uint64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, out.data() + done, length - done, offset + done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "read", path);
    }
    if (n == 0) break;  // End of file: fewer bytes, as documented.
    done += static_cast<uint64_t>(n);
  }
  out.resize(done);
  return out;
}

class LocalStorage : public TrialStorage {
 public:
  absl::StatusOr<std::vector<std::string>> List(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus(errno, "list", dir);
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      names.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  absl::StatusOr<std::string> Read(const std::string& path) override {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return ErrnoStatus(errno, "open", path);
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "stat", path);
    if (S_ISDIR(st.st_mode))
      return absl::FailedPreconditionError(absl::StrCat(path, " is a directory"));
    // The file may grow while being read: read its size at open time, which
    // is a consistent prefix for append-only writers.
    return PreadAll(fd.get(), path, 0, static_cast<uint64_t>(st.st_size));
  }

  absl::StatusOr<std::string> ReadRange(const std::string& path, uint64_t offset,
                                        uint64_t length) override {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return ErrnoStatus(errno, "open", path);
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "stat", path);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    // Clamp before allocating: `length` comes from (possibly corrupt) index files.
    if (offset >= size) return std::string();
    return PreadAll(fd.get(), path, offset, std::min(length, size - offset));
  }

  bool Exists(const std::string& path) override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  }
};

}  // namespace

std::shared_ptr<TrialStorage> LocalTrialStorage() {
  static const std::shared_ptr<TrialStorage> storage = std::make_shared<LocalStorage>();
  return storage;
}

}  // namespace debugplane::rules_engine
