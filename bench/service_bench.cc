// Load generator for TrainingJobService: Create, Describe and List throughput
// and latency at several numbers of concurrent callers, against the real
// server stack (job manager + SQLite with fsync, group commit) and, in the
// same run, against a no-op handler on the same gRPC server stack: the
// ceiling. Prints a table and the real/ceiling ratios.
//
//   service_bench [--seconds 3] [--slices 3] [--callers 1,16,64]
//                 [--ops create,describe,list] [--preload 1000] [--data-dir DIR]
//                 [--database postgresql://...]
//
// Each caller is closed-loop: it sends its next call when the previous one
// returns. Callers share one channel (one HTTP/2 connection), as one client
// process would. Each cell's time is cut into slices that alternate between
// the real server and the no-op one (real, no-op, real, ...), so that load
// from other work on the machine weighs on both alike.
//
// Besides throughput and latency, each cell shows the CPU time the whole
// process (load generator and server) spent per call, which varies much less
// than throughput when other work shares the machine, and for the real
// server's Creates the average commit group (changes per storage write, i.e.
// per fsync) and the average time of one storage write.

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "core/manager/training_job_manager.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "persistence/postgres/postgres_storage.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "service/server.h"

namespace debugplane::bench {
namespace {

namespace fs = std::filesystem;

// The ceiling: answers every call at once with an empty response.
class NoopHandler final : public core::TrainingJobHandler {
 public:
  void CreateTrainingJob(const v1::CreateTrainingJobRequest&, v1::CreateTrainingJobResponse*,
                         core::DoneCallback done) override {
    std::move(done)(absl::OkStatus());
  }
  void DescribeTrainingJob(const v1::DescribeTrainingJobRequest&, v1::DescribeTrainingJobResponse*,
                           core::DoneCallback done) override {
    std::move(done)(absl::OkStatus());
  }
  void ListTrainingJobs(const v1::ListTrainingJobsRequest&, v1::ListTrainingJobsResponse*,
                        core::DoneCallback done) override {
    std::move(done)(absl::OkStatus());
  }
  void UpdateTrainingJob(const v1::UpdateTrainingJobRequest&, v1::UpdateTrainingJobResponse*,
                         core::DoneCallback done) override {
    std::move(done)(absl::OkStatus());
  }
  void StopTrainingJob(const v1::StopTrainingJobRequest&, v1::StopTrainingJobResponse*,
                       core::DoneCallback done) override {
    std::move(done)(absl::OkStatus());
  }
  void DeleteTrainingJob(const v1::DeleteTrainingJobRequest&, v1::DeleteTrainingJobResponse*,
                         core::DoneCallback done) override {
    std::move(done)(absl::OkStatus());
  }
  absl::StatusOr<std::unique_ptr<core::WatchRegistration>> WatchTrainingJob(
      const v1::WatchTrainingJobRequest&, core::JobWatcher*) override {
    return absl::UnimplementedError("no-op");
  }
};

// A realistic job: the Debugger guide's CLI template shape, with two debug
// rules and ProfilerReport.
v1::CreateTrainingJobRequest JobRequest(const std::string& name) {
  v1::CreateTrainingJobRequest r;
  r.set_training_job_name(name);
  r.set_role_arn("arn:aws:iam::111122223333:role/service-role/AmazonSageMaker-ExecutionRole");
  auto* algorithm = r.mutable_algorithm_specification();
  algorithm->set_training_image(
      "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:1.13-gpu-py39");
  algorithm->set_training_input_mode("File");
  (*r.mutable_hyper_parameters())["epochs"] = "10";
  (*r.mutable_hyper_parameters())["sagemaker_program"] = "train.py";
  r.mutable_output_data_config()->set_s3_output_path("s3://bucket/bench/output");
  auto* hook = r.mutable_debug_hook_config();
  hook->set_s3_output_path("s3://bucket/bench/debug-output");
  auto* collection = hook->add_collection_configurations();
  collection->set_collection_name("gradients");
  (*collection->mutable_collection_parameters())["save_interval"] = "10";
  for (const char* rule_name : {"VanishingGradient", "LossNotDecreasing"}) {
    auto* rule = r.add_debug_rule_configurations();
    rule->set_rule_configuration_name(rule_name);
    rule->set_rule_evaluator_image(
        "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = rule_name;
  }
  auto* profiler_rule = r.add_profiler_rule_configurations();
  profiler_rule->set_rule_configuration_name("ProfilerReport");
  profiler_rule->set_rule_evaluator_image(
      "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest");
  (*profiler_rule->mutable_rule_parameters())["rule_to_invoke"] = "ProfilerReport";
  r.mutable_profiler_config()->set_profiling_interval_in_milliseconds(500);
  r.mutable_resource_config()->set_instance_type("ml.p3.2xlarge");
  r.mutable_resource_config()->set_instance_count(1);
  r.mutable_stopping_condition()->set_max_runtime_in_seconds(86400);
  return r;
}

// What one slice of a cell measured.
struct Sample {
  std::vector<int64_t> latencies_ns;  // One per successful call.
  absl::Duration elapsed;
  absl::Duration cpu;  // Process CPU time (all threads).
  int64_t errors = 0;
};

struct Result {
  double ops_per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
  double cpu_us_per_op = 0;  // Process CPU time (all threads) per call.
  int64_t errors = 0;
};

// CPU time of the whole process so far.
absl::Duration ProcessCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

// The figures of a cell from its slices.
Result Summarize(const std::vector<Sample>& samples) {
  std::vector<int64_t> all;
  absl::Duration elapsed, cpu;
  Result result;
  for (const Sample& sample : samples) {
    all.insert(all.end(), sample.latencies_ns.begin(), sample.latencies_ns.end());
    elapsed += sample.elapsed;
    cpu += sample.cpu;
    result.errors += sample.errors;
  }
  if (all.empty()) return result;
  std::sort(all.begin(), all.end());
  result.ops_per_second = all.size() / absl::ToDoubleSeconds(elapsed);
  result.cpu_us_per_op = absl::ToDoubleMicroseconds(cpu) / all.size();
  result.p50_us = all[all.size() / 2] / 1000.0;
  result.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)] / 1000.0;
  return result;
}

// Runs `callers` closed-loop callers of one operation for `duration`.
// Created jobs are named `<target>-<callers>-<slice>-<n>`.
class LoadRun {
 public:
  LoadRun(v1::TrainingJobService::Stub* stub, std::string op, std::string target, int callers,
          int slice, int preloaded)
      : stub_(stub),
        op_(std::move(op)),
        target_(std::move(target)),
        callers_(callers),
        slice_(slice),
        preloaded_(preloaded) {}

