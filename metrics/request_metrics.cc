#include "metrics/request_metrics.h"

#include <string>

#include "metrics/family.h"

namespace debugplane::metrics {

RequestMetrics::RequestMetrics(prometheus::Registry& registry)
    : grpc_(CounterFamily(registry, "debugplane_grpc_requests_total",
                          "gRPC calls served, by method and status code")),
      http_(CounterFamily(registry, "debugplane_http_requests_total",
                          "HTTP requests served, by route and status code")) {}

void RequestMetrics::CountGrpc(absl::string_view method, absl::string_view code) {
  grpc_.Add({{"method", std::string(method)}, {"code", std::string(code)}}).Increment();
}

void RequestMetrics::CountHttp(absl::string_view route, int code) {
  http_.Add({{"route", std::string(route)}, {"code", std::to_string(code)}}).Increment();
}

}  // namespace debugplane::metrics
