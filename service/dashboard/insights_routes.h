// The dashboard's data routes (docs/dashboard-api.md, "Overview", "Nodes",
// "Model"): GET /api/jobs/NAME/{overview, system, framework, tensors,
// tensor}, as JobResource entries for DashboardRoutes.
//
//   GET .../overview   training summary, utilization per node, top
//                      operations, rule insights
//   GET .../system     ?start&end&width&node&metric&devices: reduced series
//   GET .../framework  ?start&end&width: phase busy shares, last steps
//   GET .../tensors    tensors and collections of the job's trial
//   GET .../tensor     ?name&mode&steps&maxPoints: one series per mode
//
// Beyond the document: overview and system replies carry "problems", the
// readers' first errors naming the file and line ("system/incremental/
// 2026112122/1795300000.algo-1.json:3: ...") or why the profiler output is
// not read, and utilization entries of network metrics carry "direction"
// ("rx" | "tx").
//
// Handlers run on libmicrohttpd's threads and only parse the query; reading
// and serializing run on the InsightsStore's pool (overview, system,
// framework) or the TensorQueryHandler's (tensors, tensor), which answer
// through the responder.

#ifndef DEBUGPLANE_SERVICE_DASHBOARD_INSIGHTS_ROUTES_H_
#define DEBUGPLANE_SERVICE_DASHBOARD_INSIGHTS_ROUTES_H_

#include <string>
#include <vector>

#include "debugplane/v1/tensor_query.pb.h"
#include "rules_engine/insights/insights_store.h"
#include "rules_engine/insights/job_insights.h"
#include "rules_engine/query_handler/tensor_query_handler.h"
#include "service/dashboard/dashboard_http.h"
#include "service/dashboard/insights_query.h"

namespace debugplane::service::dashboard {

struct InsightsRouteDeps {
  rules_engine::insights::InsightsStore* store = nullptr;  // Required.
  rules_engine::TensorQueryHandler* tensors = nullptr;     // Required.
};

// The five resources. REQUIRES: the dependencies outlive the routes' use.
std::vector<JobResource> InsightsResources(InsightsRouteDeps deps);

// The replies' JSON (for the routes, tests and the bench). REQUIRES:
// view.data and view.record are set (as WithJob gives them).
std::string OverviewJson(const rules_engine::insights::JobView& view);
std::string SystemJson(const rules_engine::insights::JobView& view,
                       const rules_engine::insights::SystemQuery& query,
                       const SystemFields& fields = SystemFields());
std::string FrameworkJson(const rules_engine::insights::JobView& view,
                          const rules_engine::insights::TimeRange& range, int width);
std::string TensorsJson(const v1::ListTensorsResponse& response);
std::string TensorJson(const std::string& name,
                       const std::vector<v1::TensorValuesResponse>& messages);

}  // namespace debugplane::service::dashboard

#endif  // DEBUGPLANE_SERVICE_DASHBOARD_INSIGHTS_ROUTES_H_
