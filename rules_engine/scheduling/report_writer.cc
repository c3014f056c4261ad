#include "rules_engine/scheduling/report_writer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "persistence/lease_fence.h"

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
                                 const std::optional<persistence::CheckLease>& fence,
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
  persistence::StoredReport report{
      .job_name = job,
      .rule_configuration_name = rule,
      .generated_at_us = absl::ToUnixMicros(now),
      .final = final,
      .json = RenderProfilerReportJson(*content.data, content.findings, content.context),
      .html = RenderProfilerReportHtml(*content.data, content.findings, content.context)};
  return Store(std::move(report), FilesFor(job, rule), fence);
}

absl::Status ReportWriter::WriteRendered(
    const std::string& job, const std::string& rule, const std::string& stem,
    const std::function<RuleReport(const RuleReportContext&)>& render, bool final,
    const std::optional<persistence::CheckLease>& fence, ReportSchedule& schedule) const {
  const absl::Time now = options_.clock->Now();
  if (final) {
    schedule.final_written = true;
  } else {
    schedule.written = now;
    schedule.stale = false;
  }
  RuleReport rendered = render(RuleReportContext{
      .training_job_name = job, .rule_configuration_name = rule, .generated_at = now, .final = final});
  persistence::StoredReport report{.job_name = job,
                                   .rule_configuration_name = rule,
                                   .generated_at_us = absl::ToUnixMicros(now),
                                   .final = final,
                                   .json = std::move(rendered.json),
                                   .html = std::move(rendered.html)};
  return Store(std::move(report), core::ProfilerReportFilesFor(options_.report_dir, job, rule, stem),
               fence);
}

absl::Status ReportWriter::Store(persistence::StoredReport report,
                                 const core::ProfilerReportFiles& files,
                                 const std::optional<persistence::CheckLease>& fence) const {
  if (options_.store != nullptr) {
    // The database first: it is what every replica serves.
    absl::Status stored = options_.store->Put(report, fence);
    if (persistence::FencedJob(stored).has_value()) return absl::OkStatus();  // Not ours now.
    if (!stored.ok()) return stored;
  }
  // The JSON first: a reader that sees the new page finds its summary too.
  absl::Status written = base::WriteFileAtomically(files.json, report.json);
  if (!written.ok()) return written;
  return base::WriteFileAtomically(files.html, report.html);
}

}  // namespace debugplane::rules_engine
