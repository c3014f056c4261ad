// Replicas: durable CreateTrainingJob/s and DescribeTrainingJob/s through
// one and three job managers (each behind its own gRPC server) sharing one
// PostgreSQL database, against one manager on SQLite on the same machine,
// at several numbers of concurrent callers; the cost of read-your-writes
// (Describe with and without the catch-up read of the change feed); and
// what an idle replica costs (CPU per minute, queries per second).
//
//   replicas_bench [--seconds 3] [--callers 1,16,64] [--preload 300]
//                  [--idle-seconds 20] [--database postgresql://...]
//
// Without --database it starts a PostgreSQL of its own (as the tests do,
// tests/persistence/postgres_test_server.h; fsync on). Callers are
// closed-loop threads, spread round-robin over the replicas, each with its
// own channel to its replica.

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/manager/training_job_manager.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "persistence/postgres/postgres_storage.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "service/server.h"
#include "tests/persistence/postgres_test_server.h"

namespace debugplane::bench {
namespace {

namespace fs = std::filesystem;

v1::CreateTrainingJobRequest JobRequest(const std::string& name) {
  v1::CreateTrainingJobRequest r;
  r.set_training_job_name(name);
  r.set_role_arn("arn:aws:iam::111122223333:role/service-role/AmazonSageMaker-ExecutionRole");
  r.mutable_algorithm_specification()->set_training_input_mode("File");
  r.mutable_output_data_config()->set_s3_output_path("s3://bucket/bench/output");
  r.mutable_debug_hook_config()->set_s3_output_path("s3://bucket/bench/debug-output");
  for (const char* rule_name : {"VanishingGradient", "LossNotDecreasing"}) {
    auto* rule = r.add_debug_rule_configurations();
    rule->set_rule_configuration_name(rule_name);
    rule->set_rule_evaluator_image(
        "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = rule_name;
  }
  r.mutable_stopping_condition()->set_max_runtime_in_seconds(86400);
  return r;
}

absl::Duration ProcessCpuTime() {
  rusage usage = {};
  getrusage(RUSAGE_SELF, &usage);
  return absl::DurationFromTimeval(usage.ru_utime) + absl::DurationFromTimeval(usage.ru_stime);
}

// One control plane: its replicas (managers behind gRPC servers).
struct Plane {
  std::string name;
  std::vector<std::unique_ptr<core::TrainingJobManager>> managers;
  std::vector<std::unique_ptr<service::GrpcServer>> servers;
  std::vector<std::string> addresses;

  ~Plane() {
    for (auto& server : servers) server->Shutdown(absl::Seconds(1));
    for (auto& manager : managers) manager->Shutdown();
  }
};

absl::StatusOr<std::unique_ptr<Plane>> StartPlane(const std::string& name,
                                                  const std::string& database, int replicas,
                                                  bool follow, const fs::path& sqlite_dir) {
  auto plane = std::make_unique<Plane>();
  plane->name = name;
  for (int i = 0; i < replicas; ++i) {
    absl::StatusOr<std::unique_ptr<persistence::Storage>> storage =
        database.empty() ? absl::StatusOr<std::unique_ptr<persistence::Storage>>(
                               persistence::SqliteStorage::Open((sqlite_dir / "bench.db").string()))
                         : absl::StatusOr<std::unique_ptr<persistence::Storage>>(
                               persistence::PostgresStorage::Open(database));
    if (!storage.ok()) return storage.status();
    core::TrainingJobManagerOptions options;
    options.follow_changes = follow;
    options.replica_id = absl::StrCat(name, "-", i);
    auto manager = core::TrainingJobManager::Create(*std::move(storage), options);
    if (!manager.ok()) return manager.status();
    service::GrpcServerOptions server_options;
    server_options.listen_address = "127.0.0.1:0";
    auto server = service::GrpcServer::Start(server_options, manager->get());
    if (!server.ok()) return server.status();
    plane->addresses.push_back(absl::StrCat("127.0.0.1:", (*server)->port()));
    plane->managers.push_back(*std::move(manager));
    plane->servers.push_back(*std::move(server));
  }
  return plane;
}

struct Result {
  double ops_per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
  int64_t errors = 0;
};

// `callers` closed-loop threads for `seconds`, caller i on replica i % n.
Result Run(const Plane& plane, const std::string& op, int callers, double seconds, int preload,
           const std::string& tag) {
  std::vector<std::unique_ptr<v1::TrainingJobService::Stub>> stubs;
  for (int i = 0; i < callers; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", i);  // A connection per caller's channel.
    stubs.push_back(v1::TrainingJobService::NewStub(grpc::CreateCustomChannel(
        plane.addresses[i % plane.addresses.size()], grpc::InsecureChannelCredentials(), args)));
  }
  std::vector<std::vector<int64_t>> latencies(callers);
  std::atomic<int64_t> errors = 0;
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c) {
    threads.emplace_back([&, c] {
      for (int n = 0; absl::Now() < end; ++n) {
        grpc::ClientContext context;
        const absl::Time sent = absl::Now();
        grpc::Status status;
        if (op == "create") {
          v1::CreateTrainingJobResponse response;
          status = stubs[c]->CreateTrainingJob(
              &context, JobRequest(absl::StrCat(tag, "-", c, "-", n)), &response);
        } else {
          v1::DescribeTrainingJobRequest request;
          request.set_training_job_name(absl::StrCat("pre-", (c * 7919 + n) % preload));
          v1::DescribeTrainingJobResponse response;
          status = stubs[c]->DescribeTrainingJob(&context, request, &response);
        }
        if (status.ok()) {
          latencies[c].push_back(absl::ToInt64Nanoseconds(absl::Now() - sent));
        } else if (errors++ < 3) {
          std::fprintf(stderr, "%s %s: %s\n", plane.name.c_str(), op.c_str(),
                       status.error_message().c_str());
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const absl::Duration elapsed = absl::Now() - start;
  std::vector<int64_t> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  Result result;
  result.errors = errors.load();
  if (all.empty()) return result;
  result.ops_per_second = all.size() / absl::ToDoubleSeconds(elapsed);
  result.p50_us = all[all.size() / 2] / 1000.0;
  result.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)] / 1000.0;
  return result;
}

bool Preload(const Plane& plane, int preload) {
  auto stub = v1::TrainingJobService::NewStub(
      grpc::CreateChannel(plane.addresses[0], grpc::InsecureChannelCredentials()));
  for (int i = 0; i < preload; ++i) {
    grpc::ClientContext context;
    v1::CreateTrainingJobResponse response;
    grpc::Status status =
        stub->CreateTrainingJob(&context, JobRequest(absl::StrCat("pre-", i)), &response);
    if (!status.ok() && status.error_code() != grpc::StatusCode::ALREADY_EXISTS) {
      std::fprintf(stderr, "preload %s: %s\n", plane.name.c_str(), status.error_message().c_str());
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace debugplane::bench

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  using namespace debugplane;
  using namespace debugplane::bench;
  CLI::App app{"Replicas on one PostgreSQL vs one server on SQLite"};
  double seconds = 3;
  std::vector<int> callers = {1, 16, 64};
  int preload = 300;
  double idle_seconds = 20;
  std::string database;
  app.add_option("--seconds", seconds, "Duration of each measurement")->capture_default_str();
  app.add_option("--callers", callers, "Concurrent callers")->delimiter(',');
  app.add_option("--preload", preload, "Jobs created before Describe")->capture_default_str();
  app.add_option("--idle-seconds", idle_seconds, "How long the idle replicas are measured")
      ->capture_default_str();
  app.add_option("--database", database,
                 "PostgreSQL URI of an empty database (default: start a PostgreSQL here)");
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<testing::PostgresTestServer> postgres;
  std::vector<std::string> databases;  // One per PostgreSQL plane.
  for (int i = 0; i < 3; ++i) {
    if (!database.empty()) {
      databases.push_back(database);
      continue;
    }
    if (postgres == nullptr) {
      auto started = testing::PostgresTestServer::Start();
      if (!started.ok()) {
        std::fprintf(stderr, "%s\n", started.status().ToString().c_str());
        return 1;
      }
      postgres = *std::move(started);
    }
    auto created = postgres->CreateDatabase();
    if (!created.ok()) {
      std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
      return 1;
    }
    databases.push_back(postgres->Uri(*created));
  }
  std::string pattern = (fs::temp_directory_path() / "dpreplicasXXXXXX").string();
  const fs::path sqlite_dir = mkdtemp(pattern.data());

  struct Config {
    std::string name;
    std::string database;
    int replicas;
    bool follow;
  };
  // Creates go to a database of their own per plane; "pg-1 no catch-up"
  // shares pg-1's (Describe only).
  const std::vector<Config> configs = {
      {"sqlite-1", "", 1, false},
      {"pg-1", databases[0], 1, true},
      {"pg-3", databases[1], 3, true},
      {"pg-1-nofeed", databases[2], 1, false},
  };
  std::printf("replicas_bench: %.1f s per cell, %d preloaded jobs, PostgreSQL %s\n", seconds,
              preload, postgres != nullptr ? "started here (fsync on)" : "given");
  std::printf("%-12s %-9s %7s | %10s %8s %8s %6s\n", "plane", "op", "callers", "ops/s", "p50 us",
              "p99 us", "errors");
  std::unique_ptr<Plane> pg3;
  for (const Config& config : configs) {
    fs::create_directories(sqlite_dir / config.name);
    auto plane = StartPlane(config.name, config.database, config.replicas, config.follow,
                            sqlite_dir / config.name);
    if (!plane.ok()) {
      std::fprintf(stderr, "%s: %s\n", config.name.c_str(), plane.status().ToString().c_str());
      return 1;
    }
    if (!Preload(**plane, preload)) return 1;
    for (const std::string op : {"create", "describe"}) {
      if (config.name == "pg-1-nofeed" && op == "create") continue;
      for (int c : callers) {
        const Result r = Run(**plane, op, c, seconds, preload, absl::StrCat(config.name, "-", c));
        std::printf("%-12s %-9s %7d | %10.0f %8.0f %8.0f %6lld\n", config.name.c_str(), op.c_str(),
                    c, r.ops_per_second, r.p50_us, r.p99_us, static_cast<long long>(r.errors));
        std::fflush(stdout);
      }
    }
    if (config.name == "pg-3") pg3 = *std::move(plane);
  }

  // Idle: the three pg-3 replicas, nothing asked of them.
  std::vector<int64_t> reads_before;
  for (auto& manager : pg3->managers) reads_before.push_back(manager->feed_stats().reads);
  absl::SleepFor(absl::Seconds(1));
  const absl::Duration cpu_start = ProcessCpuTime();
  const absl::Time start = absl::Now();
  for (size_t i = 0; i < pg3->managers.size(); ++i) {
    reads_before[i] = pg3->managers[i]->feed_stats().reads;
  }
  absl::SleepFor(absl::Seconds(idle_seconds));
  const double minutes = absl::ToDoubleMinutes(absl::Now() - start);
  const double cpu_ms = absl::ToDoubleMilliseconds(ProcessCpuTime() - cpu_start);
  int64_t reads = 0;
  for (size_t i = 0; i < pg3->managers.size(); ++i) {
    reads += pg3->managers[i]->feed_stats().reads - reads_before[i];
  }
  std::printf(
      "idle: %zu replicas for %.0f s: %.1f ms CPU per replica per minute (whole process / %zu), "
      "%.3f feed queries per second per replica\n",
      pg3->managers.size(), minutes * 60, cpu_ms / minutes / pg3->managers.size(),
      pg3->managers.size(), reads / (minutes * 60) / pg3->managers.size());
  return 0;
}
