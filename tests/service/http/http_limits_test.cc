// What one client can take from the HTTP listener: Host names it must use
// (DNS rebinding), idle connections, request bodies held before anyone is
// authenticated, and failed authentications. Raw sockets, so that a test
// can choose the Host header, the source address (127.0.0.2 acts as a
// second client) and when each byte is sent.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/http/allowed_hosts.h"
#include "service/http/client_rate_limiter.h"
#include "service/http/http_server.h"

namespace debugplane::service::http {
namespace {

using ::testing::HasSubstr;

// A TCP connection to 127.0.0.1:`port` from `source`; -1 on failure.
int Connect(int port, const char* source = "127.0.0.1") {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, source, &local.sin_addr);
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t sent = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent <= 0) return false;
    data.remove_prefix(static_cast<size_t>(sent));
  }
  return true;
}

// Waits up to `timeout` for bytes or the peer's close: what was read ("" on
// close), or nullopt if nothing came.
std::optional<std::string> ReadSome(int fd, absl::Duration timeout) {
  pollfd waiting{.fd = fd, .events = POLLIN, .revents = 0};
  if (poll(&waiting, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) {
    return std::nullopt;
  }
  char buffer[16384];
  const ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
  return got <= 0 ? std::string() : std::string(buffer, static_cast<size_t>(got));
}

struct RawReply {
  int status = 0;  // 0: no reply within the time.
  std::string head;
  std::string body;
  absl::string_view Header(absl::string_view name) const {
    for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
      if (absl::StartsWithIgnoreCase(line, absl::StrCat(name, ":"))) {
        return absl::StripAsciiWhitespace(line.substr(name.size() + 1));
      }
    }
    return {};
  }
};

// Reads one reply (with Content-Length) within `timeout`.
RawReply ReadReply(int fd, absl::Duration timeout = absl::Seconds(5)) {
  RawReply reply;
  std::string data;
  const absl::Time deadline = absl::Now() + timeout;
  size_t end_of_head = std::string::npos;
  size_t length = 0;
  while (absl::Now() < deadline) {
    if (end_of_head == std::string::npos && (end_of_head = data.find("\r\n\r\n")) != data.npos) {
      reply.head = data.substr(0, end_of_head);
      absl::SimpleAtoi(reply.Header("Content-Length"), &length);
    }
    if (end_of_head != std::string::npos && data.size() >= end_of_head + 4 + length) break;
    std::optional<std::string> more = ReadSome(fd, deadline - absl::Now());
    if (!more.has_value() || more->empty()) break;
    data += *more;
  }
  if (end_of_head == std::string::npos) return reply;
  absl::SimpleAtoi(reply.head.substr(9, 3), &reply.status);
  reply.body = data.substr(end_of_head + 4, length);
  return reply;
}

// One request on a new connection from `source`.
RawReply Request(int port, absl::string_view method, absl::string_view path,
                 absl::string_view host = "127.0.0.1", absl::string_view extra_headers = "",
                 const char* source = "127.0.0.1") {
  const int fd = Connect(port, source);
  if (fd < 0) return {};
  SendAll(fd, absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: ", host, "\r\n", extra_headers,
                           "Connection: close\r\n\r\n"));
  RawReply reply = ReadReply(fd);
  close(fd);
  return reply;
}

HttpResponse Text(int status, std::string body) {
  return HttpResponse{
      .status = status, .headers = {{"Content-Type", "text/plain"}}, .body = std::move(body)};
}

// GET /hello: 200. POST /small (16 KiB at most): the body's size.
// GET /auth: 200 with `X-Key: good`, else 401 marked failed_authentication.
std::vector<HttpRoute> TestRoutes(std::atomic<int>* handled = nullptr) {
  return {
      {.method = "GET",
       .path = "/hello",
       .handler =
           [handled](HttpRequest, std::unique_ptr<HttpResponder> responder) {
             if (handled != nullptr) ++*handled;
             responder->Respond(Text(200, "hello"));
           }},
      {.method = "POST",
       .path = "/small",
       .handler =
           [handled](HttpRequest request, std::unique_ptr<HttpResponder> responder) {
             if (handled != nullptr) ++*handled;
             responder->Respond(Text(200, absl::StrCat(request.body.size())));
           },
       .max_body_bytes = 16 * 1024},
      {.method = "POST",
       .path = "/large",
       .handler =
           [](HttpRequest request, std::unique_ptr<HttpResponder> responder) {
             responder->Respond(Text(200, absl::StrCat(request.body.size())));
           }},
      {.method = "GET",
       .path = "/auth",
       .handler =
           [](HttpRequest request, std::unique_ptr<HttpResponder> responder) {
             if (request.Header("X-Key") == "good") return responder->Respond(Text(200, "in"));
             HttpResponse refused = Text(401, "wrong key");
             refused.failed_authentication = true;
             responder->Respond(std::move(refused));
           }},
  };
}

