// Network namespaces for tests that put the server, the agent and the store
// on hosts of their own: each NetworkNamespace is made by the test (`ip netns
// add`, its loopback up) and deleted when destroyed; Connect links two of
// them with a veth pair and addresses that exist only inside them. Nothing
// is added to the test's own namespace, so traffic between them never
// leaves them.
//
// Requires root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2's `ip`; when
// either is missing, Create and Connect return the error `ip` printed, for
// the test to fail with (these tests must not skip).
//
// Names: "<prefix><pid>-<what>", so concurrent runs (ctest -j) never share
// one; namespaces a crashed run left (its pid gone) are deleted by the next
// Create.

#ifndef DEBUGPLANE_TESTS_SERVICE_NETWORK_NAMESPACES_H_
#define DEBUGPLANE_TESTS_SERVICE_NETWORK_NAMESPACES_H_

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace debugplane::testing {

// Runs `ip <args>` (args are generated names and addresses: no quoting
// needed). Returns its output, or an error quoting the command and it.
inline absl::StatusOr<std::string> RunIp(const std::vector<std::string>& args) {
  const std::string command = absl::StrCat("ip ", absl::StrJoin(args, " "));
  FILE* pipe = popen(absl::StrCat(command, " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    return absl::InternalError(absl::StrCat("cannot run `", command, "`: ", std::strerror(errno)));
  }
  std::string output;
  char buffer[512];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("`", command, "` failed (status ", status, "): ", output));
  }
  return output;
}

class NetworkNamespace {
 public:
  // The prefix of every namespace these tests make.
  static constexpr char kPrefix[] = "dptest";

  // Makes namespace "dptest<pid>-<what>" with its loopback up.
  static absl::StatusOr<std::unique_ptr<NetworkNamespace>> Create(const std::string& what) {
    DeleteLeftovers();
    const std::string name = absl::StrCat(kPrefix, getpid(), "-", what);
    if (absl::StatusOr<std::string> added = RunIp({"netns", "add", name}); !added.ok()) {
      return added.status();
    }
    auto ns = std::unique_ptr<NetworkNamespace>(new NetworkNamespace(name));
    if (absl::StatusOr<std::string> up = RunIp({"-n", name, "link", "set", "lo", "up"}); !up.ok()) {
      return up.status();
    }
    return ns;
  }

  // Deletes the namespace (and the veth ends in it, which deletes their
  // peers). REQUIRES: the processes started in it have ended.
  ~NetworkNamespace() { (void)RunIp({"netns", "delete", name_}); }

  NetworkNamespace(const NetworkNamespace&) = delete;
  NetworkNamespace& operator=(const NetworkNamespace&) = delete;

  const std::string& name() const { return name_; }

  // Runs `fn` on a thread that entered the namespace: sockets it opens and
  // processes it starts (fork, posix_spawn) are in the namespace, and stay
  // there. Returns the error if the namespace cannot be entered (then `fn`
  // does not run).
  absl::Status Run(const std::function<void()>& fn) const {
    absl::Status entered;
    std::thread thread([&] {
      const std::string path = absl::StrCat("/run/netns/", name_);
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
        entered = absl::FailedPreconditionError(
            absl::StrCat("cannot enter network namespace ", path, ": ", std::strerror(errno)));
        if (fd >= 0) close(fd);
        return;
      }
      close(fd);
      fn();
    });
    thread.join();
    return entered;
  }

 private:
  explicit NetworkNamespace(std::string name) : name_(std::move(name)) {}

  // Deletes "dptest<pid>-*" namespaces whose process is gone.
  static void DeleteLeftovers() {
    absl::StatusOr<std::string> listed = RunIp({"netns", "list"});
    if (!listed.ok()) return;
    for (absl::string_view line : absl::StrSplit(*listed, '\n', absl::SkipEmpty())) {
      const absl::string_view name = line.substr(0, line.find(' '));
      if (!absl::StartsWith(name, kPrefix)) continue;
      const absl::string_view rest = name.substr(sizeof(kPrefix) - 1);
      int pid = 0;
      if (!absl::SimpleAtoi(rest.substr(0, rest.find('-')), &pid) || pid <= 0) continue;
      if (kill(pid, 0) == 0 || errno != ESRCH) continue;
      (void)RunIp({"netns", "delete", std::string(name)});
    }
  }

  std::string name_;
};

// Links `a` and `b` with a veth pair named "dp<pid><tag>a"/"...b" (at most
// 15 characters), `a_address` and `b_address` (CIDR, e.g. "10.211.1.1/30")
// on its ends, both up.
inline absl::Status Connect(const NetworkNamespace& a, const std::string& a_address,
                            const NetworkNamespace& b, const std::string& b_address,
                            const std::string& tag) {
  const std::string a_end = absl::StrCat("dp", getpid() % 1000000, tag, "a");
  const std::string b_end = absl::StrCat("dp", getpid() % 1000000, tag, "b");
  const std::vector<std::vector<std::string>> commands = {
      {"link", "add", a_end, "netns", a.name(), "type", "veth", "peer", "name", b_end, "netns",
       b.name()},
      {"-n", a.name(), "addr", "add", a_address, "dev", a_end},
      {"-n", b.name(), "addr", "add", b_address, "dev", b_end},
      {"-n", a.name(), "link", "set", a_end, "up"},
      {"-n", b.name(), "link", "set", b_end, "up"},
  };
  for (const auto& command : commands) {
    if (absl::StatusOr<std::string> done = RunIp(command); !done.ok()) return done.status();
  }
  return absl::OkStatus();
}

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_NETWORK_NAMESPACES_H_
