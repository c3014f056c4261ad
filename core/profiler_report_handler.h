// ProfilerReportService's operation behind an interface that knows nothing
// of gRPC: finds a job's ProfilerReport rule and reads the report the rules
// engine wrote (core/profiler_report_files.h).

#ifndef DEBUGPLANE_CORE_PROFILER_REPORT_HANDLER_H_
#define DEBUGPLANE_CORE_PROFILER_REPORT_HANDLER_H_

#include <deque>
#include <filesystem>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "core/training_job_handler.h"
#include "core/training_job_manager.h"
#include "debugplane/v1/profiler_report.pb.h"

namespace debugplane::core {

class ProfilerReportHandler {
 public:
  // Serves the reports under `report_dir` of the jobs `manager` knows.
  // Files are read on a thread the handler owns, never on the caller's.
  // REQUIRES: `manager` outlives the handler.
  ProfilerReportHandler(const TrainingJobManager* manager, std::filesystem::path report_dir);
  // Completes the reads already asked for (their callbacks run), then stops.
  ~ProfilerReportHandler();

  ProfilerReportHandler(const ProfilerReportHandler&) = delete;
  ProfilerReportHandler& operator=(const ProfilerReportHandler&) = delete;

  // Fills `response` with the report and calls `done` with OK; or `done`
  // with INVALID_ARGUMENT (bad job name, the named rule is not a
  // ProfilerReport), NOT_FOUND (no such job, no such rule, no report written
  // yet), FAILED_PRECONDITION (the job has no ProfilerReport rule, or several
  // and none was named) or INTERNAL (the file cannot be read), each message
  // naming the job, rule or file. `request` and `response` must stay valid
  // until `done` runs; `done` runs exactly once, on the calling thread for
  // errors found before reading and on the handler's thread otherwise.
  // Thread-safe.
  void GetProfilerReport(const v1::GetProfilerReportRequest& request,
                         v1::GetProfilerReportResponse* response, DoneCallback done);

 private:
  void ReadLoop();

  const TrainingJobManager* const manager_;
  const std::filesystem::path report_dir_;
  absl::Mutex mu_;
  absl::CondVar work_cv_;
  std::deque<absl::AnyInvocable<void() &&>> reads_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reader_;
};

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_PROFILER_REPORT_HANDLER_H_
