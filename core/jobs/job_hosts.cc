#include "core/jobs/job_hosts.h"

#include <algorithm>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/validation_text.h"

namespace debugplane::core {
namespace {

using Event = v1::ReportTrainingStatusRequest;
using HostStatus = v1::TrainingHostStatus;

bool HostEnded(const v1::TrainingHost& host) {
  return host.status() == HostStatus::Completed || host.status() == HostStatus::Failed ||
         host.status() == HostStatus::Stopped;
}

v1::TrainingHost* MutableHost(JobRecord& job, absl::string_view name) {
  for (v1::TrainingHost& host : *job.mutable_training_hosts()) {
    if (host.host_name() == name) return &host;
  }
  return nullptr;
}

int CountHosts(const JobRecord& job, HostStatus::Value status) {
  return static_cast<int>(std::count_if(
      job.training_hosts().begin(), job.training_hosts().end(),
      [status](const v1::TrainingHost& host) { return host.status() == status; }));
}

std::string HostNames(const JobRecord& job) {
  std::vector<std::string> names;
  for (const v1::TrainingHost& host : job.training_hosts()) names.push_back(host.host_name());
  return absl::StrJoin(names, ", ");
}

// A host beyond the expected count of a multi-host job is refused: it
// would make a job Complete before all its real hosts ended.
absl::Status CheckRoomForHost(const JobRecord& job, absl::string_view name) {
  const int expected = ExpectedHostCount(job);
  if (expected <= 1 || job.training_hosts_size() < expected) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "training job '", job.training_job_name(), "' expects ", expected,
      " hosts (ResourceConfig.InstanceCount) and has them (", HostNames(job), "); host '", name,
      "' would be one more: give each host's agent one of those names (--node-id)"));
}

v1::TrainingHost* AddHost(JobRecord& job, absl::string_view name) {
  v1::TrainingHost* host = job.add_training_hosts();
  host->set_host_name(std::string(name));
  host->set_status(HostStatus::Waiting);
  return host;
}

// Records the event on the host; whether it changed.
bool RecordHostEvent(v1::TrainingHost& host, const v1::ReportTrainingStatusRequest& request,
                     bool job_in_progress, absl::Time now) {
  if (request.event() == Event::EVENT_PROGRESS) {
    if (host.has_current_step() && host.current_step() >= request.current_step()) return false;
    host.set_current_step(request.current_step());
    return true;
  }
  if (HostEnded(host)) return false;  // A retried end report.
  switch (request.event()) {
    case Event::EVENT_STARTED:
      // Refused once a job is stopping or ended: the command does not start.
      if (!job_in_progress || host.status() == HostStatus::Running) return false;
      host.set_status(HostStatus::Running);
      SetTimestamp(now, host.mutable_start_time());
      return true;
    case Event::EVENT_COMPLETED:
      host.set_status(HostStatus::Completed);
      break;
    case Event::EVENT_FAILED:
      host.set_status(HostStatus::Failed);
      host.set_end_message(request.failure_reason());
      break;
    case Event::EVENT_STOPPED:
      host.set_status(HostStatus::Stopped);
      host.set_end_message(request.status_message());
      break;
    default:
      return false;
  }
  SetTimestamp(now, host.mutable_end_time());
  return true;
}

// A stopping multi-host job is Stopped once no host's command runs.
bool CompleteStopOnceNoneRuns(JobRecord& next, absl::string_view host, absl::Time now) {
  if (next.training_job_status() != v1::TrainingJobStatus::Stopping) return false;
  if (CountHosts(next, HostStatus::Running) > 0) return false;
  std::vector<std::string> ends;
  for (const v1::TrainingHost& each : next.training_hosts()) {
    ends.push_back(absl::StrCat(each.host_name(), ": ",
                                HostStatus::Value_Name(each.status())));
  }
  return CompleteStop(next, now,
                      absl::StrCat("no host's training command runs any more (",
                                   absl::StrJoin(ends, ", "), "; the last reported by ", host,
                                   ")"));
}