std::unique_ptr<HttpServer> StartOrDie(HttpServerOptions options,
                                       std::atomic<int>* handled = nullptr) {
  options.listen_address = "127.0.0.1:0";
  auto server = HttpServer::Start(std::move(options), TestRoutes(handled));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// --- Host (DNS rebinding) ---

TEST(AllowedHostsTest, LoopbackTheListenAddressAndGivenNamesOnly) {
  const AllowedHosts hosts("127.0.0.1:7080", {"dash.example.com", "Other.Example:8443"});
  for (const char* host :
       {"localhost", "localhost:7080", "LOCALHOST.", "127.0.0.1:7080", "127.4.5.6", "[::1]:7080",
        "[::ffff:127.0.0.1]", "dash.example.com:7080", "DASH.example.com", "other.example", ""}) {
    EXPECT_TRUE(hosts.Check(host).ok()) << host;
  }
  for (const char* host : {"evil.test", "evil.test:7080", "localhost.evil.test", "127.0.0.1.evil",
                           "10.0.0.5:7080", "[::2]", "dash.example.com.evil"}) {
    const absl::Status refused = hosts.Check(host);
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << host;
    EXPECT_THAT(refused.message(), HasSubstr("--http-allowed-host")) << host;
  }
}

TEST(AllowedHostsTest, ListeningOnEveryAddressAcceptsAddressesButNotOtherNames) {
  const AllowedHosts any("0.0.0.0:7080", {});
  EXPECT_TRUE(any.Check("10.0.0.5:7080").ok());
  EXPECT_TRUE(any.Check("[2001:db8::1]:7080").ok());
  EXPECT_FALSE(any.Check("evil.test:7080").ok());
  const AllowedHosts named("[fd00::5]:7080", {});
  EXPECT_TRUE(named.Check("[FD00::5]:7080").ok());
  EXPECT_FALSE(named.Check("[fd00::6]:7080").ok());
  EXPECT_EQ(AllowedHosts::HostName("[::1]:80"), "::1");
  EXPECT_EQ(AllowedHosts::HostName("Example.COM.:80"), "example.com");
}

TEST(HttpLimitsTest, AnotherHostIsRefusedWith421BeforeAnyRouteRuns) {
  std::atomic<int> handled = 0;
  auto server = StartOrDie({.allowed_hosts = {"dash.example.com"}}, &handled);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  const std::string evil = absl::StrCat("evil.test:", port);
  const RawReply get =
      Request(port, "GET", "/hello", evil, absl::StrCat("Origin: http://", evil, "\r\n"));
  EXPECT_EQ(get.status, 421);
  EXPECT_THAT(get.body, HasSubstr("evil.test"));
  EXPECT_THAT(get.body, HasSubstr("--http-allowed-host"));
  EXPECT_EQ(Request(port, "POST", "/small", evil, "Content-Length: 2\r\n").status, 421);
  EXPECT_EQ(Request(port, "GET", "/nowhere", evil).status, 421);
  EXPECT_EQ(handled.load(), 0);

  for (const std::string host : {absl::StrCat("127.0.0.1:", port), absl::StrCat("localhost:", port),
                                 std::string("dash.example.com")}) {
    EXPECT_EQ(Request(port, "GET", "/hello", host).status, 200) << host;
  }
  EXPECT_EQ(handled.load(), 3);
}

// --- Idle connections ---

TEST(HttpLimitsTest, IdleConnectionsFromOneAddressLeaveRoomForAnother) {
  auto server = StartOrDie({.max_connections = 32, .max_connections_per_address = 8});
  ASSERT_NE(server, nullptr);
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) {
    const int fd = Connect(server->port());
    if (fd >= 0) idle.push_back(fd);
  }
  absl::SleepFor(absl::Milliseconds(200));  // Let the server accept (or refuse) them.
  const absl::Time start = absl::Now();
  const RawReply fresh =
      Request(server->port(), "GET", "/hello", "127.0.0.1", "", /*source=*/"127.0.0.2");
  EXPECT_EQ(fresh.status, 200);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  for (int fd : idle) close(fd);
}

