// The training hosts of a job (DescribeTrainingJobResponse.TrainingHosts):
// one agent per host, the job's status following all of them.
//
// A job expects ResourceConfig.InstanceCount hosts (1 when absent or 0).
// With one host everything stays as it was before hosts were tracked: the
// job follows its agent's reports, and the host list only shows them. With
// more (a multi-host job):
//   - Training once the first host starts;
//   - Completed once every expected host's command exited 0;
//   - Failed at the first host that failed, naming it and its exit (the
//     others are then told to stop: MakeAgentDirective's stop order);
//   - Stopped once a stop was ordered and no host's command runs;
//   - Failed, naming the hosts, when not all of them connected within
//     HostWaitLimits::connect after the job's creation, or a host whose
//     command had not ended lost its agent for HostWaitLimits::reconnect.
// Pure functions (no I/O, no locks, no clock: the time is an argument).

#ifndef DEBUGPLANE_CORE_JOBS_JOB_HOSTS_H_
#define DEBUGPLANE_CORE_JOBS_JOB_HOSTS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/jobs/job_mutations.h"
#include "core/jobs/job_record.h"
#include "debugplane/v1/training_agent.pb.h"

namespace debugplane::core {

// HostWaitLimits: core/jobs/job_record.h.

// Who holds a host name of a job: the agent's ConnectAgent stream.
struct HostAgent {
  std::string host;   // ConnectAgentRequest.Host ("" taken as `agent`'s machine).
  std::string agent;  // ConnectAgentRequest.Agent.
  std::string replica;  // The server replica it is connected to.
};

// ResourceConfig.InstanceCount, 1 when absent or 0.
int ExpectedHostCount(const JobRecord& job);

// The host named `name`, or nullptr.
const v1::TrainingHost* FindHost(const JobRecord& job, absl::string_view name);

// The host name an agent's connection takes: `host`, else the machine part
// of `agent`, else "algo-1".
std::string HostNameOf(const HostAgent& agent);

// An agent connects: its host is (again) connected, held by it.
// ALREADY_EXISTS naming the holder if another connected agent holds the
// name; FAILED_PRECONDITION listing them when a multi-host job has all its
// expected hosts and this is another; NOT_FOUND for a missing job.
absl::StatusOr<JobMutation> ConnectHost(const JobRecord* latest, absl::string_view job_name,
                                        const HostAgent& agent, absl::Time now);

// An agent's stream ended: its host is disconnected since `now`, unless
// another agent (or a newer connection of the same one through another
// replica) holds it by now. Unchanged for a missing job.
JobMutation DisconnectHost(const JobRecord* latest, const HostAgent& agent, absl::Time now);

// The hosts held through `replica` (any, when nullopt) that the record
// shows connected: after a restart of that replica (of the only server)
// their streams are gone. Unchanged if none.
JobMutation DisconnectReplicaHosts(const JobRecord* latest,
                                   const std::optional<std::string>& replica, absl::Time now);

// Applies a ReportTrainingStatus (validated, bounded) to `next` (a copy of
// `latest`): the reporting host's status, and the job's as the top of this
// file says. Returns whether `next` changed, or INVALID_ARGUMENT when a
// multi-host job's report names no Host, FAILED_PRECONDITION for
// EVENT_STOPPED while InProgress. EVENT_CONFIG_APPLIED is the caller's.
absl::StatusOr<bool> ApplyHostReport(const JobRecord& latest,
                                     const v1::ReportTrainingStatusRequest& request,
                                     absl::Time now, JobRecord& next);

// Records a report on the host of a job with one expected host (whose
// status follows its reports as before): the host it names, else the job's
// only host, if there is one. Returns whether it changed.
bool RecordSingleHostReport(const v1::ReportTrainingStatusRequest& request, bool job_in_progress,
                            absl::Time now, JobRecord& next);

// When a multi-host InProgress job fails for a host that never connected
// or did not come back (see the top), if nothing changes before; nullopt
// for other jobs.
std::optional<absl::Time> HostWaitDeadline(const JobRecord& job, const HostWaitLimits& limits);

// Fails the job if a host wait ended by `now` (HostWaitDeadline), naming
// the hosts. Returns whether it did.
bool FailForMissingHosts(JobRecord& job, const HostWaitLimits& limits, absl::Time now);

// Whether the job's agents must stop their commands: a multi-host job that
// failed (a host failed or was lost).
bool OtherHostsMustStop(const JobRecord& job);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_JOB_HOSTS_H_
