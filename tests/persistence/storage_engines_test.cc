// The Storage contract, run against every engine: SQLite (a file in a
// temporary directory) and PostgreSQL (a real server, PostgresTestServer).
// Engine-specific behaviour is in sqlite_storage_test.cc and
// postgres_storage_test.cc.

#include <algorithm>
#include <atomic>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/postgres/postgres_storage.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/persistence/persistence_test_util.h"
#include "tests/persistence/postgres_test_server.h"

namespace debugplane::persistence {
namespace {

using ::debugplane::persistence::testing::AsTuple;
using ::debugplane::persistence::testing::Contents;
using ::debugplane::persistence::testing::MakeRow;
using ::debugplane::persistence::testing::RawDb;
using ::debugplane::persistence::testing::ReadAll;
using ::debugplane::persistence::testing::ScopedTempDir;
using ::debugplane::testing::ScratchPostgresDatabase;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// One database of one engine, and a way behind the storage's back.
class StorageEngine {
 public:
  virtual ~StorageEngine() = default;
  virtual absl::StatusOr<std::unique_ptr<Storage>> Open() = 0;
  // What the engine's error messages name: the file, or the server's address.
  virtual std::string location() const = 0;
  // The first value `sql` returns, run on a connection of its own.
  virtual std::string Value(const std::string& sql) = 0;
  // Makes the database itself refuse to insert a row named "poison", with
  // the error "poisoned row refused".
  virtual void RefuseRowsNamedPoison() = 0;
};

class SqliteEngine final : public StorageEngine {
 public:
  absl::StatusOr<std::unique_ptr<Storage>> Open() override {
    auto storage = SqliteStorage::Open(location());
    if (!storage.ok()) return storage.status();
    return std::unique_ptr<Storage>(*std::move(storage));
  }
  std::string location() const override { return (dir_.path() / "jobs.db").string(); }
  std::string Value(const std::string& sql) override { return RawDb(location()).Value(sql); }
  void RefuseRowsNamedPoison() override {
    RawDb(location())
        .Exec(
            "CREATE TRIGGER poison BEFORE INSERT ON training_jobs WHEN NEW.name = 'poison' "
            "BEGIN SELECT RAISE(ABORT, 'poisoned row refused'); END");
  }

 private:
  ScopedTempDir dir_;
};

class PostgresEngine final : public StorageEngine {
 public:
  // Check ok() before use: the server may not have started.
  const absl::Status& status() const { return database_.status(); }

  absl::StatusOr<std::unique_ptr<Storage>> Open() override {
    auto storage = PostgresStorage::Open(database_.Uri());
    if (!storage.ok()) return storage.status();
    return std::unique_ptr<Storage>(*std::move(storage));
  }
  std::string location() const override { return database_.server().address(); }
  std::string Value(const std::string& sql) override {
    auto value = database_.server().Query(database_.name(), sql);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : "";
  }
  void RefuseRowsNamedPoison() override {
    Value(
        "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.name = 'poison' THEN RAISE EXCEPTION 'poisoned row refused'; END IF; "
        "RETURN NEW; END $$; "
        "CREATE TRIGGER poison BEFORE INSERT ON training_jobs FOR EACH ROW "
        "EXECUTE FUNCTION refuse_poison()");
  }

 private:
  ScratchPostgresDatabase database_;
};

class StorageContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "Sqlite") {
      engine_ = std::make_unique<SqliteEngine>();
    } else {
      auto postgres = std::make_unique<PostgresEngine>();
      // A PostgreSQL that cannot start fails the test: it never skips.
      ASSERT_TRUE(postgres->status().ok()) << postgres->status();
      engine_ = std::move(postgres);
    }
  }

  std::unique_ptr<Storage> OpenOrDie() {
    auto storage = engine_->Open();
    EXPECT_TRUE(storage.ok()) << storage.status();
    return storage.ok() ? *std::move(storage) : nullptr;
  }

  std::unique_ptr<StorageEngine> engine_;
};

INSTANTIATE_TEST_SUITE_P(Engines, StorageContractTest, ::testing::Values("Sqlite", "Postgres"),
                         [](const auto& info) { return info.param; });

