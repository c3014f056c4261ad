// The real Prometheus server (Debian's `prometheus`) scraping the real
// debugplane-server's GET /metrics every second: with bearer credentials as
// a scrape config sends them, its query API returns the jobs by status and a
// histogram's count; with a wrong token its target is down with the 401.
// A machine without the prometheus binary fails these tests (it is a
// dependency: scripts/install-deps.sh installs it).

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/scoped_temp_dir.h"
#include "tests/service/auth/auth_test_util.h"
#include "tests/service/metrics/metrics_http.h"
#include "tests/service/server_process.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::HttpGet;
using ::debugplane::testing::HttpReply;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::TokenContext;
using ::debugplane::testing::WaitUntil;
using ::debugplane::testing::WithHttp;
using ::debugplane::testing::WriteCredentials;
using ::testing::HasSubstr;

constexpr char kPrometheus[] = "/usr/bin/prometheus";

// A loopback port free now (bound to port 0, then released).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(address.sin_port);
}

// Prometheus scraping `target` (HOST:PORT) /metrics every second with
// `token` as its bearer credentials, its data and log under `dir`.
class PrometheusProcess {
 public:
  PrometheusProcess(const fs::path& dir, const std::string& target, const std::string& token)
      : dir_(dir), port_(FreePort()) {
    std::ofstream(dir / "prometheus.yml") << "global:\n"
                                             "  scrape_interval: 1s\n"
                                             "  evaluation_interval: 1s\n"
                                             "scrape_configs:\n"
                                             "  - job_name: debugplane\n"
                                             "    scrape_interval: 1s\n"
                                             "    scrape_timeout: 1s\n"
                                             "    authorization:\n"
                                             "      credentials: '"
                                          << token
                                          << "'\n"
                                             "    static_configs:\n"
                                             "      - targets: ['"
                                          << target << "']\n";
    std::vector<std::string> args = {
        kPrometheus, absl::StrCat("--config.file=", (dir / "prometheus.yml").string()),
        absl::StrCat("--storage.tsdb.path=", (dir / "tsdb").string()),
        absl::StrCat("--web.listen-address=127.0.0.1:", port_), "--log.level=warn"};
    const std::string log = (dir / "prometheus.log").string();
    pid_ = fork();
    if (pid_ == 0) {
      FILE* out = fopen(log.c_str(), "w");
      if (out != nullptr) {
        dup2(fileno(out), STDOUT_FILENO);
        dup2(fileno(out), STDERR_FILENO);
      }
      std::vector<char*> argv;
      for (auto& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~PrometheusProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }

  // The first result of the instant query `query`: its value as text, or
  // nullopt while there is none (Prometheus not up, no scrape yet).
  std::optional<std::string> Query(const std::string& query) const {
    CURL* curl = curl_easy_init();
    char* escaped = curl_easy_escape(curl, query.c_str(), static_cast<int>(query.size()));
    const std::string url =
        absl::StrCat("http://127.0.0.1:", port_, "/api/v1/query?query=", escaped);
    curl_free(escaped);
    curl_easy_cleanup(curl);
    HttpReply reply = HttpGet(url);
    if (reply.status != 200) return std::nullopt;
    nlohmann::json json = nlohmann::json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded() || json.value("status", "") != "success") return std::nullopt;
    const nlohmann::json& result = json["data"]["result"];
    if (!result.is_array() || result.empty()) return std::nullopt;
    return result[0]["value"][1].get<std::string>();
  }

  // The scrape target's health and last error (/api/v1/targets).
  std::pair<std::string, std::string> Target() const {
    HttpReply reply = HttpGet(absl::StrCat("http://127.0.0.1:", port_, "/api/v1/targets"));
    nlohmann::json json = nlohmann::json::parse(reply.body, nullptr, false);
    if (json.is_discarded()) return {};
    const nlohmann::json& targets = json["data"]["activeTargets"];
    if (!targets.is_array() || targets.empty()) return {};
    return {targets[0].value("health", ""), targets[0].value("lastError", "")};
  }

  std::string Log() const {
    std::ifstream in(dir_ / "prometheus.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  fs::path dir_;
  int port_;
  pid_t pid_ = -1;
};

v1::CreateTrainingJobRequest Job(const std::string& name, const fs::path& dir) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_debug_hook_config()->set_s3_output_path("file://" + (dir / name).string());
  return request;
}

class PrometheusScrapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kPrometheus))
        << kPrometheus << " is missing: install Debian's prometheus (scripts/install-deps.sh)";
    WriteCredentials(dir_.path() / "credentials",
                     "admin ADMIN admin-secret\nreader SCRAPER scraper-secret\n");
    fs::create_directories(dir_.path() / "data");
    fs::create_directories(dir_.path() / "prometheus");
    server_ = std::make_unique<ServerProcess>(
        dir_.path() / "data", WithHttp({"--credentials", (dir_.path() / "credentials").string()}));
    ASSERT_GT(server_->http_port(), 0);
  }

  std::string Target() const { return absl::StrCat("127.0.0.1:", server_->http_port()); }

  ScopedTempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(PrometheusScrapeTest, QueriesSeeTheJobsByStatusAndAHistogramCount) {
  PrometheusProcess prometheus(dir_.path() / "prometheus", Target(), "SCRAPER:scraper-secret");
  auto stub = server_->Stub();
  for (const std::string name : {"p1", "p2", "p3", "p4"}) {
    v1::CreateTrainingJobResponse created;
    grpc::Status status = stub->CreateTrainingJob(TokenContext("ADMIN:admin-secret").get(),
                                                  Job(name, dir_.path() / "data"), &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  std::optional<std::string> in_progress;
  EXPECT_TRUE(WaitUntil(
      [&] {
        in_progress = prometheus.Query(R"(debugplane_jobs{status="InProgress"})");
        return in_progress == "4";
      },
      absl::Seconds(60)))
      << "last answer: " << in_progress.value_or("(none)") << "\n"
      << prometheus.Log();
  EXPECT_EQ(prometheus.Query(R"(up{job="debugplane"})"), "1");
  // A histogram's _count: the creations' gRPC calls reached the database in
  // at least one write (group commit may join them).
  std::optional<std::string> writes;
  EXPECT_TRUE(WaitUntil(
      [&] {
        writes =
            prometheus.Query(R"(debugplane_database_duration_seconds_count{operation="write"})");
        return writes.has_value() && std::stod(*writes) >= 1;
      },
      absl::Seconds(30)))
      << writes.value_or("(none)");
  EXPECT_EQ(prometheus.Query(R"(debugplane_grpc_requests_total{code="OK",)"
                             R"(method="/debugplane.v1.TrainingJobService/CreateTrainingJob"})"),
            "4");
  // The scrapes themselves, answered 200 on /metrics: a scrape is counted
  // once its reply is sent, so the next scrape shows it.
  std::optional<std::string> scrapes;
  EXPECT_TRUE(WaitUntil(
      [&] {
        scrapes =
            prometheus.Query(R"(debugplane_http_requests_total{route="/metrics",code="200"})");
        return scrapes.has_value() && std::stod(*scrapes) >= 1;
      },
      absl::Seconds(30)))
      << scrapes.value_or("(none)");
}

TEST_F(PrometheusScrapeTest, AWrongTokenLeavesTheTargetDownWith401) {
  PrometheusProcess prometheus(dir_.path() / "prometheus", Target(), "SCRAPER:wrong-secret");
  std::pair<std::string, std::string> target;
  EXPECT_TRUE(WaitUntil(
      [&] {
        target = prometheus.Target();
        return target.first == "down";
      },
      absl::Seconds(60)))
      << target.first << " " << target.second << "\n"
      << prometheus.Log();
  EXPECT_THAT(target.second, HasSubstr("401"));
  EXPECT_EQ(prometheus.Query(R"(up{job="debugplane"})"), "0");
  // The server's refusal names the key, never the secret.
  HttpReply refused = HttpGet(absl::StrCat("http://", Target(), "/metrics"),
                              {"Authorization: Bearer SCRAPER:wrong-secret"});
  EXPECT_EQ(refused.status, 401);
  EXPECT_THAT(refused.body, HasSubstr("SCRAPER"));
  EXPECT_THAT(refused.body, ::testing::Not(HasSubstr("wrong-secret")));
  EXPECT_THAT(refused.body, ::testing::Not(HasSubstr("scraper-secret")));
}

}  // namespace
}  // namespace debugplane
