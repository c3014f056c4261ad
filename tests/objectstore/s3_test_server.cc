#include "tests/objectstore/s3_test_server.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/wait_until.h"

extern char** environ;

namespace debugplane::testing {
namespace {

constexpr char kInstallHint[] =
    "moto's S3 server is needed by the S3 tests: run scripts/install-deps.sh, or "
    "`python3 -m pip install 'moto[server]==5.2.1'`";

// Reads one line from `fd` within `timeout`; false on EOF or timeout.
bool ReadLine(int fd, absl::Duration timeout, std::string* line) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const size_t newline = line->find('\n');
    if (newline != std::string::npos) {
      line->resize(newline);
      return true;
    }
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) return false;
    pollfd readable{fd, POLLIN, 0};
    if (poll(&readable, 1, static_cast<int>(left)) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) return false;
    line->append(buffer, static_cast<size_t>(n));
  }
}

size_t DiscardBody(char*, size_t size, size_t count, void*) { return size * count; }

}  // namespace

S3TestServer* S3TestServer::StartForSuite(const Options& options) {
  absl::StatusOr<std::unique_ptr<S3TestServer>> started = Start(options);
  EXPECT_TRUE(started.ok()) << started.status();
  return started.ok() ? started->release() : nullptr;
}

absl::StatusOr<std::unique_ptr<S3TestServer>> S3TestServer::Start(const Options& options) {
  int to_child[2], from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  // scripts/install-deps.sh puts moto into this virtual environment when
  // the python3 on PATH does not have it.
  const std::string venv_python = absl::StrCat(DP_SOURCE_DIR, "/build/tools/moto-venv/bin/python3");
  const std::string python = access(venv_python.c_str(), X_OK) == 0 ? venv_python : "python3";
  std::vector<std::string> args = {
      python, absl::StrCat(DP_SOURCE_DIR, "/tests/objectstore/s3_test_server.py")};
  if (options.check_signatures) args.push_back("--check-signatures");
  if (options.port != 0) args.push_back(absl::StrCat("--port=", options.port));
  if (!options.host.empty()) args.push_back(absl::StrCat("--host=", options.host));
  for (const std::string& bucket : options.buckets) args.push_back(bucket);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], STDOUT_FILENO);
  auto server = std::unique_ptr<S3TestServer>(new S3TestServer());
  const int spawned =
      posix_spawnp(&server->pid_, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(to_child[0]);
  close(from_child[1]);
  server->stdin_fd_ = to_child[1];
  if (spawned != 0) {
    close(from_child[0]);
    server->pid_ = -1;
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", python, " (", std::strerror(spawned), "); ", kInstallHint));
  }
  std::string line;
  const bool ready = ReadLine(from_child[0], absl::Minutes(1), &line);
  close(from_child[0]);
  if (!ready) {
    // It closed its output: give it a moment to exit and report why.
    close(server->stdin_fd_);
    server->stdin_fd_ = -1;
    int status = 0;
    const bool exited = WaitUntil(
        [&] { return waitpid(server->pid_, &status, WNOHANG) == server->pid_; }, absl::Seconds(2));
    if (exited) server->pid_ = -1;
    return absl::FailedPreconditionError(absl::StrCat(
        "the S3 test server did not start",
        exited && WIFEXITED(status) ? absl::StrCat(" (exit status ", WEXITSTATUS(status), ")") : "",
        "; its error output is above. ", kInstallHint));
  }
  const nlohmann::json reply = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!reply.is_object() || !reply.contains("endpoint")) {
    return absl::InternalError(absl::StrCat("the S3 test server said: ", line));
  }
  server->endpoint_ = reply["endpoint"].get<std::string>();
  server->access_key_id_ = reply["access_key_id"].get<std::string>();
  server->secret_access_key_ = reply["secret_access_key"].get<std::string>();
  return server;
}

S3TestServer::~S3TestServer() {
  if (stdin_fd_ >= 0) close(stdin_fd_);  // The server's cue to end.
  if (pid_ <= 0) return;
  if (!WaitUntil([&] { return waitpid(pid_, nullptr, WNOHANG) != 0; }, absl::Seconds(10))) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

int S3TestServer::port() const {
  int port = 0;
  if (!absl::SimpleAtoi(absl::string_view(endpoint_).substr(endpoint_.rfind(':') + 1), &port)) {
    return 0;
  }
  return port;
}

objectstore::S3Config S3TestServer::Config() const {
  objectstore::S3Config config;
  config.endpoint = endpoint_;
  config.region = "us-east-1";
  config.access_key_id = access_key_id_;
  config.secret_access_key = secret_access_key_;
  config.credentials_source = "the test server";
  config.path_style = true;
  config.connect_timeout = absl::Seconds(2);
  config.request_timeout = absl::Seconds(20);
  config.initial_backoff = absl::Milliseconds(1);
  config.max_backoff = absl::Milliseconds(10);
  return config;
}

absl::Status S3TestServer::Put(absl::string_view bucket, absl::string_view key,
                               absl::string_view data) const {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  std::string url = absl::StrCat(endpoint_, "/", bucket);
  for (absl::string_view segment : absl::StrSplit(key, '/')) {
    char* escaped = curl_easy_escape(curl, segment.data(), static_cast<int>(segment.size()));
    absl::StrAppend(&url, "/", escaped);
    curl_free(escaped);
  }
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, data.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(data.size()));
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/octet-stream");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, DiscardBody);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  const CURLcode code = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (code != CURLE_OK || status != 200) {
    return absl::InternalError(
        absl::StrCat("PUT ", url, ": ", curl_easy_strerror(code), ", HTTP ", status));
  }
  return absl::OkStatus();
}

}  // namespace debugplane::testing
