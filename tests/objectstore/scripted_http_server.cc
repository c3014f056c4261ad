#include "tests/objectstore/scripted_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace debugplane::testing {
namespace {

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 206:
      return "Partial Content";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

}  // namespace

ScriptedHttpServer::ScriptedHttpServer(std::vector<Reply> replies, bool keep_alive)
    : replies_(std::move(replies)), keep_alive_(keep_alive) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
  listen(listen_fd_, 16);
  socklen_t length = sizeof address;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { Serve(); });
}

ScriptedHttpServer::~ScriptedHttpServer() {
  stopping_ = true;
  thread_.join();
  close(listen_fd_);
}

std::string ScriptedHttpServer::endpoint() const {
  return absl::StrCat("http://127.0.0.1:", port_);
}

std::vector<std::string> ScriptedHttpServer::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

void ScriptedHttpServer::Serve() {
  while (!stopping_) {
    pollfd readable{listen_fd_, POLLIN, 0};
    if (poll(&readable, 1, 20) <= 0) continue;
    const int connection = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    {
      absl::MutexLock lock(&mu_);
      ++connections_;
    }
    std::string pending;
    while (Answer(connection, &pending) && keep_alive_ && !stopping_) {
    }
    close(connection);
  }
}

int ScriptedHttpServer::connections() const {
  absl::MutexLock lock(&mu_);
  return connections_;
}

bool ScriptedHttpServer::Answer(int connection, std::string* pending) {
  std::string& request = *pending;
  char buffer[4096];
  while (request.find("\r\n\r\n") == std::string::npos) {
    pollfd readable{connection, POLLIN, 0};
    if (poll(&readable, 1, 2000) <= 0) return false;
    const ssize_t n = read(connection, buffer, sizeof buffer);
    if (n <= 0) return false;
    request.append(buffer, static_cast<size_t>(n));
  }
  // Requests here have no body: the next one starts after the blank line.
  const size_t end = request.find("\r\n\r\n");
  const bool head = request.rfind("HEAD ", 0) == 0;
  size_t index;
  {
    absl::MutexLock lock(&mu_);
    requests_.push_back(request.substr(0, end));
    index = std::min(requests_.size(), replies_.size()) - 1;
  }
  request.erase(0, end + 4);
  const Reply& reply = replies_[index];
  std::string response = absl::StrCat("HTTP/1.1 ", reply.status, " ", Reason(reply.status),
                                      "\r\nContent-Length: ", reply.body.size(),
                                      keep_alive_ ? "\r\n" : "\r\nConnection: close\r\n");
  for (const std::string& header : reply.headers) absl::StrAppend(&response, header, "\r\n");
  absl::StrAppend(&response, "\r\n");
  if (!head) absl::StrAppend(&response, reply.body);
  size_t sent = 0;
  while (sent < response.size()) {
    const ssize_t n =
        send(connection, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string S3ErrorBody(absl::string_view code, absl::string_view message) {
  return absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>", code,
                      "</Code><Message>", message, "</Message><RequestId>1</RequestId></Error>");
}

}  // namespace debugplane::testing
