// The gRPC adapter of ProfilerReportService: thin. GetProfilerReport is a
// unary call completed by a core::ProfilerReportHandler (which reads the file
// on its own thread) and finished with its status mapped to a gRPC code.

#ifndef DEBUGPLANE_SERVICE_PROFILER_REPORT_SERVICE_H_
#define DEBUGPLANE_SERVICE_PROFILER_REPORT_SERVICE_H_

#include "core/handlers/profiler_report_handler.h"
#include "debugplane/v1/profiler_report.grpc.pb.h"
#include "service/auth/auth.h"
#include "service/grpc_adapter.h"
#include "service/raw_call.h"

namespace debugplane::service {

// Raw, as every method (see raw_call.h).
class ProfilerReportServiceImpl final
    : public v1::ProfilerReportService::WithRawCallbackMethod_GetProfilerReport<
          v1::ProfilerReportService::Service>,
      private GrpcAdapter<core::ProfilerReportHandler> {
 public:
  // Calls are authenticated and authorized (Action::kGetProfilerReport);
  // `authenticator` null: authentication off.
  // REQUIRES: `handler` and `authenticator` outlive the service and every
  // call it serves.
  explicit ProfilerReportServiceImpl(core::ProfilerReportHandler* handler,
                                     const auth::Authenticator* authenticator = nullptr)
      : GrpcAdapter(handler, authenticator) {}

  DEBUGPLANE_RAW_UNARY_METHOD(GetProfilerReport);
};

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_PROFILER_REPORT_SERVICE_H_
