#include "service/training_job_service.h"

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "service/status_mapping.h"
#include "service/stream_writer.h"

namespace debugplane::service {
namespace {

// Runs one unary call: the handler completes it, inline or later, and the
// default reactor finishes exactly once.
template <typename Request, typename Response, typename Method>
grpc::ServerUnaryReactor* ServeUnary(core::TrainingJobHandler* handler,
                                     grpc::CallbackServerContext* context, const Request* request,
                                     Response* response, Method method) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  (handler->*method)(*request, response, [reactor](const absl::Status& status) {
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

// One WatchTrainingJob stream: events from the job manager's thread, merged
// while a write is in flight into the latest state with every change kept.
class WatchReactor final : public StreamWriter<v1::WatchTrainingJobResponse>,
                           public core::JobWatcher {
 public:
  WatchReactor(core::TrainingJobHandler* handler, const v1::WatchTrainingJobRequest& request) {
    auto registration = handler->WatchTrainingJob(request, this);
    if (!registration.ok()) {
      End(ToGrpcStatus(registration.status()));
      return;
    }
    registration_ = *std::move(registration);
  }

  void OnEvent(std::shared_ptr<const v1::WatchTrainingJobResponse> event) override {
    Push(std::move(event));
  }
  void OnEnd(absl::Status status) override { End(ToGrpcStatus(status)); }

 private:
  std::shared_ptr<const v1::WatchTrainingJobResponse> Merge(
      std::shared_ptr<const v1::WatchTrainingJobResponse> pending,
      std::shared_ptr<const v1::WatchTrainingJobResponse> next) override {
    auto merged = std::make_shared<v1::WatchTrainingJobResponse>(*next);
    merged->clear_changes();
    for (const auto& change : pending->changes()) *merged->add_changes() = change;
    for (const auto& change : next->changes()) *merged->add_changes() = change;
    return merged;
  }
  // Unregisters: afterwards no JobWatcher callback runs.
  void Detach() override { registration_.reset(); }

  std::unique_ptr<core::WatchRegistration> registration_;
};

}  // namespace

grpc::ServerUnaryReactor* TrainingJobServiceImpl::CreateTrainingJob(
    grpc::CallbackServerContext* context, const v1::CreateTrainingJobRequest* request,
    v1::CreateTrainingJobResponse* response) {
  return ServeUnary(handler_, context, request, response,
                    &core::TrainingJobHandler::CreateTrainingJob);
}

grpc::ServerUnaryReactor* TrainingJobServiceImpl::DescribeTrainingJob(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  v1::DescribeTrainingJobRequest parsed;
  grpc::ByteBuffer copy(*request);  // Shares the slices; Deserialize consumes its input.
  grpc::Status decoded =
      grpc::GenericDeserialize<grpc::ProtoBufferReader, v1::DescribeTrainingJobRequest>(&copy,
                                                                                        &parsed);
  if (!decoded.ok()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "the request is not a DescribeTrainingJobRequest"));
    return reactor;
  }
  absl::StatusOr<std::shared_ptr<const std::string>> encoded =
      handler_->DescribeTrainingJobEncoded(parsed);
  if (!encoded.ok()) {
    reactor->Finish(ToGrpcStatus(encoded.status()));
    return reactor;
  }
  // The slice borrows the bytes and keeps them alive until gRPC is done.
  auto* owner = new std::shared_ptr<const std::string>(*std::move(encoded));
  grpc::Slice slice(
      const_cast<char*>((*owner)->data()), (*owner)->size(),
      [](void* user_data) { delete static_cast<std::shared_ptr<const std::string>*>(user_data); },
      owner);
  grpc::ByteBuffer bytes(&slice, 1);
  response->Swap(&bytes);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* TrainingJobServiceImpl::ListTrainingJobs(
    grpc::CallbackServerContext* context, const v1::ListTrainingJobsRequest* request,
    v1::ListTrainingJobsResponse* response) {
  return ServeUnary(handler_, context, request, response,
                    &core::TrainingJobHandler::ListTrainingJobs);
}

grpc::ServerUnaryReactor* TrainingJobServiceImpl::UpdateTrainingJob(
    grpc::CallbackServerContext* context, const v1::UpdateTrainingJobRequest* request,
    v1::UpdateTrainingJobResponse* response) {
  return ServeUnary(handler_, context, request, response,
                    &core::TrainingJobHandler::UpdateTrainingJob);
}

grpc::ServerUnaryReactor* TrainingJobServiceImpl::StopTrainingJob(
    grpc::CallbackServerContext* context, const v1::StopTrainingJobRequest* request,
    v1::StopTrainingJobResponse* response) {
  return ServeUnary(handler_, context, request, response,
                    &core::TrainingJobHandler::StopTrainingJob);
}

grpc::ServerUnaryReactor* TrainingJobServiceImpl::DeleteTrainingJob(
    grpc::CallbackServerContext* context, const v1::DeleteTrainingJobRequest* request,
    v1::DeleteTrainingJobResponse* response) {
  return ServeUnary(handler_, context, request, response,
                    &core::TrainingJobHandler::DeleteTrainingJob);
}

grpc::ServerWriteReactor<v1::WatchTrainingJobResponse>* TrainingJobServiceImpl::WatchTrainingJob(
    grpc::CallbackServerContext* context, const v1::WatchTrainingJobRequest* request) {
  return new WatchReactor(handler_, *request);
}

}  // namespace debugplane::service
