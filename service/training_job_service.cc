#include "service/training_job_service.h"

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "service/authorized_call.h"
#include "service/call_authorization.h"
#include "service/raw_call.h"
#include "service/status_mapping.h"
#include "service/stream_writer.h"

namespace debugplane::service {
namespace {

// Serves a unary method of `handler` (which completes inline or later) to
// callers allowed to do `action`.
template <typename Request, typename Response>
grpc::ServerUnaryReactor* ServeUnary(
    core::TrainingJobHandler* handler, const auth::Authenticator* authenticator,
    auth::Action action, grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response, absl::string_view method,
    void (core::TrainingJobHandler::*handle)(const Request&, Response*, core::DoneCallback)) {
  return ServeAuthorizedUnary<Request, Response>(
      authenticator, action, context, request, response, method,
      [handler, handle](const Request& decoded, Response* out, core::DoneCallback done) {
        (handler->*handle)(decoded, out, std::move(done));
      });
}

// One WatchTrainingJob stream: events from the job manager's thread, merged
// while a write is in flight into the latest state with every change kept.
class WatchReactor final : public AuthorizedStream<v1::WatchTrainingJobResponse, core::JobWatcher> {
 public:
  WatchReactor(core::TrainingJobHandler* handler, const auth::Authenticator* authenticator,
               const grpc::CallbackServerContext& context, const grpc::ByteBuffer& raw_request,
               StreamLimits limits)
      : AuthorizedStream(std::move(limits)) {
    Begin(authenticator, context, raw_request, "WatchTrainingJob", auth::Action::kWatchTrainingJob,
          handler, &core::TrainingJobHandler::WatchTrainingJob);
  }

  void OnEvent(std::shared_ptr<const v1::WatchTrainingJobResponse> event) override {
    Push(std::move(event));
  }

 private:
  // The state is the newest; the changes are all of them, in order. Only
  // `next` is copied: the changes accumulated so far stay where they are.
  void MergeInto(v1::WatchTrainingJobResponse& pending,
                 const v1::WatchTrainingJobResponse& next) override {
    google::protobuf::RepeatedPtrField<v1::StatusChange> changes;
    changes.Swap(pending.mutable_changes());
    changes.MergeFrom(next.changes());
    pending = next;
    pending.mutable_changes()->Swap(&changes);
  }
};

}  // namespace

// Create, List, Update, Stop and Delete: each serves the handler method of
// its name to callers allowed the action of its name (ServeUnary).
#define DEBUGPLANE_SERVE_JOB_METHOD(Method)                                                      \
  grpc::ServerUnaryReactor* TrainingJobServiceImpl::Method(grpc::CallbackServerContext* context, \
                                                           const grpc::ByteBuffer* request,      \
                                                           grpc::ByteBuffer* response) {         \
    return ServeUnary(handler_, authenticator_, auth::Action::k##Method, context, request,       \
                      response, #Method, &core::TrainingJobHandler::Method);                     \
  }
DEBUGPLANE_SERVE_JOB_METHOD(CreateTrainingJob)
DEBUGPLANE_SERVE_JOB_METHOD(ListTrainingJobs)
DEBUGPLANE_SERVE_JOB_METHOD(UpdateTrainingJob)
DEBUGPLANE_SERVE_JOB_METHOD(StopTrainingJob)
DEBUGPLANE_SERVE_JOB_METHOD(DeleteTrainingJob)
#undef DEBUGPLANE_SERVE_JOB_METHOD

grpc::ServerUnaryReactor* TrainingJobServiceImpl::DescribeTrainingJob(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  constexpr absl::string_view kMethod = "DescribeTrainingJob";
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto parsed = AuthorizedRequest<v1::DescribeTrainingJobRequest>(
      authenticator_, *context, *request, kMethod, auth::Action::kDescribeTrainingJob);
  if (!parsed.ok()) {
    reactor->Finish(ToGrpcStatus(parsed.status()));
    return reactor;
  }
  // Replicas: answered once this server has the changes acknowledged by
  // the others (at once with one server). The request and response live
  // until the reactor finishes.
  auto owned_request = std::shared_ptr<const v1::DescribeTrainingJobRequest>(*std::move(parsed));
  handler_->AwaitConsistentRead([this, reactor, response, owned_request](absl::Status caught_up) {
    if (!caught_up.ok()) {
      reactor->Finish(ToGrpcStatus(caught_up));
      return;
    }
    absl::StatusOr<std::shared_ptr<const std::string>> encoded =
        handler_->DescribeTrainingJobEncoded(*owned_request);
    if (!encoded.ok()) {
      reactor->Finish(ToGrpcStatus(encoded.status()));
      return;
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
  });
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TrainingJobServiceImpl::WatchTrainingJob(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new WatchReactor(handler_, authenticator_, *context, *request, watch_limits_);
}

}  // namespace debugplane::service
