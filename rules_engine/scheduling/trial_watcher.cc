#include "rules_engine/scheduling/trial_watcher.h"

#include <algorithm>
#include <utility>

namespace debugplane::rules_engine {
namespace {

using objectstore::StoreLocation;

constexpr char kPollKey[] = "poll";
constexpr uint32_t kEntries = objectstore::kEntryChanged;

// The newest subdirectory of `dir` by name (hour directories, YYYYMMDDHH),
// if it has one (and can be listed).
std::optional<StoreLocation> NewestSubdirectory(const StoreLocation& dir) {
  absl::StatusOr<objectstore::ListResult> listed =
      dir.store->ListAll({.prefix = dir.DirectoryPrefix(), .delimiter = "/"});
  if (!listed.ok() || listed->common_prefixes.empty()) return std::nullopt;
  const std::string& newest = listed->common_prefixes.back();  // Sorted.
  return StoreLocation{dir.store, newest.substr(0, newest.size() - 1)};
}

// The subdirectories of `dir` (one level; none when it cannot be listed).
std::vector<StoreLocation> Subdirectories(const StoreLocation& dir) {
  std::vector<StoreLocation> subdirectories;
  absl::StatusOr<objectstore::ListResult> listed =
      dir.store->ListAll({.prefix = dir.DirectoryPrefix(), .delimiter = "/"});
  if (!listed.ok()) return subdirectories;
  for (const std::string& prefix : listed->common_prefixes) {
    subdirectories.push_back({dir.store, prefix.substr(0, prefix.size() - 1)});
  }
  return subdirectories;
}

// The parent "directory" of `location` in its store; nullopt for the
// store's root.
std::optional<StoreLocation> Parent(const StoreLocation& location) {
  if (location.prefix.empty()) return std::nullopt;
  const size_t slash = location.prefix.rfind('/');
  return StoreLocation{location.store,
                       slash == std::string::npos ? "" : location.prefix.substr(0, slash)};
}

// The subdirectories of a TensorBoard location to watch: Lightning's
// lightning_logs/version_N/, Hugging Face's runs/<date>_<host>/ (at most
// kMaxTensorBoardDirectories, kTensorBoardDepth levels down).
constexpr int kTensorBoardDepth = 3;
constexpr size_t kMaxTensorBoardDirectories = 64;
std::vector<StoreLocation> TensorBoardDirectories(const StoreLocation& root) {
  std::vector<StoreLocation> dirs;
  std::vector<StoreLocation> level = {root};
  for (int depth = 0; depth < kTensorBoardDepth && !level.empty(); ++depth) {
    std::vector<StoreLocation> next;
    for (const StoreLocation& dir : level) {
      absl::StatusOr<objectstore::ListResult> listed = dir.store->ListAll(
          {.prefix = dir.DirectoryPrefix(), .delimiter = "/"}, kMaxTensorBoardDirectories);
      if (!listed.ok()) continue;
      for (const std::string& prefix : listed->common_prefixes) {
        if (dirs.size() >= kMaxTensorBoardDirectories) return dirs;
        dirs.push_back(StoreLocation{dir.store, prefix.substr(0, prefix.size() - 1)});
        next.push_back(dirs.back());
      }
    }
    level = std::move(next);
  }
  return dirs;
}

// At most this many pages (of up to 1000 keys) per target and probe: a
// first probe of a huge trial resumes where it stopped at the next one.
constexpr int kMaxPagesPerTarget = 10;

// FNV-1a over a delimited listing: a change of any key, size or modified
// time (or of the common prefixes) changes it.
class Fingerprint {
 public:
  void Add(absl::string_view bytes) {
    for (const char c : bytes) Mix(static_cast<unsigned char>(c));
    Add64(bytes.size());
  }
  void Add64(uint64_t v) {
    for (int i = 0; i < 8; ++i) Mix((v >> (8 * i)) & 0xff);
  }
  uint64_t value() const { return hash_; }

