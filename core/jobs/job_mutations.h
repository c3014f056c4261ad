// Job mutations: the state transitions of the training job API, as pure
// functions from a job's latest record (and a request) to its next record.
//
// Each function only computes: no locks, no storage, no clock (the time is
// an argument). TrainingJobManager (core/manager) runs them on the latest
// state of a job, queues what they decide for its group commit, and may run
// one again on a newer state after a version conflict, which is why they
// depend only on their arguments. `latest` is nullptr for a job that does
// not exist. Thread-safe (they touch nothing shared).

#ifndef DEBUGPLANE_CORE_JOBS_JOB_MUTATIONS_H_
#define DEBUGPLANE_CORE_JOBS_JOB_MUTATIONS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/jobs/job_record.h"
#include "debugplane/v1/training_agent.pb.h"
#include "debugplane/v1/training_job.pb.h"

namespace debugplane::core {

// What a mutation decided.
struct JobMutation {
  // The new latest state; nullptr deletes the job.
  std::shared_ptr<const JobRecord> next;
  // False when the mutation left the job as it was: nothing is written.
  bool changed = true;
  // `next` serialized, when the mutation has it already (Create encodes the
  // new record before it is queued); else whoever writes it encodes it.
  std::shared_ptr<const std::string> encoded;

  static JobMutation Unchanged() { return JobMutation{.changed = false}; }
};

// NOT_FOUND: "training job '<name>' does not exist".
absl::Status JobNotFoundError(absl::string_view job_name);

// CreateTrainingJob: `record` (already built and encoded from the request)
// becomes the job; ALREADY_EXISTS if a job of that name exists.
absl::StatusOr<JobMutation> CreateJob(const JobRecord* latest,
                                      std::shared_ptr<const JobRecord> record,
                                      std::shared_ptr<const std::string> encoded);

// UpdateTrainingJob (a request already validated on its own): merges the
// ProfilerConfig change and appends the new profiler rules (their
// evaluations InProgress), bumps ConfigVersion. NOT_FOUND for a missing job,
// FAILED_PRECONDITION unless it is InProgress, INVALID_ARGUMENT naming the
// fields when a rule name is taken or the profiler rules would exceed
// kMaxRulesPerKind. `warnings` gets what the update should warn about
// (computed against the job's current profiler config).
absl::StatusOr<JobMutation> UpdateJob(const JobRecord* latest,
                                      const v1::UpdateTrainingJobRequest& update,
                                      const ArnScope& arn_scope, absl::Time now,
                                      std::vector<std::string>& warnings);

// StopTrainingJob (with `reason` as the Stopping transition's message, if
// any): the job becomes Stopping; unchanged if it is stopping or ended
// already. NOT_FOUND for a missing job.
absl::StatusOr<JobMutation> StopJob(const JobRecord* latest, absl::string_view job_name,
                                    absl::Time now, absl::string_view reason = "");

// DeleteTrainingJob: deletes a Completed, Failed or Stopped job; NOT_FOUND
// for a missing job, FAILED_PRECONDITION for one still running.
absl::StatusOr<JobMutation> DeleteJob(const JobRecord* latest, absl::string_view job_name);

// A deadline of the job passed: completes a Stopping job's stop once its
// wait (given the job's agents, `presence`) is over, or begins the stop of
// an InProgress job past its MaxRuntimeInSeconds. Else unchanged, with the
// deadline still ahead in `next_deadline` (if any).
struct DeadlineOutcome {
  JobMutation mutation;
  std::optional<absl::Time> next_deadline;
};
// A multi-host job whose host wait ended (HostWaitDeadline) fails naming
// the hosts (core/jobs/job_hosts.h).
DeadlineOutcome ApplyDeadline(const JobRecord* latest, const AgentPresence& presence,
                              const StopWaitLimits& stop_wait, const HostWaitLimits& host_wait,
                              absl::Time now);

// The earlier of two optional deadlines.
std::optional<absl::Time> EarliestDeadline(std::optional<absl::Time> a,
                                           std::optional<absl::Time> b);

// SetRuleEvaluationStatus: NOT_FOUND for a missing job or rule,
// FAILED_PRECONDITION if the rule already ended with another status;
// unchanged if the rule has that status already.
absl::StatusOr<JobMutation> SetRuleEvaluation(const JobRecord* latest, absl::string_view job_name,
                                              absl::string_view rule_name, RuleStatus status,
                                              absl::string_view details, absl::Time now);

// RecordRuleProgress: NOT_FOUND for a missing job; unchanged if no rule
// moved (SetRuleProgress).
absl::StatusOr<JobMutation> RecordProgress(const JobRecord* latest, absl::string_view job_name,
                                           const std::vector<RuleProgress>& progress);

// SetRuleActionStatus: NOT_FOUND for a missing job or action,
// FAILED_PRECONDITION if the action is no longer Pending; unchanged if
// nothing changes.
absl::StatusOr<JobMutation> SetActionStatus(const JobRecord* latest, absl::string_view job_name,
                                            absl::string_view action_id,
                                            v1::RuleActionStatus::Value status,
                                            absl::string_view details, int attempts,
                                            absl::Time now);

// The checks of a ReportTrainingStatus request that need no job: the
// INVALID_ARGUMENT naming the field (no Event, EVENT_PROGRESS without
// CurrentStep, a negative CurrentStep, EVENT_FAILED without FailureReason,
// EVENT_CONFIG_APPLIED without AppliedConfigVersion), else OK.
absl::Status ValidateTrainingReport(const v1::ReportTrainingStatusRequest& request);

// The request as the server keeps it: the agent's texts cut to
// kMaxStatusTextChars before anything is built of them, the upload backlog
// dropped.
v1::ReportTrainingStatusRequest BoundTrainingReport(const v1::ReportTrainingStatusRequest& request);

// ReportTrainingStatus (a request that passed ValidateTrainingReport): the
// training process started, progressed, ended, exited after a stop order or
// applied a configuration version (see TrainingJobManager). NOT_FOUND for a
// missing job, FAILED_PRECONDITION for EVENT_STOPPED while InProgress,
// INVALID_ARGUMENT for an AppliedConfigVersion newer than ConfigVersion.
// `status` gets the job's status after the report.
absl::StatusOr<JobMutation> ApplyTrainingReport(const JobRecord* latest,
                                                const v1::ReportTrainingStatusRequest& request,
                                                absl::Time now,
                                                v1::TrainingJobStatus::Value& status);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_JOB_MUTATIONS_H_
