#include "rules_engine/scheduling/trial_watcher.h"

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

// The parent "directory" of `location` in its store; nullopt for the
// store's root.
std::optional<StoreLocation> Parent(const StoreLocation& location) {
  if (location.prefix.empty()) return std::nullopt;
  const size_t slash = location.prefix.rfind('/');
  return StoreLocation{location.store,
                       slash == std::string::npos ? "" : location.prefix.substr(0, slash)};
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
  poll_timer_ = std::make_unique<core::DeadlineTimer>(
      options_.clock, [this](const std::string&) { OnPollDeadline(); });
  if (options_.poll_interval != absl::InfiniteDuration()) {
    poll_timer_->Set(kPollKey, options_.clock->Now() + options_.poll_interval);
  }
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
  notifier.reset();
}

std::optional<absl::Time> TrialWatcher::next_poll() const {
  return poll_timer_->DeadlineOf(kPollKey);
}

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
                                   std::set<WatchId>& keep, bool& added) {
  absl::Status rooted = WatchLocked(job, root, kEntries, keep, added);
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
  if (outputs.trial.has_value()) {
    const StoreLocation& trial = *outputs.trial;
    WatchTreeLocked(job, trial,
                    {{trial.Below("index"), kEntries}, {trial.Below("index/000000000"), kEntries}},
                    keep, added);
  }
  if (outputs.profiler.has_value()) {
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
    WatchTreeLocked(job, profiler, dirs, keep, added);
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

}  // namespace debugplane::rules_engine