TEST(HttpLimitsTest, AConnectionWithoutACompleteRequestIsClosedAfterTheHeaderTimeout) {
  auto server = StartOrDie(
      {.request_header_timeout = absl::Seconds(1), .connection_timeout = absl::Seconds(60)});
  ASSERT_NE(server, nullptr);
  const int silent = Connect(server->port());
  ASSERT_GE(silent, 0);
  const int partial = Connect(server->port());
  ASSERT_TRUE(SendAll(partial, "GET /hello HTTP/1.1\r\nHost: 127"));
  const int kept_alive = Connect(server->port());
  ASSERT_TRUE(SendAll(kept_alive, "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  EXPECT_EQ(ReadReply(kept_alive).status, 200);
  for (int fd : {silent, partial, kept_alive}) {
    // Closed (an empty read) well before connection_timeout.
    std::optional<std::string> end = ReadSome(fd, absl::Seconds(4));
    ASSERT_TRUE(end.has_value()) << "connection " << fd << " is still open";
    EXPECT_EQ(*end, "");
    close(fd);
  }
}

// --- Bodies before authentication ---

TEST(HttpLimitsTest, ADeclaredBodyOverTheRoutesLimitGets413BeforeItIsSent) {
  std::atomic<int> handled = 0;
  auto server = StartOrDie({}, &handled);
  ASSERT_NE(server, nullptr);
  const int fd = Connect(server->port());
  ASSERT_TRUE(
      SendAll(fd, "POST /small HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4000000\r\n\r\n"));
  const RawReply reply = ReadReply(fd, absl::Seconds(3));
  close(fd);
  EXPECT_EQ(reply.status, 413);
  EXPECT_THAT(reply.body, HasSubstr("larger than 16384 bytes"));
  EXPECT_THAT(reply.body, HasSubstr("POST /small"));
  EXPECT_EQ(handled.load(), 0);
  EXPECT_EQ(server->peak_buffered_body_bytes(), 0u);
}

// Sends `total` bytes chunked to `path` (stopping if the server closes),
// then reads the reply.
RawReply SendChunked(int port, absl::string_view path, size_t total) {
  const int fd = Connect(port);
  if (fd < 0) return {};
  SendAll(fd, absl::StrCat("POST ", path,
                           " HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
                           "Connection: close\r\n\r\n"));
  const std::string chunk = absl::StrCat("10000\r\n", std::string(0x10000, 'x'), "\r\n");
  bool open = true;
  for (size_t sent = 0; open && sent < total; sent += 0x10000) open = SendAll(fd, chunk);
  if (open) SendAll(fd, "0\r\n\r\n");
  RawReply reply = ReadReply(fd, absl::Seconds(10));
  close(fd);
  return reply;
}

long ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

TEST(HttpLimitsTest, FiftyStreamedBigBodiesAreRefusedWithoutBeingHeld) {
  std::atomic<int> handled = 0;
  auto server = StartOrDie({.threads = 4}, &handled);
  ASSERT_NE(server, nullptr);
  const long before = ResidentBytes();
  std::vector<std::thread> clients;
  std::atomic<int> refused = 0;
  for (int i = 0; i < 50; ++i) {
    clients.emplace_back([&] {
      const RawReply reply = SendChunked(server->port(), "/small", 4 * 1024 * 1024);
      // 413, or the connection dropped once the client kept sending.
      if (reply.status == 413 || reply.status == 0) ++refused;
    });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(refused.load(), 50);
  EXPECT_EQ(handled.load(), 0);
  EXPECT_LE(server->peak_buffered_body_bytes(), 50u * 16 * 1024);
  EXPECT_LT(ResidentBytes() - before, 64l * 1024 * 1024);
  // A body within the limit still passes, streamed or declared.
  const RawReply streamed = SendChunked(server->port(), "/small", 0);
  EXPECT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed.body, "0");
  const RawReply declared =
      Request(server->port(), "POST", "/small", "127.0.0.1", "Content-Length: 0\r\n");
  EXPECT_EQ(declared.status, 200);
  EXPECT_EQ(handled.load(), 2);
}

TEST(HttpLimitsTest, BodiesBeyondTheServersBudgetGet503UntilOthersAreDone) {
  auto server = StartOrDie({.max_buffered_body_bytes = 100 * 1000});
  ASSERT_NE(server, nullptr);
  const std::string head =
      "POST /large HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 60000\r\nConnection: "
      "close\r\n\r\n";
  const int holding = Connect(server->port());
  ASSERT_TRUE(SendAll(holding, head));  // Its body is yet to come.
  absl::SleepFor(absl::Milliseconds(200));
  const int second = Connect(server->port());
  ASSERT_TRUE(SendAll(second, head));
  const RawReply busy = ReadReply(second, absl::Seconds(3));
  close(second);
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(busy.Header("Retry-After"), "1");
  ASSERT_TRUE(SendAll(holding, std::string(60000, 'x')));
  const RawReply held = ReadReply(holding);
  close(holding);
  EXPECT_EQ(held.status, 200);
  EXPECT_EQ(held.body, "60000");
  // Released: the next one fits.
  const int third = Connect(server->port());
  ASSERT_TRUE(SendAll(third, absl::StrCat(head, std::string(60000, 'y'))));
  EXPECT_EQ(ReadReply(third).status, 200);
  close(third);
  EXPECT_LE(server->peak_buffered_body_bytes(), 100u * 1000);
}

// --- Failed authentication ---

TEST(ClientRateLimiterTest, ABucketRefillsWithTheClock) {
  auto clock = std::make_shared<base::FakeClock>();
  ClientRateLimiter limiter({.per_minute = 10, .burst = 3, .clock = clock});
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(limiter.RetryAfter("10.0.0.1").has_value());
    limiter.Charge("10.0.0.1");
  }
  ASSERT_TRUE(limiter.RetryAfter("10.0.0.1").has_value());
  EXPECT_EQ(*limiter.RetryAfter("10.0.0.1"), absl::Seconds(6));
  EXPECT_FALSE(limiter.RetryAfter("10.0.0.2").has_value());
  clock->Advance(absl::Seconds(6));
  EXPECT_FALSE(limiter.RetryAfter("10.0.0.1").has_value());
}

TEST(ClientRateLimiterTest, TracksABoundedNumberOfAddresses) {
  auto clock = std::make_shared<base::FakeClock>();
  ClientRateLimiter limiter({.burst = 1, .max_clients = 100, .clock = clock});
  for (int i = 0; i < 1000; ++i) {
    limiter.Charge(absl::StrCat("10.0.", i / 256, ".", i % 256));
    clock->Advance(absl::Milliseconds(1));
  }
  EXPECT_LE(limiter.clients(), 100u);
  // The most recent ones are still limited.
  EXPECT_TRUE(limiter.RetryAfter("10.0.3.231").has_value());
}

TEST(ClientRateLimiterTest, KeysIpv6ByItsSlash64AndMappedIpv4AsIpv4) {
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "2001:db8:1:2:aaaa:bbbb:cccc:dddd", &v6.sin6_addr);
  EXPECT_EQ(ClientKeyOf(reinterpret_cast<sockaddr*>(&v6)), "2001:db8:1:2::/64");
  inet_pton(AF_INET6, "::ffff:192.0.2.7", &v6.sin6_addr);
  EXPECT_EQ(ClientKeyOf(reinterpret_cast<sockaddr*>(&v6)), "192.0.2.7");
}