TEST_P(StorageContractTest, RowsRoundTripWithEveryColumnIntact) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  JobRow binary{.name = "binary",
                .creation_time_us = -5,
                .last_modified_us = INT64_MAX,
                .status = "Stopping",
                .record = std::string("\0\xff\x01 not text\0", 14)};
  JobRow empty{
      .name = "empty", .creation_time_us = 0, .last_modified_us = 0, .status = "", .record = ""};
  JobRow unicode = MakeRow("naïve-ジョブ", 7);
  WriteBatch batch;
  batch.Put(binary);
  batch.Put(empty);
  batch.Put(unicode);
  ASSERT_TRUE(storage->Write(batch).ok());

  EXPECT_THAT(Contents(*storage), ElementsAre(AsTuple(binary), AsTuple(empty), AsTuple(unicode)));
}

TEST_P(StorageContractTest, PutReplacesTheRowWithTheSameName) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  WriteBatch first;
  first.Put(MakeRow("job", 1));
  first.Put(MakeRow("other", 2));
  ASSERT_TRUE(storage->Write(first).ok());
  WriteBatch second;
  second.Put(MakeRow("job", 3));
  ASSERT_TRUE(storage->Write(second).ok());

  EXPECT_THAT(Contents(*storage),
              ElementsAre(AsTuple(MakeRow("job", 3)), AsTuple(MakeRow("other", 2))));
  EXPECT_EQ(engine_->Value("SELECT status FROM training_jobs WHERE name = 'job'"), "Stopped");
}

TEST_P(StorageContractTest, DeleteRemovesTheRowAndAMissingRowIsNoError) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  WriteBatch put;
  put.Put(MakeRow("a", 1));
  put.Put(MakeRow("b", 2));
  ASSERT_TRUE(storage->Write(put).ok());
  WriteBatch remove;
  remove.Delete("a");
  remove.Delete("never-existed");
  ASSERT_TRUE(storage->Write(remove).ok());

  EXPECT_THAT(Contents(*storage), ElementsAre(AsTuple(MakeRow("b", 2))));
}

TEST_P(StorageContractTest, OperationsApplyInBatchOrder) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  WriteBatch batch;
  batch.Put(MakeRow("gone", 1));
  batch.Delete("gone");
  batch.Put(MakeRow("kept", 2));
  batch.Put(MakeRow("kept", 4));
  batch.Delete("back");
  batch.Put(MakeRow("back", 5));
  ASSERT_TRUE(storage->Write(batch).ok());

  EXPECT_THAT(Contents(*storage),
              ElementsAre(AsTuple(MakeRow("back", 5)), AsTuple(MakeRow("kept", 4))));
}

TEST_P(StorageContractTest, AnEmptyBatchIsOk) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  EXPECT_TRUE(storage->Write(WriteBatch()).ok());
  EXPECT_THAT(Contents(*storage), IsEmpty());
}

TEST_P(StorageContractTest, ForEachJobVisitsInAscendingBytewiseNameOrderAcrossPages) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  // More rows than one page of the scan, written in random order. Upper
  // before lower case, "a" before "a\x01" before "ab", and a two-byte
  // character last: bytewise, unlike most locales' collations.
  std::vector<std::string> names = {"B", "a", "a\x01", "ab", "\xc3\xa9", "Z-", "_x", "a-b", "a b"};
  for (int i = 0; i < 700; ++i) names.push_back(absl::StrCat("job-", i));
  std::vector<std::string> shuffled = names;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(42));
  WriteBatch batch;
  for (const std::string& name : shuffled) batch.Put(MakeRow(name, 1));
  ASSERT_TRUE(storage->Write(batch).ok());

  std::vector<std::string> visited;
  ASSERT_TRUE(storage
                  ->ForEachJob([&](const JobRow& row) {
                    visited.push_back(row.name);
                    return absl::OkStatus();
                  })
                  .ok());
  std::sort(names.begin(), names.end());  // std::string compares bytes as unsigned.
  EXPECT_EQ(visited, names);
}

TEST_P(StorageContractTest, AVisitorErrorStopsTheScanAndIsReturned) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  WriteBatch batch;
  for (int i = 0; i < 10; ++i) batch.Put(MakeRow(absl::StrCat("job-", i), i));
  ASSERT_TRUE(storage->Write(batch).ok());

  std::vector<std::string> visited;
  absl::Status status = storage->ForEachJob([&](const JobRow& row) {
    visited.push_back(row.name);
    return visited.size() == 3 ? absl::DataLossError("bad record") : absl::OkStatus();
  });
  EXPECT_EQ(status, absl::DataLossError("bad record"));
  EXPECT_THAT(visited, ElementsAre("job-0", "job-1", "job-2"));
}

