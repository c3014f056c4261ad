// DirectoryUploader (objectstore/directory_uploader.h) against moto's S3
// server with signatures checked, reached through a TCP proxy of the test's
// own that records every request line in arrival order and can go away and
// come back on the same port (a store outage).

#include "objectstore/directory_uploader.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/objectstore/s3_test_server.h"
#include "tests/support/wait_until.h"

namespace debugplane::objectstore {
namespace {

using ::debugplane::testing::S3TestServer;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::WaitUntil;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr char kBucket[] = "dp-uploads";

// A loopback TCP proxy to `target_port` that records the request line of
// every HTTP request passing through ("PUT /bucket/key"). Stop closes the
// listener and every connection (clients then get "connection refused");
// Start listens again on the same port.
class RecordingProxy {
 public:
  explicit RecordingProxy(int target_port) : target_port_(target_port) { Start(); }
  ~RecordingProxy() { Stop(); }

  int port() const { return port_; }

  void Start() {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port_));
    ASSERT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0)
        << "port " << port_ << ": " << strerror(errno);
    socklen_t length = sizeof address;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    ASSERT_EQ(listen(listener_, 16), 0);
    stopping_ = false;
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
      for (int fd : connections_) shutdown(fd, SHUT_RDWR);
    }
    shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    close(listener_);
    std::vector<std::thread> pumps;
    {
      absl::MutexLock lock(&mu_);
      pumps.swap(pumps_);
    }
    for (std::thread& pump : pumps) pump.join();
    absl::MutexLock lock(&mu_);
    for (int fd : connections_) close(fd);
    connections_.clear();
  }

  // "METHOD /path" of each request, the query cut off.
  std::vector<std::string> Requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  void AcceptLoop() {
    while (true) {
      const int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) return;
      const int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      address.sin_port = htons(static_cast<uint16_t>(target_port_));
      if (connect(server, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        close(client);
        close(server);
        continue;
      }
      absl::MutexLock lock(&mu_);
      if (stopping_) {
        close(client);
        close(server);
        return;
      }
      connections_.push_back(client);
      connections_.push_back(server);
      pumps_.emplace_back([this, client, server] { PumpRequests(client, server); });
      pumps_.emplace_back([client, server] { PumpRaw(server, client); });
    }
  }

  static bool SendAll(int fd, const char* data, size_t size) {
    while (size > 0) {
      const ssize_t sent = send(fd, data, size, MSG_NOSIGNAL);
      if (sent <= 0) return false;
      data += sent;
      size -= static_cast<size_t>(sent);
    }
    return true;
  }

  static void PumpRaw(int from, int to) {
    char buffer[65536];
    while (true) {
      const ssize_t got = recv(from, buffer, sizeof buffer, 0);
      if (got <= 0 || !SendAll(to, buffer, static_cast<size_t>(got))) break;
    }
    shutdown(to, SHUT_RDWR);
    shutdown(from, SHUT_RDWR);
  }

  // Client to server: parses each request's head (its line and
  // Content-Length) and passes its body through.
  void PumpRequests(int from, int to) {
    std::string pending;
    uint64_t body_left = 0;
    char buffer[65536];
    while (true) {
      const ssize_t got = recv(from, buffer, sizeof buffer, 0);
      if (got <= 0) break;
      pending.append(buffer, static_cast<size_t>(got));
      bool ok = true;
      while (ok && !pending.empty()) {
        if (body_left > 0) {
          const size_t take = static_cast<size_t>(std::min<uint64_t>(body_left, pending.size()));
          ok = SendAll(to, pending.data(), take);
          pending.erase(0, take);
          body_left -= take;
          continue;
        }
        const size_t end = pending.find("\r\n\r\n");
        if (end == std::string::npos) break;
        const std::string head = pending.substr(0, end + 4);
        pending.erase(0, end + 4);
        std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
        std::vector<std::string> words = absl::StrSplit(lines[0], ' ');
        if (words.size() >= 2) {
          absl::MutexLock lock(&mu_);
          requests_.push_back(absl::StrCat(words[0], " ", words[1].substr(0, words[1].find('?'))));
        }
        for (const std::string& line : lines) {
          if (absl::StartsWithIgnoreCase(line, "content-length:")) {
            (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &body_left);
          }
        }
        ok = SendAll(to, head.data(), head.size());
      }
      if (!ok) break;
    }
    shutdown(to, SHUT_RDWR);
    shutdown(from, SHUT_RDWR);
  }

  const int target_port_;
  int port_ = 0;
  int listener_ = -1;
  std::thread acceptor_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int> connections_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> pumps_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> requests_ ABSL_GUARDED_BY(mu_);
};

