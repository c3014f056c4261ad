#include "persistence/postgres/postgres_change_listener.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "spdlog/spdlog.h"

namespace debugplane::persistence {
namespace {

constexpr absl::Duration kFirstBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(5);

}  // namespace

PostgresChangeListener::PostgresChangeListener(PostgresTarget target,
                                               PostgresConnectOptions options,
                                               std::function<void()> wake)
    : target_(std::move(target)),
      options_(options),
      wake_(std::move(wake)),
      stop_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      thread_([this] { Run(); }) {}

PostgresChangeListener::~PostgresChangeListener() {
  const uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof one) < 0) {
    spdlog::error("change listener: cannot signal its thread to stop (errno {})", errno);
  }
  thread_.join();
  close(stop_fd_);
}

bool PostgresChangeListener::Sleep(absl::Duration duration) {
  pollfd stop = {.fd = stop_fd_, .events = POLLIN, .revents = 0};
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(duration));
  while (true) {
    const int ready = poll(&stop, 1, ms);
    if (ready < 0 && errno == EINTR) continue;
    return ready == 0;
  }
}

void PostgresChangeListener::Run() {
  absl::Duration backoff = kFirstBackoff;
  bool reported_failure = false;
  while (true) {
    absl::StatusOr<std::unique_ptr<PostgresConnection>> connection =
        PostgresConnection::Connect(target_, options_);
    absl::Status listening = connection.status();
    if (listening.ok()) {
      listening = (*connection)
                      ->Exec("LISTEN " DP_POSTGRES_CHANGE_CHANNEL, "listening for changes")
                      .status();
    }
    if (!listening.ok()) {
      // Once per outage at warning level: the retries are not news.
      if (!reported_failure) {
        spdlog::warn("change feed listener: {}; retrying with backoff", listening.ToString());
        reported_failure = true;
      }
      if (!Sleep(backoff)) return;
      backoff = std::min(backoff * 2, kMaxBackoff);
      continue;
    }
    if (reported_failure || connections_.load() > 0) {
      spdlog::info("change feed listener: listening again on {}", target_.Describe());
    }
    reported_failure = false;
    backoff = kFirstBackoff;
    connections_.fetch_add(1);
    // Notifications sent while not listening are lost: the subscriber
    // catches up by reading the feed.
    wake_();
    ListenOn(**connection);
    pollfd stop = {.fd = stop_fd_, .events = POLLIN, .revents = 0};
    if (poll(&stop, 1, 0) > 0) return;
  }
}

void PostgresChangeListener::ListenOn(PostgresConnection& connection) {
  PGconn* conn = connection.raw();
  while (true) {
    pollfd fds[2] = {{.fd = PQsocket(conn), .events = POLLIN, .revents = 0},
                     {.fd = stop_fd_, .events = POLLIN, .revents = 0}};
    const int ready = poll(fds, 2, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      spdlog::error("change feed listener: poll failed (errno {})", errno);
      return;
    }
    if (fds[1].revents != 0) return;  // Stopping.
    if (PQconsumeInput(conn) == 0 || PQstatus(conn) != CONNECTION_OK) {
      spdlog::warn("change feed listener: lost the connection to PostgreSQL at {}; reconnecting",
                   target_.address);
      return;
    }
    bool notified = false;
    while (PGnotify* notify = PQnotifies(conn)) {
      PQfreemem(notify);
      notified = true;
    }
    if (notified) wake_();
  }
}

}  // namespace debugplane::persistence
