#include "persistence/sqlite/sqlite_storage.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "persistence/lease_fence.h"
#include "persistence/sqlite/sqlite_storage_impl.h"
#include "spdlog/spdlog.h"

namespace debugplane::persistence {
namespace {

using sqlite_storage_internal::Statement;
using sqlite_storage_internal::StatementUse;


// Rows ForEachJob reads per hold of the mutex: bounds its memory and lets
// writes in between pages, and `visit` runs without the mutex held.
constexpr int kScanPageRows = 256;


// column_blob works for the TEXT columns too: it returns their bytes as
// stored, embedded NULs included. It returns null for an empty value.
std::string ColumnBytes(sqlite3_stmt* s, int i) {
  const void* data = sqlite3_column_blob(s, i);
  return data == nullptr ? std::string()
                         : std::string(static_cast<const char*>(data), sqlite3_column_bytes(s, i));
}

}  // namespace

absl::StatusOr<int64_t> SqliteStorage::Impl::LatestSequenceLocked() {
  StatementUse use(latest_sequence);
  if (int rc = sqlite3_step(latest_sequence.get()); rc != SQLITE_ROW) {
    return Error(rc, "reading the change sequence");
  }
  return sqlite3_column_int64(latest_sequence.get(), 0);
}

absl::StatusOr<WriteResult> SqliteStorage::Impl::WriteLocked(const WriteBatch& batch) {
  // A ROLLBACK that failed after an earlier error leaves a transaction open;
  // end it rather than have every later batch fail inside it.
  if (!sqlite3_get_autocommit(db.get())) RollBackLocked();
  // IMMEDIATE takes the write lock now (waiting up to the busy timeout), so a
  // busy database fails the batch before any of it is applied. It also
  // orders the change sequence: one writer at a time takes numbers.
  if (absl::Status s = Run(begin, "starting a write transaction"); !s.ok()) return s;
  WriteResult result;
  absl::StatusOr<int64_t> sequence = LatestSequenceLocked();
  absl::Status written = sequence.status();
  const int64_t first = sequence.ok() ? *sequence : 0;
  for (size_t i = 0; i < batch.size() && written.ok(); ++i) {
    const WriteOp& op = batch.ops()[i];
    absl::Status applied;
    if (const auto* fence = std::get_if<CheckLease>(&op)) {
      applied = CheckLeaseLocked(*fence);
      result.sequences.push_back(0);  // A check changes nothing.
      result.versions.push_back(0);
    } else {
      applied = ApplyLocked(op, &*sequence, result);
    }
    if (!applied.ok()) {
      // A version conflict's message already says that nothing was applied.
      written = applied.code() == absl::StatusCode::kAborted
                    ? applied
                    : absl::Status(applied.code(), absl::StrCat(applied.message(), " (operation ",
                                                                i + 1, " of ", batch.size(), ")"));
      applied.ForEachPayload([&written](absl::string_view type, const absl::Cord& payload) {
        written.SetPayload(type, payload);
      });
    }
  }
  if (written.ok() && *sequence != first) {
    StatementUse use(set_sequence);
    sqlite3_bind_int64(set_sequence.get(), 1, *sequence);
    if (int rc = sqlite3_step(set_sequence.get()); rc != SQLITE_DONE) {
      written = Error(rc, "advancing the change sequence");
    }
  }
  if (written.ok()) written = Run(commit, "committing");
  if (written.ok()) return result;
  RollBackLocked();
  if (written.code() == absl::StatusCode::kAborted) return written;
  if (FencedJob(written).has_value()) return written;  // Says so already.
  return absl::Status(written.code(),
                      absl::StrCat(written.message(), "; no write of the batch was applied"));
}

absl::Status SqliteStorage::Impl::CheckLeaseLocked(const CheckLease& fence) {
  StatementUse use(check_lease);
  sqlite3_stmt* s = check_lease.get();
  int rc = sqlite3_bind_text64(s, 1, fence.job_name.data(), fence.job_name.size(), SQLITE_STATIC,
                               SQLITE_UTF8);
  if (rc == SQLITE_OK) rc = sqlite3_step(s);
  std::optional<FoundLease> found;
  if (rc == SQLITE_ROW) {
    const auto* owner = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    found = FoundLease{.owner = owner == nullptr ? "" : owner, .token = sqlite3_column_int64(s, 1)};
  } else if (rc != SQLITE_DONE) {
    return Error(rc, absl::StrCat("checking the lease of job '", fence.job_name, "'"));
  }
  return CheckFence(fence, found);
}

absl::StatusOr<std::optional<int64_t>> SqliteStorage::Impl::VersionLocked(const std::string& name) {
  StatementUse use(version_of);
  int rc = sqlite3_bind_text64(version_of.get(), 1, name.data(), name.size(), SQLITE_STATIC,
                               SQLITE_UTF8);
  if (rc == SQLITE_OK) rc = sqlite3_step(version_of.get());
  if (rc == SQLITE_ROW) return sqlite3_column_int64(version_of.get(), 0);
  if (rc == SQLITE_DONE) return std::nullopt;
  return Error(rc, absl::StrCat("reading the version of job '", name, "'"));
}

absl::Status SqliteStorage::Impl::RecordChangeLocked(int64_t sequence, const std::string& name,
                                                     int64_t version, const JobRow* row) {
  static const JobRow kTombstone;
  const JobRow& r = row != nullptr ? *row : kTombstone;
  StatementUse use(add_change);
  sqlite3_stmt* s = add_change.get();
  int rc = sqlite3_bind_int64(s, 1, sequence);
  if (rc == SQLITE_OK) {
    rc = sqlite3_bind_text64(s, 2, name.data(), name.size(), SQLITE_STATIC, SQLITE_UTF8);
  }
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 3, version);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int(s, 4, row == nullptr ? 1 : 0);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 5, r.creation_time_us);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 6, r.last_modified_us);
  if (rc == SQLITE_OK) {
    rc = sqlite3_bind_text64(s, 7, r.status.data(), r.status.size(), SQLITE_STATIC, SQLITE_UTF8);
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_bind_blob64(s, 8, r.record.data(), r.record.size(), SQLITE_STATIC);
  }
  if (rc == SQLITE_OK) rc = sqlite3_step(s);
  if (rc != SQLITE_DONE) {
    return Error(rc, absl::StrCat("recording the change of job '", name, "'"));
  }
  return absl::OkStatus();
}

