#include "service/grpc_request_metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"

namespace debugplane::service {
namespace {

class CountingInterceptor final : public grpc::experimental::Interceptor {
 public:
  CountingInterceptor(std::string method, metrics::RequestMetrics* metrics)
      : method_(std::move(method)), metrics_(metrics) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_->CountGrpc(method_, GrpcCodeName(methods->GetSendStatus().error_code()));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  metrics::RequestMetrics* const metrics_;
};

class CountingFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CountingFactory(metrics::RequestMetrics* metrics) : metrics_(metrics) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CountingInterceptor(MethodLabel(info->method()), metrics_);
  }

 private:
  metrics::RequestMetrics* const metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewRequestCountingFactory(
    metrics::RequestMetrics* metrics) {
  return std::make_unique<CountingFactory>(metrics);
}

std::string MethodLabel(absl::string_view method) {
  absl::string_view name = method;
  if (!absl::ConsumePrefix(&name, "/")) return "other";
  const size_t slash = name.find('/');
  if (slash == absl::string_view::npos) return "other";
  // "/pkg.Service/Method" is "pkg.Service.Method" in the descriptor pool.
  const std::string full_name = absl::StrCat(name.substr(0, slash), ".", name.substr(slash + 1));
  if (google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(full_name) == nullptr) {
    return "other";
  }
  return std::string(method);
}

absl::string_view GrpcCodeName(int code) {
  static constexpr absl::string_view kNames[] = {"OK",
                                                 "CANCELLED",
                                                 "UNKNOWN",
                                                 "INVALID_ARGUMENT",
                                                 "DEADLINE_EXCEEDED",
                                                 "NOT_FOUND",
                                                 "ALREADY_EXISTS",
                                                 "PERMISSION_DENIED",
                                                 "RESOURCE_EXHAUSTED",
                                                 "FAILED_PRECONDITION",
                                                 "ABORTED",
                                                 "OUT_OF_RANGE",
                                                 "UNIMPLEMENTED",
                                                 "INTERNAL",
                                                 "UNAVAILABLE",
                                                 "DATA_LOSS",
                                                 "UNAUTHENTICATED"};
  if (code < 0 || code >= static_cast<int>(std::size(kNames))) return "UNKNOWN";
  return kNames[code];
}

}  // namespace debugplane::service
