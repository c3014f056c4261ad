#include "rules_engine/report/report_html.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/utc_time.h"
#include "rules_engine/report/report_charts.h"
#include "rules_engine/report/report_text.h"

namespace debugplane::rules_engine::profiler_report_internal {
namespace {

const char kCss[] = R"css(
:root{--fg:#1f2933;--muted:#616e7c;--line:#e4e7eb;--bg:#f5f7fa;--card:#fff;--accent:#4e79a7;
--bad:#c62828;--bad-bg:#fdecea;--ok:#2e7d32;--ok-bg:#e8f5e9;--run:#1565c0;--run-bg:#e3f2fd;
--err:#8e24aa;--err-bg:#f3e5f5}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,
"Segoe UI",Roboto,"Helvetica Neue",Arial,"DejaVu Sans",sans-serif}
main{max-width:1200px;margin:0 auto;padding:24px 20px 48px}
header.top{background:#1f2933;color:#fff;padding:22px 20px}
header.top .inner{max-width:1200px;margin:0 auto}
header.top h1{margin:0 0 4px;font-size:26px;font-weight:650;word-break:break-all}
header.top .meta{color:#cbd2d9;font-size:14px}
header.top .meta b{color:#fff;font-weight:600}
.mode{display:inline-block;margin-left:8px;padding:2px 10px;border-radius:999px;font-size:13px;
font-weight:600;vertical-align:middle}
.mode.live{background:#fff3cd;color:#7a5b00}.mode.final{background:#d1f2dc;color:#14532d}
.summary{margin-top:8px;color:#cbd2d9;font-size:13px;word-break:break-word}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:12px;
margin-bottom:20px}
.stat{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.stat .v{font-size:22px;font-weight:650}.stat .k{color:var(--muted);font-size:13px}
.stat.alert .v{color:var(--bad)}
.card{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:18px 20px;
margin-bottom:20px;box-shadow:0 1px 2px rgba(0,0,0,.04)}
h2{margin:0 0 4px;font-size:19px}h3{font-size:15px;margin:12px 0 6px}
.sub{margin:0 0 10px;color:var(--muted);font-size:13.5px}
.table-wrap{overflow-x:auto}
table{border-collapse:collapse;width:100%;min-width:860px;font-size:14px;table-layout:fixed}
col.c-rule{width:19%}col.c-status{width:11%}col.c-num{width:7%}col.c-params{width:22%}
col.c-details{width:34%}
th{text-align:left;color:var(--muted);font-weight:600;border-bottom:2px solid var(--line);
padding:8px 10px}
td{border-bottom:1px solid var(--line);padding:9px 10px;vertical-align:top}
tr.issues td{background:var(--bad-bg)}tr.issues td.rule{border-left:4px solid var(--bad)}
th.num{text-align:right}td.rule{font-weight:600;overflow-wrap:anywhere}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.details{font-size:13.5px;color:#323f4b;overflow-wrap:anywhere}
.badge{display:inline-block;padding:2px 9px;border-radius:999px;font-size:12.5px;font-weight:650;
white-space:nowrap}
.badge.IssuesFound{background:var(--bad);color:#fff}.badge.NoIssuesFound{background:var(--ok-bg);
color:var(--ok)}.badge.InProgress{background:var(--run-bg);color:var(--run)}
.badge.Error{background:var(--err-bg);color:var(--err)}
.params{display:flex;flex-wrap:wrap;gap:4px}
.param{background:#eef2f6;border-radius:6px;padding:1px 7px;font:12px ui-monospace,
SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;overflow-wrap:anywhere}
svg.chart{width:100%;height:auto;display:block;font-size:12px;fill:var(--fg)}
svg.chart text{fill:#52606d}svg.chart .axis-title{fill:var(--muted);font-size:12px}
svg.chart .grid line{stroke:#edf0f3}svg.chart .axis line{stroke:#9aa5b1}
svg.chart .threshold line{stroke:#c62828;stroke-dasharray:6 4;stroke-width:1.5}
svg.chart .threshold text{fill:#c62828;font-size:11.5px;font-weight:600;paint-order:stroke;
stroke:#fff;stroke-width:4px;stroke-linejoin:round}
svg.chart .bar{fill:#4e79a7}svg.chart .bar.outlier{fill:#e15759}
svg.chart .outlier-marker,svg.chart .outlier-dot{fill:#e15759;stroke:#fff;stroke-width:1}
svg.chart .heat-bg{fill:#eceff3}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;margin-top:8px;font-size:13px;color:#3e4c59}
.legend-item{display:inline-flex;align-items:center;gap:6px}
.swatch{width:14px;height:14px;border-radius:3px;display:inline-block}
.empty-state{border:2px dashed var(--line);border-radius:10px;padding:36px 20px;text-align:center;
color:var(--muted);font-size:15px;background:#fafbfc}
.outliers ul{display:flex;flex-wrap:wrap;gap:6px;list-style:none;padding:0;margin:0}
.outliers li{background:var(--bad-bg);color:var(--bad);border-radius:6px;padding:2px 8px;
font-size:13px;font-variant-numeric:tabular-nums}.outliers .dur{color:#7f1d1d;opacity:.8}
.outliers.none{color:var(--muted);font-size:13.5px}
.grid2{display:grid;grid-template-columns:1fr;gap:0}
footer{color:var(--muted);font-size:12.5px;text-align:center;margin-top:24px}
@media (max-width:640px){header.top h1{font-size:20px}main{padding:16px 10px}}
)css";

std::string StatCard(const std::string& value, const std::string& key, bool alert = false) {
  return absl::StrCat("<div class=\"stat", alert ? " alert" : "", "\"><div class=\"v\">",
                      EscapeHtml(value), "</div><div class=\"k\">", EscapeHtml(key),
                      "</div></div>");
}

// The table's row of one finding.
std::string FindingRow(const ProfilerRuleFinding& f) {
  const std::string status = ProfilerRuleStatusName(f.status);
  std::string params;
  for (const auto& [k, v] : f.parameters) {
    absl::StrAppend(&params, "<span class=\"param\">", EscapeHtml(k), " = ", EscapeHtml(v),
                    "</span>");
  }
  return absl::StrCat(
      "<tr class=\"finding", f.status == RuleVerdict::Kind::kIssuesFound ? " issues" : "",
      "\" data-status=\"", status, "\"><td class=\"rule\">", EscapeHtml(f.rule),
      "</td><td><span class=\"badge ", status, "\">", status, "</span></td><td class=\"num\">",
      FormatCount(f.violations), "</td><td class=\"num\">", FormatCount(f.datapoints),
      "</td><td><div class=\"params\">", params, "</div></td><td class=\"details\">",
      EscapeHtml(f.details), "</td></tr>\n");
}

}  // namespace

std::string PageStart(const ProfilerReportContext& context) {
  const std::string generated = base::FormatUtc(context.generated_at, "%Y-%m-%d %H:%M:%S UTC");
  return absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      // No network at all: nothing to fetch, not even a favicon.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; img-src data:\">\n"
      "<link rel=\"icon\" href=\"data:,\">\n<title>",
      EscapeHtml(context.training_job_name), " — profiler report</title>\n<style>", kCss,
      "</style></head>\n<body>\n<header class=\"top\"><div class=\"inner\">"
      "<div class=\"meta\">",
      EscapeHtml(context.rule_configuration_name.empty() ? "ProfilerReport"
                                                         : context.rule_configuration_name),
      " · SageMaker Debugger profiler report</div><h1 id=\"job-name\">",
      EscapeHtml(context.training_job_name),
      "</h1><div class=\"meta\">Training job status <b id=\"job-status\">",
      EscapeHtml(context.training_job_status.empty() ? "Unknown" : context.training_job_status),
      "</b> · generated <b>", generated, "</b>",
      context.final ? "<span class=\"mode final\" id=\"report-mode\">Final report</span>"
                    : "<span class=\"mode live\" id=\"report-mode\">Live — regenerated as data "
                      "arrives</span>",
      "</div>",
      context.data_summary.empty() ? ""
                                   : absl::StrCat("<div class=\"summary\" id=\"data-summary\">",
                                                  EscapeHtml(context.data_summary), "</div>"),
      "</div></header>\n<main>\n");
}

std::string OverviewCards(const ProfilerReportData& data,
                          const std::vector<ProfilerRuleFinding>& findings) {
  int issues = 0;
  for (const ProfilerRuleFinding& f : findings) {
    issues += f.status == RuleVerdict::Kind::kIssuesFound;
  }
  double span = data.metric_points() ? data.last_timestamp() - data.first_timestamp() : 0;
  return absl::StrCat(
      "<div class=\"cards\" id=\"overview\">",
      StatCard(absl::StrCat(issues, " of ", findings.size()), "rules found issues", issues > 0),
      StatCard(data.metric_points() ? FormatSpan(span) : "—", "of system metrics"),
      StatCard(absl::StrCat(Nodes(data).size()), "nodes"),
      StatCard(absl::StrCat(CountDevices(data, MetricDimension::kCpuUtilization)), "CPU cores"),
      StatCard(absl::StrCat(CountDevices(data, MetricDimension::kGpuUtilization)), "GPUs"),
      StatCard(FormatCount(data.metric_points()), "metric points"),
      StatCard(FormatCount(data.step_events()), "step events"), "</div>\n");
}

std::string FindingsTable(const std::vector<ProfilerRuleFinding>& findings) {
  std::string s =
      "<section class=\"card\" id=\"findings\"><h2>Rule findings</h2>"
      "<p class=\"sub\">What each profiler rule concluded, with the thresholds it used. "
      "“Triggered” counts the times the rule's condition held.</p>\n";
  if (findings.empty()) {
    return s + EmptyState("findings", "No profiler rule has reported yet.") + "</section>\n";
  }
  // IssuesFound first, then errors, undecided, clean; stable within each.
  std::vector<const ProfilerRuleFinding*> order;
  order.reserve(findings.size());
  for (const ProfilerRuleFinding& f : findings) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(),
                   [](const ProfilerRuleFinding* a, const ProfilerRuleFinding* b) {
                     return StatusDisplayRank(a->status) < StatusDisplayRank(b->status);
                   });
  absl::StrAppend(
      &s,
      "<div class=\"table-wrap\"><table id=\"findings-table\"><colgroup><col class=\"c-rule\">"
      "<col class=\"c-status\"><col class=\"c-num\"><col class=\"c-num\">"
      "<col class=\"c-params\"><col class=\"c-details\"></colgroup>"
      "<thead><tr><th>Rule</th>"
      "<th>Status</th><th class=\"num\">Triggered</th><th class=\"num\">Data points</th>"
      "<th>Thresholds and "
      "parameters</th><th>Details</th></tr></thead><tbody>\n");
  for (const ProfilerRuleFinding* f : order) s += FindingRow(*f);
  return s + "</tbody></table></div></section>\n";
}

std::string PageEnd() {
  return "<footer>Self-contained report: no network access is needed to view it. "
         "Times are UTC. Generated by debugplane.</footer>\n</main>\n</body></html>\n";
}

}  // namespace debugplane::rules_engine::profiler_report_internal
