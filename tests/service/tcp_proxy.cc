#include "tests/service/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "gtest/gtest.h"

namespace debugplane::testing {
namespace {

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

TcpProxy::TcpProxy(int target_port) : target_port_(target_port) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listen_fd_, 64) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ADD_FAILURE() << "TcpProxy: cannot listen on loopback: " << errno;
    return;
  }
  port_ = ntohs(address.sin_port);
  if (pipe2(wake_, O_CLOEXEC) != 0) ADD_FAILURE() << "TcpProxy: pipe failed";
  thread_ = std::thread([this] { Loop(); });
}

TcpProxy::~TcpProxy() {
  stopping_ = true;
  if (wake_[1] >= 0) (void)write(wake_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  for (Pair& pair : pairs_) ClosePair(pair);
  for (int fd : {listen_fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) close(fd);
  }
}

void TcpProxy::SetMode(Mode mode) {
  {
    absl::MutexLock lock(&mu_);
    mode_ = mode;
    mode_changed_ = true;
  }
  (void)write(wake_[1], "x", 1);
}

void TcpProxy::ClosePair(Pair& pair) {
  for (int* fd : {&pair.client, &pair.server}) {
    if (*fd >= 0) {
      // A reset, not an orderly close: the peer sees the connection broken.
      linger hard{.l_onoff = 1, .l_linger = 0};
      setsockopt(*fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
      close(*fd);
      *fd = -1;
    }
  }
}

void TcpProxy::Loop() {
  char buffer[16384];
  while (!stopping_) {
    Mode mode;
    {
      absl::MutexLock lock(&mu_);
      mode = mode_;
      if (mode_changed_) {
        mode_changed_ = false;
        for (Pair& pair : pairs_) {
          if (mode == Mode::kDrop) ClosePair(pair);
          if (mode == Mode::kBlackhole) pair.cut = true;
        }
      }
    }
    std::erase_if(pairs_, [](const Pair& pair) { return pair.client < 0; });
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    for (const Pair& pair : pairs_) {
      fds.push_back({pair.client, POLLIN, 0});
      fds.push_back({pair.server, POLLIN, 0});
    }
    if (poll(fds.data(), fds.size(), 200) <= 0) continue;
    if (fds[1].revents != 0) (void)read(wake_[0], buffer, sizeof buffer);
    for (size_t i = 0; i < pairs_.size(); ++i) {
      Pair& pair = pairs_[i];
      for (int side = 0; side < 2; ++side) {
        const pollfd& polled = fds[2 + 2 * i + side];
        if (polled.revents == 0 || pair.client < 0) continue;
        const int from = side == 0 ? pair.client : pair.server;
        const int to = side == 0 ? pair.server : pair.client;
        const ssize_t n = read(from, buffer, sizeof buffer);
        if (n <= 0) {
          ClosePair(pair);
          continue;
        }
        if (pair.cut) continue;  // Blackholed: dropped.
        for (ssize_t sent = 0; sent < n;) {
          const ssize_t w = write(to, buffer + sent, n - sent);
          if (w <= 0) break;
          sent += w;
        }
      }
    }
    if (fds[0].revents != 0) {
      const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      ++accepted_;
      Pair pair{.client = client, .server = -1, .cut = mode == Mode::kBlackhole};
      if (mode == Mode::kDrop || (pair.server = ConnectLoopback(target_port_)) < 0) {
        ClosePair(pair);
        continue;
      }
      pairs_.push_back(pair);
    }
  }
}

}  // namespace debugplane::testing
