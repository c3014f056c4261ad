#include "service/training_agent_service.h"

#include <memory>

#include "service/authorized_call.h"
#include "service/call_authorization.h"
#include "service/raw_call.h"
#include "service/status_mapping.h"
#include "service/stream_writer.h"

namespace debugplane::service {
namespace {

// One ConnectAgent stream. A directive is the whole configuration, so when
// a write is in flight the newest directive replaces the one waiting.
class AgentStream final
    : public AuthorizedStream<v1::ConnectAgentResponse, core::AgentDirectiveSink> {
 public:
  AgentStream(core::TrainingAgentHandler* handler, const auth::Authenticator* authenticator,
              const grpc::CallbackServerContext& context, const grpc::ByteBuffer& raw_request) {
    Begin(authenticator, context, raw_request, "ConnectAgent", auth::Action::kAgent, handler,
          &core::TrainingAgentHandler::ConnectAgent);
  }

  void OnDirective(std::shared_ptr<const v1::ConnectAgentResponse> directive) override {
    Push(std::move(directive));
  }

 private:
  void MergeInto(v1::ConnectAgentResponse& pending, const v1::ConnectAgentResponse& next) override {
    pending = next;
  }
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* TrainingAgentServiceImpl::ConnectAgent(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new AgentStream(handler_, authenticator_, *context, *request);
}

grpc::ServerUnaryReactor* TrainingAgentServiceImpl::ReportTrainingStatus(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return ServeAuthorizedUnary<v1::ReportTrainingStatusRequest, v1::ReportTrainingStatusResponse>(
      authenticator_, auth::Action::kAgent, context, request, response, "ReportTrainingStatus",
      [this](const v1::ReportTrainingStatusRequest& decoded, v1::ReportTrainingStatusResponse* out,
             core::DoneCallback done) {
        handler_->ReportTrainingStatus(decoded, out, std::move(done));
      });
}

}  // namespace debugplane::service
