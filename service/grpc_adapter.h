// What every gRPC adapter of service/ holds: the core handler its calls go
// to and the authenticator of its callers.

#ifndef DEBUGPLANE_SERVICE_GRPC_ADAPTER_H_
#define DEBUGPLANE_SERVICE_GRPC_ADAPTER_H_

#include "service/auth/auth.h"

namespace debugplane::service {

// A base of the adapters (privately inherited): `handler_` serves the
// calls, `authenticator_` authenticates their callers (null: authentication
// off). REQUIRES: both outlive the adapter and every call it serves.
template <typename Handler>
class GrpcAdapter {
 protected:
  GrpcAdapter(Handler* handler, const auth::Authenticator* authenticator)
      : handler_(handler), authenticator_(authenticator) {}

  Handler* const handler_;
  const auth::Authenticator* const authenticator_;
};

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_GRPC_ADAPTER_H_
