// The JSON summary's parts (keys in profiler_report.h's file comment).
// Internal to rules_engine/report/.

#ifndef DEBUGPLANE_RULES_ENGINE_REPORT_REPORT_JSON_H_
#define DEBUGPLANE_RULES_ENGINE_REPORT_REPORT_JSON_H_

#include <vector>

#include "nlohmann/json.hpp"
#include "rules_engine/report/profiler_report.h"

namespace debugplane::rules_engine::profiler_report_internal {

// "findings": one object per finding, in the given order.
nlohmann::json FindingsJson(const std::vector<ProfilerRuleFinding>& findings);
// "system": the metrics' span, bucket width, nodes, and per-device
// statistics sorted by dimension, node, device.
nlohmann::json SystemJson(const ProfilerReportData& data);
// "steps": step duration statistics, modes, outliers and the slowest steps.
nlohmann::json StepsJson(const ProfilerReportData& data,
                         const std::vector<ProfilerRuleFinding>& findings);

}  // namespace debugplane::rules_engine::profiler_report_internal

#endif  // DEBUGPLANE_RULES_ENGINE_REPORT_REPORT_JSON_H_
