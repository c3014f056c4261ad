// The gRPC adapter of TrainingAgentService: thin. ConnectAgent is a stream
// of directives fed by a core::TrainingAgentHandler; ReportTrainingStatus is
// a unary call finished with the handler's status mapped to a gRPC code.

#ifndef DEBUGPLANE_SERVICE_TRAINING_AGENT_SERVICE_H_
#define DEBUGPLANE_SERVICE_TRAINING_AGENT_SERVICE_H_

#include "core/handlers/training_agent_handler.h"
#include "debugplane/v1/training_agent.grpc.pb.h"
#include "service/auth/auth.h"
#include "service/grpc_adapter.h"
#include "service/raw_call.h"

namespace debugplane::service {

// Raw, as every method (see raw_call.h).
using RawTrainingAgentService = v1::TrainingAgentService::WithRawCallbackMethod_ConnectAgent<
    v1::TrainingAgentService::WithRawCallbackMethod_ReportTrainingStatus<
        v1::TrainingAgentService::Service>>;

class TrainingAgentServiceImpl final : public RawTrainingAgentService,
                                       private GrpcAdapter<core::TrainingAgentHandler> {
 public:
  // Every call is authenticated and authorized (Action::kAgent, for the job
  // the request names); `authenticator` null: authentication off.
  // REQUIRES: `handler` and `authenticator` outlive the service and every
  // call it serves.
  explicit TrainingAgentServiceImpl(core::TrainingAgentHandler* handler,
                                    const auth::Authenticator* authenticator = nullptr)
      : GrpcAdapter(handler, authenticator) {}

  grpc::ServerWriteReactor<grpc::ByteBuffer>* ConnectAgent(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  DEBUGPLANE_RAW_UNARY_METHOD(ReportTrainingStatus);
};

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_TRAINING_AGENT_SERVICE_H_
