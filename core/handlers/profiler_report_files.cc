#include "core/handlers/profiler_report_files.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace debugplane::core {
namespace {

std::string EncodeComponent(absl::string_view name) {
  std::string out;
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(byte) || c == '-' || c == '_' ||
        (c == '.' && name != "." && name != "..")) {
      out.push_back(c);
    } else {
      absl::StrAppendFormat(&out, "%%%02X", byte);
    }
  }
  return out;
}

}  // namespace

ProfilerReportFiles ProfilerReportFilesFor(const std::filesystem::path& report_dir,
                                           absl::string_view training_job_name,
                                           absl::string_view rule_configuration_name,
                                           absl::string_view stem) {
  const std::filesystem::path dir =
      report_dir / EncodeComponent(training_job_name) / EncodeComponent(rule_configuration_name);
  return {dir / absl::StrCat(stem, ".html"), dir / absl::StrCat(stem, ".json")};
}

}  // namespace debugplane::core
