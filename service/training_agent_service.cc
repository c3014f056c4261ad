#include "service/training_agent_service.h"

#include <memory>

#include "service/status_mapping.h"
#include "service/stream_writer.h"

namespace debugplane::service {
namespace {

// One ConnectAgent stream. A directive is the whole configuration, so when
// a write is in flight the newest directive replaces the one waiting.
class AgentStream final : public StreamWriter<v1::ConnectAgentResponse>,
                          public core::AgentDirectiveSink {
 public:
  AgentStream(core::TrainingAgentHandler* handler, const v1::ConnectAgentRequest& request) {
    auto registration = handler->ConnectAgent(request, this);
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
  std::shared_ptr<const v1::ConnectAgentResponse> Merge(
      std::shared_ptr<const v1::ConnectAgentResponse> /*pending*/,
      std::shared_ptr<const v1::ConnectAgentResponse> next) override {
    return next;
  }
  void Detach() override { registration_.reset(); }

  std::unique_ptr<core::WatchRegistration> registration_;
};

}  // namespace

grpc::ServerWriteReactor<v1::ConnectAgentResponse>* TrainingAgentServiceImpl::ConnectAgent(
    grpc::CallbackServerContext* context, const v1::ConnectAgentRequest* request) {
  return new AgentStream(handler_, *request);
}

grpc::ServerUnaryReactor* TrainingAgentServiceImpl::ReportTrainingStatus(
    grpc::CallbackServerContext* context, const v1::ReportTrainingStatusRequest* request,
    v1::ReportTrainingStatusResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  handler_->ReportTrainingStatus(*request, response, [reactor](const absl::Status& status) {
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

}  // namespace debugplane::service