void WriteFile(const std::filesystem::path& path, const std::string& data) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

class DirectoryUploaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static S3TestServer* server =
        S3TestServer::StartForSuite({.buckets = {kBucket}, .check_signatures = true});
    ASSERT_NE(server, nullptr) << "the S3 test server did not start (see above)";
    server_ = server;
    int moto_port = 0;
    ASSERT_TRUE(absl::SimpleAtoi(server_->endpoint().substr(server_->endpoint().rfind(':') + 1),
                                 &moto_port));
    proxy_ = std::make_unique<RecordingProxy>(moto_port);
    S3Config config = server_->Config();
    config.endpoint = absl::StrCat("http://127.0.0.1:", proxy_->port());
    config.max_attempts = 2;
    config.connect_timeout = absl::Seconds(1);
    S3ObjectStore::Options options;
    options.config = std::move(config);
    options.bucket = kBucket;
    absl::StatusOr<std::shared_ptr<S3ObjectStore>> store = S3ObjectStore::Create(options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *store;
    // Reads check what arrived without going through the proxy.
    options.config = server_->Config();
    reader_ = *S3ObjectStore::Create(options);
  }

  std::unique_ptr<DirectoryUploader> StartUploader(const std::string& prefix,
                                                   std::vector<std::string> appended = {},
                                                   bool appended_event_files = false) {
    DirectoryUploader::Options options;
    options.sources.push_back(
        {dir_.path().string(), store_, prefix, std::move(appended), appended_event_files});
    options.append_interval = absl::Milliseconds(50);
    options.initial_retry = absl::Milliseconds(20);
    options.max_retry = absl::Milliseconds(200);
    options.max_file_bytes = max_file_bytes_;
    options.log = [this](const std::string& line) {
      LOG_LINE(line);
      absl::MutexLock lock(&log_mu_);
      log_lines_.push_back(line);
    };
    absl::StatusOr<std::unique_ptr<DirectoryUploader>> uploader =
        DirectoryUploader::Start(std::move(options));
    EXPECT_TRUE(uploader.ok()) << uploader.status();
    return uploader.ok() ? *std::move(uploader) : nullptr;
  }

  static void LOG_LINE(const std::string& line) { std::cerr << "uploader: " << line << "\n"; }

  // The uploader's log so far, one line after the other.
  std::string Log() const {
    absl::MutexLock lock(&log_mu_);
    return absl::StrJoin(log_lines_, "\n");
  }

  // The PUTs of keys under `prefix` that the proxy saw, as keys.
  std::vector<std::string> PutKeys(const std::string& prefix) const {
    std::vector<std::string> keys;
    const std::string start = absl::StrCat("PUT /", kBucket, "/", prefix, "/");
    for (const std::string& request : proxy_->Requests()) {
      if (absl::StartsWith(request, start)) keys.push_back(request.substr(start.size()));
    }
    return keys;
  }

  std::string Stored(const std::string& key) const {
    return reader_->ReadAtMost(key, ReadLimit{64 << 20, "an uploaded test object"})
        .value_or("<missing>");
  }

  S3TestServer* server_ = nullptr;
  std::unique_ptr<RecordingProxy> proxy_;
  std::shared_ptr<S3ObjectStore> store_;
  std::shared_ptr<S3ObjectStore> reader_;
  ScopedTempDir dir_;
  int64_t max_file_bytes_ = DirectoryUploader::kDefaultMaxFileBytes;
  mutable absl::Mutex log_mu_;
  std::vector<std::string> log_lines_ ABSL_GUARDED_BY(log_mu_);
};