 private:
  void Mix(uint64_t byte) {
    hash_ ^= byte;
    hash_ *= 1099511628211ull;
  }
  uint64_t hash_ = 1469598103934665603ull;
};

// Whether `location`'s store offers change notification (only stores that
// are not a local file system answer UNIMPLEMENTED).
bool HasNotification(const StoreLocation& location) {
  return !absl::IsUnimplemented(location.store->OpenDirectoryForWatch(location.prefix).status());
}

}  // namespace

TrialWatcher::TrialWatcher(TrialWatcherOptions options, ChangeListener on_change,
                           PollListener on_poll)
    : options_(std::move(options)), on_change_(std::move(on_change)), on_poll_(std::move(on_poll)) {
  {
    absl::MutexLock lock(&mu_);
    notifier_ = std::make_unique<objectstore::ChangeNotifier>(
        [this](WatchId id) { OnNotifierChange(id); },
        objectstore::ChangeNotifier::Options{.poll_interval = options_.poll_interval,
                                             .use_inotify = options_.use_inotify});
  }
  poll_timer_ = std::make_unique<base::DeadlineTimer>(
      options_.clock, [this](const std::string&) { OnPollDeadline(); });
  if (options_.poll_interval != absl::InfiniteDuration()) {
    poll_timer_->Set(kPollKey, options_.clock->Now() + options_.poll_interval);
  }
  probe_timer_ = std::make_unique<base::DeadlineTimer>(
      options_.clock, [this](const std::string& job) { OnProbeDeadline(job); });
}

TrialWatcher::~TrialWatcher() { Shutdown(); }

void TrialWatcher::Shutdown() {
  std::unique_ptr<objectstore::ChangeNotifier> notifier;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    notifier = std::move(notifier_);
  }
  // Outside mu_: the listeners in flight take it (and the caller's locks).
  poll_timer_->Shutdown();
  probe_timer_->Shutdown();
  notifier.reset();
}

std::optional<absl::Time> TrialWatcher::next_poll() const {
  return poll_timer_->DeadlineOf(kPollKey);
}

bool TrialWatcher::ListPolled(const std::string& job) const {
  absl::MutexLock lock(&mu_);
  return list_polled_.count(job) > 0;
}

std::optional<absl::Time> TrialWatcher::next_probe(const std::string& job) const {
  return probe_timer_->DeadlineOf(job);
}

int64_t TrialWatcher::list_requests() const { return list_requests_.load(); }

void TrialWatcher::OnPollDeadline() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
  }
  on_poll_();
  // The next pass one interval after this one ended: a slow pass never
  // queues passes behind it.
  poll_timer_->Set(kPollKey, options_.clock->Now() + options_.poll_interval);
}

void TrialWatcher::OnNotifierChange(WatchId id) {
  std::set<std::string> jobs;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    auto owners = owners_.find(id);
    if (owners == owners_.end()) return;
    jobs = owners->second;
  }
  for (const std::string& job : jobs) on_change_(job);
}

absl::Status TrialWatcher::WatchLocked(const std::string& job, const StoreLocation& dir,
                                       uint32_t events, std::set<WatchId>& keep, bool& added) {
  if (notifier_ == nullptr) return absl::CancelledError("the watcher is shut down");
  absl::StatusOr<WatchId> id = notifier_->Watch(dir, events);
  if (!id.ok()) return id.status();
  keep.insert(*id);
  if (owners_[*id].insert(job).second) {
    watches_[job].insert(*id);
    added = true;
  }
  return absl::OkStatus();
}

void TrialWatcher::WatchTreeLocked(const std::string& job, const StoreLocation& root,
                                   const std::vector<std::pair<StoreLocation, uint32_t>>& below,
                                   std::set<WatchId>& keep, bool& added, uint32_t root_events) {
  absl::Status rooted = WatchLocked(job, root, kEntries | root_events, keep, added);
  if (rooted.ok()) {
    for (const auto& [dir, events] : below) (void)WatchLocked(job, dir, events, keep, added);
    return;
  }
  for (std::optional<StoreLocation> ancestor = Parent(root);
       absl::IsNotFound(rooted) && ancestor.has_value(); ancestor = Parent(*ancestor)) {
    rooted = WatchLocked(job, *ancestor, kEntries, keep, added);
  }
}

