// WalCheckpointer: folds a SQLite connection's write-ahead log into the
// database on a thread and connection of its own.
//
// By default SQLite checkpoints inside the COMMIT that takes the WAL past
// 1000 pages: that commit copies the log's pages into the database and
// fsyncs it before it returns, on the thread of the writer (the job
// manager's committer), whose callers all wait. The checkpointer instead
// hooks the writer's commits (sqlite3_wal_hook, which also turns the
// automatic checkpoint off) and, once the log holds `pages` pages, wakes its
// thread to run a PASSIVE checkpoint over its own connection: it copies
// what is committed and never blocks the writer, which keeps appending.
//
// Durability is unchanged: a commit is durable once its WAL frames are
// synced (synchronous=FULL), before and regardless of any checkpoint; a
// checkpoint only copies durable frames, syncing the database before the
// log may be reused, and a crash in the middle of one is recovered from the
// log at the next open.
//
// Thread-safety: Hook runs on the writer's thread (under its lock); the
// rest is the owner's. REQUIRES: the writer's connection outlives it, and
// Detach is called (under the writer's lock) before the destructor.

#ifndef DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_WAL_CHECKPOINTER_H_
#define DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_WAL_CHECKPOINTER_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace debugplane::persistence::sqlite_storage_internal {

class WalCheckpointer {
 public:
  // SQLite's own threshold (SQLITE_DEFAULT_WAL_AUTOCHECKPOINT).
  static constexpr int kDefaultPages = 1000;

  // Opens a second connection to the database at `path` and hooks the
  // commits of `writer` (a connection to the same file, in WAL mode).
  // Returns UNAVAILABLE naming the path if the connection cannot be opened.
  // REQUIRES: the caller holds the lock that serializes `writer`.
  static absl::StatusOr<std::unique_ptr<WalCheckpointer>> Start(const std::string& path,
                                                                sqlite3* writer,
                                                                int pages = kDefaultPages);
  // Stops the thread (a checkpoint under way completes first) and closes
  // its connection.
  ~WalCheckpointer();

  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  // Unhooks the writer's commits. REQUIRES: under the writer's lock.
  void Detach();

  // Checkpoints that copied every committed frame (the log may then be
  // reused from its start), since Start.
  int64_t completed() const;

 private:
  WalCheckpointer(sqlite3* writer, sqlite3* own, int pages);
  static int OnCommit(void* self, sqlite3* db, const char* schema, int log_pages);
  void Run();

  sqlite3* const writer_;
  sqlite3* const own_;
  const int pages_;
  mutable absl::Mutex mu_;
  absl::CondVar wanted_cv_;
  bool wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace debugplane::persistence::sqlite_storage_internal

#endif  // DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_WAL_CHECKPOINTER_H_
