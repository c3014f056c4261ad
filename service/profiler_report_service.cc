#include "service/profiler_report_service.h"

#include "service/authorized_call.h"

namespace debugplane::service {

grpc::ServerUnaryReactor* ProfilerReportServiceImpl::GetProfilerReport(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return ServeAuthorizedUnary<v1::GetProfilerReportRequest, v1::GetProfilerReportResponse>(
      authenticator_, auth::Action::kGetProfilerReport, context, request, response,
      "GetProfilerReport",
      [this](const v1::GetProfilerReportRequest& decoded, v1::GetProfilerReportResponse* out,
             core::DoneCallback done) {
        handler_->GetProfilerReport(decoded, out, std::move(done));
      });
}

}  // namespace debugplane::service
