#include "service/http/http_listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace debugplane::service::http {
namespace {

// File descriptors kept for the rest of the server (gRPC, the database,
// training output) when the connection limit is fitted to RLIMIT_NOFILE.
constexpr int kFilesKeptForTheRest = 256;

}  // namespace

int FittedConnectionLimit(int wanted) {
  wanted = std::max(1, wanted);
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return wanted;
  const int room =
      static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 30)) - kFilesKeptForTheRest;
  if (room >= wanted) return wanted;
  spdlog::warn(
      "http: {} connections at most, not {}: RLIMIT_NOFILE is {} (raise it with ulimit -n)",
      std::max(16, room), wanted, files.rlim_cur);
  return std::max(16, room);
}

unsigned int TimeoutSeconds(absl::Duration duration) {
  return static_cast<unsigned int>(std::max<int64_t>(1, absl::ToInt64Seconds(duration)));
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, " ", path, " cannot be read"));
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

absl::StatusOr<int> Listen(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-listen ", address, ": expected HOST:PORT (port 0 picks a free one)"));
  }
  std::string host = address.substr(0, colon);
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(port);
  if (int error =
          getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints, &found);
      error != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-listen ", address, ": ", gai_strerror(error)));
  }
  std::string last_error = "no address";
  int fd = -1;
  for (addrinfo* candidate = found; candidate != nullptr; candidate = candidate->ai_next) {
    fd = socket(candidate->ai_family, candidate->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, candidate->ai_addr, candidate->ai_addrlen) == 0 && listen(fd, 512) == 0) break;
    last_error = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("--http-listen ", address, ": cannot listen: ", last_error));
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) return 0;
  if (bound.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

const sockaddr* AddressOf(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  return info == nullptr ? nullptr : info->client_addr;
}

std::string PeerOf(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == nullptr || info->client_addr == nullptr) return "unknown";
  char host[INET6_ADDRSTRLEN] = "";
  const sockaddr* address = info->client_addr;
  if (address->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    return absl::StrCat("[", host, "]:", ntohs(in6->sin6_port));
  }
  const auto* in4 = reinterpret_cast<const sockaddr_in*>(address);
  inet_ntop(AF_INET, &in4->sin_addr, host, sizeof(host));
  return absl::StrCat(host, ":", ntohs(in4->sin_port));
}

}  // namespace debugplane::service::http
