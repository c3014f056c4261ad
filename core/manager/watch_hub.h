// WatchHub: how the job manager's watchers hear of commits.
//
// Each registered JobWatcher has a JobWatch: a queue of deliveries (the
// news of each commit of its job, in commit order) and at most one drainer
// at a time. Queuing is cheap and never calls a watcher, so the manager
// queues under its own lock (which gives the commit order); the watchers are
// called by the hub's delivery pool, outside every lock but the watch's own
// bookkeeping. A watch that already has a drain scheduled or running is
// not scheduled again: what is queued meanwhile joins that drain (the
// coalescing that keeps one drainer per watch, so its callbacks are
// serialized and in order). A watcher that blocks holds up its own
// deliveries (and a delivery thread), nothing else.
//
// The `done` of a commit whose job has watchers runs (with OK) once every
// one of them has been told of it, or dropped it as unregistered
// (DeliveryCompletion).
//
// Which watches a job has is the manager's to keep (under its lock): the hub
// takes the list as an argument and keeps no index of jobs.
//
// Thread-safety: every member is thread-safe unless it says otherwise.

#ifndef DEBUGPLANE_CORE_MANAGER_WATCH_HUB_H_
#define DEBUGPLANE_CORE_MANAGER_WATCH_HUB_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/thread_pool.h"
#include "core/jobs/job_record.h"
#include "core/manager/training_job_handler.h"

namespace debugplane::core {

// Counts the watchers still to be told of one commit; runs the commit's
// `done` (with OK) when the last one has been, or has dropped it.
class DeliveryCompletion {
 public:
  DeliveryCompletion(int watches, DoneCallback done)
      : remaining_(watches), done_(std::move(done)) {}
  void CountDown() {
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::move(done_)(absl::OkStatus());
    }
  }

 private:
  std::atomic<int> remaining_;
  DoneCallback done_;
};

// What one commit (or the registration) tells one watcher, in this order.
struct WatchDelivery {
  std::shared_ptr<const JobRecord> record;                    // OnRecord.
  std::shared_ptr<const v1::WatchTrainingJobResponse> event;  // OnEvent, if any.
  std::optional<absl::Status> end;                            // OnEnd, if any.
  std::shared_ptr<DeliveryCompletion> completion;             // Counted down after.
};

// One registered watcher and what waits to be delivered to it.
struct JobWatch {
  JobWatch(JobWatcher* watcher, std::string job_name)
      : watcher(watcher), job_name(std::move(job_name)) {}

  JobWatcher* const watcher;
  const std::string job_name;

  absl::Mutex mu;
  // Queued in commit order (under the manager's lock), delivered by the one
  // drainer.
  std::deque<WatchDelivery> pending ABSL_GUARDED_BY(mu);
  // A drain is scheduled or running: it takes whatever is queued, so nobody
  // else starts one. Always true while `pending` is not empty.
  bool draining ABSL_GUARDED_BY(mu) = false;
  // A callback is running (on `delivering_thread`): Detach waits for it, on
  // `delivered`.
  bool delivering ABSL_GUARDED_BY(mu) = false;
  absl::CondVar delivered;
  std::thread::id delivering_thread ABSL_GUARDED_BY(mu);
  // Unregistered: what is still queued is dropped, the watcher not called.
  bool detached ABSL_GUARDED_BY(mu) = false;
};

class WatchHub {
 public:
  using WatchList = std::vector<std::shared_ptr<JobWatch>>;
  // Watches that have something to deliver and no drain yet: the caller
  // starts one for each (StartDrains) once it no longer holds its own lock.
  using WatchesToDrain = std::vector<std::shared_ptr<JobWatch>>;
  // Unregisters a watch from its owner's lists and then Detaches it.
  using Unwatch = std::function<void(const std::shared_ptr<JobWatch>&)>;

  // Delivers on `delivery_threads` threads; `clock` stamps the initial-state
  // events. A registration destroyed while the hub lives calls `unwatch`
  // (see MakeRegistration).
  WatchHub(int delivery_threads, std::shared_ptr<base::Clock> clock, Unwatch unwatch);
  // Registrations destroyed from now on only detach their watch.
  ~WatchHub();

  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // A new watch of `job_name` whose first delivery is `current` (and the
  // end of its stream if `settled`). The calling thread is its drainer until
  // it calls DeliverInitialState; anything queued on it meanwhile waits.
  static std::shared_ptr<JobWatch> NewWatch(JobWatcher* watcher, std::string job_name,
                                            std::shared_ptr<const JobRecord> current,
                                            bool settled);

  // Delivers the initial state NewWatch queued (a KIND_INITIAL_STATE event),
  // on the calling thread, then hands what else is queued to the pool.
  // REQUIRES: called once, by the thread that called NewWatch.
  void DeliverInitialState(const std::shared_ptr<JobWatch>& watch);

  // The registration to hand to the watcher: destroying it unregisters the
  // watch (through `unwatch` while the hub lives; else it only detaches it).
  std::unique_ptr<WatchRegistration> MakeRegistration(std::shared_ptr<JobWatch> watch);

  // Queues the news of a job's new committed state `after` (nullptr: the job
  // was deleted), following `before` (nullptr: none), on each of `watches`:
  // the record, a status-change event if the status moved, and the end of
  // the stream once the job is settled or deleted (then `watches` is
  // cleared). If there are watches, `done` runs once all have the news and
  // nullptr is returned; else `done` is returned for the caller to run.
  // Calls no watcher. REQUIRES: the caller serializes the news of one job
  // (the manager's lock), so that each watch gets them in commit order.
  static DoneCallback QueueNews(const std::string& job_name, WatchList& watches,
                                const std::shared_ptr<const JobRecord>& before,
                                const std::shared_ptr<const JobRecord>& after, absl::Time now,
                                DoneCallback done, WatchesToDrain& to_drain);

  // Queues the end of the stream with `status` on each of `watches`, and
  // clears it.
  static void EndAll(WatchList& watches, const absl::Status& status, WatchesToDrain& to_drain);

  // Queues `delivery` on `watch`; adds the watch to `to_drain` if no drain
  // of it is scheduled or running.
  static void Enqueue(const std::shared_ptr<JobWatch>& watch, WatchDelivery delivery,
                      WatchesToDrain& to_drain);

  // Schedules a drain of each watch on the delivery pool (after Shutdown:
  // drains on this thread), and clears `to_drain`.
  void StartDrains(WatchesToDrain& to_drain);

  // Delivers what is queued on `watch`, in order, until nothing is; skips
  // the callbacks once the watch is detached (completions still count).
  // REQUIRES: the caller is the watch's one drainer (it set `draining`).
  static void Drain(JobWatch& watch);

  // Stops the deliveries to `watch`: when it returns, none of its callbacks
  // is running (unless on this very thread) or will run. What is queued is
  // dropped by its drain (the completions still count).
  static void Detach(JobWatch& watch);

  // Runs every drain already scheduled (and the `done`s they hold), then
  // stops the delivery threads. Blocks until done; idempotent.
  void Shutdown();

 private:
  class Registration;
  // Whether the hub is still there, shared with the registrations, which may
  // outlive it.
  struct Liveness {
    absl::Mutex mu;
    Unwatch unwatch ABSL_GUARDED_BY(mu);  // Null once the hub is destroyed.
  };

  const std::shared_ptr<base::Clock> clock_;
  const std::shared_ptr<Liveness> liveness_;
  base::ThreadPool delivery_pool_;
};

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_MANAGER_WATCH_HUB_H_
