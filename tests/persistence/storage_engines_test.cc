// The Storage contract, run against every engine: SQLite (a file in a
// temporary directory) and PostgreSQL (a real server, PostgresTestServer).
// Engine-specific behaviour is in sqlite_storage_test.cc and
// postgres_storage_test.cc.

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/postgres_storage.h"
#include "persistence/sqlite_storage.h"
#include "tests/persistence/persistence_test_util.h"
#include "tests/persistence/postgres_test_server.h"

namespace debugplane::persistence {
namespace {

using ::debugplane::persistence::testing::AsTuple;
using ::debugplane::persistence::testing::AsTuples;
using ::debugplane::persistence::testing::MakeRow;
using ::debugplane::persistence::testing::RawDb;
using ::debugplane::persistence::testing::ReadAll;
using ::debugplane::persistence::testing::ScopedTempDir;
using ::debugplane::testing::PostgresTestServer;
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
  PostgresEngine() {
    auto server = PostgresTestServer::Start();
    if (!server.ok()) {
      status_ = server.status();
      return;
    }
    server_ = *std::move(server);
    auto database = server_->CreateDatabase();
    status_ = database.status();
    if (database.ok()) database_ = *database;
  }
  const absl::Status& status() const { return status_; }

  absl::StatusOr<std::unique_ptr<Storage>> Open() override {
    auto storage = PostgresStorage::Open(server_->Uri(database_));
    if (!storage.ok()) return storage.status();
    return std::unique_ptr<Storage>(*std::move(storage));
  }
  std::string location() const override { return server_->address(); }
  std::string Value(const std::string& sql) override {
    auto value = server_->Query(database_, sql);
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
  absl::Status status_;
  std::unique_ptr<PostgresTestServer> server_;
  std::string database_;
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

  std::vector<testing::RowTuple> Contents(Storage& storage) {
    auto rows = ReadAll(storage);
    EXPECT_TRUE(rows.ok()) << rows.status();
    return rows.ok() ? AsTuples(*rows) : std::vector<testing::RowTuple>{};
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

}  // namespace
}  // namespace debugplane::persistence
