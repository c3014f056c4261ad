// The training job record and its lifecycle.
//
// A job is stored and served as one DescribeTrainingJobResponse message: the
// record. These functions create and transition records; they are pure (no
// I/O, no locking) so the job manager, the rules engine and tests share them.

#ifndef DEBUGPLANE_CORE_JOBS_JOB_RECORD_H_
#define DEBUGPLANE_CORE_JOBS_JOB_RECORD_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "debugplane/v1/training_job.pb.h"

namespace debugplane::core {

using JobRecord = v1::DescribeTrainingJobResponse;
using JobStatus = v1::TrainingJobStatus::Value;
using SecondaryStatus = v1::SecondaryStatus::Value;
using RuleStatus = v1::RuleEvaluationStatus::Value;

// Where ARN-like identifiers say the job lives.
struct ArnScope {
  std::string partition = "aws";
  std::string region = "local";
  std::string account = "000000000000";
};

// Default profiling interval when ProfilerConfig gives none (SageMaker's).
inline constexpr int64_t kDefaultProfilingIntervalMs = 500;

// "arn:aws:sagemaker:<region>:<account>:training-job/<name>".
std::string TrainingJobArn(const ArnScope& scope, absl::string_view job_name);

// A processing-job-shaped ARN for one rule evaluation, SageMaker style:
// "<job>-<rule>-<8 hex>" trimmed to a valid 63-character name. Deterministic
// for (job, rule, creation time) so restarts and replicas agree.
std::string RuleEvaluationJobArn(const ArnScope& scope, absl::string_view job_name,
                                 absl::string_view rule_name, absl::Time creation_time);

// The record of a newly created job: request members copied, defaults filled
// (ProfilerConfig interval, profiler output path, a one-day
// MaxRuntimeInSeconds), no ModelArtifacts yet, TrainingJobStatus InProgress,
// SecondaryStatus Starting with its transition, one InProgress status per
// rule, ConfigVersion 1.
// REQUIRES: `request` passed ValidateCreateTrainingJobRequest.
JobRecord NewJobRecord(const v1::CreateTrainingJobRequest& request, const ArnScope& scope,
                       absl::Time now);

// Enters `status`: closes the current SecondaryStatusTransition (EndTime) and
// appends one for `status` with `message`. Updates LastModifiedTime.
// A no-op if `status` is already current.
void TransitionSecondaryStatus(JobRecord& job, SecondaryStatus status, absl::string_view message,
                               absl::Time now);

// StopTrainingJob: an InProgress job becomes Stopping (primary and secondary,
// with `reason` as the transition's StatusMessage, a default if empty); its
// InProgress rule evaluations become Stopping. Returns false (and changes
// nothing) if the job is already Stopping or terminal.
bool BeginStop(JobRecord& job, absl::Time now, absl::string_view reason = "");

// When an InProgress job has run longer than its
// StoppingCondition.MaxRuntimeInSeconds: that long after TrainingStartTime
// once training started, else after CreationTime. nullopt for a job that is
// not InProgress or has no limit.
std::optional<absl::Time> MaxRuntimeDeadline(const JobRecord& job);

// The job ran out of MaxRuntimeInSeconds: as BeginStop, with FailureReason
// "Training job exceeded MaxRuntimeInSeconds of N s" (also the Stopping
// transition's StatusMessage), so that CompleteStop ends it in
// MaxRuntimeExceeded. Returns false (no change) unless the job is InProgress.
bool BeginMaxRuntimeStop(JobRecord& job, absl::Time now);

// True for a job that is Stopping or Stopped because it exceeded
// MaxRuntimeInSeconds (the only way a stop gets a FailureReason).
bool StoppedForMaxRuntime(const JobRecord& job);

// When the job's current stop was ordered: the start of its last Stopping
// SecondaryStatusTransition (LastModifiedTime if it has none).
absl::Time StopOrderTime(const JobRecord& job);

// Completes a stop once the training process is gone (or the wait for it
// ended, see PlanStopCompletion): a Stopping job becomes Stopped, with
// SecondaryStatus MaxRuntimeExceeded if it ran out of time, else Stopped,
// and `how` (how the process ended) as that transition's StatusMessage (a
// default if empty); its Stopping (or still InProgress) rule evaluations
// become Stopped; TrainingEndTime and TrainingTimeInSeconds are set.
// Returns false if the job is not Stopping.
bool CompleteStop(JobRecord& job, absl::Time now, absl::string_view how = "");

// How long a Stopping job waits for its agent to report that the training
// process exited (ReportTrainingStatus EVENT_STOPPED) before it is Stopped
// without that report.
struct StopWaitLimits {
  // While no agent is connected to the job, counted from the stop order or
  // from the moment the last agent went away, whichever is later: time for
  // an agent to reconnect (after a network blip or a server restart).
  absl::Duration without_agent = absl::Seconds(10);
  // From the stop order, whether or not an agent is connected: an agent
  // that does not confirm within this time (a hung host, a lost network
  // that the server has not noticed yet) is given up on. It should exceed
  // the agents' --stop-grace (SIGTERM to SIGKILL).
  absl::Duration for_agent = absl::Minutes(5);
};

// The bounds of a multi-host job's wait for its hosts (core/jobs/job_hosts.h;
// server flags).
struct HostWaitLimits {
  // From the job's creation until every expected host has connected once.
  absl::Duration connect = absl::Minutes(10);
  // From a host's lost connection (its command not ended) until it is back.
  absl::Duration reconnect = absl::Minutes(5);
};

// The agents connected to a job, as the job manager tracks them.
struct AgentPresence {
  int connected = 0;
  // When the last agent disconnected, or when the server started if none has
  // since: the start of a wait for one to (re)connect.
  absl::Time absent_since = absl::InfinitePast();
};

// When a Stopping job is Stopped without its agent's report, and the
// Stopped transition's StatusMessage saying why. A job whose training never
// started (no TrainingStartTime: agents report the start before they start
// the command, and a start is refused once a job is Stopping) with no agent
// connected has no process to wait for: `at` is the stop order.
struct StopCompletion {
  absl::Time at;
  std::string message;
};
// REQUIRES: job is Stopping.
StopCompletion PlanStopCompletion(const JobRecord& job, const AgentPresence& agents,
                                  const StopWaitLimits& limits);

// The training process started on its host: SecondaryStatus Training,
// TrainingStartTime set. Returns false (no change) unless the job is
// InProgress and not yet Training.
bool MarkTrainingStarted(JobRecord& job, absl::Time now);

// Training progress: ProgressInfo.CurrentStep. Returns false if the job is
// not InProgress or the step is not newer.
bool SetTrainingStep(JobRecord& job, int64_t step);

// The most characters of a FailureReason, a secondary status transition's
// StatusMessage or a rule's StatusDetails (SageMaker's limit for the first
// and the last): longer texts, which an agent or a rule may report, are cut
// where they are stored, so that no record outgrows a reply.
inline constexpr size_t kMaxStatusTextChars = 1024;

// Cuts the texts above (FailureReason, every transition's StatusMessage,
// every rule's StatusDetails) to kMaxStatusTextChars in a record read from
// storage: an older version kept an agent's whole text (4 MB) in the
// transition, and such a record would fail every Describe of its job with
// RESOURCE_EXHAUSTED. Returns whether anything was cut (the caller then
// encodes the record again).
bool BoundStoredTexts(JobRecord& job);

// The training process ended: exit 0 makes the job Completed, with its
// ModelArtifacts (as SageMaker, which shows them only for a completed
// training), anything else Failed with `failure_reason` (primary and
// secondary status, TrainingEndTime, TrainingTimeInSeconds). Rule
// evaluations go on until they have read all the data. Returns false if the
// job is not InProgress (a stopped job stays Stopped).
bool EndTraining(JobRecord& job, bool succeeded, absl::string_view failure_reason, absl::Time now);

// Appends `update` to the job's ConfigurationUpdates (keeping the last 100),
// as the change that made the job's current ConfigVersion.
void RecordConfigurationUpdate(JobRecord& job, const v1::UpdateTrainingJobRequest& update,
                               absl::Time now);

// The job's agent wrote the training's configuration files of ConfigVersion
// `version` (ReportTrainingStatus EVENT_CONFIG_APPLIED): sets
// ProfilerConfigAppliedVersion and ProfilerConfigAppliedTime (`now`).
// Returns false (no change) if the job is terminal or `version` is not newer
// than the recorded one. REQUIRES: 1 <= version <= job.config_version().
bool RecordProfilerConfigApplied(JobRecord& job, int64_t version, absl::Time now);

// Sets the status of the rule evaluation named `rule` (debug or profiler).
// Returns false if there is no such rule or nothing changes. Terminal rule
// statuses are final: returns false when the rule is already terminal.
// A debug rule turning IssuesFound also records its action_json's actions
// (RecordTriggeredActions in core/jobs/rule_actions.h), Pending.
bool SetRuleStatus(JobRecord& job, absl::string_view rule, RuleStatus status,
                   absl::string_view details, absl::Time now);

// Records that debug rule `rule` evaluated every step up to global step
// `last_evaluated_step`. Returns false (and changes nothing) if there is no
// such rule, it is terminal, or it had reached that step already. Does not
// touch LastModifiedTime: progress is not a status change.
bool SetRuleProgress(JobRecord& job, absl::string_view rule, int64_t last_evaluated_step);

// One rule's progress as the rules engine records it (RecordRuleProgress).
struct RuleProgress {
  std::string rule;                  // The rule configuration name.
  int64_t last_evaluated_step = -1;  // A debugging rule's; -1 leaves it as it is.
  // How far its reader has read (ReadProgress); absent leaves it as it is.
  std::optional<v1::RuleReadProgress> read;
};

// Records `progress` on the rule it names (debug or profiler): its
// LastEvaluatedStep as SetRuleProgress above, and its ReadProgress replaced
// when given and different. Returns false (and changes nothing) if there is
// no such rule, it is terminal, or nothing changes. Does not touch
// LastModifiedTime.
bool SetRuleProgress(JobRecord& job, const RuleProgress& progress);

bool IsTerminal(JobStatus status);   // Completed, Failed, Stopped.
bool IsTerminal(RuleStatus status);  // NoIssuesFound, IssuesFound, Error, Stopped.

// True when the job and every rule evaluation are terminal and no rule action
// is Pending: nothing about the job will change any more and a watch stream
// ends.
bool IsSettled(const JobRecord& job);

// SageMaker's words for enum values ("InProgress", "IssuesFound", ...).
absl::string_view JobStatusName(JobStatus status);
absl::string_view SecondaryStatusName(SecondaryStatus status);
absl::string_view RuleStatusName(RuleStatus status);

// What changed between two versions of a job, as WatchTrainingJob reports it.
// Empty if nothing a watcher cares about changed.
std::vector<v1::StatusChange> DiffForWatch(const JobRecord& before, const JobRecord& after);

// The status part of `job` as a watch event, with `changes`.
v1::WatchTrainingJobResponse MakeWatchEvent(const JobRecord& job,
                                            std::vector<v1::StatusChange> changes,
                                            absl::Time event_time);

// Conversions between absl::Time and google.protobuf.Timestamp.
void SetTimestamp(absl::Time time, google::protobuf::Timestamp* out);
absl::Time ToAbslTime(const google::protobuf::Timestamp& timestamp);
int64_t ToUnixMicros(const google::protobuf::Timestamp& timestamp);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_JOB_RECORD_H_
