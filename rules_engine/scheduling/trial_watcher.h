// TrialWatcher: says "job J may have new data, look again". It knows where
// each job's output lies (its tensor trial, its profiler output) and nothing
// of rules or evaluations.
//
// Two sources, one listener each:
// - changes: a ChangeNotifier (objectstore/change_notifier.h: inotify on the
//   directories a job's data lands in, milliseconds; listing for stores
//   without notification) calls `on_change(job)` for every job a changed
//   directory serves (one directory may serve several jobs);
// - the polling pass: every poll_interval of the watcher's Clock,
//   `on_poll()` is called, so that the caller looks at every job again (the
//   fallback for directories that do not exist yet and for time-driven
//   rules). Tests advance a FakeClock instead of sleeping.
//
// - list polling, for outputs in stores without change notification (object
//   storage: ObjectStore::OpenDirectoryForWatch is UNIMPLEMENTED). Each such
//   job is probed on its own schedule by the watcher's Clock (ListPolling):
//   a few list requests that say whether anything new landed, fast while
//   data is arriving, backing off while idle, and never more than
//   ListPolling::max_list_requests_per_minute per job in any minute. A probe
//   that saw something new calls `on_change(job)` (the job's reader then
//   lists incrementally itself); so does a probe that succeeds after failed
//   ones (the store came back), the first probe ListPolling::settle_wake
//   after new data was seen and, for time-driven rules, the first probe
//   ListPolling::quiet_wake after the last wake. Such jobs need no polling
//   pass (ListPolled): the caller may leave them out of on_poll's look.
//
// Directories that do not exist yet are not watched; their nearest existing
// ancestor in the store is, to hear of their creation (Update is called
// again after a look, and then watches the directory itself and drops the
// ancestor, which would otherwise wake the job for every other job's files).
//
// Thread-safe. The listeners run on the watcher's threads (the notifier's,
// the poll timer's), never with the watcher's lock held, so they may take the
// caller's locks, under which the caller may call Update and Drop (lock
// order: the caller's lock, then the watcher's). They must not block for
// long and must not call Shutdown.

#ifndef DEBUGPLANE_RULES_ENGINE_SCHEDULING_TRIAL_WATCHER_H_
#define DEBUGPLANE_RULES_ENGINE_SCHEDULING_TRIAL_WATCHER_H_

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/deadline_timer.h"
#include "objectstore/change_notifier.h"
#include "objectstore/object_store.h"