TEST_F(DirectoryUploaderTest, UploadsEachClosedFileAsItIsClosed) {
  std::unique_ptr<DirectoryUploader> uploader = StartUploader("live");
  ASSERT_NE(uploader, nullptr);
  WriteFile(dir_.path() / "events/000000000001/a_worker_0.tfevents", "step one");
  ASSERT_TRUE(WaitUntil(
      [&] { return Stored("live/events/000000000001/a_worker_0.tfevents") == "step one"; }));
  // A writer's temporary file never goes up.
  WriteFile(dir_.path() / "events/000000000002/.b.tfevents.tmp", "half");
  EXPECT_TRUE(uploader->Finish(absl::Seconds(20)).ok());
  EXPECT_THAT(PutKeys("live"), ElementsAre("events/000000000001/a_worker_0.tfevents"));
}

TEST_F(DirectoryUploaderTest, EventFilesGoUpBeforeIndexFilesAndTheEndMarkerLast) {
  std::unique_ptr<DirectoryUploader> uploader = StartUploader("ordered");
  ASSERT_NE(uploader, nullptr);
  // While the store is away everything closes; the end marker and an index
  // close before the event file they follow.
  proxy_->Stop();
  WriteFile(dir_.path() / "training_job_end.ts", "1700000000.0\n");
  WriteFile(dir_.path() / "index/000000000/000000000001_worker_0.json", "{\"index\": 1}");
  WriteFile(dir_.path() / "events/000000000001/e1.tfevents", "event one");
  WriteFile(dir_.path() / "events/000000000002/e2.tfevents", "event two");
  WriteFile(dir_.path() / "index/000000000/000000000002_worker_0.json", "{\"index\": 2}");
  ASSERT_TRUE(WaitUntil([&] { return uploader->backlog().pending_files == 5; }));
  // A try that began before the last file closed may still be under way:
  // the store comes back only after one that began with all five pending.
  const int64_t failed = uploader->backlog().failed_attempts;
  ASSERT_TRUE(WaitUntil([&] { return uploader->backlog().failed_attempts >= failed + 2; }));
  proxy_->Start();
  ASSERT_TRUE(uploader->Finish(absl::Seconds(20)).ok());
  // Data files in any order; index files after them, in key order (what a
  // start-after listing needs); the end marker last.
  const std::vector<std::string> keys = PutKeys("ordered");
  ASSERT_EQ(keys.size(), 5u) << ::testing::PrintToString(keys);
  EXPECT_THAT(
      std::vector<std::string>(keys.begin(), keys.begin() + 2),
      UnorderedElementsAre("events/000000000001/e1.tfevents", "events/000000000002/e2.tfevents"));
  EXPECT_THAT(std::vector<std::string>(keys.begin() + 2, keys.end()),
              ElementsAre("index/000000000/000000000001_worker_0.json",
                          "index/000000000/000000000002_worker_0.json", "training_job_end.ts"));
}

