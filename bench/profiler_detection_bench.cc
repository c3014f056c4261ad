// Profiler detection latency: from the moment system metrics showing a CPU
// bottleneck are written (appended to the metrics file, as the agent's
// sampler does) to the CPUBottleneck rule's IssuesFound on a
// WatchTrainingJob stream (issue 5: "within one scan of new data";
// scan_interval_us is 60 s here, its default).
//
//   profiler_detection_bench [--samples 100] [--concurrency 1,4] [--with-report]
//                            [--timeout-ms 10000] [--server PATH]
//
// It runs the real debugplane-server binary as a child process (loopback,
// port 0, its own data directory), as production runs it: the same inotify
// scheduler (IN_MODIFY on the newest hour directory), the same rule workers,
// the same fsynced commit before the change is pushed.
//
// For each sample: create a job with a CPUBottleneck rule (patience 0) and,
// with --with-report, a ProfilerReport that also evaluates all ten rules and
// renders its report; open WatchTrainingJob; append 20 healthy samples
// (4 CPU cores at 35%, a GPU at 90%); then, after 20 ms, append 181
// bottlenecked samples (CPU 97%, GPU 3%) in one write. The clock starts when
// that write returns; the rule's 100th sample completes a check with 80% of
// samples bottlenecked (threshold 50%).
//
// Ceiling, measured in the same run: a CreateTrainingJob round trip (gRPC
// plus one fsynced commit, which IssuesFound also pays before it is pushed).

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/bench_processes.h"
#include "bench/bench_stats.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace debugplane::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string Samples(int count, double cpu, double gpu, double* timestamp) {
  std::string out;
  for (int i = 0; i < count; ++i, *timestamp += 0.5) {
    for (int core = 0; core < 4; ++core) {
      absl::StrAppendFormat(&out,
                            "{\"Type\": \"cpu\", \"Name\": \"cpu%d\", \"Dimension\": "
                            "\"CPUUtilization\", \"Value\": %.1f, \"NodeId\": \"algo-1\", "
                            "\"Timestamp\": %.3f}\n",
                            core, cpu, *timestamp);
    }
    absl::StrAppendFormat(&out,
                          "{\"Type\": \"gpu\", \"Name\": \"gpu0\", \"Dimension\": "
                          "\"GPUUtilization\", \"Value\": %.1f, \"NodeId\": \"algo-1\", "
                          "\"Timestamp\": %.3f}\n",
                          gpu, *timestamp);
  }
  return out;
}

bool Append(const fs::path& path, const std::string& data) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool ok = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  close(fd);
  return ok;
}

v1::CreateTrainingJobRequest Job(const std::string& name, const fs::path& profiler,
                                 bool with_report) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Bench");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_profiler_config()->set_s3_output_path(profiler.string());
  auto add = [&](const std::string& rule_name, const std::string& rule_to_invoke,
                 std::map<std::string, std::string> parameters) {
    auto* rule = request.add_profiler_rule_configurations();
    rule->set_rule_configuration_name(rule_name);
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = rule_to_invoke;
    for (auto& [key, value] : parameters) (*rule->mutable_rule_parameters())[key] = value;
  };
  add("CPUBottleneck", "CPUBottleneck", {{"patience", "0"}});
  if (with_report) add("ProfilerReport", "ProfilerReport", {{"CPUBottleneck_patience", "0"}});
  return request;
}

struct Options {
  int samples = 100;
  std::vector<int> concurrency = {1, 4};
  bool with_report = false;
  int timeout_ms = 10000;
  std::string server = NextToSelf("debugplane-server");
};

// One sample: returns the latency in ms, or a negative value on timeout or
// error (with `*error` set).
double RunSample(v1::TrainingJobService::Stub& stub, const fs::path& root, const std::string& job,
                 const Options& options, std::string* error) {
  const fs::path profiler = root / job;
  const fs::path hour = profiler / "system" / "incremental" / "2026112207";
  v1::CreateTrainingJobResponse created;
  grpc::Status status = stub.CreateTrainingJob(ContextWithin(absl::Seconds(10)).get(),
                                               Job(job, profiler, options.with_report), &created);
  if (!status.ok()) {
    *error = absl::StrCat("create: ", status.error_message());
    return -1;
  }
  auto watch_context = ContextWithin(absl::Milliseconds(options.timeout_ms));
  v1::WatchTrainingJobRequest watch;
  watch.set_training_job_name(job);
  auto reader = stub.WatchTrainingJob(watch_context.get(), watch);
  v1::WatchTrainingJobResponse event;
  if (!reader->Read(&event)) {  // The initial state: the watch is registered.
    *error = "watch ended before its first event";
    return -1;
  }
  fs::create_directories(hour);
  const fs::path file = hour / "1795331436.algo-1.json";
  double timestamp = static_cast<double>(absl::ToUnixMicros(absl::Now())) / 1e6;
  if (!Append(file, Samples(20, 35, 90, &timestamp))) {
    *error = "cannot write " + file.string();
    return -1;
  }
  absl::SleepFor(absl::Milliseconds(20));
  const std::string burst = Samples(181, 97, 3, &timestamp);
  if (!Append(file, burst)) {
    *error = "cannot write " + file.string();
    return -1;
  }
  const Clock::time_point written = Clock::now();
  while (reader->Read(&event)) {
    for (const auto& rule : event.profiler_rule_evaluation_statuses()) {
      if (rule.rule_configuration_name() == "CPUBottleneck" &&
          rule.rule_evaluation_status() == v1::RuleEvaluationStatus::IssuesFound) {
        const double latency = MillisSince(written);
        watch_context->TryCancel();
        return latency;
      }
    }
  }
  *error = absl::StrCat("no IssuesFound within ", options.timeout_ms, " ms");
  return -1;
}