namespace debugplane::rules_engine {

// What a job needs watched now; absent: nothing of that kind (no rule reads
// it any more, or it cannot be read).
struct WatchedOutputs {
  // The smdebug trial: its directory, index/ and index/000000000 (smdebug
  // writes a step's index file after its event file, so a new index file
  // means a new step).
  std::optional<objectstore::StoreLocation> trial;
  // The profiler output: system/incremental and framework/pevents, and
  // appends in their newest hour directories.
  std::optional<objectstore::StoreLocation> profiler;
  // TensorBoard event files: the directory and its subdirectories (runs,
  // versions) a few levels deep, for new files and appends; in stores
  // without notification, one recursive listing compared by fingerprint
  // (keys, sizes and times: event files grow in place).
  std::optional<objectstore::StoreLocation> tensorboard;
  // More places PyTorch profiler traces land (TensorBoardOutputConfig's
  // path): each root and its subdirectories. The profiler output's own
  // traces (framework/pytorch/<node>/) are watched with `profiler`. Only
  // watched with `profiler` (traces feed the profiler rules).
  std::vector<objectstore::StoreLocation> traces;
};

// The polling policy for outputs in stores without change notification.
// A probe of a job lists, per output: its tensor trial, one delimited
// listing of the trial's directory (collections, training_job_end.ts) and
// one recursive listing of index/ after the last index key seen (a new index
// file is a new step); its profiler output, one recursive listing each of
// system/ and framework/ after the last key seen (framework/pytorch/ holds
// the PyTorch traces); each more trace root, one recursive listing. A page of 1000 keys is one
// request; a first probe of a large trial pages through it (and counts
// every page against the cap). With the defaults, an idle job costs 2 list
// requests every 5 s (24 a minute) for a trial, a job that saw data in the
// last minute 2 a second (120 a minute), and a job whose data keeps arriving
// at most 240 list requests a minute from the watcher; each wake adds the
// reader's own incremental listing (about 3 requests).
struct ListPolling {
  // After a probe that saw new data, the next one this soon.
  absl::Duration active_interval = absl::Milliseconds(150);
  // After a probe that saw nothing new (or failed), the interval doubles,
  // up to this...
  absl::Duration idle_interval = absl::Seconds(5);
  // ...or up to this while the job's last new data is at most
  // recent_data_window old: a training that writes a step every few seconds
  // is still "arriving", and its next step is found within a second.
  absl::Duration recent_interval = absl::Seconds(1);
  absl::Duration recent_data_window = absl::Minutes(1);
  // At most this many list requests per job in any 60 s of the clock; a
  // probe that would pass it waits until it fits.
  int max_list_requests_per_minute = 240;
  // A job is woken at least this often even when nothing changed, for
  // time-driven rules (StalledTrainingRule): at the first probe after it.
  absl::Duration quiet_wake = absl::Seconds(30);
  // A job is woken once more at the first probe this long after the last
  // one that saw new data: the scheduler records a rule's progress
  // (LastEvaluatedStep) at the end of a look, at most once a second, so the
  // look that read a burst may have left it unrecorded.
  absl::Duration settle_wake = absl::Seconds(1);
};

struct TrialWatcherOptions {
  // How often on_poll is called, and how often the notifier lists the
  // directories of stores without change notification.
  // InfiniteDuration: never (tests that drive everything by hand).
  absl::Duration poll_interval = absl::Seconds(1);
  // The clock the polling pass follows.
  std::shared_ptr<base::Clock> clock = base::SystemClock();
  // False: every directory is listed by polling, as without inotify (tests).
  bool use_inotify = true;
  // How jobs whose outputs are in stores without notification are probed.
  ListPolling list_polling;
};

class TrialWatcher {
 public:
  using ChangeListener = std::function<void(const std::string& job)>;
  using PollListener = std::function<void()>;

  // Starts the notifier and the poll timer (the first pass comes one
  // poll_interval from now).
  TrialWatcher(TrialWatcherOptions options, ChangeListener on_change, PollListener on_poll);
  // Shuts down.
  ~TrialWatcher();

  TrialWatcher(const TrialWatcher&) = delete;
  TrialWatcher& operator=(const TrialWatcher&) = delete;

  // Watches what `outputs` names for job `job` from now on, and drops the
  // job's watches it no longer needs. Returns true if a watch is new for the
  // job: changes made before it was added were not heard, so the caller
  // should look once more. Directories the store refuses (a symbolic link)
  // are not watched: the readers report them. No-op (false) after Shutdown.
  bool Update(const std::string& job, const WatchedOutputs& outputs);

  // Drops every watch of `job`. No-op for an unknown job.
  void Drop(const std::string& job);

  // When the next polling pass is due by the clock (none: poll_interval is
  // infinite, or shut down). For diagnostics and tests. Thread-safe.
  std::optional<absl::Time> next_poll() const;

  // Whether `job`'s outputs are all in stores without notification, probed
  // by the watcher's list polling (then the polling pass need not look at
  // it). False for an unknown job. Thread-safe.
  bool ListPolled(const std::string& job) const;

  // When `job`'s next probe is due by the clock (none: not list-polled, or
  // a probe is running). For diagnostics and tests. Thread-safe.
  std::optional<absl::Time> next_probe(const std::string& job) const;

  // List requests the probes have made, in total. Thread-safe.
  int64_t list_requests() const;

  // Stops the notifier and the timer: when it returns no listener is
  // running or will run. Idempotent.
  // REQUIRES: not called from a listener, nor with a lock a listener takes.
  void Shutdown();

 private:
  using WatchId = objectstore::ChangeNotifier::WatchId;

