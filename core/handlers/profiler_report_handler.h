// ProfilerReportService's operation behind an interface that knows nothing
// of gRPC: finds a job's ProfilerReport rule and reads the report the rules
// engine wrote: from the database (persistence/report_store.h), which every
// replica serves, keeping a copy in this server's report directory (the
// response's path, core/handlers/profiler_report_files.h); or, without a store, from
// the report directory alone.

#ifndef DEBUGPLANE_CORE_HANDLERS_PROFILER_REPORT_HANDLER_H_
#define DEBUGPLANE_CORE_HANDLERS_PROFILER_REPORT_HANDLER_H_

#include <deque>
#include <filesystem>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "core/manager/training_job_handler.h"
#include "core/manager/training_job_manager.h"
#include "debugplane/v1/profiler_report.pb.h"
#include "persistence/report_store.h"

namespace debugplane::core {

class ProfilerReportHandler {
 public:
  // Serves the reports of the jobs `manager` knows from `store` (null: the
  // files under `report_dir` alone), copying each into `report_dir`.
  // The store and files are read on a thread the handler owns, never on
  // the caller's.
  // REQUIRES: `manager` and `store` outlive the handler.
  ProfilerReportHandler(TrainingJobManager* manager, std::filesystem::path report_dir,
                        persistence::ReportStore* store = nullptr);
  // Completes the reads already asked for (their callbacks run), then stops.
  ~ProfilerReportHandler();

  ProfilerReportHandler(const ProfilerReportHandler&) = delete;
  ProfilerReportHandler& operator=(const ProfilerReportHandler&) = delete;

  // Fills `response` with the report and calls `done` with OK; or `done`
  // with INVALID_ARGUMENT (bad job name, the named rule is not a
  // ProfilerReport), NOT_FOUND (no such job, no such rule, no report written
  // yet), FAILED_PRECONDITION (the job has no ProfilerReport rule, or several
  // and none was named), UNAVAILABLE (the database, named) or INTERNAL (the
  // file cannot be read or written), each message naming the job, rule or
  // file. `request` and `response` must stay valid
  // until `done` runs; `done` runs exactly once, on the calling thread for
  // errors found before reading (or the manager's, after catching up with
  // other replicas) and on the handler's thread otherwise.
  // Thread-safe.
  void GetProfilerReport(const v1::GetProfilerReportRequest& request,
                         v1::GetProfilerReportResponse* response, DoneCallback done);

  // Deletes, on the handler's thread, the stored reports of job `job_name`
  // generated before `deleted_at` (the job was deleted). Does not block;
  // a failure is logged (the reports of a deleted job are never served:
  // they are older than any job created again under its name).
  // Thread-safe.
  void ForgetJob(const std::string& job_name, absl::Time deleted_at);

 private:
  void ReadLoop();
  // GetProfilerReport once the manager caught up with other replicas.
  void ServeCaughtUp(const v1::GetProfilerReportRequest& request,
                     v1::GetProfilerReportResponse* response, DoneCallback done);
  // On the handler's thread: fills `response` (its path set) with the
  // report's time and, unless `path_only`, its content.
  absl::Status ReadReport(const std::string& job_name, absl::Time job_created,
                          const std::string& rule, bool path_only,
                          v1::GetProfilerReportResponse* response) const;
  absl::Status ReadFromStore(const std::string& job_name, absl::Time job_created,
                             const std::string& rule, bool path_only,
                             v1::GetProfilerReportResponse* response) const;

  TrainingJobManager* const manager_;
  const std::filesystem::path report_dir_;
  persistence::ReportStore* const store_;
  absl::Mutex mu_;
  absl::CondVar work_cv_;
  std::deque<absl::AnyInvocable<void() &&>> reads_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reader_;
};

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_HANDLERS_PROFILER_REPORT_HANDLER_H_
