#include "service/tensor_query_service.h"

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "service/call_authorization.h"
#include "service/raw_call.h"

namespace debugplane::service {

absl::Status AuthorizeTensorQuery(const auth::Authenticator* authenticator,
                                  grpc::CallbackServerContext* context, absl::string_view method,
                                  absl::string_view training_job_name) {
  absl::StatusOr<auth::Principal> principal = AuthenticateCall(authenticator, *context, method);
  if (!principal.ok()) return principal.status();
  return AuthorizeCall(*principal, *context, method, auth::Action::kQueryTensors,
                       training_job_name);
}

namespace {

// One GetTensorValues stream: the handler's batches, written one at a time.
// Deleted when both gRPC (OnDone) and the handler (its callback) are done
// with it, whichever comes last.
class TensorValuesReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  TensorValuesReactor(rules_engine::TensorQueryHandler* handler,
                      const auth::Authenticator* authenticator,
                      grpc::CallbackServerContext* context, const grpc::ByteBuffer& raw) {
    auto request = DecodeRequest<v1::GetTensorValuesRequest>(raw, "GetTensorValues");
    absl::Status allowed = request.ok()
                               ? AuthorizeTensorQuery(authenticator, context, "GetTensorValues",
                                                      (*request)->training_job_name())
                               : request.status();
    if (!allowed.ok()) {
      absl::MutexLock lock(&mu_);
      FinishLocked(ToGrpcStatus(allowed));
      return;
    }
    refs_.fetch_add(1);  // The handler's callback holds one.
    handler->GetTensorValues(**request, cancelled_,
                             [this](absl::StatusOr<std::vector<v1::TensorValuesResponse>> result) {
                               OnResult(std::move(result));
                             });
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok || cancelled_->load()) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream closed by the client"));
      return;
    }
    WriteNextLocked();
  }

  void OnCancel() override {
    cancelled_->store(true);  // The handler's read stops at its next batch of steps.
    absl::MutexLock lock(&mu_);
    if (!writing_) FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override { Unref(); }

 private:
  void OnResult(absl::StatusOr<std::vector<v1::TensorValuesResponse>> result) {
    {
      absl::MutexLock lock(&mu_);
      if (!result.ok()) {
        FinishLocked(ToGrpcStatus(result.status()));
      } else if (!finished_) {
        messages_ = *std::move(result);
        WriteNextLocked();
      }
    }
    Unref();
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    if (next_ >= messages_.size()) {
      FinishLocked(grpc::Status::OK);
      return;
    }
    in_flight_.Clear();
    if (!EncodeMessage(messages_[next_++], &in_flight_)) {
      FinishLocked(grpc::Status(grpc::StatusCode::INTERNAL, "a stream message cannot be encoded"));
      return;
    }
    writing_ = true;
    StartWrite(&in_flight_);
  }

  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    messages_.clear();
    Finish(std::move(status));
  }

  void Unref() {
    if (refs_.fetch_sub(1) == 1) delete this;
  }

  const std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
  std::atomic<int> refs_{1};  // gRPC's (until OnDone).
  absl::Mutex mu_;
  std::vector<v1::TensorValuesResponse> messages_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::ByteBuffer in_flight_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerUnaryReactor* TensorQueryServiceImpl::ListTensors(grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer* request,
                                                              grpc::ByteBuffer* response) {
  return ServeRawUnary<v1::ListTensorsRequest, v1::ListTensorsResponse>(
      context, request, response, "ListTensors",
      [this, context](const v1::ListTensorsRequest& decoded, v1::ListTensorsResponse* out,
                      core::DoneCallback done) {
        if (absl::Status allowed = AuthorizeTensorQuery(authenticator_, context, "ListTensors",
                                                        decoded.training_job_name());
            !allowed.ok()) {
          std::move(done)(allowed);
          return;
        }
        handler_->ListTensors(decoded, out, std::move(done));
      });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TensorQueryServiceImpl::GetTensorValues(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new TensorValuesReactor(handler_, authenticator_, context, *request);
}

}  // namespace debugplane::service
