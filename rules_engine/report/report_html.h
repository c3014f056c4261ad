// The report page's HTML around the charts: the head with its inline CSS
// and the job's header, the overview cards, the findings table and the
// footer. Internal to rules_engine/report/.

#ifndef DEBUGPLANE_RULES_ENGINE_REPORT_REPORT_HTML_H_
#define DEBUGPLANE_RULES_ENGINE_REPORT_REPORT_HTML_H_

#include <string>
#include <vector>

#include "rules_engine/report/profiler_report.h"

namespace debugplane::rules_engine::profiler_report_internal {

// From <!DOCTYPE html> to <main>: the head (title, CSS, a policy that
// forbids any fetch) and the header naming the job, its status, when the
// page was generated, live or final, and the data summary.
std::string PageStart(const ProfilerReportContext& context);
// The overview cards: rules with issues, metrics span, nodes, devices,
// point and step counts.
std::string OverviewCards(const ProfilerReportData& data,
                          const std::vector<ProfilerRuleFinding>& findings);
// The findings table, IssuesFound rows first and highlighted.
std::string FindingsTable(const std::vector<ProfilerRuleFinding>& findings);
// The footer, and the end of the page.
std::string PageEnd();

}  // namespace debugplane::rules_engine::profiler_report_internal

#endif  // DEBUGPLANE_RULES_ENGINE_REPORT_REPORT_HTML_H_
