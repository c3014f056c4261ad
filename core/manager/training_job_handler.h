// The TrainingJobService operations behind an interface that knows nothing of
// gRPC: the gRPC adapter (service/) calls it, and tests call it directly with
// no network.

#ifndef DEBUGPLANE_CORE_MANAGER_TRAINING_JOB_HANDLER_H_
#define DEBUGPLANE_CORE_MANAGER_TRAINING_JOB_HANDLER_H_

#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "debugplane/v1/training_job.pb.h"

namespace debugplane::core {

// Completion of an asynchronous operation. Called exactly once, with OK or the
// error to return to the client, either on the calling thread before the
// operation returns or later on a thread the handler owns. It must not block.
using DoneCallback = absl::AnyInvocable<void(absl::Status) &&>;

// Receives the events of one WatchTrainingJob stream.
//
// Calls are serialized per watcher, in commit order. The first (the current
// state) may come on the thread that registers the watcher, before
// WatchTrainingJob returns; the others come from threads the handler owns.
// Implementations must not block (queue the event and return): a blocked
// watcher holds up its own stream and the handler threads that serve it.
class JobWatcher {
 public:
  virtual ~JobWatcher() = default;
  // A committed change. The first call carries the state when watching
  // started (a KIND_INITIAL_STATE change).
  virtual void OnEvent(std::shared_ptr<const v1::WatchTrainingJobResponse> event) = 0;
  // The committed record of the job, before each OnEvent (also the initial
  // one) and after every other committed change of the job (e.g. progress),
  // for watchers that need more than the status (the agents'
  // configuration). The default ignores it.
  virtual void OnRecord(std::shared_ptr<const v1::DescribeTrainingJobResponse> job) {}
  // The stream is over: OK once the job and its rules are terminal, NOT_FOUND
  // when the job was deleted, UNAVAILABLE when the server shuts down. No
  // OnEvent follows.
  virtual void OnEnd(absl::Status status) = 0;
};

// Keeps a watcher registered; destroying it unregisters the watcher, after
// which no callback is running or will run. Do not destroy it from inside a
// JobWatcher callback.
class WatchRegistration {
 public:
  virtual ~WatchRegistration() = default;
};

// The operations. For the asynchronous ones, `request` and `response` must
// stay valid until `done` runs; `response` is filled only when `done` gets OK.
// Implementations are thread-safe.
class TrainingJobHandler {
 public:
  virtual ~TrainingJobHandler() = default;

  virtual void CreateTrainingJob(const v1::CreateTrainingJobRequest& request,
                                 v1::CreateTrainingJobResponse* response, DoneCallback done) = 0;
  virtual void DescribeTrainingJob(const v1::DescribeTrainingJobRequest& request,
                                   v1::DescribeTrainingJobResponse* response,
                                   DoneCallback done) = 0;
  virtual void ListTrainingJobs(const v1::ListTrainingJobsRequest& request,
                                v1::ListTrainingJobsResponse* response, DoneCallback done) = 0;
  virtual void UpdateTrainingJob(const v1::UpdateTrainingJobRequest& request,
                                 v1::UpdateTrainingJobResponse* response, DoneCallback done) = 0;
  virtual void StopTrainingJob(const v1::StopTrainingJobRequest& request,
                               v1::StopTrainingJobResponse* response, DoneCallback done) = 0;
  virtual void DeleteTrainingJob(const v1::DeleteTrainingJobRequest& request,
                                 v1::DeleteTrainingJobResponse* response, DoneCallback done) = 0;

  // Registers `watcher` for the job. On success the watcher soon gets the
  // current state, then every committed change, then OnEnd. Returns
  // INVALID_ARGUMENT for a bad name, NOT_FOUND for an unknown job.
  // REQUIRES: `watcher` outlives the returned registration.
  virtual absl::StatusOr<std::unique_ptr<WatchRegistration>> WatchTrainingJob(
      const v1::WatchTrainingJobRequest& request, JobWatcher* watcher) = 0;

  // DescribeTrainingJob's response already serialized (protobuf wire
  // format), for the hot read path: the gRPC adapter sends these bytes as
  // they are. Same errors as DescribeTrainingJob; returns synchronously. The
  // default serializes DescribeTrainingJob's response.
  virtual absl::StatusOr<std::shared_ptr<const std::string>> DescribeTrainingJobEncoded(
      const v1::DescribeTrainingJobRequest& request);

  // Read-your-writes for the synchronous reads (DescribeTrainingJobEncoded):
  // `done` gets OK once they see every change acknowledged (by any server of
  // a replicated control plane) before this call; UNAVAILABLE if that cannot
  // be known now. The default (one server) calls `done` at once. `done` must
  // not block.
  virtual void AwaitConsistentRead(DoneCallback done) { std::move(done)(absl::OkStatus()); }
};

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_MANAGER_TRAINING_JOB_HANDLER_H_