  Sample Run(absl::Duration duration) {
    deadline_ = absl::Now() + duration;
    start_ = absl::Now();
    const absl::Duration cpu_start = ProcessCpuTime();
    active_ = callers_;
    latencies_.resize(callers_);
    for (int i = 0; i < callers_; ++i) Issue(i);
    finished_.WaitForNotification();
    Sample sample;
    sample.cpu = ProcessCpuTime() - cpu_start;
    sample.elapsed = end_ - start_;
    for (auto& l : latencies_) {
      sample.latencies_ns.insert(sample.latencies_ns.end(), l.begin(), l.end());
    }
    sample.errors = errors_.load();
    return sample;
  }

 private:
  struct Call {
    grpc::ClientContext context;
    v1::CreateTrainingJobRequest create;
    v1::CreateTrainingJobResponse create_response;
    v1::DescribeTrainingJobRequest describe;
    v1::DescribeTrainingJobResponse describe_response;
    v1::ListTrainingJobsRequest list;
    v1::ListTrainingJobsResponse list_response;
    absl::Time sent;
  };

  void Issue(int caller) {
    if (absl::Now() >= deadline_) {
      if (--active_ == 0) {
        end_ = absl::Now();
        finished_.Notify();
      }
      return;
    }
    auto call = std::make_shared<Call>();
    const int64_t n = sequence_++;
    auto on_done = [this, caller, call](grpc::Status status) {
      const absl::Time now = absl::Now();
      if (status.ok()) {
        latencies_[caller].push_back(absl::ToInt64Nanoseconds(now - call->sent));
      } else if (errors_++ < 3) {
        std::fprintf(stderr, "%s %s: %s\n", target_.c_str(), op_.c_str(),
                     status.error_message().c_str());
      }
      Issue(caller);
    };
    call->sent = absl::Now();
    if (op_ == "create") {
      call->create = JobRequest(absl::StrCat("run-", target_, "-", callers_, "-", slice_, "-", n));
      stub_->async()->CreateTrainingJob(&call->context, &call->create, &call->create_response,
                                        std::move(on_done));
    } else if (op_ == "describe") {
      call->describe.set_training_job_name(absl::StrCat("pre-", n % preloaded_));
      stub_->async()->DescribeTrainingJob(&call->context, &call->describe, &call->describe_response,
                                          std::move(on_done));
    } else {
      call->list.set_max_results(20);
      stub_->async()->ListTrainingJobs(&call->context, &call->list, &call->list_response,
                                       std::move(on_done));
    }
  }

