#include "core/manager/watch_hub.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace debugplane::core {
namespace {

// The KIND_INITIAL_STATE event a watch starts with.
std::shared_ptr<const v1::WatchTrainingJobResponse> InitialStateEvent(const JobRecord& job,
                                                                      absl::Time now) {
  v1::StatusChange change;
  change.set_kind(v1::StatusChange::KIND_INITIAL_STATE);
  change.set_to(absl::StrCat(JobStatusName(job.training_job_status()), "/",
                             SecondaryStatusName(job.secondary_status())));
  return std::make_shared<const v1::WatchTrainingJobResponse>(MakeWatchEvent(job, {change}, now));
}

// What a commit tells the job's watchers: the end of the stream when the
// job is deleted; else the record, an event if the status moved, and the
// end once the job is settled.
WatchDelivery MakeNews(const std::string& job_name, const std::shared_ptr<const JobRecord>& before,
                       const std::shared_ptr<const JobRecord>& after, absl::Time now) {
  WatchDelivery news;
  if (after == nullptr) {
    news.end = absl::NotFoundError(absl::StrCat("training job '", job_name, "' was deleted"));
    return news;
  }
  news.record = after;
  std::vector<v1::StatusChange> changes =
      before == nullptr ? std::vector<v1::StatusChange>{} : DiffForWatch(*before, *after);
  if (!changes.empty()) {
    news.event = std::make_shared<const v1::WatchTrainingJobResponse>(
        MakeWatchEvent(*after, std::move(changes), now));
  }
  if (IsSettled(*after)) news.end = absl::OkStatus();
  return news;
}

// Calls the watcher with what `delivery` holds, in order.
void CallWatcher(JobWatcher& watcher, WatchDelivery& delivery) {
  if (delivery.record != nullptr) watcher.OnRecord(delivery.record);
  if (delivery.event != nullptr) watcher.OnEvent(std::move(delivery.event));
  if (delivery.end.has_value()) watcher.OnEnd(*std::move(delivery.end));
}

}  // namespace

class WatchHub::Registration final : public WatchRegistration {
 public:
  Registration(std::shared_ptr<Liveness> liveness, std::shared_ptr<JobWatch> watch)
      : liveness_(std::move(liveness)), watch_(std::move(watch)) {}
  ~Registration() override {
    // Held (shared) while unwatching: the hub's owner is not destroyed
    // meanwhile.
    absl::ReaderMutexLock lock(&liveness_->mu);
    if (liveness_->unwatch != nullptr) {
      liveness_->unwatch(watch_);
    } else {
      // The owner's shutdown delivered everything: only later deliveries
      // are ruled out.
      absl::MutexLock watch_lock(&watch_->mu);
      watch_->detached = true;
    }
  }

 private:
  const std::shared_ptr<Liveness> liveness_;
  const std::shared_ptr<JobWatch> watch_;
};

WatchHub::WatchHub(int delivery_threads, std::shared_ptr<base::Clock> clock, Unwatch unwatch)
    : clock_(std::move(clock)),
      liveness_(std::make_shared<Liveness>()),
      delivery_pool_(delivery_threads, "dp-watch") {
  absl::MutexLock lock(&liveness_->mu);
  liveness_->unwatch = std::move(unwatch);
}

WatchHub::~WatchHub() {
  {
    absl::MutexLock lock(&liveness_->mu);
    liveness_->unwatch = nullptr;
  }
  Shutdown();
}

std::shared_ptr<JobWatch> WatchHub::NewWatch(JobWatcher* watcher, std::string job_name,
                                             std::shared_ptr<const JobRecord> current,
                                             bool settled) {
  auto watch = std::make_shared<JobWatch>(watcher, std::move(job_name));
  absl::MutexLock lock(&watch->mu);
  watch->pending.push_back(
      WatchDelivery{.record = std::move(current),
                    .end = settled ? std::optional<absl::Status>(absl::OkStatus()) : std::nullopt});
  watch->draining = true;  // This thread: DeliverInitialState.
  return watch;
}