// The job's part of a multi-host report; whether it changed.
bool ApplyJobPart(const v1::ReportTrainingStatusRequest& request, absl::Time now,
                  JobRecord& next) {
  const std::string& host = request.host();
  switch (request.event()) {
    case Event::EVENT_STARTED:
      return MutableHost(next, host)->status() == HostStatus::Running &&
             MarkTrainingStarted(next, now);
    case Event::EVENT_PROGRESS:
      return SetTrainingStep(next, request.current_step());
    case Event::EVENT_COMPLETED:
      if (CountHosts(next, HostStatus::Completed) >= ExpectedHostCount(next) &&
          EndTraining(next, /*succeeded=*/true, "", now)) {
        return true;
      }
      return CompleteStopOnceNoneRuns(next, host, now);
    case Event::EVENT_FAILED:
      if (EndTraining(next, /*succeeded=*/false,
                      CutToChars(absl::StrCat("host '", host, "' failed: ", request.failure_reason()),
                                 kMaxStatusTextChars),
                      now)) {
        return true;
      }
      return CompleteStopOnceNoneRuns(next, host, now);
    case Event::EVENT_STOPPED:
      return CompleteStopOnceNoneRuns(next, host, now);
    default:
      return false;
  }
}

// The hosts among algo-1..algo-N that have not connected, when every host
// that did is named that way; else how many are missing.
std::string MissingHosts(const JobRecord& job, int connected) {
  const int expected = ExpectedHostCount(job);
  std::set<int> ranks;
  for (const v1::TrainingHost& host : job.training_hosts()) {
    int rank = 0;
    if (!host.has_first_connect_time()) continue;
    if (!absl::StartsWith(host.host_name(), "algo-") ||
        !absl::SimpleAtoi(host.host_name().substr(5), &rank)) {
      return absl::StrCat(expected - connected, " host(s)");
    }
    ranks.insert(rank);
  }
  std::vector<std::string> missing;
  for (int rank = 1; rank <= expected; ++rank) {
    if (ranks.count(rank) == 0) missing.push_back(absl::StrCat("algo-", rank));
  }
  return absl::StrJoin(missing, ", ");
}

int ConnectedOnce(const JobRecord& job) {
  return static_cast<int>(std::count_if(
      job.training_hosts().begin(), job.training_hosts().end(),
      [](const v1::TrainingHost& host) { return host.has_first_connect_time(); }));
}

bool AwaitedBack(const v1::TrainingHost& host) {
  return !host.connected() && !HostEnded(host) && host.has_disconnect_time();
}

bool MultiHostInProgress(const JobRecord& job) {
  return ExpectedHostCount(job) > 1 &&
         job.training_job_status() == v1::TrainingJobStatus::InProgress;
}

}  // namespace

int ExpectedHostCount(const JobRecord& job) {
  return std::max(1, job.resource_config().instance_count());
}

const v1::TrainingHost* FindHost(const JobRecord& job, absl::string_view name) {
  for (const v1::TrainingHost& host : job.training_hosts()) {
    if (host.host_name() == name) return &host;
  }
  return nullptr;
}

std::string HostNameOf(const HostAgent& agent) {
  if (!agent.host.empty()) return agent.host;
  const std::string machine = agent.agent.substr(0, agent.agent.rfind(':'));
  return machine.empty() ? std::string("algo-1") : machine;
}

absl::StatusOr<JobMutation> ConnectHost(const JobRecord* latest, absl::string_view job_name,
                                        const HostAgent& agent, absl::Time now) {
  if (latest == nullptr) return JobNotFoundError(job_name);
  const std::string name = HostNameOf(agent);
  const v1::TrainingHost* held = FindHost(*latest, name);
  if (held != nullptr && held->connected() && held->agent() != agent.agent) {
    return absl::AlreadyExistsError(absl::StrCat(
        "host name '", name, "' of training job '", job_name, "' is held by agent '",
        held->agent(), "' (connected through server replica '", held->replica(),
        "'); give this agent another host name (--node-id)"));
  }
  if (held == nullptr) {
    if (absl::Status room = CheckRoomForHost(*latest, name); !room.ok()) return room;
  }
  auto next = std::make_shared<JobRecord>(*latest);
  v1::TrainingHost* host = MutableHost(*next, name);
  if (host == nullptr) host = AddHost(*next, name);
  if (!host->has_first_connect_time()) SetTimestamp(now, host->mutable_first_connect_time());
  host->set_connected(true);
  host->set_agent(agent.agent);
  host->set_replica(agent.replica);
  host->clear_disconnect_time();
  return JobMutation{.next = std::move(next)};
}

JobMutation DisconnectHost(const JobRecord* latest, const HostAgent& agent, absl::Time now) {
  if (latest == nullptr) return JobMutation::Unchanged();
  const v1::TrainingHost* held = FindHost(*latest, HostNameOf(agent));
  if (held == nullptr || !held->connected() || held->agent() != agent.agent ||
      held->replica() != agent.replica) {
    return JobMutation::Unchanged();
  }
  auto next = std::make_shared<JobRecord>(*latest);
  v1::TrainingHost* host = MutableHost(*next, HostNameOf(agent));
  host->set_connected(false);
  SetTimestamp(now, host->mutable_disconnect_time());
  return JobMutation{.next = std::move(next)};
}

