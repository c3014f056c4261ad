#include "rules_engine/scheduling/report_writer.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace debugplane::rules_engine {

ReportWriter::ReportWriter(ReportWriterOptions options) : options_(std::move(options)) {}

core::ProfilerReportFiles ReportWriter::FilesFor(const std::string& job,
                                                 const std::string& rule) const {
  return core::ProfilerReportFilesFor(options_.report_dir, job, rule);
}

bool ReportWriter::Due(const ReportSchedule& schedule) const {
  return enabled() && schedule.stale &&
         options_.clock->Now() - schedule.written >= options_.report_interval;
}

absl::Status ReportWriter::Write(const std::string& job, const std::string& rule,
                                 ReportContent content, bool final,
                                 v1::TrainingJobStatus::Value job_status,
                                 ReportSchedule& schedule) const {
  const absl::Time now = options_.clock->Now();
  if (final) {
    schedule.final_written = true;
    schedule.final_job_status = job_status;
  } else {
    schedule.written = now;
    schedule.stale = false;
  }
  content.context.generated_at = now;
  content.context.final = final;
  const core::ProfilerReportFiles files = FilesFor(job, rule);
  // The JSON first: a reader that sees the new page finds its summary too.
  absl::Status written = WriteFileAtomically(
      files.json, RenderProfilerReportJson(*content.data, content.findings, content.context));
  if (!written.ok()) return written;
  return WriteFileAtomically(
      files.html, RenderProfilerReportHtml(*content.data, content.findings, content.context));
}

absl::Status WriteFileAtomically(const std::filesystem::path& path, const std::string& content) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", path.parent_path().string(), ": ", error.message()));
  }
  // A temporary of its own per write: two writers never rename each other's.
  static std::atomic<uint64_t> writes{0};
  const std::filesystem::path temporary =
      absl::StrCat(path.string(), ".tmp.", getpid(), ".", writes.fetch_add(1));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) {
      return absl::InternalError(
          absl::StrCat("cannot write ", temporary.string(), ": ", std::strerror(errno)));
    }
  }
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot rename ", temporary.string(), " to ",
                                            path.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

}  // namespace debugplane::rules_engine
