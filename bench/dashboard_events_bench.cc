// Live dashboards: the server's CPU while N browsers follow every job over
// GET /api/events (server-sent events) and the jobs change, and how long a
// committed change takes to reach them.
//
//   dashboard_events_bench [--clients 20] [--jobs 10] [--rate 50] [--seconds 10]
//
// Runs the real debugplane-server (next to this binary) with --http-listen,
// opens --clients event streams (libcurl, one thread each, as browsers
// would hold them), creates --jobs jobs, then changes them --rate times a
// second for --seconds (UpdateTrainingJob over gRPC, alternating the
// profiling interval: each change is one `event: job` to every client).
// Reports the server process's CPU (utime+stime from /proc) over the
// window, and the latency from the UpdateTrainingJob call (commit included:
// SQLite, fsync) to the event's arrival at a client (configVersion
// identifies the change).

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/bench_processes.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"

namespace debugplane::bench {
namespace {

namespace fs = std::filesystem;

// When each (job, configVersion) was acknowledged.
class Sent {
 public:
  void Record(const std::string& job, int64_t version, absl::Time at) {
    absl::MutexLock lock(&mu_);
    sent_[{job, version}] = at;
  }
  std::optional<absl::Time> When(const std::string& job, int64_t version) {
    absl::MutexLock lock(&mu_);
    auto it = sent_.find({job, version});
    if (it == sent_.end()) return std::nullopt;
    return it->second;
  }

 private:
  absl::Mutex mu_;
  std::map<std::pair<std::string, int64_t>, absl::Time> sent_;
};

// One browser: an event stream parsed as it arrives.
class Follower {
 public:
  Follower(std::string url, Sent* sent) : url_(std::move(url)), sent_(sent) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Follower() {
    stop_ = true;
    thread_.join();
  }
  int64_t events() const { return events_.load(); }
  std::vector<double> TakeLatenciesMs() {
    absl::MutexLock lock(&mu_);
    return std::move(latencies_ms_);
  }

 private:
  static size_t OnBody(char* data, size_t size, size_t count, void* self) {
    static_cast<Follower*>(self)->Parse(absl::string_view(data, size * count));
    return size * count;
  }
  static int OnProgress(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<Follower*>(self)->stop_ ? 1 : 0;
  }
  void Parse(absl::string_view chunk) {
    const absl::Time now = absl::Now();
    buffer_.append(chunk.data(), chunk.size());
    size_t end;
    while ((end = buffer_.find('\n')) != std::string::npos) {
      const std::string line = buffer_.substr(0, end);
      buffer_.erase(0, end + 1);
      if (line.rfind("data: {", 0) != 0) continue;
      const nlohmann::json event = nlohmann::json::parse(line.substr(6), nullptr, false);
      if (!event.is_object() || !event.contains("configVersion")) continue;
      events_.fetch_add(1);
      if (auto at = sent_->When(event["name"], event["configVersion"].get<int64_t>())) {
        absl::MutexLock lock(&mu_);
        latencies_ms_.push_back(absl::ToDoubleMilliseconds(now - *at));
      }
    }
  }
  void Run() {
    CURL* curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &OnBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, this);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &OnProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, this);
    curl_easy_perform(curl);
    curl_easy_cleanup(curl);
  }

  const std::string url_;
  Sent* const sent_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> events_{0};
  std::string buffer_;
  absl::Mutex mu_;
  std::vector<double> latencies_ms_;
  std::thread thread_;
};

// utime + stime of `pid`, in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<std::string> fields = absl::StrSplit(stat.substr(stat.rfind(')') + 2), ' ');
  return (std::stod(fields[11]) + std::stod(fields[12])) / sysconf(_SC_CLK_TCK);
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p * values.size()))];
}

