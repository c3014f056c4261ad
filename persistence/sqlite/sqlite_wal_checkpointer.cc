#include "persistence/sqlite/sqlite_wal_checkpointer.h"

#include <pthread.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace debugplane::persistence::sqlite_storage_internal {

absl::StatusOr<std::unique_ptr<WalCheckpointer>> WalCheckpointer::Start(const std::string& path,
                                                                        sqlite3* writer,
                                                                        int pages) {
  sqlite3* own = nullptr;
  // NOMUTEX: only the checkpointer's thread uses this connection.
  const int rc =
      sqlite3_open_v2(path.c_str(), &own, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status error = absl::UnavailableError(
        absl::StrCat("sqlite database '", path, "': opening the WAL checkpointer's connection: ",
                     own != nullptr ? sqlite3_errmsg(own) : sqlite3_errstr(rc)));
    sqlite3_close_v2(own);
    return error;
  }
  // A checkpoint waits for the writer's brief locks rather than giving up.
  sqlite3_busy_timeout(own, 5000);
  // A connection finds the database in WAL mode (and opens the log) at its
  // first read; until then its checkpoints do nothing.
  if (int read = sqlite3_exec(own, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
      read != SQLITE_OK) {
    absl::Status error = absl::UnavailableError(
        absl::StrCat("sqlite database '", path, "': reading it from the WAL checkpointer's "
                     "connection: ", sqlite3_errmsg(own)));
    sqlite3_close_v2(own);
    return error;
  }
  std::unique_ptr<WalCheckpointer> checkpointer(new WalCheckpointer(writer, own, pages));
  sqlite3_wal_hook(writer, &WalCheckpointer::OnCommit, checkpointer.get());
  checkpointer->thread_ = std::thread([raw = checkpointer.get()] { raw->Run(); });
  return checkpointer;
}

WalCheckpointer::WalCheckpointer(sqlite3* writer, sqlite3* own, int pages)
    : writer_(writer), own_(own), pages_(pages) {}

WalCheckpointer::~WalCheckpointer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wanted_cv_.Signal();
  }
  if (thread_.joinable()) thread_.join();
  sqlite3_close_v2(own_);
}

void WalCheckpointer::Detach() { sqlite3_wal_hook(writer_, nullptr, nullptr); }

int64_t WalCheckpointer::completed() const {
  absl::MutexLock lock(&mu_);
  return completed_;
}

int WalCheckpointer::OnCommit(void* self, sqlite3*, const char*, int log_pages) {
  auto* checkpointer = static_cast<WalCheckpointer*>(self);
  if (log_pages < checkpointer->pages_) return SQLITE_OK;
  absl::MutexLock lock(&checkpointer->mu_);
  if (!checkpointer->wanted_) {
    checkpointer->wanted_ = true;
    checkpointer->wanted_cv_.Signal();
  }
  return SQLITE_OK;  // The commit itself succeeded, whatever happens next.
}

void WalCheckpointer::Run() {
  pthread_setname_np(pthread_self(), "dp-checkpoint");
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      while (!wanted_ && !stopping_) wanted_cv_.Wait(&mu_);
      if (stopping_) return;
      wanted_ = false;
    }
    int log_frames = 0;
    int copied_frames = 0;
    const int rc = sqlite3_wal_checkpoint_v2(own_, nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                             &log_frames, &copied_frames);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
      // The log keeps growing until a later checkpoint succeeds (at the
      // latest the one at close); commits are not affected.
      spdlog::warn("sqlite WAL checkpoint failed: {} (sqlite code {})", sqlite3_errmsg(own_), rc);
      continue;
    }
    if (rc == SQLITE_OK && log_frames > 0 && copied_frames == log_frames) {
      absl::MutexLock lock(&mu_);
      ++completed_;
    }
  }
}

}  // namespace debugplane::persistence::sqlite_storage_internal