TEST_F(DirectoryUploaderTest, StoreOutageIsSurvivedAndEveryFileArrivesOnce) {
  std::unique_ptr<DirectoryUploader> uploader = StartUploader("outage");
  ASSERT_NE(uploader, nullptr);
  WriteFile(dir_.path() / "events/000000000000/e0.tfevents", "before");
  ASSERT_TRUE(WaitUntil([&] { return uploader->backlog().uploaded_files == 1; }));
  proxy_->Stop();
  WriteFile(dir_.path() / "events/000000000001/e1.tfevents", "during 1");
  WriteFile(dir_.path() / "events/000000000002/e2.tfevents", "during 2");
  WriteFile(dir_.path() / "index/000000000/000000000002_worker_0.json", "{}");
  // The backlog shows, with the store's error.
  ASSERT_TRUE(WaitUntil([&] {
    DirectoryUploader::Backlog backlog = uploader->backlog();
    return backlog.pending_files == 3 && !backlog.last_error.ok();
  }));
  DirectoryUploader::Backlog backlog = uploader->backlog();
  EXPECT_EQ(backlog.last_error.code(), absl::StatusCode::kUnavailable) << backlog.last_error;
  EXPECT_EQ(backlog.pending_bytes, 8 + 8 + 2);
  // A few failed retries.
  ASSERT_TRUE(WaitUntil([&, failed = backlog.failed_attempts] {
    return uploader->backlog().failed_attempts >= failed + 2;
  }));
  proxy_->Start();
  ASSERT_TRUE(WaitUntil([&] { return uploader->backlog().pending_files == 0; }));
  EXPECT_TRUE(uploader->backlog().last_error.ok());
  ASSERT_TRUE(uploader->Finish(absl::Seconds(20)).ok());
  EXPECT_EQ(Stored("outage/events/000000000001/e1.tfevents"), "during 1");
  EXPECT_EQ(Stored("outage/events/000000000002/e2.tfevents"), "during 2");
  EXPECT_EQ(Stored("outage/index/000000000/000000000002_worker_0.json"), "{}");
  // Each once: the failed tries never reached the store.
  const std::vector<std::string> keys = PutKeys("outage");
  EXPECT_THAT(keys, UnorderedElementsAre("events/000000000000/e0.tfevents",
                                         "events/000000000001/e1.tfevents",
                                         "events/000000000002/e2.tfevents",
                                         "index/000000000/000000000002_worker_0.json"));
  ASSERT_FALSE(keys.empty());
  EXPECT_EQ(keys.back(), "index/000000000/000000000002_worker_0.json");
}

TEST_F(DirectoryUploaderTest, FinishWithTheStoreAwayGivesUpAfterTheBoundNamingTheBacklog) {
  std::unique_ptr<DirectoryUploader> uploader = StartUploader("bounded");
  ASSERT_NE(uploader, nullptr);
  proxy_->Stop();
  WriteFile(dir_.path() / "events/000000000001/e1.tfevents", "12345");
  const absl::Time start = absl::Now();
  absl::Status finished = uploader->Finish(absl::Milliseconds(500));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(finished.code(), absl::StatusCode::kDeadlineExceeded) << finished;
  EXPECT_THAT(finished.message(), HasSubstr("1 files (5 bytes) were not uploaded"));
  EXPECT_THAT(finished.message(), HasSubstr("cannot reach the S3 endpoint"));
  proxy_->Start();
}

TEST_F(DirectoryUploaderTest, GrowingFilesGoUpToTheirLastLineAndWholeAtFinish) {
  std::unique_ptr<DirectoryUploader> uploader = StartUploader("metrics", {"system/"});
  ASSERT_NE(uploader, nullptr);
  const std::filesystem::path file = dir_.path() / "system/incremental/2026112410/1.algo-1.json";
  std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  out << "{\"a\": 1}\n{\"b\": 2}\n{\"c\"" << std::flush;  // a line half written
  const std::string key = "metrics/system/incremental/2026112410/1.algo-1.json";
  ASSERT_TRUE(WaitUntil([&] { return Stored(key) == "{\"a\": 1}\n{\"b\": 2}\n"; })) << Stored(key);
  out << ": 3}\n" << std::flush;
  ASSERT_TRUE(WaitUntil([&] { return Stored(key) == "{\"a\": 1}\n{\"b\": 2}\n{\"c\": 3}\n"; }))
      << Stored(key);
  out << "{\"d\": 4}\n" << std::flush;  // still open at Finish
  ASSERT_TRUE(uploader->Finish(absl::Seconds(20)).ok());
  EXPECT_EQ(Stored(key), "{\"a\": 1}\n{\"b\": 2}\n{\"c\": 3}\n{\"d\": 4}\n");
  // Once per new last line, not once per interval: three versions.
  EXPECT_EQ(PutKeys("metrics").size(), 3u) << ::testing::PrintToString(PutKeys("metrics"));
}

