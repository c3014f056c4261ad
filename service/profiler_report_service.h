// The gRPC adapter of ProfilerReportService: thin. GetProfilerReport is a
// unary call completed by a core::ProfilerReportHandler (which reads the file
// on its own thread) and finished with its status mapped to a gRPC code.

#ifndef DEBUGPLANE_SERVICE_PROFILER_REPORT_SERVICE_H_
#define DEBUGPLANE_SERVICE_PROFILER_REPORT_SERVICE_H_

#include "core/profiler_report_handler.h"
#include "debugplane/v1/profiler_report.grpc.pb.h"

namespace debugplane::service {

// Raw, as every method (see raw_call.h).
class ProfilerReportServiceImpl final
    : public v1::ProfilerReportService::WithRawCallbackMethod_GetProfilerReport<
          v1::ProfilerReportService::Service> {
 public:
  // REQUIRES: `handler` outlives the service and every call it serves.
  explicit ProfilerReportServiceImpl(core::ProfilerReportHandler* handler) : handler_(handler) {}

  grpc::ServerUnaryReactor* GetProfilerReport(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) override;

 private:
  core::ProfilerReportHandler* const handler_;
};

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_PROFILER_REPORT_SERVICE_H_
