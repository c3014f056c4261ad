// Calls served only to callers that may make them (unary calls and
// streams fed by the core): the call is authenticated before its body is
// decoded, and authorized (role, and the job the request names) before the
// handler sees it.

#ifndef DEBUGPLANE_SERVICE_AUTHORIZED_CALL_H_
#define DEBUGPLANE_SERVICE_AUTHORIZED_CALL_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "debugplane/v1/training_job.pb.h"
#include "service/auth/auth.h"
#include "service/call_authorization.h"
#include "service/raw_call.h"
#include "service/status_mapping.h"
#include "service/stream_writer.h"

namespace debugplane::service {

// The job a request names, for authorization.
template <typename Request>
absl::string_view JobNameOf(const Request& request) {
  return request.training_job_name();
}
inline absl::string_view JobNameOf(const v1::ListTrainingJobsRequest&) { return ""; }

// The request of a call served only to callers allowed to do `action`:
// the caller is authenticated (AuthenticateCall), `raw_request` decoded
// (DecodeRequest) and the caller authorized for the job it names
// (AuthorizeCall). Returns the request, or the error (UNAUTHENTICATED,
// INVALID_ARGUMENT, PERMISSION_DENIED) to finish the call with. Never
// blocks; finishes nothing itself, so that each reactor finishes once.
// REQUIRES: `authenticator` (null: authentication off) outlives the call.
template <typename Request>
absl::StatusOr<std::unique_ptr<Request>> AuthorizedRequest(
    const auth::Authenticator* authenticator, const grpc::CallbackServerContext& context,
    const grpc::ByteBuffer& raw_request, absl::string_view method, auth::Action action) {
  absl::StatusOr<auth::Principal> principal = AuthenticateCall(authenticator, context, method);
  if (!principal.ok()) return principal.status();
  absl::StatusOr<std::unique_ptr<Request>> request = DecodeRequest<Request>(raw_request, method);
  if (!request.ok()) return request.status();
  if (absl::Status allowed =
          AuthorizeCall(*principal, context, method, action, JobNameOf(**request));
      !allowed.ok()) {
    return allowed;
  }
  return request;
}

// As ServeRawUnary, after AuthenticateCall; the decoded request is then
// authorized for `action` (AuthorizeCall) before `invoke` runs. Refusals
// finish the call with UNAUTHENTICATED or PERMISSION_DENIED.
// REQUIRES: `authenticator` (null: authentication off) outlives the call.
template <typename Request, typename Response, typename Invoke>
grpc::ServerUnaryReactor* ServeAuthorizedUnary(const auth::Authenticator* authenticator,
                                               auth::Action action,
                                               grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* raw_request,
                                               grpc::ByteBuffer* raw_response,
                                               absl::string_view method, Invoke invoke) {
  absl::StatusOr<auth::Principal> principal = AuthenticateCall(authenticator, *context, method);
  if (!principal.ok()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(principal.status()));
    return reactor;
  }
  return ServeRawUnary<Request, Response>(
      context, raw_request, raw_response, method,
      [principal = *std::move(principal), context, method, action, invoke = std::move(invoke)](
          const Request& request, Response* response, core::DoneCallback done) mutable {
        absl::Status allowed =
            AuthorizeCall(principal, *context, method, action, JobNameOf(request));
        if (!allowed.ok()) {
          std::move(done)(std::move(allowed));
          return;
        }
        invoke(request, response, std::move(done));
      });
}

// A server stream fed by a registration with the core: `Sink` is the
// interface the core calls (core::JobWatcher, core::AgentDirectiveSink),
// whose OnEnd ends the stream. The subclass implements the sink's other
// callbacks (pushing what they get) and StreamWriter::MergeInto.
template <typename Message, typename Sink>
class AuthorizedStream : public StreamWriter<Message>, public Sink {
 public:
  void OnEnd(absl::Status status) override { this->End(ToGrpcStatus(status)); }

 protected:
  explicit AuthorizedStream(StreamLimits limits = {}) : StreamWriter<Message>(std::move(limits)) {}

  // Starts the stream, from the subclass's constructor: the caller is
  // authenticated, `raw_request` decoded and the caller authorized for
  // `action` on the job it names (AuthorizedRequest); then `subscribe` of
  // `handler` registers this stream. The registration is kept until
  // OnDone; any error ends the stream at once.
  template <typename Request, typename Handler>
  void Begin(const auth::Authenticator* authenticator, const grpc::CallbackServerContext& context,
             const grpc::ByteBuffer& raw_request, absl::string_view method, auth::Action action,
             Handler* handler,
             absl::StatusOr<std::unique_ptr<core::WatchRegistration>> (Handler::*subscribe)(
                 const Request&, Sink*)) {
    absl::StatusOr<std::unique_ptr<Request>> request =
        AuthorizedRequest<Request>(authenticator, context, raw_request, method, action);
    if (!request.ok()) {
      this->End(ToGrpcStatus(request.status()));
      return;
    }
    absl::StatusOr<std::unique_ptr<core::WatchRegistration>> registration =
        (handler->*subscribe)(**request, this);
    if (!registration.ok()) {
      this->End(ToGrpcStatus(registration.status()));
      return;
    }
    registration_ = *std::move(registration);
  }

 private:
  // Unregisters: afterwards the core calls nothing on this stream.
  void Detach() override { registration_.reset(); }

  std::unique_ptr<core::WatchRegistration> registration_;
};

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_AUTHORIZED_CALL_H_
