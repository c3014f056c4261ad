#include "service/training_job_service.h"

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "service/status_mapping.h"

namespace debugplane::service {
namespace {

// Runs one unary call: the handler completes it, inline or later, and the
// default reactor finishes exactly once.
template <typename Request, typename Response, typename Method>
grpc::ServerUnaryReactor* ServeUnary(core::TrainingJobHandler* handler,
                                     grpc::CallbackServerContext* context, const Request* request,
                                     Response* response, Method method) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  (handler->*method)(*request, response,
                     [reactor](const absl::Status& status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

// One WatchTrainingJob stream. Events arrive from the job manager's thread and
// must not block it: one write is in flight at a time and events that arrive
// meanwhile are coalesced into one (latest state, all changes kept), so a
// slow reader costs bounded memory and loses no change.
class WatchReactor final : public grpc::ServerWriteReactor<v1::WatchTrainingJobResponse>,
                           public core::JobWatcher {
 public:
  WatchReactor(core::TrainingJobHandler* handler, const v1::WatchTrainingJobRequest& request) {
    auto registration = handler->WatchTrainingJob(request, this);
    if (!registration.ok()) {
      absl::MutexLock lock(&mu_);
      FinishLocked(ToGrpcStatus(registration.status()));
      return;
    }
    registration_ = *std::move(registration);
  }

  void OnEvent(std::shared_ptr<const v1::WatchTrainingJobResponse> event) override {
    absl::MutexLock lock(&mu_);
    if (finished_ || ended_ || cancelled_) return;
    if (in_flight_ == nullptr) {
      in_flight_ = std::move(event);
      StartWrite(in_flight_.get());
      return;
    }
    if (pending_ == nullptr) {
      pending_ = std::move(event);
      return;
    }
    // Coalesce: the latest state, with every change since the last write.
    auto merged = std::make_shared<v1::WatchTrainingJobResponse>(*event);
    merged->clear_changes();
    for (const auto& change : pending_->changes()) *merged->add_changes() = change;
    for (const auto& change : event->changes()) *merged->add_changes() = change;
    pending_ = std::move(merged);
  }

  void OnEnd(absl::Status status) override {
    absl::MutexLock lock(&mu_);
    if (finished_ || ended_) return;
    ended_ = true;
    end_status_ = ToGrpcStatus(status);
    if (in_flight_ == nullptr) FinishLocked(end_status_);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    in_flight_ = nullptr;
    if (finished_) return;
    // The client went away. gRPC does not order OnCancel and the completion
    // of a write in flight: if OnCancel came first it left the finishing to
    // this write, which may still have succeeded (ok), and no reaction
    // follows. Not finishing here would leave the stream registered until the
    // job ends, and GrpcServer::Shutdown waiting for it.
    if (!ok || cancelled_) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream closed by the client"));
      return;
    }
    if (pending_ != nullptr) {
      in_flight_ = std::move(pending_);
      StartWrite(in_flight_.get());
    } else if (ended_) {
      FinishLocked(end_status_);
    }
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    // With a write in flight, its OnWriteDone finishes (gRPC allows one
    // write at a time, and Finish after it).
    if (!finished_ && in_flight_ == nullptr) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    }
  }

  void OnDone() override {
    // Unregister first: afterwards no JobWatcher callback runs.
    registration_.reset();
    delete this;
  }

 private:
  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    pending_ = nullptr;
    Finish(std::move(status));
  }

  std::unique_ptr<core::WatchRegistration> registration_;
  absl::Mutex mu_;
  std::shared_ptr<const v1::WatchTrainingJobResponse> in_flight_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const v1::WatchTrainingJobResponse> pending_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
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