  // One listing a probe makes for a job.
  struct ProbeTarget {
    objectstore::StoreLocation dir;
    // True: keys under dir/ after `last_key` (new ones); false: the
    // delimited listing of dir/, compared by fingerprint.
    bool recursive = false;
    // With `recursive`: the whole listing compared by fingerprint instead
    // of keys after `last_key` (objects that grow in place).
    bool whole_tree = false;
    std::string last_key;
    std::optional<uint64_t> fingerprint;
  };
  // A list-polled job's probe state.
  struct Probe {
    std::vector<ProbeTarget> targets;
    // Bumped when targets change, so that a probe in flight drops its
    // outdated results.
    uint64_t generation = 0;
    absl::Duration interval;
    // When each of the job's list requests in the last minute was made.
    std::deque<absl::Time> requests;
    absl::Time last_wake;
    // When the wake after the last new data is due (settle_wake).
    std::optional<absl::Time> settle_wake;
    // When a probe last saw new data.
    std::optional<absl::Time> last_data;
    bool failing = false;
  };
  // The outcome of listing one target.
  struct TargetResult {
    absl::Status status;
    int requests = 0;
    bool changed = false;
    ProbeTarget updated;
  };

  void OnNotifierChange(WatchId id);
  void OnPollDeadline();
  // Watches `dir` for `job`, recording it in `keep`; sets `added` when the
  // job did not have it. Returns the notifier's error (NOT_FOUND: missing).
  absl::Status WatchLocked(const std::string& job, const objectstore::StoreLocation& dir,
                           uint32_t events, std::set<WatchId>& keep, bool& added)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Watches `root` and `below` for `job`, or when `root` does not exist its
  // nearest existing ancestor.
  void WatchTreeLocked(const std::string& job, const objectstore::StoreLocation& root,
                       const std::vector<std::pair<objectstore::StoreLocation, uint32_t>>& below,
                       std::set<WatchId>& keep, bool& added, uint32_t root_events = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropWatchLocked(const std::string& job, WatchId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The probe targets of `outputs` in stores without notification
  // (appended to `targets`); returns whether every watched output is such.
  static bool PolledTargets(const WatchedOutputs& outputs, std::vector<ProbeTarget>& targets);
  // Sets `job`'s probe targets (keeping their state when unchanged); sets
  // `added` when they are new.
  void UpdateProbeLocked(const std::string& job, std::vector<ProbeTarget> targets, bool& added)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `job`'s due probe (on the probe timer's thread).
  void OnProbeDeadline(const std::string& job);
  // Drops the requests older than a minute from `probe`; if one more probe
  // would exceed max_list_requests_per_minute, sets the job's timer for when
  // it will not and returns false.
  bool WithinRequestCapLocked(const std::string& job, Probe& probe)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes a probe's listing results into `probe`: its targets, whether it
  // failed, its next interval (active, recent or idle, backing off) and its
  // settle wake. Returns whether to wake the job.
  bool ApplyProbeResultsLocked(Probe& probe, std::vector<TargetResult>& results, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static TargetResult ListTarget(const ProbeTarget& target);

  const TrialWatcherOptions options_;
  const ChangeListener on_change_;
  const PollListener on_poll_;

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Watch -> the jobs it wakes (the notifier gives one id per directory).
  std::map<WatchId, std::set<std::string>> owners_ ABSL_GUARDED_BY(mu_);
  // Job -> its watches.
  std::map<std::string, std::set<WatchId>> watches_ ABSL_GUARDED_BY(mu_);

  // Null after Shutdown (moved out under mu_ and destroyed outside it, as
  // its listener takes mu_).
  std::unique_ptr<objectstore::ChangeNotifier> notifier_ ABSL_GUARDED_BY(mu_);
  // List-polled jobs (some output in a store without notification).
  std::map<std::string, Probe> probes_ ABSL_GUARDED_BY(mu_);
  // Jobs whose every output is list-polled.
  std::set<std::string> list_polled_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> list_requests_{0};

  // Set by the constructor, shut down (not reset) by Shutdown.
  std::unique_ptr<base::DeadlineTimer> poll_timer_;
  // Probe deadlines keyed by job; its own thread, so that a slow store
  // never delays the polling pass.
  std::unique_ptr<base::DeadlineTimer> probe_timer_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SCHEDULING_TRIAL_WATCHER_H_
