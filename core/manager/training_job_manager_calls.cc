// TrainingJobManager's API calls: each validates its request, then reads the
// committed state or queues a change computed by a job mutation
// (core/jobs/job_mutations.h) for the group committer. Also the observers
// and the snapshots of the committed state.

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/page_token.h"
#include "core/manager/training_job_manager.h"

namespace debugplane::core {
namespace {

constexpr int kDefaultMaxResults = 10;

// Answers `done` with `status` unless it is OK; whether it did.
bool Refused(absl::Status status, DoneCallback& done) {
  if (status.ok()) return false;
  std::move(done)(std::move(status));
  return true;
}

v1::TrainingJobSummary ToSummary(const JobRecord& job) {
  v1::TrainingJobSummary summary;
  summary.set_training_job_name(job.training_job_name());
  summary.set_training_job_arn(job.training_job_arn());
  *summary.mutable_creation_time() = job.creation_time();
  if (job.has_training_end_time()) *summary.mutable_training_end_time() = job.training_end_time();
  *summary.mutable_last_modified_time() = job.last_modified_time();
  summary.set_training_job_status(job.training_job_status());
  summary.set_secondary_status(job.secondary_status());
  return summary;
}

// The filters of a ListTrainingJobs request, resolved once.
struct ListFilter {
  explicit ListFilter(const v1::ListTrainingJobsRequest& request)
      : name_contains(absl::AsciiStrToLower(request.name_contains())),
        status(request.status_equals()),
        created_after(request.has_creation_time_after()
                          ? ToUnixMicros(request.creation_time_after())
                          : INT64_MIN),
        created_before(request.has_creation_time_before()
                           ? ToUnixMicros(request.creation_time_before())
                           : INT64_MAX),
        modified_after(request.has_last_modified_time_after()
                           ? ToUnixMicros(request.last_modified_time_after())
                           : INT64_MIN),
        modified_before(request.has_last_modified_time_before()
                            ? ToUnixMicros(request.last_modified_time_before())
                            : INT64_MAX) {}

  bool Matches(const JobRecord& job) const {
    if (status != v1::TrainingJobStatus::TRAINING_JOB_STATUS_UNSPECIFIED &&
        job.training_job_status() != status) {
      return false;
    }
    const int64_t created = ToUnixMicros(job.creation_time());
    if (created <= created_after || created >= created_before) return false;
    const int64_t modified = ToUnixMicros(job.last_modified_time());
    if (modified <= modified_after || modified >= modified_before) return false;
    // SageMaker's NameContains is case-insensitive.
    return name_contains.empty() ||
           absl::StrContains(absl::AsciiStrToLower(job.training_job_name()), name_contains);
  }

  std::string name_contains;
  JobStatus status;
  int64_t created_after, created_before, modified_after, modified_before;
};

// The page token of a request, if it has one that belongs to its query.
absl::StatusOr<std::optional<PageToken>> PageAfter(const v1::ListTrainingJobsRequest& request,
                                                   uint32_t fingerprint) {
  if (request.next_token().empty()) return std::nullopt;
  absl::StatusOr<PageToken> token = DecodePageToken(request.next_token());
  if (!token.ok()) return token.status();
  if (token->query_fingerprint != fingerprint) {
    return InvalidField("NextToken",
                        "this NextToken belongs to a query with other filters or sort order; "
                        "repeat the original query's parameters with it");
  }
  return std::optional<PageToken>(*std::move(token));
}

// Key of the by-status order: (status name, job name).
std::pair<std::string, std::string> StatusKey(const JobRecord& job) {
  return std::make_pair(std::string(JobStatusName(job.training_job_status())),
                        job.training_job_name());
}

}  // namespace

// A ListTrainingJobs request, resolved.
struct TrainingJobManager::ListQuery {
  uint32_t fingerprint = 0;
  std::optional<PageToken> after;
  std::string sort_by;
  bool descending = true;
  size_t limit = kDefaultMaxResults;
  std::optional<ListFilter> filter;

