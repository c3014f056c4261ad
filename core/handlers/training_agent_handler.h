// TrainingAgentService behind an interface that knows nothing of gRPC (the
// adapter in service/ calls it; tests call it directly), and its
// implementation over the job manager.

#ifndef DEBUGPLANE_CORE_HANDLERS_TRAINING_AGENT_HANDLER_H_
#define DEBUGPLANE_CORE_HANDLERS_TRAINING_AGENT_HANDLER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/manager/training_job_handler.h"
#include "core/manager/training_job_manager.h"
#include "debugplane/v1/training_agent.pb.h"

namespace debugplane::core {

// Receives the directives of one ConnectAgent stream. Calls are serialized
// and come from threads the handler owns: implementations must not block.
class AgentDirectiveSink {
 public:
  virtual ~AgentDirectiveSink() = default;
  // The job's configuration now (the first call), then whenever its
  // ConfigVersion, status or stop order changes.
  virtual void OnDirective(std::shared_ptr<const v1::ConnectAgentResponse> directive) = 0;
  // The stream is over: OK once the job has ended (after a directive with
  // its final status), NOT_FOUND when it was deleted, UNAVAILABLE when the
  // server shuts down. No OnDirective follows.
  virtual void OnEnd(absl::Status status) = 0;
};

class TrainingAgentHandler {
 public:
  virtual ~TrainingAgentHandler() = default;

  // Connects `sink` to the job. On success the sink soon gets the current
  // directive, and the agent counts as connected to the job (a stop waits
  // for its report) until the registration is destroyed, which disconnects
  // (not from inside a sink callback). Returns INVALID_ARGUMENT for a bad
  // name, NOT_FOUND for an unknown job.
  // REQUIRES: `sink` outlives the returned registration.
  virtual absl::StatusOr<std::unique_ptr<WatchRegistration>> ConnectAgent(
      const v1::ConnectAgentRequest& request, AgentDirectiveSink* sink) = 0;

  // As TrainingJobManager::ReportTrainingStatus.
  virtual void ReportTrainingStatus(const v1::ReportTrainingStatusRequest& request,
                                    v1::ReportTrainingStatusResponse* response,
                                    DoneCallback done) = 0;
};

// The directive an agent must apply for `job`.
v1::ConnectAgentResponse MakeAgentDirective(const JobRecord& job);

// TrainingAgentHandler over the job manager: a connection is an agent's
// watch of the job (TrainingJobManager::WatchAsAgent) that turns committed
// records into directives. Thread-safe.
class TrainingAgentManager final : public TrainingAgentHandler {
 public:
  // REQUIRES: `jobs` outlives this object and every registration.
  explicit TrainingAgentManager(TrainingJobManager* jobs) : jobs_(jobs) {}

  absl::StatusOr<std::unique_ptr<WatchRegistration>> ConnectAgent(
      const v1::ConnectAgentRequest& request, AgentDirectiveSink* sink) override;
  void ReportTrainingStatus(const v1::ReportTrainingStatusRequest& request,
                            v1::ReportTrainingStatusResponse* response,
                            DoneCallback done) override {
    jobs_->ReportTrainingStatus(request, response, std::move(done));
  }

 private:
  TrainingJobManager* const jobs_;
};

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_HANDLERS_TRAINING_AGENT_HANDLER_H_
