#include "service/profiler_report_service.h"

#include "service/raw_call.h"

namespace debugplane::service {

grpc::ServerUnaryReactor* ProfilerReportServiceImpl::GetProfilerReport(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return ServeRawUnary<v1::GetProfilerReportRequest, v1::GetProfilerReportResponse>(
      context, request, response, "GetProfilerReport",
      [this](const v1::GetProfilerReportRequest& decoded, v1::GetProfilerReportResponse* out,
             core::DoneCallback done) {
        handler_->GetProfilerReport(decoded, out, std::move(done));
      });
}

}  // namespace debugplane::service