int Run(int clients, int jobs, int rate, int seconds) {
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("dp-dash-bench-", getpid());
  fs::create_directories(dir / "data");
  const int http_port = FreePort();
  ServerChild server;
  if (absl::Status started = server.Start(NextToSelf("debugplane-server"),
                                          {"--data-dir", (dir / "data").string(), "--http-listen",
                                           absl::StrCat("127.0.0.1:", http_port)},
                                          dir / "server.log", absl::Seconds(30));
      !started.ok()) {
    std::fprintf(stderr, "%s\n", std::string(started.message()).c_str());
    return 1;
  }
  auto stub = v1::TrainingJobService::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  for (int j = 0; j < jobs; ++j) {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(absl::StrCat("live-", j));
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Bench");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
    v1::CreateTrainingJobResponse response;
    grpc::ClientContext context;
    if (!stub->CreateTrainingJob(&context, request, &response).ok()) return 1;
  }
  Sent sent;
  std::vector<std::unique_ptr<Follower>> followers;
  for (int c = 0; c < clients; ++c) {
    followers.push_back(std::make_unique<Follower>(
        absl::StrCat("http://127.0.0.1:", http_port, "/api/events"), &sent));
  }
  absl::SleepFor(absl::Seconds(1));  // Every stream open and welcomed.
  for (auto& follower : followers) follower->TakeLatenciesMs();

  const double cpu_before = CpuSeconds(server.pid());
  const absl::Time start = absl::Now();
  const absl::Duration period = absl::Seconds(1) / rate;
  int64_t changes = 0;
  std::map<int, int64_t> version;
  for (absl::Time next = start; absl::Now() - start < absl::Seconds(seconds); next += period) {
    absl::SleepFor(next - absl::Now());
    const int j = static_cast<int>(changes % jobs);
    v1::UpdateTrainingJobRequest request;
    request.set_training_job_name(absl::StrCat("live-", j));
    request.mutable_profiler_config()->set_profiling_interval_in_milliseconds(
        changes % 2 == 0 ? 1000 : 500);
    // ConfigVersion: 1 at creation, +1 per accepted update. Recorded before
    // the call: an event may arrive before the reply does.
    sent.Record(request.training_job_name(), (version[j] += 1) + 1, absl::Now());
    v1::UpdateTrainingJobResponse response;
    grpc::ClientContext context;
    if (!stub->UpdateTrainingJob(&context, request, &response).ok()) return 1;
    ++changes;
  }
  absl::SleepFor(absl::Milliseconds(500));  // Late deliveries.
  const double cpu = CpuSeconds(server.pid()) - cpu_before;
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  std::vector<double> latencies;
  int64_t events = 0;
  for (auto& follower : followers) {
    std::vector<double> own = follower->TakeLatenciesMs();
    latencies.insert(latencies.end(), own.begin(), own.end());
    events += follower->events();
  }
  followers.clear();
  server.Stop(absl::Seconds(15));
  std::printf(
      "clients=%d jobs=%d changes=%lld (%.0f/s) events_received=%lld expected>=%lld\n"
      "server CPU: %.2f s in %.1f s wall = %.1f%% of one core\n"
      "delivery latency: p50 %.2f ms  p99 %.2f ms  max %.2f ms (%zu samples)\n",
      clients, jobs, static_cast<long long>(changes), changes / wall,
      static_cast<long long>(events), static_cast<long long>(changes) * clients, cpu, wall,
      100 * cpu / wall, Percentile(latencies, 0.5), Percentile(latencies, 0.99),
      Percentile(latencies, 1.0), latencies.size());
  fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace debugplane::bench

int main(int argc, char** argv) {
  CLI::App app("Live dashboards: server CPU and delivery latency of /api/events");
  int clients = 20, jobs = 10, rate = 50, seconds = 10;
  app.add_option("--clients", clients, "event streams open")->check(CLI::NonNegativeNumber);
  app.add_option("--jobs", jobs, "jobs changed in turn")->check(CLI::PositiveNumber);
  app.add_option("--rate", rate, "changes per second")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "measured time")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  return debugplane::bench::Run(clients, jobs, rate, seconds);
}