absl::Status SqliteStorage::Impl::ApplyLocked(const WriteOp& op, int64_t* sequence,
                                              WriteResult& result) {
  const bool is_put = std::holds_alternative<PutJob>(op);
  const std::string& name = is_put ? std::get<PutJob>(op).row.name : std::get<DeleteJob>(op).name;
  const std::optional<int64_t> expected =
      is_put ? std::get<PutJob>(op).expected_version : std::get<DeleteJob>(op).expected_version;
  absl::StatusOr<std::optional<int64_t>> current = VersionLocked(name);
  if (!current.ok()) return current.status();
  if (expected.has_value() && current->value_or(kAbsent) != *expected) {
    return VersionConflictError(name, *expected, *current);
  }
  const int64_t version = current->value_or(kAbsent) + 1;
  if (is_put) {
    const JobRow& row = std::get<PutJob>(op).row;
    StatementUse use(put);
    sqlite3_stmt* s = put.get();
    // SQLITE_STATIC: the row outlives the step, and StatementUse unbinds it.
    int rc =
        sqlite3_bind_text64(s, 1, row.name.data(), row.name.size(), SQLITE_STATIC, SQLITE_UTF8);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 2, row.creation_time_us);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 3, row.last_modified_us);
    if (rc == SQLITE_OK) {
      rc = sqlite3_bind_text64(s, 4, row.status.data(), row.status.size(), SQLITE_STATIC,
                               SQLITE_UTF8);
    }
    // data() is never null, so an empty record binds as an empty blob, not
    // as NULL (which the NOT NULL column would refuse).
    if (rc == SQLITE_OK) {
      rc = sqlite3_bind_blob64(s, 5, row.record.data(), row.record.size(), SQLITE_STATIC);
    }
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 6, version);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) return Error(rc, absl::StrCat("writing job '", row.name, "'"));
  } else {
    if (!current->has_value()) {  // Nothing to delete: no change.
      result.sequences.push_back(0);
      result.versions.push_back(kAbsent);
      return absl::OkStatus();
    }
    StatementUse use(remove);
    int rc =
        sqlite3_bind_text64(remove.get(), 1, name.data(), name.size(), SQLITE_STATIC, SQLITE_UTF8);
    if (rc == SQLITE_OK) rc = sqlite3_step(remove.get());
    if (rc != SQLITE_DONE) return Error(rc, absl::StrCat("deleting job '", name, "'"));
  }
  ++*sequence;
  if (absl::Status recorded = RecordChangeLocked(*sequence, name, version,
                                                 is_put ? &std::get<PutJob>(op).row : nullptr);
      !recorded.ok()) {
    return recorded;
  }
  result.sequences.push_back(*sequence);
  result.versions.push_back(version);
  return absl::OkStatus();
}

void SqliteStorage::Impl::RollBackLocked() {
  // Some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, ...) already rolled
  // the transaction back; a ROLLBACK without one would fail.
  if (sqlite3_get_autocommit(db.get())) return;
  if (absl::Status s = Run(rollback, "rolling back a failed transaction"); !s.ok()) {
    spdlog::error("{}", s.ToString());
  }
}

absl::Status SqliteStorage::Impl::ReadPageLocked(const std::string* after,
                                                 std::vector<JobRow>& rows) {
  const Statement& scan = after == nullptr ? scan_first : scan_after;
  StatementUse use(scan);
  sqlite3_stmt* s = scan.get();
  int rc = SQLITE_OK;
  if (after != nullptr) {
    rc = sqlite3_bind_text64(s, 1, after->data(), after->size(), SQLITE_STATIC, SQLITE_UTF8);
  }
  if (rc == SQLITE_OK) rc = sqlite3_bind_int(s, after == nullptr ? 1 : 2, kScanPageRows);
  if (rc != SQLITE_OK) return Error(rc, "reading jobs");
  auto column = [s](int i) { return ColumnBytes(s, i); };
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    JobRow& row = rows.emplace_back();
    row.name = column(0);
    row.creation_time_us = sqlite3_column_int64(s, 1);
    row.last_modified_us = sqlite3_column_int64(s, 2);
    row.status = column(3);
    row.record = column(4);
    row.version = sqlite3_column_int64(s, 5);
  }
  if (rc != SQLITE_DONE) return Error(rc, "reading jobs");
  return absl::OkStatus();
}