bool TrialWatcher::Update(const std::string& job, const WatchedOutputs& outputs) {
  absl::MutexLock lock(&mu_);
  if (stopped_) return false;
  std::set<WatchId> keep;
  bool added = false;
  std::vector<ProbeTarget> targets;
  const bool all_polled = PolledTargets(outputs, targets);
  UpdateProbeLocked(job, std::move(targets), added);
  if (all_polled) {
    list_polled_.insert(job);
  } else {
    list_polled_.erase(job);
  }
  if (outputs.trial.has_value() && HasNotification(*outputs.trial)) {
    const StoreLocation& trial = *outputs.trial;
    WatchTreeLocked(job, trial,
                    {{trial.Below("index"), kEntries}, {trial.Below("index/000000000"), kEntries}},
                    keep, added);
  }
  if (outputs.profiler.has_value() && HasNotification(*outputs.profiler)) {
    // The profiler appends to open files (system metrics every interval,
    // timelines as events come): appends in the newest hour directories,
    // new entries above them for the next hour.
    const StoreLocation& profiler = *outputs.profiler;
    const StoreLocation system = profiler.Below("system/incremental");
    const StoreLocation framework = profiler.Below("framework/pevents");
    std::vector<std::pair<StoreLocation, uint32_t>> dirs = {
        {profiler.Below("system"), kEntries},
        {system, kEntries},
        {profiler.Below("framework"), kEntries},
        {framework, kEntries},
    };
    for (const StoreLocation& parent : {system, framework}) {
      if (std::optional<StoreLocation> hour = NewestSubdirectory(parent); hour.has_value()) {
        dirs.emplace_back(*std::move(hour), kEntries | objectstore::kObjectAppended);
      }
    }
    // PyTorch traces (debugplane_profiler writes framework/pytorch/<node>/):
    // written whole when a profiling window ends, so a new entry (closed
    // after writing, or renamed in) is a new trace.
    const StoreLocation pytorch = profiler.Below("framework/pytorch");
    dirs.emplace_back(pytorch, kEntries);
    for (StoreLocation& node : Subdirectories(pytorch))
      dirs.emplace_back(std::move(node), kEntries);
    WatchTreeLocked(job, profiler, dirs, keep, added);
  }
  if (outputs.tensorboard.has_value() && HasNotification(*outputs.tensorboard)) {
    // Writers append to open event files, in run directories made as runs start.
    constexpr uint32_t kFiles = kEntries | objectstore::kObjectAppended;
    std::vector<std::pair<StoreLocation, uint32_t>> dirs;
    for (StoreLocation& dir : TensorBoardDirectories(*outputs.tensorboard)) {
      dirs.emplace_back(std::move(dir), kFiles);
    }
    WatchTreeLocked(job, *outputs.tensorboard, dirs, keep, added, kFiles);
  }
  if (outputs.profiler.has_value()) {
    // tensorboard_trace_handler writes into its directory (or one below per
    // run): the root and its subdirectories.
    for (const StoreLocation& root : outputs.traces) {
      if (!HasNotification(root)) continue;
      std::vector<std::pair<StoreLocation, uint32_t>> dirs;
      for (StoreLocation& sub : Subdirectories(root)) dirs.emplace_back(std::move(sub), kEntries);
      WatchTreeLocked(job, root, dirs, keep, added);
    }
  }
  // Drop what is no longer needed: an ancestor (often the data root, shared
  // by every job) would otherwise wake this job for every other job's files,
  // and an old hour directory no longer grows.
  auto current = watches_.find(job);
  if (current != watches_.end()) {
    const std::set<WatchId> ids = current->second;
    for (const WatchId id : ids) {
      if (keep.count(id) == 0) DropWatchLocked(job, id);
    }
  }
  return added;
}

void TrialWatcher::Drop(const std::string& job) {
  absl::MutexLock lock(&mu_);
  list_polled_.erase(job);
  if (probes_.erase(job) > 0) probe_timer_->Cancel(job);
  auto current = watches_.find(job);
  if (current == watches_.end()) return;
  const std::set<WatchId> ids = current->second;
  for (const WatchId id : ids) DropWatchLocked(job, id);
}

