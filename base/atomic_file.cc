#include "base/atomic_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace debugplane::base {

absl::Status WriteFileAtomically(const std::filesystem::path& path, const std::string& content) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", path.parent_path().string(), ": ", error.message()));
  }
  // A temporary of its own per write: two writers never rename each other's.
  static std::atomic<uint64_t> writes{0};
  const std::filesystem::path temporary =
      absl::StrCat(path.string(), ".tmp.", getpid(), ".", writes.fetch_add(1));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) {
      return absl::InternalError(
          absl::StrCat("cannot write ", temporary.string(), ": ", std::strerror(errno)));
    }
  }
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot rename ", temporary.string(), " to ",
                                            path.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

}  // namespace debugplane::base
