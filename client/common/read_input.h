// Reading a whole input given on the command line: a file, or stdin as "-".

#ifndef DEBUGPLANE_CLIENT_COMMON_READ_INPUT_H_
#define DEBUGPLANE_CLIENT_COMMON_READ_INPUT_H_

#include <istream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace debugplane::client {

// The whole content of the file at `path`, or of `stdin_stream` when `path`
// is "-". NOT_FOUND if the file does not exist, INVALID_ARGUMENT if it
// cannot be read (a directory, no permission, an I/O error).
absl::StatusOr<std::string> ReadInput(absl::string_view path, std::istream& stdin_stream);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_COMMON_READ_INPUT_H_