void TrialWatcher::DropWatchLocked(const std::string& job, WatchId id) {
  auto jobs_watches = watches_.find(job);
  if (jobs_watches != watches_.end()) {
    jobs_watches->second.erase(id);
    if (jobs_watches->second.empty()) watches_.erase(jobs_watches);
  }
  auto owners = owners_.find(id);
  if (owners == owners_.end()) return;
  owners->second.erase(job);
  if (owners->second.empty()) {
    if (notifier_ != nullptr) notifier_->Unwatch(id);
    owners_.erase(owners);
  }
}

bool TrialWatcher::PolledTargets(const WatchedOutputs& outputs, std::vector<ProbeTarget>& targets) {
  bool all_polled = outputs.trial.has_value() || outputs.profiler.has_value() ||
                    outputs.tensorboard.has_value();
  if (outputs.trial.has_value()) {
    if (HasNotification(*outputs.trial)) {
      all_polled = false;
    } else {
      // The directory itself: collections, training_job_end.ts, index/
      // appearing. index/ recursively: smdebug writes a step's index file
      // after its event file, so a new index key is a new step.
      targets.push_back({.dir = *outputs.trial, .recursive = false});
      targets.push_back({.dir = outputs.trial->Below("index"), .recursive = true});
    }
  }
  if (outputs.profiler.has_value()) {
    if (HasNotification(*outputs.profiler)) {
      all_polled = false;
    } else {
      // Objects are uploaded whole and their names grow with time (hour
      // directories, timestamped files): new keys come after the last one.
      targets.push_back({.dir = outputs.profiler->Below("system"), .recursive = true});
      targets.push_back({.dir = outputs.profiler->Below("framework"), .recursive = true});
    }
    // Trace files are uploaded whole under new (timestamped) names.
    for (const StoreLocation& root : outputs.traces) {
      if (HasNotification(root)) {
        all_polled = false;
      } else {
        targets.push_back({.dir = root, .recursive = true});
      }
    }
  }
  if (outputs.tensorboard.has_value()) {
    if (HasNotification(*outputs.tensorboard)) {
      all_polled = false;
    } else {
      targets.push_back({.dir = *outputs.tensorboard, .recursive = true, .whole_tree = true});
    }
  }
  return all_polled;
}

void TrialWatcher::UpdateProbeLocked(const std::string& job, std::vector<ProbeTarget> targets,
                                     bool& added) {
  auto it = probes_.find(job);
  if (targets.empty()) {
    if (it != probes_.end()) {
      probes_.erase(it);
      probe_timer_->Cancel(job);
    }
    return;
  }
  const auto same_places = [](const std::vector<ProbeTarget>& a,
                              const std::vector<ProbeTarget>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const ProbeTarget& x, const ProbeTarget& y) {
                        return x.dir.store == y.dir.store && x.dir.prefix == y.dir.prefix &&
                               x.recursive == y.recursive;
                      });
  };
  if (it != probes_.end() && same_places(it->second.targets, targets)) return;
  const absl::Time now = options_.clock->Now();
  Probe& probe = probes_[job];
  probe.targets = std::move(targets);
  ++probe.generation;
  probe.interval = options_.list_polling.active_interval;
  probe.last_wake = now;
  probe.failing = false;
  probe.settle_wake.reset();
  probe.last_data.reset();
  probe_timer_->Set(job, now + probe.interval);
  added = true;
}

TrialWatcher::TargetResult TrialWatcher::ListTarget(const ProbeTarget& target) {
  TargetResult result;
  result.updated = target;
  objectstore::ListOptions list{.prefix = target.dir.DirectoryPrefix(),
                                .start_after = target.recursive && !target.whole_tree
                                                   ? target.last_key
                                                   : "",
                                .delimiter = target.recursive ? "" : "/"};
  Fingerprint fingerprint;
  bool any = false;
  for (int page = 0; page < kMaxPagesPerTarget; ++page) {
    ++result.requests;
    absl::StatusOr<objectstore::ListResult> listed = target.dir.store->List(list);
    if (!listed.ok() && !absl::IsNotFound(listed.status())) {
      result.status = listed.status();
      return result;
    }
    if (listed.ok()) {
      any = any || !listed->objects.empty() || !listed->common_prefixes.empty();
      for (const objectstore::ObjectEntry& entry : listed->objects) {
        fingerprint.Add(entry.key);
        fingerprint.Add64(entry.size);
        fingerprint.Add64(static_cast<uint64_t>(absl::ToUnixNanos(entry.modified)));
      }
      for (const std::string& prefix : listed->common_prefixes) fingerprint.Add(prefix);
      if (target.recursive && !target.whole_tree && !listed->objects.empty()) {
        result.updated.last_key = listed->objects.back().key;
      }
    }
    if (!listed.ok() || !listed->truncated) break;
    list.start_after = listed->next_start_after;
  }
  if (target.recursive && !target.whole_tree) {
    result.changed = any;
  } else {
    // A first listing is a change when it finds anything: the job's reader
    // may have looked before it landed.
    result.changed =
        target.fingerprint.has_value() ? *target.fingerprint != fingerprint.value() : any;
    result.updated.fingerprint = fingerprint.value();
  }
  return result;
}

