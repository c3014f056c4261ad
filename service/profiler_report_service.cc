#include "service/profiler_report_service.h"

#include "service/status_mapping.h"

namespace debugplane::service {

grpc::ServerUnaryReactor* ProfilerReportServiceImpl::GetProfilerReport(
    grpc::CallbackServerContext* context, const v1::GetProfilerReportRequest* request,
    v1::GetProfilerReportResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  handler_->GetProfilerReport(*request, response, [reactor](const absl::Status& status) {
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

}  // namespace debugplane::service
