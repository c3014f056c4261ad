// TrainingJobManagerOptions: how a TrainingJobManager validates, groups its
// commits, delivers to watchers, keeps time and follows the other replicas
// (see core/manager/training_job_manager.h).

#ifndef DEBUGPLANE_CORE_MANAGER_TRAINING_JOB_MANAGER_OPTIONS_H_
#define DEBUGPLANE_CORE_MANAGER_TRAINING_JOB_MANAGER_OPTIONS_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "base/clock.h"
#include "core/jobs/job_hosts.h"
#include "core/jobs/job_record.h"
#include "core/jobs/validation.h"

namespace debugplane::core {

struct TrainingJobManagerOptions {
  ValidationOptions validation;
  ArnScope arn_scope;
  // Upper bound of job writes grouped into one storage transaction.
  int max_commit_group = 1024;
  // Group commit: the callers of an acknowledged group usually send their
  // next change at once (clients wait for each reply). Without waiting for
  // them, callers split into two halves that alternate: one half's changes
  // are written while the other's queue, each group half of what one write
  // could take. So the committer waits, up to this long after acknowledging
  // a group (and never longer than half the last storage write took), until
  // the changes then queued plus that group's callers are queued again,
  // and one write (one fsync) serves them all. The wait ends as soon as they
  // are there: a lone caller never waits (its own change is the one
  // expected). Zero turns it off.
  absl::Duration max_group_wait = absl::Milliseconds(2);
  // Threads that validate CreateTrainingJob and UpdateTrainingJob requests
  // (their output paths are checked against the file system).
  int validation_threads = 2;
  // Threads that deliver committed changes to watchers.
  int watch_delivery_threads = 2;
  // The clock of every timestamp and deadline; tests use a base::FakeClock.
  std::shared_ptr<base::Clock> clock = base::SystemClock();
  // How long a Stopping job waits for the training process to be reported
  // gone (see StopWaitLimits).
  StopWaitLimits stop_wait;
  // How long a multi-host job waits for its hosts to connect, and for a
  // lost one to come back, before it fails naming them.
  HostWaitLimits host_wait;

  // Replicas (see the top of core/manager/training_job_manager.h). Off:
  // this manager is the only writer of its storage (SQLite's case); reads
  // never query the storage.
  bool follow_changes = false;
  // This server's name among the replicas (agent presence, logs).
  std::string replica_id = "replica";
  // How often the feed is read without being woken: the safety net of
  // LISTEN/NOTIFY, or the only way for storages without it (SQLite). Timed
  // by `clock` (a clock that moves only when told leaves the reads to the
  // wake-ups).
  absl::Duration change_poll_interval = absl::Seconds(5);
  // Re-runs of a call's mutation after version conflicts before the call
  // fails with ABORTED.
  int max_conflict_retries = 8;
  // How often this server's agent presence records are refreshed; those
  // not refreshed for 3 intervals (a server that died) no longer count.
  absl::Duration presence_heartbeat = absl::Seconds(2);
};

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_MANAGER_TRAINING_JOB_MANAGER_OPTIONS_H_
