#include "rules_engine/insights/insights_store.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace debugplane::rules_engine::insights {

namespace {

constexpr size_t kMaxReadErrors = 10;

bool TrainingEnded(const core::JobRecord& job) {
  return core::IsTerminal(job.training_job_status()) ||
         job.training_job_status() == v1::TrainingJobStatus::Stopping;
}

}  // namespace

bool IsLiveProfiledJob(const core::JobRecord& job) {
  return job.training_job_status() == v1::TrainingJobStatus::InProgress &&
         job.has_profiler_config() && !job.profiler_config().disable_profiler() &&
         !job.profiler_config().s3_output_path().empty();
}

struct InsightsStore::Entry {
  explicit Entry(std::string job_name, int level_capacity)
      : name(std::move(job_name)), data(level_capacity) {}

  const std::string name;
  // One read at a time; guards the readers.
  absl::Mutex read_mu;
  std::unique_ptr<SystemMetricsReader> system ABSL_GUARDED_BY(read_mu);
  std::unique_ptr<FrameworkTimelineReader> framework ABSL_GUARDED_BY(read_mu);
  // Where `framework` reads (to start over when a timeline is replaced).
  std::optional<objectstore::StoreLocation> framework_location ABSL_GUARDED_BY(read_mu);
  std::vector<objectstore::StoreLocation> trace_roots ABSL_GUARDED_BY(read_mu);
  // What the readers give passes through it (see plausible_times.h).
  PlausibleTimes plausible ABSL_GUARDED_BY(read_mu);
  std::string resolved_path ABSL_GUARDED_BY(read_mu);  // What the readers read.
  absl::Time last_read ABSL_GUARDED_BY(read_mu) = absl::InfinitePast();

  absl::Mutex data_mu;
  JobInsights data ABSL_GUARDED_BY(data_mu);
  std::string problem ABSL_GUARDED_BY(data_mu);
  std::vector<std::string> read_errors ABSL_GUARDED_BY(data_mu);
  bool first_read_done ABSL_GUARDED_BY(data_mu) = false;

  // Apart from data_mu, so that the manager's commit observer never waits
  // for a batch being added or a reply being serialized.
  mutable absl::Mutex record_mu;
  std::shared_ptr<const core::JobRecord> record ABSL_GUARDED_BY(record_mu);
  std::atomic<size_t> bytes{0};  // data.memory_bytes() after the last read.

  std::shared_ptr<const core::JobRecord> Record() const {
    absl::MutexLock lock(&record_mu);
    return record;
  }
  void SetRecord(std::shared_ptr<const core::JobRecord> job) {
    absl::MutexLock lock(&record_mu);
    record = std::move(job);
  }

  // Polled in the background (guarded by the store's mu_).
  bool live = false;

  // Why the job's profiler output cannot be read ("" when it can), opening
  // the readers when its output path is new.
  std::string OpenReaders(const core::DataRootStores& stores)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu);
  // Reads what is new into `data`, with the readers' problems. Returns
  // whether it added data (points or events, or a timeline read again).
  bool ReadNew(const InsightsStoreOptions& options) ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu);
  // The readers' problems (see JobView::read_errors), at most kMaxReadErrors.
  std::vector<std::string> ReadErrors() ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu);
};

