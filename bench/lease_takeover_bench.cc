// Takeover time after kill -9: how long a job's evaluation lease stays with
// a dead server replica before another replica holds it.
//
// Runs `--replicas` real debugplane-server processes on one PostgreSQL
// (--database, created empty beforehand), creates one job with a rule (its
// trial not there yet, so the rule stays InProgress), then `--kills` times:
// finds the replica holding the job's lease, kill -9s it, and polls the
// database (every 5 ms) until another replica holds a live lease of the job;
// the killed replica is started again before the next kill.
//
//   createdb -h 127.0.0.1 -p 55432 -U debugplane takeover
//   PGPASSWORD=... build/test/lease_takeover_bench --kills 20 --lease-duration 2 \
//       --database postgresql://debugplane@127.0.0.1:55432/takeover

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/bench_processes.h"
#include "bench/bench_stats.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "persistence/postgres/postgres_lease_table.h"

namespace debugplane::bench {
namespace {

constexpr char kJob[] = "takeover-bench";

// The live lease's owner, "" if none.
std::string LiveOwner(persistence::LeaseTable& table) {
  auto rows = table.List();
  if (!rows.ok()) return "";
  for (const auto& row : *rows) {
    if (row.job_name == kJob && row.live) return row.owner;
  }
  return "";
}

int Run(int argc, char** argv) {
  std::string database;
  int kills = 20;
  int replicas = 3;
  double lease_seconds = 2;
  CLI::App app{"Lease takeover time after kill -9 of the owning replica"};
  app.add_option("--database", database, "postgresql:// URI of an empty database")->required();
  app.add_option("--kills", kills, "Kills measured")->capture_default_str();
  app.add_option("--replicas", replicas, "Server replicas")->capture_default_str();
  app.add_option("--lease-duration", lease_seconds, "Seconds (the server's flag)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("dp-takeover-", getpid());
  std::filesystem::create_directories(dir / "shared");
  const std::string server = NextToSelf("debugplane-server");
  std::map<std::string, std::unique_ptr<ServerChild>> children;
  const auto start = [&](const std::string& id) -> absl::Status {
    std::filesystem::create_directories(dir / id);
    auto child = std::make_unique<ServerChild>();
    absl::Status started = child->Start(
        server,
        {"--data-dir", (dir / id).string(), "--data-root", (dir / "shared").string(), "--database",
         database, "--replica-id", id, "--lease-duration", absl::StrCat(lease_seconds),
         "--lease-safety-margin", absl::StrCat(lease_seconds / 5), "--log-level", "warn"},
        dir / absl::StrCat(id, ".log"), absl::Seconds(30));
    children[id] = std::move(child);
    return started;
  };
  for (int i = 0; i < replicas; ++i) {
    if (absl::Status s = start(absl::StrCat("replica-", i)); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(kJob);
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Bench");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
    request.mutable_debug_hook_config()->set_s3_output_path((dir / "shared" / "trial").string());
    auto* rule = request.add_debug_rule_configurations();
    rule->set_rule_configuration_name("LossNotDecreasing");
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = "LossNotDecreasing";
    auto stub = v1::TrainingJobService::NewStub(grpc::CreateChannel(
        children.begin()->second->address(), grpc::InsecureChannelCredentials()));
    v1::CreateTrainingJobResponse response;
    grpc::Status created =
        stub->CreateTrainingJob(ContextWithin(absl::Seconds(10)).get(), request, &response);
    if (!created.ok()) {
      std::fprintf(stderr, "CreateTrainingJob: %s\n", created.error_message().c_str());
      return 1;
    }
  }
  // Jobs are loaded at a replica's start: the others learn of the job by
  // starting again.
  for (auto& [id, child] : children) {
    if (id == children.begin()->first) continue;
    child->Stop(absl::Seconds(10));
    if (absl::Status s = start(id); !s.ok()) return 1;
  }
  auto table = persistence::PostgresLeaseTable::Open(database);
  if (!table.ok()) {
    std::fprintf(stderr, "%s\n", table.status().ToString().c_str());
    return 1;
  }
  std::vector<double> takeovers_ms;
  for (int k = 0; k < kills; ++k) {
    std::string owner;
    const absl::Time wait_until = absl::Now() + absl::Seconds(60);
    while ((owner = LiveOwner(**table)).empty() && absl::Now() < wait_until) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    if (owner.empty() || children.count(owner) == 0) {
      std::fprintf(stderr, "no replica holds the lease\n");
      return 1;
    }
    // Kill at a random point of the renewal cycle.
    absl::SleepFor(absl::Milliseconds(100 + (k * 137) % 700));
    ServerChild& victim = *children[owner];
    kill(victim.pid(), SIGKILL);
    const absl::Time killed = absl::Now();
    victim.Stop(absl::Seconds(5));  // Reaps it.
    std::string next;
    while (((next = LiveOwner(**table)).empty() || next == owner) &&
           absl::Now() - killed < absl::Seconds(120)) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    const double ms = absl::ToDoubleMilliseconds(absl::Now() - killed);
    takeovers_ms.push_back(ms);
    std::printf("kill %2d: %s -> %s in %.0f ms\n", k + 1, owner.c_str(), next.c_str(), ms);
    std::fflush(stdout);
    if (absl::Status s = start(owner); !s.ok()) return 1;
  }
  const Percentiles p = Summarize(takeovers_ms);
  std::printf(
      "takeover after kill -9: n=%zu p50=%.0f ms p90=%.0f ms p99=%.0f ms max=%.0f ms "
      "(lease %.1f s, %d replicas)\n",
      p.n, p.p50, p.p90, p.p99, p.max, lease_seconds, replicas);
  children.clear();
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace debugplane::bench

int main(int argc, char** argv) { return debugplane::bench::Run(argc, argv); }
