// PostgresChangeListener: hears of commits to the change feed of a
// PostgreSQL database (persistence/storage.h) through LISTEN/NOTIFY.
//
// Every writing transaction of PostgresStorage sends NOTIFY on
// DP_POSTGRES_CHANGE_CHANNEL; PostgreSQL delivers it at commit to every
// session listening. The listener keeps one connection of its own for that
// (not from the pool), waits on its socket with poll(), and calls `wake`
// for each delivery. Notifications sent while it is not connected are lost,
// so after every (re)connection it calls `wake` once too: the subscriber
// then reads the feed from where it was (a catch-up read), and misses
// nothing. A lost connection is reopened with backoff (100 ms doubling to
// 5 s); a subscriber should still poll now and then as a safety net.

#ifndef DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_CHANGE_LISTENER_H_
#define DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_CHANGE_LISTENER_H_

#include <atomic>
#include <functional>
#include <thread>

#include "absl/time/time.h"
#include "persistence/postgres/postgres_connection.h"
#include "persistence/storage.h"

// The NOTIFY channel of the change feed (a literal, for SQL text).
#define DP_POSTGRES_CHANGE_CHANNEL "debugplane_job_changes"

namespace debugplane::persistence {

class PostgresChangeListener final : public ChangeSubscription {
 public:
  // Starts the listening thread, which connects at once. `wake` runs on
  // that thread: it must not block (it schedules a read of the feed).
  PostgresChangeListener(PostgresTarget target, PostgresConnectOptions options,
                         std::function<void()> wake);
  // Stops the thread; waits for a `wake` in progress, and for a connection
  // attempt in progress (at most the connect timeout).
  ~PostgresChangeListener() override;

  PostgresChangeListener(const PostgresChangeListener&) = delete;
  PostgresChangeListener& operator=(const PostgresChangeListener&) = delete;

  // How many times the listener has connected and LISTENed (thread-safe).
  int connections() const { return connections_.load(); }

 private:
  void Run();
  // Waits for notifications on `connection` until it breaks (returns) or
  // the listener stops.
  void ListenOn(PostgresConnection& connection);
  // Sleeps `duration` unless the listener stops first; false if it did.
  bool Sleep(absl::Duration duration);

  const PostgresTarget target_;
  const PostgresConnectOptions options_;
  const std::function<void()> wake_;
  const int stop_fd_;  // An eventfd, written once to stop.
  std::atomic<int> connections_{0};
  std::thread thread_;
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_CHANGE_LISTENER_H_
