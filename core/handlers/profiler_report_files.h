// Where the server keeps a ProfilerReport rule's report: written by the rules
// engine, served by GetProfilerReport.

#ifndef DEBUGPLANE_CORE_HANDLERS_PROFILER_REPORT_FILES_H_
#define DEBUGPLANE_CORE_HANDLERS_PROFILER_REPORT_FILES_H_

#include <filesystem>
#include <string>

#include "absl/strings/string_view.h"

namespace debugplane::core {

struct ProfilerReportFiles {
  std::filesystem::path html;  // The self-contained report page.
  std::filesystem::path json;  // Its summary, beside it.
};

// <report_dir>/<job>/<rule>/<stem>.{html,json}: "profiler-report" for a
// ProfilerReport, "xgboost_report" for CreateXgboostReport. The job name is
// safe as a path component (validated: [a-zA-Z0-9-]); the rule configuration
// name is encoded (bytes other than [A-Za-z0-9._-] become %XX, and "." and
// ".." are encoded whole), so no name can leave its directory.
ProfilerReportFiles ProfilerReportFilesFor(const std::filesystem::path& report_dir,
                                           absl::string_view training_job_name,
                                           absl::string_view rule_configuration_name,
                                           absl::string_view stem = "profiler-report");

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_HANDLERS_PROFILER_REPORT_FILES_H_
