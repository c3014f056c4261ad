// Authentication and authorization of one gRPC call: who the caller is (the
// `authorization` metadata, else the verified TLS client certificate's CN)
// and whether that principal may do the call's action on its job. Every
// refusal is logged (method, key id, peer; never a secret).

#ifndef DEBUGPLANE_SERVICE_CALL_AUTHORIZATION_H_
#define DEBUGPLANE_SERVICE_CALL_AUTHORIZATION_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"
#include "service/auth/auth.h"

namespace debugplane::service {

// Returns the caller's principal (an anonymous admin if `authenticator` is
// null or disabled), or UNAUTHENTICATED saying what is wrong: the
// authorization metadata if sent (bearer token), else the client
// certificate's common name, else "no credentials". Non-blocking.
absl::StatusOr<auth::Principal> AuthenticateCall(const auth::Authenticator* authenticator,
                                                 const grpc::ServerContextBase& context,
                                                 absl::string_view method);

// auth::Authorize, with the refusal logged. `job_name`: the job the request
// names ("" for none).
absl::Status AuthorizeCall(const auth::Principal& principal, const grpc::ServerContextBase& context,
                           absl::string_view method, auth::Action action,
                           absl::string_view job_name);

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_CALL_AUTHORIZATION_H_