TEST_P(StorageContractTest, AVisitorMayWriteDuringTheScan) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  WriteBatch batch;
  for (int i = 0; i < 600; ++i)
    batch.Put(MakeRow(absl::StrCat("job-", absl::Dec(i, absl::kZeroPad3)), i));
  ASSERT_TRUE(storage->Write(batch).ok());

  int visited = 0;
  absl::Status status = storage->ForEachJob([&](const JobRow& row) {
    ++visited;
    WriteBatch remove;
    remove.Delete(row.name);
    return storage->Write(remove);  // Would deadlock if the scan held the lock.
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(visited, 600);
  EXPECT_THAT(Contents(*storage), IsEmpty());
}

TEST_P(StorageContractTest, ABatchFailingMidwayAppliesNothing) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  WriteBatch before;
  before.Put(MakeRow("keep", 1));
  ASSERT_TRUE(storage->Write(before).ok());
  // A real engine error in the 4th operation, after three that succeeded.
  engine_->RefuseRowsNamedPoison();

  WriteBatch batch;
  batch.Put(MakeRow("new-1", 2));
  batch.Delete("keep");
  batch.Put(MakeRow("keep", 3));
  batch.Put(MakeRow("poison", 4));
  batch.Put(MakeRow("new-2", 5));
  absl::Status failed = storage->Write(batch);
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal) << failed;
  EXPECT_THAT(failed.message(),
              AllOf(HasSubstr(engine_->location()), HasSubstr("poisoned row refused"),
                    HasSubstr("'poison'"), HasSubstr("operation 4 of 5")));

  EXPECT_THAT(Contents(*storage), ElementsAre(AsTuple(MakeRow("keep", 1))));
  // The connection is not left inside the failed transaction.
  WriteBatch after;
  after.Put(MakeRow("new-1", 6));
  ASSERT_TRUE(storage->Write(after).ok());
  storage.reset();
  storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  EXPECT_THAT(Contents(*storage),
              ElementsAre(AsTuple(MakeRow("keep", 1)), AsTuple(MakeRow("new-1", 6))));
}

TEST_P(StorageContractTest, DataSurvivesCloseAndReopen) {
  {
    auto storage = OpenOrDie();
    ASSERT_NE(storage, nullptr);
    WriteBatch batch;
    batch.Put(MakeRow("a", 1));
    batch.Put(MakeRow("b", 2));
    ASSERT_TRUE(storage->Write(batch).ok());
    WriteBatch remove;
    remove.Delete("a");
    ASSERT_TRUE(storage->Write(remove).ok());
  }
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  EXPECT_THAT(Contents(*storage), ElementsAre(AsTuple(MakeRow("b", 2))));
}

