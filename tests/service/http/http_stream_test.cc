// Streamed replies (HttpResponder::StartStream): several clients, writes
// from other threads, a client that goes away, a client that does not read,
// and a server shut down with streams open.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/http/http_server.h"
#include "tests/service/http/stream_client.h"

namespace debugplane::service::http {
namespace {

using ::debugplane::testing::StreamClient;

// Starts a stream for every GET /stream and keeps it for the test.
class StreamCollector {
 public:
  HttpRoute Route() {
    return HttpRoute{.method = "GET",
                     .path = "/stream",
                     .handler = [this](HttpRequest, std::unique_ptr<HttpResponder> responder) {
                       auto stream = responder->StartStream(
                           200,
                           {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-store"}});
                       stream->SetOnClosed([this] { closed_.fetch_add(1); });
                       absl::MutexLock lock(&mu_);
                       streams_.push_back(std::move(stream));
                     }};
  }

  // Waits until `count` streams were started.
  bool WaitForStreams(size_t count) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return streams_.size() >= count; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(5));
  }

  // Writes `chunk` to every stream; returns how many took it.
  int WriteAll(const std::string& chunk) {
    absl::MutexLock lock(&mu_);
    int taken = 0;
    for (auto& stream : streams_) taken += stream->Write(chunk) ? 1 : 0;
    return taken;
  }

  HttpStream& stream(size_t i) {
    absl::MutexLock lock(&mu_);
    return *streams_.at(i);
  }

  int closed() const { return closed_.load(); }

