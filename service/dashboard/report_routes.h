// The dashboard's view of a job's reports: GET /api/jobs/NAME/report
// ?rule=RULE&format=html|json serves the report of the job's ProfilerReport
// rule or its CreateXgboostReport debugging rule (the XGBoost training
// report) through GetProfilerReport's handler: the page itself (opened in
// its own tab; its own Content-Security-Policy forbids every script and
// fetch) or its JSON summary. Errors as GetProfilerReport's, in JSON.

#ifndef DEBUGPLANE_SERVICE_DASHBOARD_REPORT_ROUTES_H_
#define DEBUGPLANE_SERVICE_DASHBOARD_REPORT_ROUTES_H_

#include "core/handlers/profiler_report_handler.h"
#include "service/dashboard/dashboard_http.h"

namespace debugplane::service::dashboard {

// REQUIRES: `reports` outlives the routes.
JobResource ReportResource(core::ProfilerReportHandler* reports);

}  // namespace debugplane::service::dashboard

#endif  // DEBUGPLANE_SERVICE_DASHBOARD_REPORT_ROUTES_H_