TEST_P(StorageContractTest, ConcurrentWritersLoseNothing) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  // A second storage on the same database competes through its locks.
  auto second = OpenOrDie();
  ASSERT_NE(second, nullptr);
  constexpr int kThreadsPerConnection = 3;
  constexpr int kBatches = 40;
  constexpr int kRowsPerBatch = 3;

  std::atomic<bool> writing = true;
  std::atomic<int> failures = 0;
  std::thread reader([&] {
    while (writing.load()) {
      if (!ReadAll(*storage).ok()) failures.fetch_add(1);
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 2 * kThreadsPerConnection; ++t) {
    writers.emplace_back([&, t] {
      Storage& target = t < kThreadsPerConnection ? *storage : *second;
      for (int b = 0; b < kBatches; ++b) {
        WriteBatch batch;
        for (int r = 0; r < kRowsPerBatch; ++r) {
          batch.Put(MakeRow(absl::StrCat("t", t, "-b", b, "-r", r), b));
        }
        if (!target.Write(batch).ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  writing = false;
  reader.join();

  EXPECT_EQ(failures.load(), 0);
  std::vector<testing::RowTuple> expected;
  for (int t = 0; t < 2 * kThreadsPerConnection; ++t) {
    for (int b = 0; b < kBatches; ++b) {
      for (int r = 0; r < kRowsPerBatch; ++r) {
        expected.push_back(AsTuple(MakeRow(absl::StrCat("t", t, "-b", b, "-r", r), b)));
      }
    }
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Contents(*storage), expected);
  EXPECT_EQ(Contents(*second), expected);
}

// --- Row versions and the change feed (replicas) ------------------------------

namespace replicas {

int64_t VersionOf(Storage& storage, const std::string& name) {
  auto row = storage.ReadJob(name);
  EXPECT_TRUE(row.ok()) << row.status();
  return row.ok() && row->has_value() ? (*row)->version : kAbsent;
}

std::vector<JobChange> AllChanges(Storage& storage, int64_t after = 0) {
  auto changes = storage.ReadChangesAfter(after, 10'000);
  EXPECT_TRUE(changes.ok()) << changes.status();
  return changes.ok() ? *std::move(changes) : std::vector<JobChange>{};
}

}  // namespace replicas

TEST_P(StorageContractTest, VersionsStartAtOneAndGrowByOnePerWrite) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  WriteBatch batch;
  batch.Put(MakeRow("job", 1), kAbsent);
  auto written = storage->WriteAndReport(batch);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_THAT(written->versions, ElementsAre(1));
  for (int64_t expected = 1; expected <= 3; ++expected) {
    WriteBatch update;
    update.Put(MakeRow("job", expected + 1), expected);
    written = storage->WriteAndReport(update);
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_THAT(written->versions, ElementsAre(expected + 1));
  }
  // An unconditional put counts too.
  WriteBatch unconditional;
  unconditional.Put(MakeRow("job", 9));
  ASSERT_TRUE(storage->Write(unconditional).ok());
  auto row = storage->ReadJob("job");
  ASSERT_TRUE(row.ok()) << row.status();
  ASSERT_TRUE(row->has_value());
  EXPECT_EQ((*row)->version, 5);
  EXPECT_EQ(AsTuple(**row), AsTuple(MakeRow("job", 9)));
  auto rows = ReadAll(*storage);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].version, 5);
  auto missing = storage->ReadJob("missing");
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_FALSE(missing->has_value());
}

TEST_P(StorageContractTest, AVersionConflictAbortsTheWholeBatchNamingJobAndVersions) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  WriteBatch setup;
  setup.Put(MakeRow("taken", 1));
  setup.Put(MakeRow("taken", 2));  // Version 2.
  ASSERT_TRUE(storage->Write(setup).ok());
  const int64_t sequence_before = *storage->LatestChangeSequence();

  WriteBatch stale;
  stale.Put(MakeRow("innocent", 1), kAbsent);
  stale.Put(MakeRow("taken", 3), 1);
  absl::Status status = storage->Write(stale);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("'taken'"), HasSubstr("expected version 1"),
                    HasSubstr("has version 2"), HasSubstr("no write of the batch was applied")));
  // Nothing of the batch: no row, no version, no change.
  EXPECT_THAT(Contents(*storage), ElementsAre(AsTuple(MakeRow("taken", 2))));
  EXPECT_EQ(replicas::VersionOf(*storage, "taken"), 2);
  EXPECT_EQ(*storage->LatestChangeSequence(), sequence_before);
  EXPECT_THAT(replicas::AllChanges(*storage, sequence_before), IsEmpty());

  WriteBatch create_again;
  create_again.Put(MakeRow("taken", 4), kAbsent);
  status = storage->Write(create_again);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("expected no row"), HasSubstr("has version 2")));

  WriteBatch update_missing;
  update_missing.Put(MakeRow("ghost", 1), 3);
  status = storage->Write(update_missing);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("'ghost'"), HasSubstr("expected version 3"),
                                      HasSubstr("has no row")));

  WriteBatch stale_delete;
  stale_delete.Delete("taken", 1);
  EXPECT_EQ(storage->Write(stale_delete).code(), absl::StatusCode::kAborted);
  WriteBatch fresh_delete;
  fresh_delete.Delete("taken", 2);
  EXPECT_TRUE(storage->Write(fresh_delete).ok());
  EXPECT_THAT(Contents(*storage), IsEmpty());
}

