// The query parameters of the dashboard's data routes
// (docs/dashboard-api.md: /api/jobs/NAME/system, framework, tensor),
// parsed and checked. Every error is INVALID_ARGUMENT naming the parameter
// ("width must be 1..4000", "start after end"), with the parameter in
// `ParamError::field` for the reply's "field".

#ifndef DEBUGPLANE_SERVICE_DASHBOARD_INSIGHTS_QUERY_H_
#define DEBUGPLANE_SERVICE_DASHBOARD_INSIGHTS_QUERY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "debugplane/v1/tensor_query.pb.h"
#include "rules_engine/insights/job_insights.h"

namespace debugplane::service::dashboard {

struct ParamError {
  absl::Status status;  // OK: no error.
  std::string field;    // The parameter at fault.
  bool ok() const { return status.ok(); }
};

// "a=1&b=x%20y" -> {a: "1", b: "x y"} ('+' is a space; a repeated name keeps
// the last value). Error for a bad percent escape or a name outside
// `known` (field: that name).
ParamError ParseQueryString(absl::string_view query, const std::vector<std::string>& known,
                            std::map<std::string, std::string>* out);

inline constexpr int kDefaultWidth = 800;
inline constexpr int kMaxWidth = rules_engine::insights::kMaxBuckets;

// Which arrays each series of a system reply carries: ?fields=mean gives
// only the means (the reply's top-level "t" has the bucket starts every
// series shares), a third of the bytes of t, min, max and mean per series.
struct SystemFields {
  bool t = true;
  bool min = true;
  bool max = true;
  bool mean = true;
};

// start, end (epoch seconds from 0 to rules_engine::insights::kLatestTime,
// the year 2286; start before end), width (1..4000, default 800), node,
// metric (a dashboard metric name), devices (comma list), fields (comma
// list of t, min, max, mean; default all four) into `fields` when not null.
// A range is only checked here; the answer narrows it to the job's data
// (job_insights.h).
ParamError ParseSystemQuery(absl::string_view query, rules_engine::insights::SystemQuery* out,
                            SystemFields* fields = nullptr);
// start, end, width.
ParamError ParseFrameworkQuery(absl::string_view query, rules_engine::insights::TimeRange* range,
                               int* width);

inline constexpr int kDefaultTensorPoints = 1000;

// name (required), mode (TRAIN, EVAL, PREDICT, GLOBAL or ALL, the
// default), steps "A:B" (either side may be empty), maxPoints (1..10000,
// default 1000): a GetTensorValues request for job `job_name`.
ParamError ParseTensorQuery(absl::string_view query, const std::string& job_name,
                            v1::GetTensorValuesRequest* out);

}  // namespace debugplane::service::dashboard

#endif  // DEBUGPLANE_SERVICE_DASHBOARD_INSIGHTS_QUERY_H_
