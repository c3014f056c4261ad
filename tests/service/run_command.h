// Runs a shell command for end-to-end tests of the command-line programs
// (the CLI, the Python example) and keeps what it printed.

#ifndef DEBUGPLANE_TESTS_SERVICE_RUN_COMMAND_H_
#define DEBUGPLANE_TESTS_SERVICE_RUN_COMMAND_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace debugplane::testing {

struct CommandResult {
  int exit_code = -1;  // -1 if it could not run or did not exit normally.
  std::string out;     // stdout and stderr together.
};

// Runs `command` with /bin/sh, stderr merged into stdout, and waits for it.
inline CommandResult RunCommand(const std::string& command) {
  FILE* pipe = popen(absl::StrCat(command, " 2>&1").c_str(), "r");
  CommandResult result;
  if (pipe == nullptr) return result;
  char buffer[4096];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) result.out += buffer;
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_RUN_COMMAND_H_