// One TFRecord record framing `payload` (CRC fields zero: the uploader
// reads only the lengths; readers check the CRCs).
std::string Record(const std::string& payload) {
  std::string record;
  for (int i = 0; i < 8; ++i) record.push_back(static_cast<char>((payload.size() >> (8 * i)) & 0xff));
  record.append(4, '\0');
  record += payload;
  record.append(4, '\0');
  return record;
}

// A TensorBoard writer appends records to its event file all run long: the
// file goes up while it grows, never with a torn last record.
TEST_F(DirectoryUploaderTest, GrowingEventFilesGoUpToTheirLastCompleteRecord) {
  std::unique_ptr<DirectoryUploader> uploader =
      StartUploader("tb", {}, /*appended_event_files=*/true);
  ASSERT_NE(uploader, nullptr);
  const std::filesystem::path file =
      dir_.path() / "runs/Nov28_08-00-00_host/events.out.tfevents.1764316800.host.42.0";
  std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  const std::string first = Record("brain.Event:2"), second = Record("step 1 loss 0.5");
  out << first << second.substr(0, 5) << std::flush;  // the second's header half written
  const std::string key = "tb/runs/Nov28_08-00-00_host/events.out.tfevents.1764316800.host.42.0";
  ASSERT_TRUE(WaitUntil([&] { return Stored(key) == first; })) << Stored(key).size();
  out << second.substr(5, 15) << std::flush;  // header whole, data torn
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(Stored(key), first);
  out << second.substr(20) << std::flush;
  ASSERT_TRUE(WaitUntil([&] { return Stored(key) == first + second; })) << Stored(key).size();
  // Other files of the directory are not appended to: they go up when closed.
  WriteFile(dir_.path() / "runs/projector_config.pbtxt", "embeddings {}\n");
  ASSERT_TRUE(uploader->Finish(absl::Seconds(20)).ok());
  EXPECT_EQ(Stored("tb/runs/projector_config.pbtxt"), "embeddings {}\n");
  EXPECT_EQ(Stored(key), first + second);
}

TEST_F(DirectoryUploaderTest, FilesAlreadyThereAtStartGoUp) {
  WriteFile(dir_.path() / "collections/000000000/worker_0_collections.json", "{}");
  std::unique_ptr<DirectoryUploader> uploader = StartUploader("existing");
  ASSERT_NE(uploader, nullptr);
  ASSERT_TRUE(uploader->Finish(absl::Seconds(20)).ok());
  EXPECT_EQ(Stored("existing/collections/000000000/worker_0_collections.json"), "{}");
}

TEST_F(DirectoryUploaderTest, LargeFilesGoUpAsSignedMultipartUploads) {
  S3ObjectStore::Options options;
  options.config = store_->config();
  options.bucket = kBucket;
  options.multipart_part_bytes = 5 << 20;
  absl::StatusOr<std::shared_ptr<S3ObjectStore>> store = S3ObjectStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  store_ = *store;
  std::unique_ptr<DirectoryUploader> uploader = StartUploader("large");
  ASSERT_NE(uploader, nullptr);
  std::string data(11 << 20, 'x');
  for (size_t i = 0; i < data.size(); i += 4096) data[i] = static_cast<char>('a' + i / 4096 % 26);
  WriteFile(dir_.path() / "events/000000000001/big.tfevents", data);
  ASSERT_TRUE(uploader->Finish(absl::Seconds(60)).ok());
  EXPECT_TRUE(Stored("large/events/000000000001/big.tfevents") == data);
  // Create, three parts, complete: on the wire, each signed and accepted.
  const std::string key = absl::StrCat("/", kBucket, "/large/events/000000000001/big.tfevents");
  std::vector<std::string> requests;
  for (const std::string& request : proxy_->Requests()) {
    if (absl::EndsWith(request, key)) requests.push_back(request.substr(0, request.find(' ')));
  }
  EXPECT_THAT(requests, ElementsAre("POST", "PUT", "PUT", "PUT", "POST"));
}