TEST(HttpLimitsTest, FailedAuthenticationsAreLimitedPerAddressWithRetryAfter) {
  auto clock = std::make_shared<base::FakeClock>();
  auto limiter = std::make_shared<ClientRateLimiter>(
      ClientRateLimiterOptions{.per_minute = 10, .burst = 3, .clock = clock});
  auto server = StartOrDie({.auth_failures = limiter});
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  // Successes take nothing.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(Request(port, "GET", "/auth", "127.0.0.1", "X-Key: good\r\n").status, 200);
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Request(port, "GET", "/auth", "127.0.0.1", "X-Key: bad\r\n").status, 401);
  }
  // Out of tries: refused before the key is looked at, even a good one.
  const RawReply limited = Request(port, "GET", "/auth", "127.0.0.1", "X-Key: good\r\n");
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(limited.Header("Retry-After"), "6");
  EXPECT_THAT(limited.body, HasSubstr("127.0.0.1"));
  // Another address is not affected.
  EXPECT_EQ(Request(port, "GET", "/auth", "127.0.0.1", "X-Key: bad\r\n", "127.0.0.2").status, 401);
  clock->Advance(absl::Seconds(6));
  EXPECT_EQ(Request(port, "GET", "/auth", "127.0.0.1", "X-Key: good\r\n").status, 200);
}

}  // namespace
}  // namespace debugplane::service::http