std::string InsightsStore::Entry::OpenReaders(const core::DataRootStores& stores) {
  const std::shared_ptr<const core::JobRecord> job = Record();
  const std::string path = job ? job->profiler_config().s3_output_path() : "";
  if (job == nullptr || !job->has_profiler_config() || path.empty()) {
    return "the job has no ProfilerConfig.S3OutputPath: no profiler output to read";
  }
  if (resolved_path == path && system != nullptr) return "";
  absl::StatusOr<objectstore::StoreLocation> location = stores.Resolve(path);
  if (!location.ok()) {
    return absl::StrCat("ProfilerConfig.S3OutputPath cannot be read: ",
                        location.status().message());
  }
  system = std::make_unique<SystemMetricsReader>(*location);
  // PyTorch traces also where TensorBoard output goes (when readable).
  std::vector<objectstore::StoreLocation> roots;
  const std::string& tensorboard = job->tensor_board_output_config().s3_output_path();
  if (!tensorboard.empty() && tensorboard != path) {
    if (absl::StatusOr<objectstore::StoreLocation> tb = stores.Resolve(tensorboard); tb.ok()) {
      roots.push_back(*std::move(tb));
    }
  }
  framework_location = *location;
  trace_roots = roots;
  framework = std::make_unique<FrameworkTimelineReader>(*location, std::move(roots));
  plausible = PlausibleTimes();
  resolved_path = path;
  return "";
}

bool InsightsStore::Entry::ReadNew(const InsightsStoreOptions& options) {
  bool added = false;
  // Batches of system metrics, so that memory stays bounded while a long
  // job is caught up and queries see the progress.
  do {
    std::vector<SystemMetricPoint> points = system->ReadNew(options.batch_bytes);
    plausible.FilterMetrics(&points, options.clock->Now());
    added = added || !points.empty();
    absl::MutexLock data_lock(&data_mu);
    data.AddMetrics(points);
  } while (system->more_pending());
  // Timelines are read from where the last read stopped (the reader keeps
  // an offset per file), never whole again; a file replaced or cut since
  // makes its earlier events stale: every timeline is then read again by a
  // new reader, into framework data started afresh.
  std::vector<FrameworkEvent> events = framework->ReadNew();
  const bool start_over = framework->files_restarted() > 0;
  if (start_over) {
    framework = std::make_unique<FrameworkTimelineReader>(*framework_location, trace_roots);
    events = framework->ReadNew();
  }
  plausible.FilterEvents(&events, options.clock->Now());
  added = added || start_over || !events.empty();
  std::vector<std::string> errors = ReadErrors();
  absl::MutexLock data_lock(&data_mu);
  if (start_over) data.ResetFramework();
  data.AddFrameworkEvents(events);
  read_errors = std::move(errors);
  return added;
}

std::vector<std::string> InsightsStore::Entry::ReadErrors() {
  // A file over its read limit first: that series is incomplete, and the
  // reader's own list may be full of earlier, lesser errors. Then the
  // skipped implausible times, so that the readers' errors never crowd
  // them out.
  std::vector<std::string> errors;
  for (const absl::Status* over : {&system->limit_error(), &framework->limit_error()}) {
    if (!over->ok()) errors.emplace_back(over->message());
  }
  if (std::string skipped = plausible.Summary(); !skipped.empty()) {
    errors.push_back(std::move(skipped));
  }
  const auto said = [&errors](const std::string& e) {
    return std::any_of(errors.begin(), errors.end(),
                       [&e](const std::string& s) { return absl::StartsWith(e, s); });
  };
  for (const std::string& e : system->errors()) {
    if (!said(e)) errors.push_back(e);
  }
  for (const std::string& e : framework->errors()) {
    if (!said(e)) errors.push_back(e);
  }
  if (errors.size() > kMaxReadErrors) errors.resize(kMaxReadErrors);
  return errors;
}

InsightsStore::InsightsStore(core::TrainingJobManager* manager, InsightsStoreOptions options)
    : manager_(manager),
      options_(std::move(options)),
      stores_(options_.data_roots, {}, options_.bucket_stores),
      pool_(std::max(1, options_.threads), "dp-insights"),
      poll_timer_(options_.clock, [this](const std::string& job) { OnPollDeadline(job); }) {
  core::TrainingJobManager::Observation observation = manager_->AddCommitObserver(
      [this](const std::string& job_name, std::shared_ptr<const core::JobRecord> job) {
        OnCommit(job_name, std::move(job));
      });
  observer_id_ = observation.id;
  for (auto& job : observation.jobs) {
    const std::string name = job->training_job_name();
    OnCommit(name, std::move(job));
  }
}