absl::Status SqliteStorage::Write(const WriteBatch& batch) {
  return WriteAndReport(batch).status();
}

absl::StatusOr<WriteResult> SqliteStorage::WriteAndReport(const WriteBatch& batch) {
  if (batch.empty()) return WriteResult{};
  absl::MutexLock lock(&impl_->mu);
  return impl_->WriteLocked(batch);
}

absl::StatusOr<std::optional<JobRow>> SqliteStorage::ReadJob(const std::string& name) {
  absl::MutexLock lock(&impl_->mu);
  const Statement& read = impl_->read_job;
  StatementUse use(read);
  sqlite3_stmt* s = read.get();
  int rc = sqlite3_bind_text64(s, 1, name.data(), name.size(), SQLITE_STATIC, SQLITE_UTF8);
  if (rc == SQLITE_OK) rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) return impl_->Error(rc, absl::StrCat("reading job '", name, "'"));
  JobRow row;
  row.name = ColumnBytes(s, 0);
  row.creation_time_us = sqlite3_column_int64(s, 1);
  row.last_modified_us = sqlite3_column_int64(s, 2);
  row.status = ColumnBytes(s, 3);
  row.record = ColumnBytes(s, 4);
  row.version = sqlite3_column_int64(s, 5);
  return row;
}

absl::StatusOr<std::vector<JobChange>> SqliteStorage::ReadChangesAfter(int64_t after, int limit) {
  absl::MutexLock lock(&impl_->mu);
  const Statement& read = impl_->changes_after;
  StatementUse use(read);
  sqlite3_stmt* s = read.get();
  int rc = sqlite3_bind_int64(s, 1, after);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int(s, 2, limit);
  if (rc != SQLITE_OK) return impl_->Error(rc, "reading the change feed");
  std::vector<JobChange> changes;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    JobChange& change = changes.emplace_back();
    change.sequence = sqlite3_column_int64(s, 0);
    change.name = ColumnBytes(s, 1);
    change.version = sqlite3_column_int64(s, 2);
    change.deleted = sqlite3_column_int(s, 3) != 0;
    if (change.deleted) continue;
    change.row.name = change.name;
    change.row.creation_time_us = sqlite3_column_int64(s, 4);
    change.row.last_modified_us = sqlite3_column_int64(s, 5);
    change.row.status = ColumnBytes(s, 6);
    change.row.record = ColumnBytes(s, 7);
    change.row.version = change.version;
  }
  if (rc != SQLITE_DONE) return impl_->Error(rc, "reading the change feed");
  return changes;
}

absl::StatusOr<int64_t> SqliteStorage::PruneChanges(int64_t modified_before_us, int limit) {
  absl::MutexLock lock(&impl_->mu);
  if (!sqlite3_get_autocommit(impl_->db.get())) impl_->RollBackLocked();
  if (absl::Status s = impl_->Run(impl_->begin, "starting to prune the change feed"); !s.ok()) {
    return s;
  }
  int64_t pruned = 0;
  absl::Status done;
  {
    const Statement& prune = impl_->prune_changes;
    StatementUse use(prune);
    int rc = sqlite3_bind_int64(prune.get(), 1, modified_before_us);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(prune.get(), 2, limit);
    if (rc == SQLITE_OK) rc = sqlite3_step(prune.get());
    if (rc == SQLITE_DONE) {
      pruned = sqlite3_changes(impl_->db.get());
    } else {
      done = impl_->Error(rc, "pruning the change feed");
    }
  }
  if (done.ok()) done = impl_->Run(impl_->commit, "committing the change feed's pruning");
  if (!done.ok()) {
    impl_->RollBackLocked();
    return done;
  }
  return pruned;
}

absl::StatusOr<int64_t> SqliteStorage::LatestChangeSequence() {
  absl::MutexLock lock(&impl_->mu);
  return impl_->LatestSequenceLocked();
}

absl::Status SqliteStorage::ForEachJob(const std::function<absl::Status(const JobRow&)>& visit) {
  std::vector<JobRow> page;
  std::string after;
  for (bool first = true;; first = false) {
    page.clear();
    {
      absl::MutexLock lock(&impl_->mu);
      if (absl::Status read = impl_->ReadPageLocked(first ? nullptr : &after, page); !read.ok()) {
        return read;
      }
    }
    for (const JobRow& row : page) {
      if (absl::Status visited = visit(row); !visited.ok()) return visited;
    }
    if (page.size() < kScanPageRows) return absl::OkStatus();
    after = std::move(page.back().name);
  }
}

int SqliteStorage::schema_version() const { return impl_->schema_version; }

}  // namespace debugplane::persistence
