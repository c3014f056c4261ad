#include "objectstore/open_beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_split.h"

namespace debugplane::objectstore {
namespace {

// openat2 may fail with EAGAIN when a rename races with the lookup.
constexpr int kOpenat2Attempts = 8;

// The kernel's openat2; -1 with errno ENOSYS where it has none.
int Openat2Beneath(int root_fd, const std::string& relative, int flags) {
  struct open_how how;
  std::memset(&how, 0, sizeof(how));
  how.flags = static_cast<uint64_t>(flags);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0;; ++attempt) {
    const long fd = syscall(SYS_openat2, root_fd, relative.c_str(), &how, sizeof(how));
    if (fd >= 0) return static_cast<int>(fd);
    if (errno == EINTR || (errno == EAGAIN && attempt + 1 < kOpenat2Attempts)) continue;
    return -1;
  }
}

// One openat per component, each with O_NOFOLLOW: a link anywhere is ELOOP.
int OpenByWalk(int root_fd, const std::vector<std::string>& components, int flags) {
  base::UniqueFd current;  // The directory reached; root_fd before the first step.
  for (size_t i = 0; i < components.size(); ++i) {
    const bool last = i + 1 == components.size();
    const int step_flags = last ? flags : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int fd;
    do {
      fd = ::openat(current.valid() ? current.get() : root_fd, components[i].c_str(), step_flags);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return -1;
    current.reset(fd);
  }
  return current.release();
}

}  // namespace

base::UniqueFd OpenBeneath(int root_fd, const std::string& relative, int flags) {
  flags |= O_NOFOLLOW | O_CLOEXEC;
  const std::vector<std::string> components = absl::StrSplit(relative, '/');
  for (const std::string& component : components) {
    if (component.empty() || component == "." || component == "..") {
      errno = EINVAL;
      return base::UniqueFd();
    }
  }
  const int fd = Openat2Beneath(root_fd, relative, flags);
  // No openat2 (ENOSYS), or a seccomp filter that refuses it (EPERM): the
  // walk, which meets any real EPERM again.
  if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return base::UniqueFd(fd);
  return base::UniqueFd(OpenByWalk(root_fd, components, flags));
}

}  // namespace debugplane::objectstore
