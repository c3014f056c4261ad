// The dashboard's live updates (GET /api/events, docs/dashboard-api.md):
// follows the job manager's commits and the server's reads of new data (the
// rules engine's, the dashboard store's), and fans them out as server-sent
// events to every subscribed stream.
//
// Threads: the commit observer and OnDataRead only record what changed under
// a short mutex and wake the hub's own thread, which builds each job's
// summary once and writes it to the streams (HttpStream::Write only queues).
// So neither the job manager's committer nor libmicrohttpd's threads ever
// wait for a client.

#ifndef DEBUGPLANE_SERVICE_DASHBOARD_DASHBOARD_EVENTS_H_
#define DEBUGPLANE_SERVICE_DASHBOARD_DASHBOARD_EVENTS_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "core/manager/training_job_manager.h"
#include "service/auth/auth.h"
#include "service/http/http_server.h"

namespace debugplane::service::dashboard {

struct DashboardEventsOptions {
  // A comment line this often keeps proxies from closing idle streams (and
  // lets the server notice clients that went away).
  absl::Duration keep_alive = absl::Seconds(15);
  // At most one `event: data` per job this often (the last one of a burst
  // is sent when the interval ends, never dropped).
  absl::Duration data_interval = absl::Milliseconds(250);
  // The clock of lastDataTime.
  std::shared_ptr<base::Clock> clock = base::SystemClock();
};

// A job and when its data was last read, as the hub knows it.
struct JobView {
  std::shared_ptr<const core::JobRecord> record;
  std::optional<absl::Time> last_data_time;
};

class DashboardEvents {
 public:
  // REQUIRES: `manager` outlives this object (or its Shutdown).
  DashboardEvents(core::TrainingJobManager* manager, DashboardEventsOptions options = {});
  // Shuts down.
  ~DashboardEvents();

  DashboardEvents(const DashboardEvents&) = delete;
  DashboardEvents& operator=(const DashboardEvents&) = delete;

  // Follows the manager's commits and starts the hub's thread.
  void Start();

  // Stops following, ends every stream (each after what it was sent) and
  // joins the thread. Idempotent. REQUIRES: not from a commit observer.
  void Shutdown();

  // The server (the rules engine, the dashboard's store) read new data of
  // `job_name` up to global step `last_step` (-1: none known): recorded as
  // its lastDataTime (now) and sent as `event: data` (throttled, see
  // options). Thread-safe; never blocks beyond a short mutex.
  void OnDataRead(const std::string& job_name, int64_t last_step);

  // Re-checks a subscriber's credentials (a removed key ends its stream).
  using Reauthenticate = std::function<absl::StatusOr<auth::Principal>()>;

  // Sends `stream` every job `principal` may see (only `job_name` unless
  // empty) as `event: job`, then every change, data read and keep-alive,
  // until the stream closes or the hub shuts down. Every keep-alive
  // interval `reauthenticate` (if set) is called on the hub's thread; an
  // error ends the stream. Thread-safe; never blocks.
  void Subscribe(std::unique_ptr<http::HttpStream> stream, std::string job_name,
                 auth::Principal principal, Reauthenticate reauthenticate = nullptr);

  // Every job the hub knows (the committed records it was told of), newest
  // first. Thread-safe.
  std::vector<JobView> Jobs() const;

  // When the server last read new data of `job_name` (OnDataRead).
  std::optional<absl::Time> LastDataTime(const std::string& job_name) const;

  // Streams subscribed and open (for tests and diagnostics).
  size_t subscribers() const;

 private:
  struct Subscriber;
  struct DataRead {
    absl::Time time;
    int64_t last_step = -1;
    bool unsent = false;
    absl::Time sent = absl::InfinitePast();  // Real time of the last event: data.
  };

  void OnCommit(const std::string& job_name, std::shared_ptr<const core::JobRecord> job);
  void Loop();
  // One pass of the hub's thread over what changed. REQUIRES: mu_ not held.
  void SendJobs(const std::vector<std::string>& names);
  void SendDataReads(absl::Time now);
  void SendKeepAlives();
  void Welcome(const std::shared_ptr<Subscriber>& subscriber);
  // Writes `event` to the subscribers that may see `job_name`.
  void Broadcast(const std::string& job_name, const std::string& event);

  core::TrainingJobManager* const manager_;
  const DashboardEventsOptions options_;

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  std::map<std::string, std::shared_ptr<const core::JobRecord>> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, DataRead> data_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> changed_ ABSL_GUARDED_BY(mu_);  // Jobs whose summary is owed.
  std::vector<std::shared_ptr<Subscriber>> joining_ ABSL_GUARDED_BY(mu_);
  bool data_unsent_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  // The hub thread's own (subscribers() reads the count under mu_).
  std::vector<std::shared_ptr<Subscriber>> subscribers_;
  size_t subscriber_count_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t observer_id_ = 0;
  std::thread thread_;
};

}  // namespace debugplane::service::dashboard

#endif  // DEBUGPLANE_SERVICE_DASHBOARD_DASHBOARD_EVENTS_H_
