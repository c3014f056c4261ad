// Unary calls served only to callers that may make them: the call is
// authenticated before its body is decoded, and authorized (role, and the
// job the request names) before the handler sees it.

#ifndef DEBUGPLANE_SERVICE_AUTHORIZED_CALL_H_
#define DEBUGPLANE_SERVICE_AUTHORIZED_CALL_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "debugplane/v1/training_job.pb.h"
#include "service/auth/auth.h"
#include "service/call_authorization.h"
#include "service/raw_call.h"
#include "service/status_mapping.h"

namespace debugplane::service {

// The job a request names, for authorization.
template <typename Request>
absl::string_view JobNameOf(const Request& request) {
  return request.training_job_name();
}
inline absl::string_view JobNameOf(const v1::ListTrainingJobsRequest&) { return ""; }

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

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_AUTHORIZED_CALL_H_