  bool WaitForClosed(int count, absl::Duration timeout = absl::Seconds(5)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (closed_.load() < count && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
    return closed_.load() >= count;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::unique_ptr<HttpStream>> streams_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> closed_{0};
};

std::unique_ptr<HttpServer> Start(std::vector<HttpRoute> routes, HttpServerOptions options = {}) {
  options.listen_address = "127.0.0.1:0";
  auto server = HttpServer::Start(std::move(options), std::move(routes));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::string Url(const HttpServer& server) {
  return absl::StrCat("http://127.0.0.1:", server.port(), "/stream");
}

TEST(HttpStreamTest, StreamsToSeveralClientsAsWrittenThenEndsOnClose) {
  StreamCollector collector;
  auto server = Start({collector.Route()}, {.threads = 2});
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<StreamClient>> clients;
  for (int i = 0; i < 5; ++i) clients.push_back(std::make_unique<StreamClient>(Url(*server)));
  ASSERT_TRUE(collector.WaitForStreams(5));

  EXPECT_EQ(collector.WriteAll("event: job\ndata: 1\n\n"), 5);
  for (auto& client : clients) {
    EXPECT_TRUE(client->WaitFor("data: 1\n\n")) << client->body();
    EXPECT_NE(client->header_text().find("text/event-stream"), std::string::npos);
    EXPECT_NE(client->header_text().find("x-amzn-RequestId"), std::string::npos);
  }
  // Written from another thread, while the connections wait suspended.
  std::thread writer([&] { collector.WriteAll("data: 2\n\n"); });
  writer.join();
  for (auto& client : clients) EXPECT_TRUE(client->WaitFor("data: 1\n\ndata: 2\n\n"));

  for (size_t i = 0; i < clients.size(); ++i) collector.stream(i).Close();
  for (auto& client : clients) {
    ASSERT_TRUE(client->WaitForEnd());
    EXPECT_EQ(client->result(), CURLE_OK);  // A complete chunked body.
    EXPECT_EQ(client->status(), 200);
    EXPECT_EQ(client->body(), "event: job\ndata: 1\n\ndata: 2\n\n");
  }
  EXPECT_TRUE(collector.WaitForClosed(5));
  EXPECT_FALSE(collector.stream(0).Write("late"));
  EXPECT_TRUE(collector.stream(0).closed());
}

TEST(HttpStreamTest, AStreamStartedLaterFromAnotherThreadCarriesWhatWasWrittenBefore) {
  std::vector<std::thread> threads;
  absl::Notification written;
  HttpRoute route{.method = "GET",
                  .path = "/stream",
                  .handler = [&](HttpRequest, std::unique_ptr<HttpResponder> responder) {
                    threads.emplace_back([&written, responder = std::move(responder)]() mutable {
                      absl::SleepFor(absl::Milliseconds(100));
                      auto stream = responder->StartStream(200, {});
                      stream->Write("first ");
                      stream->Write("second");
                      stream->Close();
                      written.Notify();
                    });
                  }};
  auto server = Start({route});
  ASSERT_NE(server, nullptr);
  StreamClient client(Url(*server));
  ASSERT_TRUE(client.WaitForEnd());
  EXPECT_EQ(client.result(), CURLE_OK);
  EXPECT_EQ(client.body(), "first second");
  written.WaitForNotification();
  for (auto& thread : threads) thread.join();
}

TEST(HttpStreamTest, AClientThatWentAwayClosesTheStreamAtTheNextWrite) {
  StreamCollector collector;
  auto server = Start({collector.Route()});
  ASSERT_NE(server, nullptr);
  auto client = std::make_unique<StreamClient>(Url(*server));
  ASSERT_TRUE(collector.WaitForStreams(1));
  ASSERT_TRUE(collector.stream(0).Write("hello\n"));
  ASSERT_TRUE(client->WaitFor("hello\n"));
  client.reset();  // Disconnects.

  // libmicrohttpd notices when it sends: keep writing, as keep-alives do.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!collector.stream(0).closed() && absl::Now() < deadline) {
    collector.stream(0).Write(": keep-alive\n\n");
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(collector.stream(0).closed());
  EXPECT_TRUE(collector.WaitForClosed(1));
  EXPECT_FALSE(collector.stream(0).Write("more"));
}

// Connects and sends a request, then never reads.
int ConnectWithoutReading(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string request = "GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  EXPECT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  return fd;
}

TEST(HttpStreamTest, AClientThatDoesNotReadIsCutOffInsteadOfBufferedWithoutBound) {
  StreamCollector collector;
  auto server = Start({collector.Route()}, {.max_stream_queue_bytes = 64 * 1024});
  ASSERT_NE(server, nullptr);
  const int fd = ConnectWithoutReading(server->port());
  ASSERT_TRUE(collector.WaitForStreams(1));
  const std::string chunk(1024, 'x');
  int64_t accepted = 0;
  // The socket buffers take some megabytes at most; then the queue fills.
  while (accepted < (int64_t{256} << 20) && collector.stream(0).Write(chunk)) {
    accepted += static_cast<int64_t>(chunk.size());
    if (accepted % (1 << 20) == 0) absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_LT(accepted, int64_t{256} << 20) << "never cut off";
  EXPECT_TRUE(collector.stream(0).closed());
  EXPECT_TRUE(collector.WaitForClosed(1));
  close(fd);
}

TEST(HttpStreamTest, ShutdownEndsOpenStreamsCleanlyAndPromptly) {
  StreamCollector collector;
  auto server = Start({collector.Route()});
  ASSERT_NE(server, nullptr);
  StreamClient first(Url(*server)), second(Url(*server));
  ASSERT_TRUE(collector.WaitForStreams(2));
  ASSERT_EQ(collector.WriteAll("before\n"), 2);
  ASSERT_TRUE(first.WaitFor("before\n"));
  ASSERT_TRUE(second.WaitFor("before\n"));

  const absl::Time start = absl::Now();
  server->Shutdown(absl::Seconds(20));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "waited for streams that never end";
  for (StreamClient* client : {&first, &second}) {
    ASSERT_TRUE(client->WaitForEnd());
    EXPECT_EQ(client->result(), CURLE_OK);
    EXPECT_EQ(client->body(), "before\n");
  }
  EXPECT_EQ(collector.closed(), 2);
  EXPECT_EQ(collector.WriteAll("after"), 0);
}

TEST(HttpStreamTest, DroppingTheStreamEndsTheReply) {
  HttpRoute route{.method = "GET",
                  .path = "/stream",
                  .handler = [](HttpRequest, std::unique_ptr<HttpResponder> responder) {
                    auto stream = responder->StartStream(200, {});
                    stream->Write("only");
                  }};
  auto server = Start({route});
  ASSERT_NE(server, nullptr);
  StreamClient client(Url(*server));
  ASSERT_TRUE(client.WaitForEnd());
  EXPECT_EQ(client.result(), CURLE_OK);
  EXPECT_EQ(client.body(), "only");
}

}  // namespace
}  // namespace debugplane::service::http