// The peak resident memory of this process so far (VmHWM), in bytes.
int64_t PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    int64_t kib = 0;
    if (absl::StartsWith(line, "VmHWM:") &&
        absl::SimpleAtoi(
            absl::StripAsciiWhitespace(absl::StripSuffix(absl::StripPrefix(line, "VmHWM:"), "kB")),
            &kib)) {
      return kib * 1024;
    }
  }
  return -1;
}

// Stops the store, lets `path` become pending (closed) and, once a try has
// failed with it pending, runs `swap`; then brings the store back.
void MakePendingThenSwap(DirectoryUploader& uploader, RecordingProxy& proxy,
                         const std::filesystem::path& path, const std::function<void()>& swap) {
  proxy.Stop();
  WriteFile(path, "first version");
  ASSERT_TRUE(WaitUntil([&] { return uploader.backlog().failed_attempts >= 1; }));
  swap();
  proxy.Start();
}

TEST_F(DirectoryUploaderTest, AFifoInAFilesPlaceIsRefusedWithoutWaitingAndTheRestGoesUp) {
  std::unique_ptr<DirectoryUploader> uploader = StartUploader("fifo");
  ASSERT_NE(uploader, nullptr);
  const std::filesystem::path fifo = dir_.path() / "events/000000000001/e1.tfevents";
  MakePendingThenSwap(*uploader, *proxy_, fifo, [&] {
    std::filesystem::remove(fifo);
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << strerror(errno);
    WriteFile(dir_.path() / "events/000000000002/e2.tfevents", "after the fifo");
  });
  // Should the uploader wait in open() for a writer (the failure this test
  // is for), Finish could not join it: a writer comes after 25 s, so that
  // the test fails instead of hanging.
  absl::Notification finished_in_time;
  std::thread unblocker([&] {
    if (finished_in_time.WaitForNotificationWithTimeout(absl::Seconds(25))) return;
    const int writer = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (writer >= 0) close(writer);
  });
  const absl::Status finished = uploader->Finish(absl::Seconds(20));
  finished_in_time.Notify();
  unblocker.join();
  EXPECT_TRUE(finished.ok()) << finished;
  EXPECT_EQ(Stored("fifo/events/000000000002/e2.tfevents"), "after the fifo");
  EXPECT_EQ(Stored("fifo/events/000000000001/e1.tfevents"), "<missing>");
  const DirectoryUploader::Backlog backlog = uploader->backlog();
  EXPECT_EQ(backlog.refused_files, 1);
  EXPECT_THAT(backlog.last_refusal.message(), HasSubstr("e1.tfevents: not a regular file"));
  EXPECT_THAT(Log(), HasSubstr("not uploading " + fifo.string()));
}

