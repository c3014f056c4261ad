#include "client/common/read_input.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace debugplane::client {

absl::StatusOr<std::string> ReadInput(absl::string_view path, std::istream& stdin_stream) {
  std::ostringstream content;
  if (path == "-") {
    content << stdin_stream.rdbuf();
    if (stdin_stream.bad()) return absl::InvalidArgumentError("<stdin>: read error");
    return std::move(content).str();
  }
  const std::filesystem::path file{std::string(path)};
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  if (std::filesystem::is_directory(file, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a JSON file"));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in.is_open()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  content << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat(path, ": read error"));
  return std::move(content).str();
}

}  // namespace debugplane::client
