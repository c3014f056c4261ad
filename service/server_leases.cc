#include "service/server_leases.h"

#include <unistd.h>

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/jobs/rule_actions.h"
#include "base/steady_clock.h"
#include "persistence/postgres/postgres_lease_table.h"
#include "persistence/sqlite/sqlite_lease_table.h"
#include "spdlog/spdlog.h"

namespace debugplane::service {
bool JobNeedsLease(const core::JobRecord& job) {
  for (const auto& rule : job.debug_rule_evaluation_statuses()) {
    if (rule.rule_evaluation_status() == v1::RuleEvaluationStatus::InProgress) return true;
  }
  for (const auto& rule : job.profiler_rule_evaluation_statuses()) {
    if (rule.rule_evaluation_status() == v1::RuleEvaluationStatus::InProgress) return true;
  }
  return core::HasPendingActions(job);
}

ActiveJobIndex::ActiveJobIndex(core::TrainingJobManager* manager, std::function<void()> on_new_job)
    : manager_(manager), on_new_job_(std::move(on_new_job)) {
  core::TrainingJobManager::Observation observation = manager_->AddCommitObserver(
      [this](const std::string& name, std::shared_ptr<const core::JobRecord> job) {
        Follow(name, job.get());
      });
  observer_id_ = observation.id;
  for (const auto& job : observation.jobs) Follow(job->training_job_name(), job.get());
}

ActiveJobIndex::~ActiveJobIndex() { manager_->RemoveCommitObserver(observer_id_); }

void ActiveJobIndex::Follow(const std::string& job_name, const core::JobRecord* job) {
  bool added = false;
  {
    absl::MutexLock lock(&mu_);
    if (job != nullptr && JobNeedsLease(*job)) {
      added = jobs_.insert(job_name).second;
    } else {
      jobs_.erase(job_name);
    }
  }
  if (added && on_new_job_) on_new_job_();
}

std::vector<std::string> ActiveJobIndex::Jobs() const {
  absl::MutexLock lock(&mu_);
  return {jobs_.begin(), jobs_.end()};
}

absl::StatusOr<ServerLeases> OpenServerLeases(const ServerConfig& config,
                                              const std::string& sqlite_path,
                                              core::TrainingJobManager* manager,
                                              metrics::LeaseMetrics* lease_metrics) {
  core::LeaseKeeperOptions options{.replica_id = config.manager.replica_id.empty()
                                                     ? DefaultReplicaId()
                                                     : config.manager.replica_id,
                                   .lease_duration = config.lease_duration,
                                   .safety_margin = config.lease_safety_margin,
                                   .clock = base::SteadyClock(),
                                   .metrics = lease_metrics};
  if (absl::Status valid = core::ValidateLeaseKeeperOptions(options); !valid.ok()) return valid;

  std::shared_ptr<persistence::LeaseTable> table;
  std::shared_ptr<persistence::ActionOutbox> outbox;
  if (config.database_url.empty()) {
    auto sqlite = persistence::SqliteLeaseTable::Open(sqlite_path);
    if (!sqlite.ok()) return sqlite.status();
    std::shared_ptr<persistence::SqliteLeaseTable> shared = *std::move(sqlite);
    // This server holds the data directory's lock: what a killed
    // predecessor held is free now.
    if (absl::Status ended = shared->ExpireAll(); !ended.ok()) return ended;
    table = shared;
    outbox = shared;
  } else {
    // A database that stops answering must show within a pass, well before
    // the leases' local end.
    auto postgres =
        persistence::PostgresLeaseTable::Open(config.database_url, config.lease_duration / 3);
    if (!postgres.ok()) {
      return absl::Status(postgres.status().code(),
                          absl::StrCat("--database (leases): ", postgres.status().message()));
    }
    std::shared_ptr<persistence::PostgresLeaseTable> shared = *std::move(postgres);
    table = shared;
    outbox = shared;
  }
  spdlog::info("leases: replica '{}', lease {} (local end {} earlier), action claims {}",
               options.replica_id, absl::FormatDuration(options.lease_duration),
               absl::FormatDuration(options.safety_margin),
               absl::FormatDuration(config.action_claim_duration));
  ServerLeases leases;
  leases.outbox = std::move(outbox);
  // The keeper is made first (the index pokes it), the index reads for it.
  auto active = std::make_shared<ActiveJobIndex*>(nullptr);
  leases.keeper = std::make_unique<core::LeaseKeeper>(
      std::move(table),
      [active] { return *active == nullptr ? std::vector<std::string>() : (*active)->Jobs(); },
      std::move(options));
  core::LeaseKeeper* keeper = leases.keeper.get();
  leases.active = std::make_unique<ActiveJobIndex>(manager, [keeper] { keeper->Poke(); });
  *active = leases.active.get();
  return leases;
}

}  // namespace debugplane::service
