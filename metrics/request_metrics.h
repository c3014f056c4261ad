// Requests served: gRPC calls by method and status code, HTTP requests by
// route and status code. Recorded by the gRPC server's interceptor and the
// HTTP listener (service/).

#ifndef DEBUGPLANE_METRICS_REQUEST_METRICS_H_
#define DEBUGPLANE_METRICS_REQUEST_METRICS_H_

#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace debugplane::metrics {

class RequestMetrics {
 public:
  // Registers debugplane_grpc_requests_total{method,code} and
  // debugplane_http_requests_total{route,code} in `registry`, which must
  // outlive this object. Throws (prometheus-cpp) if they are registered
  // there already.
  explicit RequestMetrics(prometheus::Registry& registry);

  // A gRPC call of `method` ("/debugplane.v1.TrainingJobService/
  // CreateTrainingJob": the caller passes only methods the server serves, or
  // "other") ended with `code` ("OK", "NOT_FOUND", ...).
  void CountGrpc(absl::string_view method, absl::string_view code);
  // An HTTP request to `route` (a registered route's path, or "unmatched":
  // never the path as sent) was answered with status `code`.
  void CountHttp(absl::string_view route, int code);

 private:
  prometheus::Family<prometheus::Counter>& grpc_;
  prometheus::Family<prometheus::Counter>& http_;
};

}  // namespace debugplane::metrics

#endif  // DEBUGPLANE_METRICS_REQUEST_METRICS_H_
