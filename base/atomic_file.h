// Writing a file so that a reader sees the old contents or the new, never
// half of them (the server's report files).

#ifndef DEBUGPLANE_BASE_ATOMIC_FILE_H_
#define DEBUGPLANE_BASE_ATOMIC_FILE_H_

#include <filesystem>
#include <string>

#include "absl/status/status.h"

namespace debugplane::base {

// Writes `content` to `path` (creating its directory) through a temporary
// file of its own beside it and a rename, so that two writers never rename
// each other's temporary. Errors: INTERNAL naming the path and the cause.
// Thread-safe.
absl::Status WriteFileAtomically(const std::filesystem::path& path, const std::string& content);

}  // namespace debugplane::base

#endif  // DEBUGPLANE_BASE_ATOMIC_FILE_H_
