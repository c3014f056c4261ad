// InsightsStore: the dashboard's per-job JobInsights (job_insights.h), kept
// current from each job's profiler output (ProfilerConfig.S3OutputPath,
// local or s3:// through core::DataRootStores, as the rules engine reads it).
//
// Which jobs are kept:
// - a job that is InProgress with profiling on (ProfilerConfig not disabled,
//   an output path) is ingested in the background from the moment the job
//   manager commits it (a commit observer), and then refreshed every
//   `refresh_interval` (500 ms) of the options' clock until it ends (one last
//   refresh after), so opening a big job is instant and the dashboard
//   follows new data within a second. Polling, rather than a hook from the
//   evaluation scheduler, because the scheduler reads a job's profiler
//   output only while a profiler rule runs, and the dashboard must follow
//   jobs that have none; the readers' incremental listing makes a poll of an
//   unchanged job a listing and no read;
// - any other job on its first request (WithJob), refreshed at most every
//   refresh_interval on later requests;
// - at most `max_jobs` jobs and about `max_bytes` of data (default 32 jobs,
//   1 GiB): past either, the least recently used job is dropped (a live one
//   stops being polled until it is asked for again). One job is bounded by
//   bucket_pyramid.h's per-level capacity: about 1 MiB per series for a day.
//
// Ingestion runs on the store's pool (`threads`), in batches of at most
// `batch_bytes` of new files, taking the job's data lock only to add a
// batch, so queries run between batches and see the data read so far. The
// manager's commit observer takes only the store's lock and a job's record
// lock, never a data lock: it does not wait for ingestion or replies.
//
// Thread-safe.

#ifndef DEBUGPLANE_RULES_ENGINE_INSIGHTS_INSIGHTS_STORE_H_
#define DEBUGPLANE_RULES_ENGINE_INSIGHTS_INSIGHTS_STORE_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/deadline_timer.h"
#include "base/thread_pool.h"
#include "core/jobs/job_record.h"
#include "core/jobs/output_path.h"
#include "core/manager/training_job_manager.h"
#include "rules_engine/insights/job_insights.h"
#include "rules_engine/profiler/framework_timeline_reader.h"
#include "rules_engine/profiler/plausible_times.h"
#include "rules_engine/profiler/system_metrics_reader.h"

namespace debugplane::rules_engine::insights {

struct InsightsStoreOptions {
  // Where local output paths may lie, and the stores of s3:// buckets (as
  // the evaluation scheduler's).
  std::vector<std::filesystem::path> data_roots;
  core::DataRootStores::BucketStoreFactory bucket_stores;
  int threads = 2;
  absl::Duration refresh_interval = absl::Milliseconds(500);
  size_t max_jobs = 32;
  size_t max_bytes = size_t{1} << 30;
  uint64_t batch_bytes = uint64_t{16} << 20;
  // How long a request waits for a job's first read that another thread
  // (the background's) is doing, before it answers with what is read so far.
  absl::Duration first_read_wait = absl::Seconds(2);
  int level_capacity = kDefaultLevelCapacity;
  std::shared_ptr<base::Clock> clock = base::SystemClock();
  // Called with a job's name after a read added data to it, once the data
  // can be queried (on the store's pool or a requesting thread; must not
  // block): the dashboard's live updates tell the page to ask again. The
  // rules engine's reads cannot: they may come before this store read the
  // same files, or not at all for a job without profiler rules.
  std::function<void(const std::string& job_name)> on_new_data;
};

// What a request sees of one job, under the job's data lock.
struct JobView {
  std::shared_ptr<const core::JobRecord> record;  // The committed record.
  const JobInsights* data = nullptr;              // Never null.
  // Why the profiler output is not read (no ProfilerConfig.S3OutputPath,
  // profiling disabled, a path the server cannot read), or empty.
  std::string problem;
  // What was skipped for implausible times (rules_engine/profiler/
  // plausible_times.h: "skipped 6 system metric samples ...", first), then
  // the readers' first problems ("system/incremental/<hour>/<file>:<line>:
  // what", files the store refused); at most 10.
  std::vector<std::string> read_errors;
  bool training_ended = false;
};

class InsightsStore {
 public:
  // REQUIRES: `manager` outlives the store. Registers a commit observer and
  // starts ingesting the live jobs.
  InsightsStore(core::TrainingJobManager* manager, InsightsStoreOptions options);
  // Shutdown().
  ~InsightsStore();
  InsightsStore(const InsightsStore&) = delete;
  InsightsStore& operator=(const InsightsStore&) = delete;

  // Removes the observer, stops polling, runs the queued work (callbacks of
  // WithJob get UNAVAILABLE if not started). Idempotent; blocks.
  void Shutdown();

  // Runs `fn` on the store's pool with the job's data, first reading what is
  // new if the last read is older than refresh_interval (unless an ingestion
  // of the job is running: then with what it has read so far). `fn` runs
  // under the job's data lock (shared): it must not call the store.
  // Errors passed to `fn`: NOT_FOUND "training job 'x' does not exist";
  // UNAVAILABLE while shutting down. Never blocks the caller.
  using ViewFn = absl::AnyInvocable<void(absl::StatusOr<JobView>) &&>;
  void WithJob(const std::string& job_name, ViewFn fn);

  // As WithJob's read, on the calling thread (tests, benches): reads
  // everything new of the job now. Errors as WithJob's.
  absl::Status RefreshNow(const std::string& job_name);

  // Jobs held and their approximate bytes (diagnostics, tests).
  size_t job_count() const;
  size_t memory_bytes() const;
  // Whether `job_name` is being polled in the background.
  bool IsLive(const std::string& job_name) const;

 private:
  struct Entry;
  std::shared_ptr<Entry> GetOrCreate(const std::string& job_name,
                                     std::shared_ptr<const core::JobRecord> record);
  // WithJob's work, on the pool.
  void Serve(const std::string& job_name, ViewFn fn);
  // Reads what is new (blocking on another read of the job when `wait`).
  void Refresh(Entry& entry, bool wait);
  void OnCommit(const std::string& job_name, std::shared_ptr<const core::JobRecord> job);
  void OnPollDeadline(const std::string& job_name);
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TouchLocked(const std::string& job_name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  core::TrainingJobManager* const manager_;
  const InsightsStoreOptions options_;
  const core::DataRootStores stores_;
  base::ThreadPool pool_;
  base::DeadlineTimer poll_timer_;
  int64_t observer_id_ = 0;

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> jobs_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);  // Most recent first.
  // Live jobs seen by the commit observer (taken in once, see OnCommit).
  std::set<std::string> seen_live_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

// Whether `job` is one the store follows in the background: InProgress,
// profiling not disabled, a profiler output path.
bool IsLiveProfiledJob(const core::JobRecord& job);

}  // namespace debugplane::rules_engine::insights

#endif  // DEBUGPLANE_RULES_ENGINE_INSIGHTS_INSIGHTS_STORE_H_