int Main(int argc, char** argv) {
  Options options;
  std::string concurrency = "1,4";
  CLI::App app("Profiler detection latency: bottleneck metrics written -> IssuesFound on Watch");
  app.add_option("--samples", options.samples, "Samples per concurrency level");
  app.add_option("--concurrency", concurrency, "Comma-separated numbers of concurrent jobs");
  app.add_flag("--with-report", options.with_report,
               "Also run a ProfilerReport (all rules + report rendering) on every job");
  app.add_option("--timeout-ms", options.timeout_ms, "Per-sample timeout");
  app.add_option("--server", options.server, "debugplane-server binary");
  CLI11_PARSE(app, argc, argv);
  options.concurrency.clear();
  for (absl::string_view part : absl::StrSplit(concurrency, ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1) {
      std::fprintf(stderr, "--concurrency: '%s' is not a positive integer\n",
                   std::string(part).c_str());
      return 2;
    }
    options.concurrency.push_back(n);
  }

  char dir_template[] = "/tmp/dp-profiler-bench-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return 1;
  const fs::path root = dir_template;
  ServerChild server;
  absl::Status started = server.Start(
      options.server,
      {"--data-dir", (root / "data").string(), "--data-root", root.string(), "--log-level", "warn"},
      root / "server.log", absl::Seconds(30));
  if (!started.ok()) {
    std::fprintf(stderr, "%s\n", started.ToString().c_str());
    return 1;
  }
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::TrainingJobService::NewStub(channel);

  std::printf("profiler detection latency (ms), %d samples per level%s\n", options.samples,
              options.with_report ? ", with ProfilerReport on every job" : "");
  int job_counter = 0;
  int failures = 0;
  for (const int level : options.concurrency) {
    std::vector<double> latencies;
    std::vector<double> creates;
    absl::Mutex mu;
    std::vector<std::thread> threads;
    const int per_thread = (options.samples + level - 1) / level;
    for (int t = 0; t < level; ++t) {
      threads.emplace_back([&] {
        auto own_stub = v1::TrainingJobService::NewStub(channel);
        for (int i = 0; i < per_thread; ++i) {
          std::string job;
          {
            absl::MutexLock lock(&mu);
            job = absl::StrCat("profiled-", job_counter++);
          }
          std::string error;
          const double latency = RunSample(*own_stub, root, job, options, &error);
          absl::MutexLock lock(&mu);
          if (latency < 0) {
            ++failures;
            std::fprintf(stderr, "%s: %s\n", job.c_str(), error.c_str());
          } else {
            latencies.push_back(latency);
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();
    // The ceiling: Create round trips (one fsynced commit each), sequential.
    for (int i = 0; i < 20; ++i) {
      const Clock::time_point start = Clock::now();
      v1::CreateTrainingJobResponse created;
      v1::CreateTrainingJobRequest request =
          Job(absl::StrCat("ceiling-", job_counter++), root / "ceiling", false);
      request.clear_profiler_rule_configurations();
      if (stub->CreateTrainingJob(ContextWithin(absl::Seconds(10)).get(), request, &created).ok()) {
        creates.push_back(MillisSince(start));
      }
    }
    const Percentiles p = Summarize(latencies);
    const Percentiles c = Summarize(creates);
    std::printf(
        "concurrency %2d: detection p50 %7.2f  p90 %7.2f  p99 %7.2f  max %7.2f  (n=%zu)\n"
        "                create round trip (ceiling) p50 %6.2f  p99 %6.2f; p99 / scan interval "
        "(60 s) = %.5f\n",
        level, p.p50, p.p90, p.p99, p.max, p.n, c.p50, c.p99, p.p99 / 60000.0);
  }
  server.Stop(absl::Seconds(15));
  std::error_code ignored;
  fs::remove_all(root, ignored);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace debugplane::bench

int main(int argc, char** argv) { return debugplane::bench::Main(argc, argv); }