TEST_F(DirectoryUploaderTest, ADirectorySwappedForASymlinkIsNotFollowed) {
  ScopedTempDir outside;
  WriteFile(outside.path() / "000000000001/e1.tfevents", "another job's secret");
  std::unique_ptr<DirectoryUploader> uploader = StartUploader("swapped");
  ASSERT_NE(uploader, nullptr);
  const std::filesystem::path events = dir_.path() / "events";
  MakePendingThenSwap(*uploader, *proxy_, events / "000000000001/e1.tfevents", [&] {
    // The file's own name is unchanged; a directory above it is now a link.
    std::filesystem::rename(events, dir_.path() / "moved");
    std::filesystem::create_directory_symlink(outside.path(), events);
    WriteFile(dir_.path() / "other/000000000002/e2.tfevents", "mine");
  });
  EXPECT_TRUE(uploader->Finish(absl::Seconds(20)).ok());
  EXPECT_EQ(Stored("swapped/events/000000000001/e1.tfevents"), "<missing>");
  EXPECT_EQ(Stored("swapped/other/000000000002/e2.tfevents"), "mine");
  const DirectoryUploader::Backlog backlog = uploader->backlog();
  EXPECT_EQ(backlog.refused_files, 1);
  EXPECT_THAT(backlog.last_refusal.message(), HasSubstr("links are not followed"));
}

TEST_F(DirectoryUploaderTest, ASparse100GbFileIsRefusedNamingTheLimitWithoutReadingIt) {
  const std::filesystem::path huge = dir_.path() / "events/000000000001/huge.tfevents";
  WriteFile(huge, "");
  std::filesystem::resize_file(huge, uint64_t{100} << 30);  // truncate -s 100G
  WriteFile(dir_.path() / "events/000000000002/small.tfevents", "small");
  const int64_t peak_before = PeakRssBytes();
  std::unique_ptr<DirectoryUploader> uploader = StartUploader("sparse");
  ASSERT_NE(uploader, nullptr);
  EXPECT_TRUE(uploader->Finish(absl::Seconds(20)).ok());
  EXPECT_LT(PeakRssBytes() - peak_before, int64_t{64} << 20);
  EXPECT_EQ(Stored("sparse/events/000000000002/small.tfevents"), "small");
  EXPECT_EQ(Stored("sparse/events/000000000001/huge.tfevents"), "<missing>");
  const DirectoryUploader::Backlog backlog = uploader->backlog();
  EXPECT_EQ(backlog.refused_files, 1);
  EXPECT_EQ(backlog.last_refusal.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(backlog.last_refusal.message(),
              AllOf(HasSubstr(huge.string()), HasSubstr("107374182400 bytes"),
                    HasSubstr("upload limit of 1073741824 bytes per file")));
}

TEST_F(DirectoryUploaderTest, AFileOverTheLimitGoesUpOnceRewrittenWithinIt) {
  max_file_bytes_ = 16;
  std::unique_ptr<DirectoryUploader> uploader = StartUploader("limit");
  ASSERT_NE(uploader, nullptr);
  const std::filesystem::path file = dir_.path() / "events/000000000001/e.tfevents";
  WriteFile(file, std::string(17, 'x'));
  ASSERT_TRUE(WaitUntil([&] { return uploader->backlog().refused_files == 1; }));
  EXPECT_THAT(uploader->backlog().last_refusal.message(),
              HasSubstr("17 bytes, more than the upload limit of 16 bytes per file"));
  WriteFile(file, "within");
  ASSERT_TRUE(uploader->Finish(absl::Seconds(20)).ok());
  EXPECT_EQ(Stored("limit/events/000000000001/e.tfevents"), "within");
  EXPECT_EQ(uploader->backlog().refused_files, 1);
}

TEST(DirectoryUploaderStartTest, RefusesMissingDirectoryNamingIt) {
  S3ObjectStore::Options store_options;
  store_options.config.endpoint = "http://127.0.0.1:9";
  store_options.config.access_key_id = "AKIATEST";
  store_options.config.secret_access_key = "secret";
  store_options.bucket = kBucket;
  DirectoryUploader::Options options;
  options.sources.push_back(
      {"/nonexistent/dp-upload-dir", *S3ObjectStore::Create(store_options), "p", {}});
  absl::Status status = DirectoryUploader::Start(std::move(options)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_THAT(status.message(), HasSubstr("/nonexistent/dp-upload-dir"));
}

}  // namespace
}  // namespace debugplane::objectstore