  v1::TrainingJobService::Stub* stub_;
  const std::string op_;
  const std::string target_;
  const int callers_;
  const int slice_;
  const int preloaded_;
  absl::Time start_, end_, deadline_;
  std::atomic<int> active_{0};
  std::atomic<int64_t> sequence_{0};
  std::atomic<int64_t> errors_{0};
  std::vector<std::vector<int64_t>> latencies_;
  absl::Notification finished_;
};

struct Target {
  std::string name;
  std::unique_ptr<core::TrainingJobHandler> handler;
  std::unique_ptr<service::GrpcServer> server;
  std::unique_ptr<v1::TrainingJobService::Stub> stub;
};

}  // namespace
}  // namespace debugplane::bench

int main(int argc, char** argv) {
  // As in debugplane-server: no absl::Mutex deadlock detection in production.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  using namespace debugplane;
  using namespace debugplane::bench;
  CLI::App app{"TrainingJobService load generator: real server vs no-op ceiling"};
  double seconds = 3;
  int slices = 3;
  std::vector<int> callers = {1, 16, 64};
  std::vector<std::string> ops = {"create", "describe", "list"};
  int preload = 1000;
  std::string data_dir;
  core::TrainingJobManagerOptions manager_options;
  int64_t group_wait_us = absl::ToInt64Microseconds(manager_options.max_group_wait);
  app.add_option("--seconds", seconds, "Duration of each measurement")->capture_default_str();
  app.add_option("--slices", slices,
                 "Slices per measurement, alternating between the real and the no-op server")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--callers", callers, "Concurrent callers")->delimiter(',');
  app.add_option("--ops", ops, "Operations: create, describe, list")->delimiter(',');
  app.add_option("--preload", preload, "Jobs created before Describe/List")->capture_default_str();
  app.add_option("--data-dir", data_dir, "Database directory (default: a fresh temp dir)");
  std::string database;
  app.add_option("--database", database,
                 "PostgreSQL URI (postgresql://...) of an empty database to use instead of "
                 "SQLite in --data-dir");
  app.add_option("--group-wait-us", group_wait_us,
                 "The real server's max_group_wait in microseconds (0: off)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (data_dir.empty()) {
    std::string pattern = (fs::temp_directory_path() / "dpbenchXXXXXX").string();
    data_dir = mkdtemp(pattern.data());
  }
  fs::create_directories(data_dir);

  absl::StatusOr<std::unique_ptr<persistence::Storage>> storage =
      database.empty()
          ? absl::StatusOr<std::unique_ptr<persistence::Storage>>(
                persistence::SqliteStorage::Open((fs::path(data_dir) / "bench.db").string()))
          : absl::StatusOr<std::unique_ptr<persistence::Storage>>(
                persistence::PostgresStorage::Open(database));
  if (!storage.ok()) {
    std::fprintf(stderr, "%s\n", storage.status().ToString().c_str());
    return 1;
  }
  manager_options.max_group_wait = absl::Microseconds(group_wait_us);
  auto manager = core::TrainingJobManager::Create(*std::move(storage), manager_options);
  if (!manager.ok()) {
    std::fprintf(stderr, "%s\n", manager.status().ToString().c_str());
    return 1;
  }

  std::vector<Target> targets;
  targets.push_back({"real", *std::move(manager), nullptr, nullptr});
  targets.push_back({"noop", std::make_unique<NoopHandler>(), nullptr, nullptr});
  for (Target& target : targets) {
    service::GrpcServerOptions options;
    options.listen_address = "127.0.0.1:0";
    auto server = service::GrpcServer::Start(options, target.handler.get());
    if (!server.ok()) {
      std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
      return 1;
    }
    target.server = *std::move(server);
    grpc::ChannelArguments args;
    // A channel per target, never shared with another target.
    args.SetInt("grpc.channel_id", static_cast<int>(&target - targets.data()));
    target.stub = v1::TrainingJobService::NewStub(
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", target.server->port()),
                                  grpc::InsecureChannelCredentials(), args));
  }

  // Preload the real server for Describe and List.
  {
    for (int i = 0; i < preload; ++i) {
      grpc::ClientContext context;
      v1::CreateTrainingJobResponse response;
      grpc::Status status = targets[0].stub->CreateTrainingJob(
          &context, JobRequest(absl::StrCat("pre-", i)), &response);
      if (!status.ok()) {
        std::fprintf(stderr, "preload: %s\n", status.error_message().c_str());
        return 1;
      }
    }
  }

  std::printf(
      "service_bench: %.1f s per cell in %d alternating slices, %d preloaded jobs, group wait "
      "%lld us, data dir %s\n",
      seconds, slices, preload, static_cast<long long>(group_wait_us), data_dir.c_str());
  std::printf("%-9s %7s | %10s %7s %7s %6s %5s %6s | %10s %7s %7s %6s | %6s\n", "op", "callers",
              "real ops/s", "p50 us", "p99 us", "cpu us", "group", "wr ms", "noop ops/s", "p50 us",
              "p99 us", "cpu us", "ratio");
  auto* real_manager = static_cast<core::TrainingJobManager*>(targets[0].handler.get());
  for (const std::string& op : ops) {
    for (int c : callers) {
      std::vector<Sample> samples[2];
      core::TrainingJobManager::CommitStats before, after;
      int64_t writes = 0, changes = 0;
      absl::Duration writing;
      for (int slice = 0; slice < slices; ++slice) {
        for (int t = 0; t < 2; ++t) {
          if (t == 0) before = real_manager->commit_stats();
          LoadRun run(targets[t].stub.get(), op, targets[t].name, c, slice, preload);
          samples[t].push_back(run.Run(absl::Seconds(seconds / slices)));
          if (t == 0) {
            after = real_manager->commit_stats();
            writes += after.writes - before.writes;
            changes += after.changes - before.changes;
            writing += after.writing - before.writing;
          }
        }
      }
      const Result results[2] = {Summarize(samples[0]), Summarize(samples[1])};
      const double group = writes > 0 ? static_cast<double>(changes) / writes : 0;
      const double write_ms = writes > 0 ? absl::ToDoubleMilliseconds(writing) / writes : 0;
      const double ratio =
          results[1].ops_per_second > 0 ? results[0].ops_per_second / results[1].ops_per_second : 0;
      std::printf(
          "%-9s %7d | %10.0f %7.0f %7.0f %6.1f %5.1f %6.2f | %10.0f %7.0f %7.0f %6.1f | "
          "%5.0f%%%s\n",
          op.c_str(), c, results[0].ops_per_second, results[0].p50_us, results[0].p99_us,
          results[0].cpu_us_per_op, group, write_ms, results[1].ops_per_second, results[1].p50_us,
          results[1].p99_us, results[1].cpu_us_per_op, ratio * 100,
          results[0].errors + results[1].errors > 0 ? "  (errors!)" : "");
      std::fflush(stdout);
    }
  }
  for (Target& target : targets) target.server->Shutdown(absl::Seconds(1));
  static_cast<core::TrainingJobManager*>(targets[0].handler.get())->Shutdown();
  return 0;
}
