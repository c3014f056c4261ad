// The report's entry points: the page and the JSON summary, assembled from
// report_html.cc (page around the charts), report_charts.cc (the charts,
// with the kit in svg_charts.cc) and report_json.cc. The data they read is
// summarized by report_data.cc; texts come from report_text.cc.

#include "rules_engine/report/profiler_report.h"

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "rules_engine/report/report_charts.h"
#include "rules_engine/report/report_html.h"
#include "rules_engine/report/report_json.h"
#include "rules_engine/report/report_text.h"

namespace debugplane::rules_engine {

namespace parts = profiler_report_internal;

std::string RenderProfilerReportHtml(const ProfilerReportData& data,
                                     const std::vector<ProfilerRuleFinding>& findings,
                                     const ProfilerReportContext& context) {
  using parts::References;
  using parts::Section;
  std::string s = parts::PageStart(context);
  s += parts::OverviewCards(data, findings);
  s += parts::FindingsTable(findings);
  s += Section(parts::UtilizationChart(
      data, MetricDimension::kCpuUtilization, "chart-cpu", "CPU utilization over time", true,
      References(findings, {{"CPUBottleneck", "cpu_threshold"}}),
      "No CPU utilization metrics recorded yet — is system profiling enabled?"));
  s += Section(parts::UtilizationChart(data, MetricDimension::kGpuUtilization, "chart-gpu",
                                       "GPU utilization over time", false,
                                       References(findings, {{"LowGPUUtilization", "threshold_p95"},
                                                             {"LowGPUUtilization", "threshold_p5"},
                                                             {"CPUBottleneck", "gpu_threshold"},
                                                             {"IOBottleneck", "gpu_threshold"}}),
                                       "No GPU metrics recorded — is this a CPU-only instance?"));
  s += Section(parts::Heatmap(data));
  s += Section(parts::StepHistogram(data, findings));
  s += Section(parts::StepTimeline(data, findings));
  s += Section(
      parts::UtilizationChart(data, MetricDimension::kGpuMemoryUtilization, "chart-gpu-memory",
                              "GPU memory utilization over time", false, {},
                              "No GPU memory metrics recorded — is this a CPU-only instance?"));
  s += Section(parts::HostChart(data, References(findings, {{"IOBottleneck", "io_threshold"}})));
  return s + parts::PageEnd();
}

std::string RenderProfilerReportJson(const ProfilerReportData& data,
                                     const std::vector<ProfilerRuleFinding>& findings,
                                     const ProfilerReportContext& context) {
  using nlohmann::json;
  json j;
  j["job"] = context.training_job_name;
  j["rule_configuration_name"] = context.rule_configuration_name;
  j["training_job_status"] = context.training_job_status;
  j["final"] = context.final;
  j["generated_at"] = parts::FormatRfc3339(context.generated_at);
  j["data_summary"] = context.data_summary;
  j["findings"] = parts::FindingsJson(findings);
  j["system"] = parts::SystemJson(data);
  j["steps"] = parts::StepsJson(data, findings);
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace debugplane::rules_engine