void WatchHub::DeliverInitialState(const std::shared_ptr<JobWatch>& watch) {
  JobWatch& w = *watch;
  w.mu.Lock();
  // NewWatch queued the initial state first and set `draining`: this thread
  // is the drainer until it hands over.
  WatchDelivery initial = std::move(w.pending.front());
  w.pending.pop_front();
  w.delivering = true;
  w.delivering_thread = std::this_thread::get_id();
  w.mu.Unlock();
  w.watcher->OnRecord(initial.record);
  w.watcher->OnEvent(InitialStateEvent(*initial.record, clock_->Now()));
  if (initial.end.has_value()) w.watcher->OnEnd(*std::move(initial.end));
  w.mu.Lock();
  w.delivering = false;
  if (w.detached) w.delivered.SignalAll();
  // Commits that came meanwhile go to the pool, with their `done`s.
  const bool more = !w.pending.empty();
  if (!more) w.draining = false;
  w.mu.Unlock();
  if (more) {
    WatchesToDrain to_drain = {watch};
    StartDrains(to_drain);
  }
}

std::unique_ptr<WatchRegistration> WatchHub::MakeRegistration(std::shared_ptr<JobWatch> watch) {
  return std::make_unique<Registration>(liveness_, std::move(watch));
}

DoneCallback WatchHub::QueueNews(const std::string& job_name, WatchList& watches,
                                 const std::shared_ptr<const JobRecord>& before,
                                 const std::shared_ptr<const JobRecord>& after, absl::Time now,
                                 DoneCallback done, WatchesToDrain& to_drain) {
  if (watches.empty()) return done;
  // Only the news is made here (the diff and one shared event); the
  // watchers are called by the delivery pool.
  WatchDelivery news = MakeNews(job_name, before, after, now);
  if (done != nullptr) {
    news.completion =
        std::make_shared<DeliveryCompletion>(static_cast<int>(watches.size()), std::move(done));
  }
  for (const std::shared_ptr<JobWatch>& watch : watches) Enqueue(watch, news, to_drain);
  if (news.end.has_value()) watches.clear();  // Their streams are over.
  return nullptr;
}

void WatchHub::EndAll(WatchList& watches, const absl::Status& status, WatchesToDrain& to_drain) {
  for (const std::shared_ptr<JobWatch>& watch : watches) {
    Enqueue(watch, WatchDelivery{.end = status}, to_drain);
  }
  watches.clear();
}

void WatchHub::Enqueue(const std::shared_ptr<JobWatch>& watch, WatchDelivery delivery,
                       WatchesToDrain& to_drain) {
  absl::MutexLock lock(&watch->mu);
  watch->pending.push_back(std::move(delivery));
  if (!watch->draining) {
    watch->draining = true;
    to_drain.push_back(watch);
  }
}

void WatchHub::StartDrains(WatchesToDrain& to_drain) {
  for (std::shared_ptr<JobWatch>& watch : to_drain) {
    // Refused only once Shutdown has drained the pool (a registration that
    // raced with it): then this thread delivers.
    if (!delivery_pool_.Schedule([watch] { Drain(*watch); })) Drain(*watch);
  }
  to_drain.clear();
}

void WatchHub::Drain(JobWatch& watch) {
  watch.mu.Lock();
  while (!watch.pending.empty()) {
    WatchDelivery delivery = std::move(watch.pending.front());
    watch.pending.pop_front();
    if (!watch.detached) {
      watch.delivering = true;
      watch.delivering_thread = std::this_thread::get_id();
      watch.mu.Unlock();
      CallWatcher(*watch.watcher, delivery);
      watch.mu.Lock();
      watch.delivering = false;
      if (watch.detached) watch.delivered.SignalAll();
    }
    if (delivery.completion != nullptr) {
      // The change's `done` may run here: not under the watch's lock.
      watch.mu.Unlock();
      delivery.completion->CountDown();
      delivery.completion = nullptr;
      watch.mu.Lock();
    }
  }
  watch.draining = false;
  watch.mu.Unlock();
}

void WatchHub::Detach(JobWatch& watch) {
  // Nothing is queued on it from now on; what is queued is dropped by its
  // drain. Wait for a callback in progress, unless it is this thread's own.
  absl::MutexLock lock(&watch.mu);
  watch.detached = true;
  if (watch.delivering && watch.delivering_thread == std::this_thread::get_id()) return;
  while (watch.delivering) watch.delivered.Wait(&watch.mu);
}

void WatchHub::Shutdown() { delivery_pool_.Shutdown(); }

}  // namespace debugplane::core
