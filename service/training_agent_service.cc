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
class AgentStream final : public StreamWriter<v1::ConnectAgentResponse>,
                          public core::AgentDirectiveSink {
 public:
  AgentStream(core::TrainingAgentHandler* handler, const auth::Authenticator* authenticator,
              const grpc::CallbackServerContext& context, const grpc::ByteBuffer& raw_request) {
    constexpr absl::string_view kMethod = "ConnectAgent";
    auto principal = AuthenticateCall(authenticator, context, kMethod);
    if (!principal.ok()) {
      End(ToGrpcStatus(principal.status()));
      return;
    }
    auto request = DecodeRequest<v1::ConnectAgentRequest>(raw_request, kMethod);
    if (!request.ok()) {
      End(ToGrpcStatus(request.status()));
      return;
    }
    if (absl::Status allowed = AuthorizeCall(*principal, context, kMethod, auth::Action::kAgent,
                                             (*request)->training_job_name());
        !allowed.ok()) {
      End(ToGrpcStatus(allowed));
      return;
    }
    auto registration = handler->ConnectAgent(**request, this);
    if (!registration.ok()) {
      End(ToGrpcStatus(registration.status()));
      return;
    }
    registration_ = *std::move(registration);
  }

  void OnDirective(std::shared_ptr<const v1::ConnectAgentResponse> directive) override {
    Push(std::move(directive));
  }
  void OnEnd(absl::Status status) override { End(ToGrpcStatus(status)); }

 private:
  void MergeInto(v1::ConnectAgentResponse& pending, const v1::ConnectAgentResponse& next) override {
    pending = next;
  }
  void Detach() override { registration_.reset(); }

  std::unique_ptr<core::WatchRegistration> registration_;
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