namespace {
// The window of ListPolling::max_list_requests_per_minute.
constexpr absl::Duration kRequestWindow = absl::Minutes(1);
}  // namespace

void TrialWatcher::OnProbeDeadline(const std::string& job) {
  std::vector<ProbeTarget> targets;
  uint64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    auto it = probes_.find(job);
    if (it == probes_.end()) return;
    if (!WithinRequestCapLocked(job, it->second)) return;
    targets = it->second.targets;
    generation = it->second.generation;
  }
  // Listed outside the lock: network I/O.
  std::vector<TargetResult> results;
  results.reserve(targets.size());
  for (const ProbeTarget& target : targets) results.push_back(ListTarget(target));

  bool wake = false;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    const absl::Time now = options_.clock->Now();
    auto it = probes_.find(job);
    int requests = 0;
    for (const TargetResult& result : results) requests += result.requests;
    list_requests_ += requests;
    // Targets changed meanwhile: Update scheduled the next probe already.
    if (it == probes_.end() || it->second.generation != generation) return;
    Probe& probe = it->second;
    for (int i = 0; i < requests; ++i) probe.requests.push_back(now);
    wake = ApplyProbeResultsLocked(probe, results, now);
    probe_timer_->Set(job, now + probe.interval);
  }
  if (wake) on_change_(job);
}

bool TrialWatcher::WithinRequestCapLocked(const std::string& job, Probe& probe) {
  const absl::Time now = options_.clock->Now();
  while (!probe.requests.empty() && probe.requests.front() <= now - kRequestWindow) {
    probe.requests.pop_front();
  }
  // Over the cap: wait until enough of the minute's requests leave the
  // window (a probe needs at least one request per target).
  const size_t cap =
      static_cast<size_t>(std::max(1, options_.list_polling.max_list_requests_per_minute));
  const size_t need = std::min(cap, probe.targets.size());
  if (probe.requests.size() + need <= cap) return true;
  probe_timer_->Set(job, probe.requests[probe.requests.size() + need - cap - 1] + kRequestWindow);
  return false;
}

bool TrialWatcher::ApplyProbeResultsLocked(Probe& probe, std::vector<TargetResult>& results,
                                           absl::Time now) {
  const ListPolling& policy = options_.list_polling;
  bool failed = false;
  bool changed = false;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].status.ok()) {
      failed = true;
      continue;
    }
    changed = changed || results[i].changed;
    probe.targets[i] = std::move(results[i].updated);
  }
  // Back after failures: the job's reader may have stopped at the outage.
  if (!failed && probe.failing) changed = true;
  probe.failing = failed;
  if (changed) probe.last_data = now;
  const bool recent =
      probe.last_data.has_value() && now - *probe.last_data < policy.recent_data_window;
  probe.interval = changed ? policy.active_interval
                           : std::min(probe.interval * 2,
                                      recent ? policy.recent_interval : policy.idle_interval);
  const bool settled = probe.settle_wake.has_value() && now >= *probe.settle_wake;
  const bool wake = changed || settled || now - probe.last_wake >= policy.quiet_wake;
  if (wake) probe.last_wake = now;
  if (changed) {
    probe.settle_wake = now + policy.settle_wake;
  } else if (settled) {
    probe.settle_wake.reset();
  }
  return wake;
}

}  // namespace debugplane::rules_engine
