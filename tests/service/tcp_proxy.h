// TcpProxy: forwards loopback TCP connections to a target port, and cuts them
// when a test says so: the network partition between a server replica and
// its database, without root or packet filters.
//
// Modes:
//   kForward   - bytes flow both ways (the default).
//   kBlackhole - bytes are read and dropped both ways, connections stay
//                open: the peers wait for answers that never come (a
//                partition that drops packets). New connections are
//                accepted and blackholed too.
//   kDrop      - every connection is closed at once, new ones as soon as
//                they are accepted (a partition the peers see as resets).
// Going back to kForward does not revive cut connections (their bytes are
// lost); it forwards connections made after it.
//
// Thread-safe. One thread polls every socket.

#ifndef DEBUGPLANE_TESTS_SERVICE_TCP_PROXY_H_
#define DEBUGPLANE_TESTS_SERVICE_TCP_PROXY_H_

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace debugplane::testing {

class TcpProxy {
 public:
  enum class Mode { kForward, kBlackhole, kDrop };

  // Listens on 127.0.0.1 on a free port, forwarding to 127.0.0.1:target_port.
  explicit TcpProxy(int target_port);
  ~TcpProxy();  // Closes everything.

  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  void SetMode(Mode mode);
  // Connections accepted so far (for tests of the proxy's use).
  int accepted() const { return accepted_.load(); }

 private:
  struct Pair {
    int client = -1;
    int server = -1;
    bool cut = false;  // Blackholed: bytes are dropped.
  };
  void Loop();
  void ClosePair(Pair& pair);

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};  // A pipe: wakes the loop when the mode changes.
  std::atomic<int> accepted_{0};
  std::atomic<bool> stopping_{false};
  absl::Mutex mu_;
  Mode mode_ ABSL_GUARDED_BY(mu_) = Mode::kForward;
  bool mode_changed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Pair> pairs_;  // The loop's own.
  std::thread thread_;
};

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_TCP_PROXY_H_
