// ReportWriter: writes the reports of ProfilerReport rules
// (<report_dir>/<job>/<rule>/profiler-report.{html,json}, see
// core/handlers/profiler_report_files.h) and of debugging rules that render
// their own (CreateXgboostReport: xgboost_report.{html,json}), and decides
// when a report is due.
//
// A report is regenerated at most once per report_interval while data keeps
// coming, at once the first time, and always when training ended (the final
// report). Time is read from the writer's Clock, so tests advance a FakeClock
// to move past the interval instead of sleeping.
//
// Every file is written through a temporary of its own and a rename: a reader
// sees the old report or the new one, never half of one, and two writers
// never rename each other's temporary. The JSON is written before the page,
// so a reader that sees the new page finds its summary too.
//
// Thread-safe: the writer holds no mutable state (what was written when is
// the caller's ReportSchedule, one per report, owned by the one worker that
// evaluates its job).

#ifndef DEBUGPLANE_RULES_ENGINE_SCHEDULING_REPORT_WRITER_H_
#define DEBUGPLANE_RULES_ENGINE_SCHEDULING_REPORT_WRITER_H_

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "core/handlers/profiler_report_files.h"
#include "debugplane/v1/training_job.pb.h"
#include "persistence/report_store.h"
#include "rules_engine/report/profiler_report.h"
#include "rules_engine/rule/rule.h"

namespace debugplane::rules_engine {

// When one report was written, and whether what it shows is out of date.
struct ReportSchedule {
  absl::Time written = absl::InfinitePast();  // Last non-final (throttled) write.
  bool stale = true;                          // Data or findings changed since it was written.
  bool final_written = false;                 // The report after training ended is written.
  // The job status the final report was last written with.
  v1::TrainingJobStatus::Value final_job_status =
      v1::TrainingJobStatus::TRAINING_JOB_STATUS_UNSPECIFIED;
};

// What one report shows.
struct ReportContent {
  const ProfilerReportData* data = nullptr;  // REQUIRES: non-null.
  std::vector<ProfilerRuleFinding> findings;
  ProfilerReportContext context;  // generated_at is set by Write.
};

struct ReportWriterOptions {
  // Where reports go; empty: reports are not written (enabled() is false).
  std::filesystem::path report_dir;
  // How often, at most, a report is regenerated while data keeps coming.
  absl::Duration report_interval = absl::Seconds(2);
  std::shared_ptr<base::Clock> clock = base::SystemClock();
  // Where every replica reads reports (null: the files alone). Must outlive
  // the writer.
  persistence::ReportStore* store = nullptr;
};

class ReportWriter {
 public:
  explicit ReportWriter(ReportWriterOptions options);

  // Whether reports are written at all (a report_dir is set).
  bool enabled() const { return !options_.report_dir.empty(); }

  // The files of the report of rule `rule` of job `job`.
  core::ProfilerReportFiles FilesFor(const std::string& job, const std::string& rule) const;

  // Whether a non-final report is due now: enabled, out of date
  // (schedule.stale) and report_interval has passed since schedule.written
  // (always true for a report never written).
  bool Due(const ReportSchedule& schedule) const;

  // Writes the report of rule `rule` of job `job` with `content` (its
  // context's generated_at set to the clock's now) to the store, under
  // `fence` (the job's evaluation lease; nullopt: unfenced), and then to
  // the files, the writing replica's copy; and updates `schedule`:
  // a non-final write sets `written` to now and clears `stale`; a final one
  // sets final_written and final_job_status = `job_status`.
  // A stale fence (another replica evaluates the job now) writes nothing
  // and is OK. Errors: the store's (UNAVAILABLE naming the database);
  // INTERNAL naming the file that could not be created, written or renamed
  // (the schedule is updated even then: the next write is the retry, a
  // failed write is not retried in a loop).
  // REQUIRES: enabled().
  absl::Status Write(const std::string& job, const std::string& rule, ReportContent content,
                     bool final, v1::TrainingJobStatus::Value job_status,
                     const std::optional<persistence::CheckLease>& fence,
                     ReportSchedule& schedule) const;

  // The same for a report rendered already (a debugging rule's, see
  // Rule::RenderReport), into <stem>.{html,json}: `render` is called with
  // the context's generated_at set to the clock's now and final set.
  absl::Status WriteRendered(const std::string& job, const std::string& rule,
                             const std::string& stem,
                             const std::function<RuleReport(const RuleReportContext&)>& render,
                             bool final, const std::optional<persistence::CheckLease>& fence,
                             ReportSchedule& schedule) const;

 private:
  // Stores `report` (fenced), then writes its files.
  absl::Status Store(persistence::StoredReport report, const core::ProfilerReportFiles& files,
                     const std::optional<persistence::CheckLease>& fence) const;

  const ReportWriterOptions options_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SCHEDULING_REPORT_WRITER_H_