InsightsStore::~InsightsStore() { Shutdown(); }

void InsightsStore::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  manager_->RemoveCommitObserver(observer_id_);
  poll_timer_.Shutdown();
  pool_.Shutdown();
}

void InsightsStore::OnCommit(const std::string& job_name,
                             std::shared_ptr<const core::JobRecord> job) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  auto it = jobs_.find(job_name);
  if (job == nullptr) {  // Deleted.
    if (it != jobs_.end()) {
      jobs_.erase(it);
      lru_.remove(job_name);
    }
    seen_live_.erase(job_name);
    poll_timer_.Cancel(job_name);
    return;
  }
  const bool live = IsLiveProfiledJob(*job);
  if (!live) seen_live_.erase(job_name);
  if (it == jobs_.end()) {
    // Read on its first request; a live job once, when it is first seen
    // live (one the LRU dropped is not taken back by its next commit).
    if (!live || !seen_live_.insert(job_name).second) return;
    it = jobs_.emplace(job_name, std::make_shared<Entry>(job_name, options_.level_capacity)).first;
    lru_.push_front(job_name);
    EvictLocked();
    it = jobs_.find(job_name);
    if (it == jobs_.end()) return;
  }
  Entry& entry = *it->second;
  entry.SetRecord(job);
  if (live && !entry.live) {
    entry.live = true;
    poll_timer_.Set(job_name, options_.clock->Now());
  }
  // A job that ended keeps its poll until the next one, which reads the
  // last data and then stops (OnPollDeadline).
}

void InsightsStore::OnPollDeadline(const std::string& job_name) {
  std::shared_ptr<Entry> entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job_name);
    if (shut_down_ || it == jobs_.end() || !it->second->live) return;
    entry = it->second;
  }
  pool_.Schedule([this, entry] {
    Refresh(*entry, /*wait=*/false);
    const std::shared_ptr<const core::JobRecord> record = entry->Record();
    const bool still_live = record != nullptr && IsLiveProfiledJob(*record);
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    auto it = jobs_.find(entry->name);
    if (it == jobs_.end() || it->second != entry) return;  // Evicted meanwhile.
    if (still_live) {
      poll_timer_.Set(entry->name, options_.clock->Now() + options_.refresh_interval);
    } else {
      entry->live = false;  // That was the read after the end.
    }
  });
}

std::shared_ptr<InsightsStore::Entry> InsightsStore::GetOrCreate(
    const std::string& job_name, std::shared_ptr<const core::JobRecord> record) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_name);
  if (it == jobs_.end()) {
    it = jobs_.emplace(job_name, std::make_shared<Entry>(job_name, options_.level_capacity)).first;
    lru_.push_front(job_name);
  } else {
    TouchLocked(job_name);
  }
  std::shared_ptr<Entry> entry = it->second;
  // A live job asked for after the LRU dropped it is followed again.
  if (record != nullptr && IsLiveProfiledJob(*record) && !entry->live) {
    entry->live = true;
    poll_timer_.Set(job_name, options_.clock->Now() + options_.refresh_interval);
  }
  entry->SetRecord(std::move(record));
  EvictLocked();
  return entry;
}

void InsightsStore::TouchLocked(const std::string& job_name) {
  auto it = std::find(lru_.begin(), lru_.end(), job_name);
  if (it != lru_.begin() && it != lru_.end()) lru_.splice(lru_.begin(), lru_, it);
}

void InsightsStore::EvictLocked() {
  size_t bytes = 0;
  for (const auto& [name, entry] : jobs_) bytes += entry->bytes.load();
  // Never the most recent job (the one being added or read).
  while (lru_.size() > 1 && (lru_.size() > options_.max_jobs || bytes > options_.max_bytes)) {
    const std::string victim = lru_.back();
    lru_.pop_back();
    auto it = jobs_.find(victim);
    if (it == jobs_.end()) continue;
    bytes -= std::min(bytes, it->second->bytes.load());
    poll_timer_.Cancel(victim);
    jobs_.erase(it);
  }
}