  // Adds `job` to `page` if it matches; whether the page is full (one more
  // than the limit).
  bool Take(const std::shared_ptr<const JobRecord>& job,
            std::vector<std::shared_ptr<const JobRecord>>& page) const {
    if (job != nullptr && filter->Matches(*job)) page.push_back(job);
    return page.size() > limit;
  }
};

template <typename Request, typename Response>
void TrainingJobManager::OnValidationPool(
    void (TrainingJobManager::*validated)(const Request&, Response*, DoneCallback),
    const Request& request, Response* response, DoneCallback done) {
  auto call = std::make_shared<DoneCallback>(std::move(done));
  if (validation_pool_->Schedule([this, validated, &request, response, call] {
        (this->*validated)(request, response, std::move(*call));
      })) {
    return;
  }
  std::move (*call)(absl::UnavailableError("the server is shutting down; retry on another server"));
}

void TrainingJobManager::AfterCaughtUp(absl::AnyInvocable<void(DoneCallback) &&> read,
                                       DoneCallback done) {
  if (!following_) {
    std::move(read)(std::move(done));
    return;
  }
  // Read-your-writes: answered once the other servers' changes are in.
  AwaitCaughtUp([read = std::move(read), done = std::move(done)](absl::Status caught_up) mutable {
    if (!caught_up.ok()) {
      std::move(done)(std::move(caught_up));
      return;
    }
    std::move(read)(std::move(done));
  });
}

// --- TrainingJobHandler ----------------------------------------------------------

void TrainingJobManager::CreateTrainingJob(const v1::CreateTrainingJobRequest& request,
                                           v1::CreateTrainingJobResponse* response,
                                           DoneCallback done) {
  // Output paths are checked against the file system: not on this thread.
  OnValidationPool(&TrainingJobManager::CreateValidated, request, response, std::move(done));
}

void TrainingJobManager::UpdateTrainingJob(const v1::UpdateTrainingJobRequest& request,
                                           v1::UpdateTrainingJobResponse* response,
                                           DoneCallback done) {
  // ProfilerConfig.S3OutputPath is checked against the file system: not on
  // this thread.
  OnValidationPool(&TrainingJobManager::UpdateValidated, request, response, std::move(done));
}

void TrainingJobManager::CreateValidated(const v1::CreateTrainingJobRequest& request,
                                         v1::CreateTrainingJobResponse* response,
                                         DoneCallback done) {
  if (Refused(ValidateCreateTrainingJobRequest(request, options_.validation), done)) return;
  auto record = std::make_shared<const JobRecord>(NewJobRecord(request, options_.arn_scope, Now()));
  // Encoded here, in parallel with other calls, rather than on the committer.
  auto encoded = std::make_shared<const std::string>(record->SerializeAsString());
  std::vector<std::string> warnings = CreateTrainingJobWarnings(request, options_.validation);
  Mutate(
      request.training_job_name(),
      [record, encoded](const JobRecord* latest) { return CreateJob(latest, record, encoded); },
      [record, warnings = std::move(warnings), response,
       done = std::move(done)](const absl::Status& status) mutable {
        if (status.ok()) {
          response->set_training_job_arn(record->training_job_arn());
          for (std::string& warning : warnings) response->add_warnings(std::move(warning));
        }
        std::move(done)(status);
      });
}

void TrainingJobManager::DescribeTrainingJob(const v1::DescribeTrainingJobRequest& request,
                                             v1::DescribeTrainingJobResponse* response,
                                             DoneCallback done) {
  if (Refused(ValidateTrainingJobName(request.training_job_name()), done)) return;
  AfterCaughtUp(
      [this, &request, response](DoneCallback read_done) {
        DescribeCommitted(request, response, std::move(read_done));
      },
      std::move(done));
}

void TrainingJobManager::DescribeCommitted(const v1::DescribeTrainingJobRequest& request,
                                           v1::DescribeTrainingJobResponse* response,
                                           DoneCallback done) {
  std::shared_ptr<const JobRecord> job = GetJob(request.training_job_name());
  if (job == nullptr) {
    std::move(done)(JobNotFoundError(request.training_job_name()));
    return;
  }
  *response = *job;
  std::move(done)(absl::OkStatus());
}

absl::StatusOr<std::shared_ptr<const std::string>> TrainingJobManager::DescribeTrainingJobEncoded(
    const v1::DescribeTrainingJobRequest& request) {
  if (absl::Status valid = ValidateTrainingJobName(request.training_job_name()); !valid.ok()) {
    return valid;
  }
  absl::ReaderMutexLock lock(&mu_);
  auto it = jobs_.find(request.training_job_name());
  if (it == jobs_.end() || it->second.committed_encoded == nullptr) {
    return JobNotFoundError(request.training_job_name());
  }
  return it->second.committed_encoded;
}

void TrainingJobManager::ListTrainingJobs(const v1::ListTrainingJobsRequest& request,
                                          v1::ListTrainingJobsResponse* response,
                                          DoneCallback done) {
  if (Refused(ValidateListTrainingJobsRequest(request), done)) return;
  AfterCaughtUp(
      [this, &request, response](DoneCallback read_done) {
        ListCommitted(request, response, std::move(read_done));
      },
      std::move(done));
}

void TrainingJobManager::ListCommitted(const v1::ListTrainingJobsRequest& request,
                                       v1::ListTrainingJobsResponse* response, DoneCallback done) {
  ListQuery query;
  query.fingerprint = QueryFingerprint(request);
  absl::StatusOr<std::optional<PageToken>> after = PageAfter(request, query.fingerprint);
  if (Refused(after.status(), done)) return;
  query.after = *std::move(after);
  // Validation allows only these values; empty means the default.
  query.sort_by = request.sort_by().empty() ? "CreationTime" : request.sort_by();
  query.descending = request.sort_order() != "Ascending";
  query.limit = request.has_max_results() ? request.max_results() : kDefaultMaxResults;
  query.filter.emplace(request);

  std::vector<std::shared_ptr<const JobRecord>> page = CollectPage(query);
  const bool more = page.size() > query.limit;
  if (more) page.resize(query.limit);
  for (const auto& job : page) *response->add_training_job_summaries() = ToSummary(*job);
  if (more && !page.empty()) {
    const JobRecord& last = *page.back();
    response->set_next_token(
        EncodePageToken({.query_fingerprint = query.fingerprint,
                         .last_creation_time_us = ToUnixMicros(last.creation_time()),
                         .last_status = std::string(JobStatusName(last.training_job_status())),
                         .last_name = last.training_job_name()}));
  }
  std::move(done)(absl::OkStatus());
}

std::vector<std::shared_ptr<const JobRecord>> TrainingJobManager::CollectPage(
    const ListQuery& query) const {
  std::vector<std::shared_ptr<const JobRecord>> page;
  absl::ReaderMutexLock lock(&mu_);
  if (query.sort_by == "Name") {
    CollectByNameLocked(query, page);
  } else if (query.sort_by == "CreationTime") {
    CollectByCreationLocked(query, page);
  } else {
    CollectByStatusLocked(query, page);
  }
  return page;
}

void TrainingJobManager::CollectByNameLocked(
    const ListQuery& query, std::vector<std::shared_ptr<const JobRecord>>& page) const {
  mu_.AssertReaderHeld();
  const std::optional<PageToken>& after = query.after;
  if (query.descending) {
    auto it = after ? jobs_.lower_bound(after->last_name) : jobs_.end();
    while (it != jobs_.begin()) {
      --it;
      if (query.Take(it->second.committed, page)) return;
    }
    return;
  }
  for (auto it = after ? jobs_.upper_bound(after->last_name) : jobs_.begin(); it != jobs_.end();
       ++it) {
    if (query.Take(it->second.committed, page)) return;
  }
}

void TrainingJobManager::CollectByCreationLocked(
    const ListQuery& query, std::vector<std::shared_ptr<const JobRecord>>& page) const {
  mu_.AssertReaderHeld();
  const std::optional<PageToken>& after = query.after;
  const std::pair<int64_t, std::string> key =
      after ? std::make_pair(after->last_creation_time_us, after->last_name)
            : std::make_pair(int64_t{0}, std::string());
  if (query.descending) {
    auto it = after ? by_creation_.lower_bound(key) : by_creation_.end();
    while (it != by_creation_.begin()) {
      --it;
      if (query.Take(jobs_.at(it->second).committed, page)) return;
    }
    return;
  }
  for (auto it = after ? by_creation_.upper_bound(key) : by_creation_.begin();
       it != by_creation_.end(); ++it) {
    if (query.Take(jobs_.at(it->second).committed, page)) return;
  }
}

void TrainingJobManager::CollectByStatusLocked(
    const ListQuery& query, std::vector<std::shared_ptr<const JobRecord>>& page) const {
  mu_.AssertReaderHeld();
  // By status (then name): rare enough to sort the matches per call.
  std::vector<std::shared_ptr<const JobRecord>> all;
  for (const auto& [name, entry] : jobs_) {
    if (entry.committed != nullptr && query.filter->Matches(*entry.committed)) {
      all.push_back(entry.committed);
    }
  }
  const bool descending = query.descending;
  std::sort(all.begin(), all.end(), [descending](const auto& a, const auto& b) {
    return descending ? StatusKey(*b) < StatusKey(*a) : StatusKey(*a) < StatusKey(*b);
  });
  const std::optional<PageToken>& after = query.after;
  const auto after_key = after ? std::make_pair(after->last_status, after->last_name)
                               : std::make_pair(std::string(), std::string());
  for (const auto& job : all) {
    if (after) {
      const auto key = StatusKey(*job);
      if (descending ? !(key < after_key) : !(after_key < key)) continue;
    }
    page.push_back(job);
    if (page.size() > query.limit) return;
  }
}

void TrainingJobManager::UpdateValidated(const v1::UpdateTrainingJobRequest& request,
                                         v1::UpdateTrainingJobResponse* response,
                                         DoneCallback done) {
  if (Refused(ValidateUpdateTrainingJobRequest(request, options_.validation), done)) return;
  if (!request.has_profiler_config() && request.profiler_rule_configurations().empty()) {
    std::move(done)(
        InvalidField("ProfilerConfig",
                     "nothing to update: give ProfilerConfig, ProfilerRuleConfigurations "
                     "or both"));
    return;
  }
  auto update = std::make_shared<const v1::UpdateTrainingJobRequest>(request);
  // Filled by the mutation (it needs the job's current profiler config),
  // read by the callback once the change is committed.
  auto warnings = std::make_shared<std::vector<std::string>>();
  Mutate(
      request.training_job_name(),
      [this, update, warnings](const JobRecord* latest) {
        return UpdateJob(latest, *update, options_.arn_scope, Now(), *warnings);
      },
      [this, update, warnings, response,
       done = std::move(done)](const absl::Status& status) mutable {
        if (status.ok()) {
          response->set_training_job_arn(
              TrainingJobArn(options_.arn_scope, update->training_job_name()));
          for (const std::string& warning : *warnings) response->add_warnings(warning);
        }
        std::move(done)(status);
      });
}

void TrainingJobManager::StopTrainingJob(const v1::StopTrainingJobRequest& request,
                                         v1::StopTrainingJobResponse* response, DoneCallback done) {
  if (Refused(ValidateTrainingJobName(request.training_job_name()), done)) return;
  StopTrainingJobWithReason(request.training_job_name(), /*reason=*/"", std::move(done));
}

void TrainingJobManager::DeleteTrainingJob(const v1::DeleteTrainingJobRequest& request,
                                           v1::DeleteTrainingJobResponse* response,
                                           DoneCallback done) {
  if (Refused(ValidateTrainingJobName(request.training_job_name()), done)) return;
  const std::string& name = request.training_job_name();
  Mutate(
      name, [name](const JobRecord* latest) { return DeleteJob(latest, name); }, std::move(done));
}

absl::StatusOr<std::unique_ptr<WatchRegistration>> TrainingJobManager::WatchTrainingJob(
    const v1::WatchTrainingJobRequest& request, JobWatcher* watcher) {
  return RegisterWatch(request.training_job_name(), watcher, /*agent=*/std::nullopt);
}

absl::StatusOr<std::unique_ptr<WatchRegistration>> TrainingJobManager::WatchAsAgent(
    const std::string& job_name, HostAgent agent, JobWatcher* watcher) {
  agent.replica = options_.replica_id;
  return RegisterWatch(job_name, watcher, agent);
}

// --- The rules engine's and the agents' calls ---------------------------------------

void TrainingJobManager::SetRuleEvaluationStatus(const std::string& job_name,
                                                 const std::string& rule_name, RuleStatus status,
                                                 std::string details, DoneCallback done,
                                                 std::optional<persistence::CheckLease> fence) {
  Mutate(
      job_name,
      [this, job_name, rule_name, status, details = std::move(details)](const JobRecord* latest) {
        return SetRuleEvaluation(latest, job_name, rule_name, status, details, Now());
      },
      std::move(done), std::move(fence));
}

void TrainingJobManager::RecordRuleProgress(const std::string& job_name,
                                            std::vector<RuleProgress> progress, DoneCallback done,
                                            std::optional<persistence::CheckLease> fence) {
  Mutate(
      job_name,
      [job_name, progress = std::move(progress)](const JobRecord* latest) {
        return RecordProgress(latest, job_name, progress);
      },
      std::move(done), std::move(fence));
}

void TrainingJobManager::SetRuleActionStatus(const std::string& job_name,
                                             const std::string& action_id,
                                             v1::RuleActionStatus::Value status,
                                             std::string details, int attempts, DoneCallback done,
                                             std::optional<persistence::CheckLease> fence) {
  Mutate(
      job_name,
      [this, job_name, action_id, status, attempts,
       details = std::move(details)](const JobRecord* latest) {
        return SetActionStatus(latest, job_name, action_id, status, details, attempts, Now());
      },
      std::move(done), std::move(fence));
}

void TrainingJobManager::StopTrainingJobWithReason(const std::string& job_name, std::string reason,
                                                   DoneCallback done,
                                                   std::optional<persistence::CheckLease> fence) {
  Mutate(
      job_name,
      [this, job_name, reason = std::move(reason)](const JobRecord* latest) {
        return StopJob(latest, job_name, Now(), reason);
      },
      std::move(done), std::move(fence));
}

void TrainingJobManager::ReportTrainingStatus(const v1::ReportTrainingStatusRequest& request,
                                              v1::ReportTrainingStatusResponse* response,
                                              DoneCallback done) {
  if (Refused(ValidateTrainingJobName(request.training_job_name()), done)) return;
  if (Refused(ValidateTrainingReport(request), done)) return;
  auto status = std::make_shared<v1::TrainingJobStatus::Value>();
  Mutate(
      request.training_job_name(),
      [this, report = BoundTrainingReport(request), status](const JobRecord* latest) {
        return ApplyTrainingReport(latest, report, Now(), *status);
      },
      [response, status, done = std::move(done)](const absl::Status& result) mutable {
        if (result.ok()) response->set_training_job_status(*status);
        std::move(done)(result);
      });
}

// --- Observers and snapshots ------------------------------------------------------

TrainingJobManager::Observation TrainingJobManager::AddCommitObserver(CommitObserver observer) {
  Observation observation;
  // Register first, then take the snapshot (the two locks never nest, so an
  // observer may call the manager while holding its own lock): a commit
  // whose notification comes after the registration reaches the observer,
  // and one whose notification came before it was published before it, so
  // it is in the snapshot.
  {
    absl::MutexLock lock(&observers_mu_);
    observation.id = next_observer_id_++;
    observers_.emplace(observation.id, std::move(observer));
  }
  absl::ReaderMutexLock lock(&mu_);
  observation.jobs.reserve(committed_count_);
  for (const auto& [name, entry] : jobs_) {
    if (entry.committed != nullptr) observation.jobs.push_back(entry.committed);
  }
  return observation;
}

void TrainingJobManager::RemoveCommitObserver(int64_t id) {
  absl::MutexLock lock(&observers_mu_);
  observers_.erase(id);
}

std::vector<std::string> TrainingJobManager::ActiveJobNamesWithPrefix(
    const std::string& prefix) const {
  std::vector<std::string> names;
  absl::ReaderMutexLock lock(&mu_);
  for (auto it = jobs_.lower_bound(prefix);
       it != jobs_.end() && absl::StartsWith(it->first, prefix); ++it) {
    if (it->second.committed != nullptr &&
        it->second.committed->training_job_status() == v1::TrainingJobStatus::InProgress) {
      names.push_back(it->first);
    }
  }
  return names;
}

std::shared_ptr<const JobRecord> TrainingJobManager::GetJob(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : it->second.committed;
}

TrainingJobManager::CommitStats TrainingJobManager::commit_stats() const {
  return committer_->stats();
}

size_t TrainingJobManager::job_count() const {
  absl::ReaderMutexLock lock(&mu_);
  return committed_count_;
}

TrainingJobManager::StatusCounts TrainingJobManager::CountStatuses() const {
  StatusCounts counts;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, entry] : jobs_) {
    // Agents' watches are among `watches` until the job settles.
    const int64_t agents = static_cast<int64_t>(entry.agents.size());
    counts.agent_watches += agents;
    counts.client_watches +=
        std::max<int64_t>(0, static_cast<int64_t>(entry.watches.size()) - agents);
    if (entry.committed == nullptr) continue;
    const JobRecord& job = *entry.committed;
    ++counts.jobs[job.training_job_status()];
    for (const auto& rule : job.debug_rule_evaluation_statuses()) {
      ++counts.rule_evaluations[rule.rule_evaluation_status()];
    }
    for (const auto& rule : job.profiler_rule_evaluation_statuses()) {
      ++counts.rule_evaluations[rule.rule_evaluation_status()];
    }
  }
  return counts;
}

}  // namespace debugplane::core
