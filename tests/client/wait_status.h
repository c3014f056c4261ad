// A real waitpid status, for the tests of what the agent says about a
// training process's end.

#ifndef DEBUGPLANE_TESTS_CLIENT_WAIT_STATUS_H_
#define DEBUGPLANE_TESTS_CLIENT_WAIT_STATUS_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace debugplane::client::testing {

// The waitpid status of a child that exits with `code`, or is ended by
// `signal` if it is not 0.
inline int WaitStatusOf(int code, int signal = 0) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (signal != 0) raise(signal);
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

}  // namespace debugplane::client::testing

#endif  // DEBUGPLANE_TESTS_CLIENT_WAIT_STATUS_H_