void InsightsStore::Refresh(Entry& entry, bool wait) {
  if (wait) {
    entry.read_mu.Lock();
  } else if (!entry.read_mu.TryLock()) {
    return;  // Another read of the job is under way; answer with its progress.
  }
  std::string problem = entry.OpenReaders(stores_);
  const bool added = problem.empty() && entry.system != nullptr && entry.ReadNew(options_);
  entry.last_read = options_.clock->Now();
  {
    absl::MutexLock data_lock(&entry.data_mu);
    entry.problem = std::move(problem);
    entry.bytes = entry.data.memory_bytes();
    entry.first_read_done = true;
  }
  entry.read_mu.Unlock();
  // After the data is in: a page told of it and asking again finds it.
  if (added && options_.on_new_data) options_.on_new_data(entry.name);
  absl::MutexLock lock(&mu_);
  EvictLocked();
}

void InsightsStore::WithJob(const std::string& job_name, ViewFn fn) {
  // Shared so that a task the pool refuses (shutting down) can still be
  // answered here.
  auto callback = std::make_shared<ViewFn>(std::move(fn));
  if (!pool_.Schedule([this, job_name, callback] { Serve(job_name, std::move(*callback)); })) {
    std::move (*callback)(absl::UnavailableError("the server is shutting down"));
  }
}

void InsightsStore::Serve(const std::string& job_name, ViewFn fn) {
  std::shared_ptr<const core::JobRecord> record = manager_->GetJob(job_name);
  if (record == nullptr) {
    std::move(fn)(
        absl::NotFoundError(absl::StrCat("training job '", job_name, "' does not exist")));
    return;
  }
  std::shared_ptr<Entry> entry = GetOrCreate(job_name, record);
  // A read within the last refresh_interval is recent enough; a read under
  // way (TryLock fails) is answered with what it has read so far.
  bool stale = false;
  if (entry->read_mu.TryLock()) {
    stale = options_.clock->Now() - entry->last_read >= options_.refresh_interval;
    entry->read_mu.Unlock();
  }
  if (stale) Refresh(*entry, /*wait=*/false);
  JobView view;
  view.record = entry->Record();
  view.training_ended = TrainingEnded(*view.record);
  // A first read under way elsewhere (the background's) is waited for a
  // while, so a small job is not shown empty; a big one then shows what is
  // read so far.
  entry->data_mu.ReaderLockWhenWithTimeout(absl::Condition(&entry->first_read_done),
                                           options_.first_read_wait);
  view.data = &entry->data;
  view.problem = entry->problem;
  view.read_errors = entry->read_errors;
  std::move(fn)(std::move(view));
  entry->data_mu.ReaderUnlock();
}

absl::Status InsightsStore::RefreshNow(const std::string& job_name) {
  std::shared_ptr<const core::JobRecord> record = manager_->GetJob(job_name);
  if (record == nullptr) {
    return absl::NotFoundError(absl::StrCat("training job '", job_name, "' does not exist"));
  }
  std::shared_ptr<Entry> entry = GetOrCreate(job_name, std::move(record));
  Refresh(*entry, /*wait=*/true);
  return absl::OkStatus();
}

size_t InsightsStore::job_count() const {
  absl::MutexLock lock(&mu_);
  return jobs_.size();
}

size_t InsightsStore::memory_bytes() const {
  absl::MutexLock lock(&mu_);
  size_t bytes = 0;
  for (const auto& [name, entry] : jobs_) bytes += entry->bytes.load();
  return bytes;
}

bool InsightsStore::IsLive(const std::string& job_name) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_name);
  return it != jobs_.end() && it->second->live;
}

}  // namespace debugplane::rules_engine::insights