JobMutation DisconnectReplicaHosts(const JobRecord* latest,
                                   const std::optional<std::string>& replica, absl::Time now) {
  if (latest == nullptr) return JobMutation::Unchanged();
  auto next = std::make_shared<JobRecord>(*latest);
  bool changed = false;
  for (v1::TrainingHost& host : *next->mutable_training_hosts()) {
    if (!host.connected() || (replica.has_value() && host.replica() != *replica)) continue;
    host.set_connected(false);
    SetTimestamp(now, host.mutable_disconnect_time());
    changed = true;
  }
  if (!changed) return JobMutation::Unchanged();
  return JobMutation{.next = std::move(next)};
}

absl::StatusOr<bool> ApplyHostReport(const JobRecord& latest,
                                     const v1::ReportTrainingStatusRequest& request,
                                     absl::Time now, JobRecord& next) {
  const bool in_progress = latest.training_job_status() == v1::TrainingJobStatus::InProgress;
  if (request.host().empty()) {
    return InvalidField("Host", absl::StrCat("is required: training job '",
                                             latest.training_job_name(), "' has ",
                                             ExpectedHostCount(latest),
                                             " hosts (ResourceConfig.InstanceCount)"));
  }
  if (request.event() == Event::EVENT_STOPPED && in_progress) {
    return absl::FailedPreconditionError(absl::StrCat(
        "training job '", request.training_job_name(),
        "' is InProgress: no stop was ordered; report the end of a training command "
        "that exited on its own with EVENT_COMPLETED or EVENT_FAILED"));
  }
  v1::TrainingHost* host = MutableHost(next, request.host());
  if (host == nullptr) {
    if (absl::Status room = CheckRoomForHost(latest, request.host()); !room.ok()) return room;
    host = AddHost(next, request.host());
  }
  bool changed = RecordHostEvent(*host, request, in_progress, now);
  changed |= ApplyJobPart(request, now, next);
  return changed;
}

bool RecordSingleHostReport(const v1::ReportTrainingStatusRequest& request, bool job_in_progress,
                            absl::Time now, JobRecord& next) {
  v1::TrainingHost* host = MutableHost(next, request.host());
  if (host == nullptr && request.host().empty() && next.training_hosts_size() == 1) {
    host = next.mutable_training_hosts(0);
  }
  return host != nullptr && RecordHostEvent(*host, request, job_in_progress, now);
}

std::optional<absl::Time> HostWaitDeadline(const JobRecord& job, const HostWaitLimits& limits) {
  if (!MultiHostInProgress(job)) return std::nullopt;
  std::optional<absl::Time> deadline;
  const auto earliest = [&deadline](absl::Time at) {
    deadline = deadline.has_value() ? std::min(*deadline, at) : at;
  };
  if (ConnectedOnce(job) < ExpectedHostCount(job)) {
    earliest(ToAbslTime(job.creation_time()) + limits.connect);
  }
  for (const v1::TrainingHost& host : job.training_hosts()) {
    if (AwaitedBack(host)) earliest(ToAbslTime(host.disconnect_time()) + limits.reconnect);
  }
  return deadline;
}

bool FailForMissingHosts(JobRecord& job, const HostWaitLimits& limits, absl::Time now) {
  if (!MultiHostInProgress(job)) return false;
  const int connected = ConnectedOnce(job);
  const int expected = ExpectedHostCount(job);
  if (connected < expected && ToAbslTime(job.creation_time()) + limits.connect <= now) {
    return EndTraining(
        job, /*succeeded=*/false,
        absl::StrCat("only ", connected, " of the ", expected,
                     " hosts (ResourceConfig.InstanceCount) connected within ",
                     absl::FormatDuration(limits.connect), " of the job's creation; missing: ",
                     MissingHosts(job, connected)),
        now);
  }
  for (const v1::TrainingHost& host : job.training_hosts()) {
    if (!AwaitedBack(host) || ToAbslTime(host.disconnect_time()) + limits.reconnect > now) {
      continue;
    }
    const std::string reason = absl::StrCat(
        "host '", host.host_name(), "' lost its agent's connection (",
        HostStatus::Value_Name(host.status()), ") and did not reconnect within ",
        absl::FormatDuration(limits.reconnect));
    return EndTraining(job, /*succeeded=*/false, reason, now);
  }
  return false;
}

bool OtherHostsMustStop(const JobRecord& job) {
  return ExpectedHostCount(job) > 1 &&
         job.training_job_status() == v1::TrainingJobStatus::Failed;
}

}  // namespace debugplane::core
