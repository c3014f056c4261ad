// The gRPC adapter of TrainingAgentService: thin. ConnectAgent is a stream
// of directives fed by a core::TrainingAgentHandler; ReportTrainingStatus is
// a unary call finished with the handler's status mapped to a gRPC code.

#ifndef DEBUGPLANE_SERVICE_TRAINING_AGENT_SERVICE_H_
#define DEBUGPLANE_SERVICE_TRAINING_AGENT_SERVICE_H_

#include "core/training_agent_handler.h"
#include "debugplane/v1/training_agent.grpc.pb.h"

namespace debugplane::service {

class TrainingAgentServiceImpl final : public v1::TrainingAgentService::CallbackService {
 public:
  // REQUIRES: `handler` outlives the service and every call it serves.
  explicit TrainingAgentServiceImpl(core::TrainingAgentHandler* handler) : handler_(handler) {}

  grpc::ServerWriteReactor<v1::ConnectAgentResponse>* ConnectAgent(
      grpc::CallbackServerContext* context, const v1::ConnectAgentRequest* request) override;
  grpc::ServerUnaryReactor* ReportTrainingStatus(
      grpc::CallbackServerContext* context, const v1::ReportTrainingStatusRequest* request,
      v1::ReportTrainingStatusResponse* response) override;

 private:
  core::TrainingAgentHandler* const handler_;
};

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_TRAINING_AGENT_SERVICE_H_