TEST_P(StorageContractTest, TheFeedHoldsEveryWriteInOrderWithTombstonesForDeletes) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  EXPECT_EQ(*storage->LatestChangeSequence(), 0);
  WriteBatch first;
  first.Put(MakeRow("a", 1));
  first.Put(MakeRow("b", 2));
  first.Delete("never-there");  // No change.
  auto written = storage->WriteAndReport(first);
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(written->sequences.size(), 3u);
  EXPECT_GT(written->sequences[1], written->sequences[0]);
  EXPECT_EQ(written->sequences[2], 0);
  WriteBatch second;
  second.Put(MakeRow("a", 3), 1);
  second.Delete("b", 1);
  written = storage->WriteAndReport(second);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_THAT(written->versions, ElementsAre(2, 2));

  std::vector<JobChange> changes = replicas::AllChanges(*storage);
  ASSERT_EQ(changes.size(), 4u);
  std::vector<std::tuple<std::string, int64_t, bool>> seen;
  for (size_t i = 0; i < changes.size(); ++i) {
    if (i > 0) {
      EXPECT_GT(changes[i].sequence, changes[i - 1].sequence);
    }
    seen.emplace_back(changes[i].name, changes[i].version, changes[i].deleted);
  }
  EXPECT_THAT(seen, ElementsAre(std::make_tuple("a", 1, false), std::make_tuple("b", 1, false),
                                std::make_tuple("a", 2, false), std::make_tuple("b", 2, true)));
  EXPECT_EQ(AsTuple(changes[0].row), AsTuple(MakeRow("a", 1)));
  EXPECT_EQ(AsTuple(changes[2].row), AsTuple(MakeRow("a", 3)));
  EXPECT_EQ(changes[2].row.version, 2);
  EXPECT_EQ(changes[3].sequence, written->sequences[1]);
  EXPECT_EQ(*storage->LatestChangeSequence(), changes.back().sequence);

  // Paging: after a sequence number, up to a limit.
  auto page = storage->ReadChangesAfter(changes[0].sequence, 2);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].sequence, changes[1].sequence);
  EXPECT_EQ((*page)[1].sequence, changes[2].sequence);
  EXPECT_THAT(replicas::AllChanges(*storage, changes.back().sequence), IsEmpty());

  // The feed survives a reopen, and numbering goes on.
  storage.reset();
  storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  EXPECT_EQ(replicas::AllChanges(*storage).size(), 4u);
  WriteBatch third;
  third.Put(MakeRow("b", 5), kAbsent);  // Created again after its delete.
  written = storage->WriteAndReport(third);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_GT(written->sequences[0], changes.back().sequence);
}

// Pruning keeps each job's latest change (and every change newer than the
// horizon), so a reader resuming after any sequence number still reaches
// every job's current state, tombstones included.
TEST_P(StorageContractTest, PruningDropsOnlySupersededChangesOlderThanTheHorizon) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  // MakeRow(name, n) was last modified at kBase + 2n.
  constexpr int64_t kBase = 1'700'000'000'000'000;
  for (int n = 1; n <= 5; ++n) {  // "a" five times: 1..4 superseded.
    WriteBatch batch;
    batch.Put(MakeRow("a", n));
    ASSERT_TRUE(storage->Write(batch).ok());
  }
  WriteBatch others;
  others.Put(MakeRow("b", 1));   // Only change of "b": stays.
  others.Put(MakeRow("c", 2));   // Superseded by its tombstone.
  others.Put(MakeRow("d", 20));  // Superseded, but newer than the horizon.
  others.Put(MakeRow("d", 21));
  ASSERT_TRUE(storage->Write(others).ok());
  WriteBatch remove;
  remove.Delete("c");
  ASSERT_TRUE(storage->Write(remove).ok());
  const int64_t latest = *storage->LatestChangeSequence();

  // Horizon kBase + 10: changes modified before it may go. Two per call.
  absl::StatusOr<int64_t> pruned = storage->PruneChanges(kBase + 10, 2);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 2);
  pruned = storage->PruneChanges(kBase + 10, 100);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 3);  // a#3, a#4 and c#2.
  EXPECT_EQ(*storage->PruneChanges(kBase + 10, 100), 0);

  std::vector<std::tuple<std::string, int64_t, bool>> left;
  for (const JobChange& change : replicas::AllChanges(*storage)) {
    left.emplace_back(change.name, change.deleted ? 0 : change.row.last_modified_us - kBase,
                      change.deleted);
  }
  EXPECT_THAT(left, ElementsAre(std::make_tuple("a", 10, false), std::make_tuple("b", 2, false),
                                std::make_tuple("d", 40, false), std::make_tuple("d", 42, false),
                                std::make_tuple("c", 0, true)));
  // The numbering is untouched; writes go on after it.
  EXPECT_EQ(*storage->LatestChangeSequence(), latest);
  WriteBatch after;
  after.Put(MakeRow("c", 7));
  auto written = storage->WriteAndReport(after);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_GT(written->sequences[0], latest);
  // The re-created job's tombstone is superseded now (modified at 0).
  EXPECT_EQ(*storage->PruneChanges(kBase + 10, 100), 1);
}

