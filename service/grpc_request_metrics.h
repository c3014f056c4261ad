// Counts gRPC calls by method and status code into metrics::RequestMetrics
// (debugplane_grpc_requests_total), with a server interceptor: every call
// of every service is counted when its status is sent, without touching
// the services.

#ifndef DEBUGPLANE_SERVICE_GRPC_REQUEST_METRICS_H_
#define DEBUGPLANE_SERVICE_GRPC_REQUEST_METRICS_H_

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "grpcpp/support/server_interceptor.h"
#include "metrics/request_metrics.h"

namespace debugplane::service {

// The factory to install with ServerBuilder::experimental()
// .SetInterceptorCreators. REQUIRES: `metrics` is not null and outlives the
// server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewRequestCountingFactory(
    metrics::RequestMetrics* metrics);

// The method label of a call to `method` ("/package.Service/Method"):
// itself if the server's compiled protos define it, "other" otherwise (a
// client may call any path; labels must stay a fixed set).
std::string MethodLabel(absl::string_view method);

// "OK", "NOT_FOUND", ... for a gRPC status code.
absl::string_view GrpcCodeName(int code);

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_GRPC_REQUEST_METRICS_H_
