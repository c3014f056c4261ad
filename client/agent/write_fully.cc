#include "client/agent/write_fully.h"

#include <unistd.h>

#include <cerrno>

namespace debugplane::client {

int WriteFully(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t written = write(fd, data.data(), data.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data.remove_prefix(static_cast<size_t>(written));
  }
  return 0;
}

}  // namespace debugplane::client