// Writers on separate connections (PostgreSQL: separate pools, as separate
// servers) race; a reader that follows the feed by "after the last sequence
// I saw" must end up with every acknowledged change exactly once. A feed
// numbered out of commit order loses changes here (a reader that already
// passed a number that commits later never reads it).
TEST_P(StorageContractTest, AFollowerOfTheFeedMissesNoChangeUnderConcurrentWriters) {
  constexpr int kWriters = 4;
  constexpr int kWritesEach = 60;
  std::vector<std::unique_ptr<Storage>> writers;
  for (int i = 0; i < kWriters; ++i) {
    writers.push_back(OpenOrDie());
    ASSERT_NE(writers.back(), nullptr);
  }
  auto follower = OpenOrDie();
  ASSERT_NE(follower, nullptr);
  std::atomic<bool> done = false;
  std::vector<int64_t> followed;
  absl::Status follow_error;
  std::thread reader([&] {
    int64_t cursor = 0;
    while (true) {
      const bool last_round = done.load();
      auto changes = follower->ReadChangesAfter(cursor, 7);
      if (!changes.ok()) {
        follow_error = changes.status();
        return;
      }
      for (const JobChange& change : *changes) {
        followed.push_back(change.sequence);
        cursor = change.sequence;
      }
      if (last_round && changes->empty()) return;
    }
  });
  std::vector<std::vector<int64_t>> acknowledged(kWriters);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kWritesEach; ++i) {
        WriteBatch batch;
        batch.Put(MakeRow(absl::StrCat("w", w, "-", i % 5), i));
        if (i % 3 == 0) batch.Put(MakeRow(absl::StrCat("shared-", i % 2), i));
        auto written = writers[w]->WriteAndReport(batch);
        ASSERT_TRUE(written.ok()) << written.status();
        for (int64_t sequence : written->sequences) acknowledged[w].push_back(sequence);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  done = true;
  reader.join();
  ASSERT_TRUE(follow_error.ok()) << follow_error;
  std::vector<int64_t> all;
  for (const auto& mine : acknowledged) all.insert(all.end(), mine.begin(), mine.end());
  std::sort(all.begin(), all.end());
  EXPECT_TRUE(std::is_sorted(followed.begin(), followed.end()));
  EXPECT_EQ(followed, all);
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "a sequence number twice";
}

// Read-modify-write with expected versions from several connections: every
// increment that was acknowledged counts, none is lost to a concurrent one.
TEST_P(StorageContractTest, ExpectedVersionsLoseNoConcurrentUpdate) {
  constexpr int kWriters = 3;
  constexpr int kIncrementsEach = 25;
  {
    auto storage = OpenOrDie();
    ASSERT_NE(storage, nullptr);
    JobRow counter = MakeRow("counter", 0);
    counter.record = "0";
    WriteBatch create;
    create.Put(counter, kAbsent);
    ASSERT_TRUE(storage->Write(create).ok());
  }
  std::atomic<int> conflicts = 0;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&] {
      auto storage = OpenOrDie();
      ASSERT_NE(storage, nullptr);
      for (int done = 0; done < kIncrementsEach;) {
        auto row = storage->ReadJob("counter");
        ASSERT_TRUE(row.ok() && row->has_value()) << row.status();
        const int64_t count = std::stoll((*row)->record);
        JobRow next = **row;
        next.record = std::to_string(count + 1);
        WriteBatch batch;
        batch.Put(next, (*row)->version);
        absl::Status written = storage->Write(batch);
        if (written.code() == absl::StatusCode::kAborted) {
          ++conflicts;
          continue;
        }
        ASSERT_TRUE(written.ok()) << written;
        ++done;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  auto row = storage->ReadJob("counter");
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->record, std::to_string(kWriters * kIncrementsEach));
  EXPECT_EQ((*row)->version, 1 + kWriters * kIncrementsEach);
  std::cout << "version conflicts retried: " << conflicts.load() << "\n";
}

}  // namespace
}  // namespace debugplane::persistence
