// Writing a whole buffer to a file descriptor.

#ifndef DEBUGPLANE_CLIENT_AGENT_WRITE_FULLY_H_
#define DEBUGPLANE_CLIENT_AGENT_WRITE_FULLY_H_

#include "absl/strings/string_view.h"

namespace debugplane::client {

// Writes all of `data` to `fd`, retrying short writes and EINTR. Returns 0,
// or the errno of the write(2) that failed (some of `data` may be written).
int WriteFully(int fd, absl::string_view data);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_WRITE_FULLY_H_
