#include "persistence/sqlite/sqlite_storage.h"

#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/sqlite/sqlite_migrations.h"
#include "tests/persistence/persistence_test_util.h"

// The engine-independent cases (round trips, order, atomicity, concurrency)
// run against SQLite and PostgreSQL in storage_engines_test.cc.

namespace debugplane::persistence {
namespace {

namespace fs = std::filesystem;
using ::debugplane::persistence::testing::AsTuple;
using ::debugplane::persistence::testing::Contents;
using ::debugplane::persistence::testing::MakeRow;
using ::debugplane::persistence::testing::RawDb;
using ::debugplane::persistence::testing::ReadAll;
using ::debugplane::persistence::testing::ScopedTempDir;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class SqliteStorageTest : public ::testing::Test {
 protected:
  std::string db_path() const { return (dir_.path() / "jobs.db").string(); }

  std::unique_ptr<SqliteStorage> OpenOrDie() {
    auto storage = SqliteStorage::Open(db_path());
    EXPECT_TRUE(storage.ok()) << storage.status();
    return storage.ok() ? *std::move(storage) : nullptr;
  }

  ScopedTempDir dir_;
};

TEST_F(SqliteStorageTest, OpenCreatesAWalDatabaseAtTheCurrentSchemaVersion) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  EXPECT_EQ(storage->schema_version(), 4);
  EXPECT_EQ(storage->schema_version(), kSqliteSchemaVersion);

  RawDb raw(db_path());
  EXPECT_EQ(raw.Value("PRAGMA user_version"), "4");
  EXPECT_EQ(raw.Value("PRAGMA journal_mode"), "wal");
  EXPECT_THAT(
      raw.Column("SELECT name FROM sqlite_master WHERE tbl_name = 'training_jobs' AND "
                 "sql IS NOT NULL ORDER BY name"),
      ElementsAre("training_jobs", "training_jobs_by_creation_time", "training_jobs_by_status"));
  EXPECT_THAT(raw.Column("SELECT name FROM pragma_index_info('training_jobs_by_creation_time') "
                         "ORDER BY seqno"),
              ElementsAre("creation_time_us", "name"));
  EXPECT_THAT(raw.Column("SELECT name FROM pragma_index_info('training_jobs_by_status')"),
              ElementsAre("status"));
}

TEST_F(SqliteStorageTest, MigrationStepsAreContiguousAndEndAtTheCurrentVersion) {
  const auto steps = SqliteMigrations();
  ASSERT_FALSE(steps.empty());
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].to_version, static_cast<int>(i) + 1);
  }
  EXPECT_EQ(steps.back().to_version, kSqliteSchemaVersion);
}

// A 0-byte file is what an interrupted creation used to leave (and what an
// unlucky copy leaves): taking it for a new database made every job vanish.
TEST_F(SqliteStorageTest, AnEmptyFileIsRefusedSayingHowToRecover) {
  { std::ofstream(db_path(), std::ios::binary); }
  auto storage = SqliteStorage::Open(db_path());
  ASSERT_EQ(storage.status().code(), absl::StatusCode::kFailedPrecondition) << storage.status();
  EXPECT_THAT(storage.status().message(), AllOf(HasSubstr(db_path()), HasSubstr("empty (0 bytes)"),
                                                HasSubstr("backup"), HasSubstr("delete it")));
  EXPECT_EQ(fs::file_size(db_path()), 0u);  // Untouched.
}

TEST_F(SqliteStorageTest, ADatabaseWithoutTablesIsRefused) {
  RawDb(db_path()).Exec("PRAGMA user_version = 0");  // A valid header, no schema.
  auto storage = SqliteStorage::Open(db_path());
  ASSERT_EQ(storage.status().code(), absl::StatusCode::kFailedPrecondition) << storage.status();
  EXPECT_THAT(storage.status().message(), AllOf(HasSubstr(db_path()), HasSubstr("no tables")));
}

TEST_F(SqliteStorageTest, ANewDatabaseIsCreatedWholeAndALeftoverTemporaryIsDiscarded) {
  // What a creation killed midway leaves: only the temporary file.
  { std::ofstream(db_path() + ".creating", std::ios::binary) << "half"; }
  {
    auto storage = OpenOrDie();
    ASSERT_NE(storage, nullptr);
    EXPECT_EQ(storage->schema_version(), kSqliteSchemaVersion);
  }
  EXPECT_FALSE(fs::exists(db_path() + ".creating"));
  EXPECT_FALSE(fs::exists(db_path() + ".creating-wal"));
  EXPECT_GT(fs::file_size(db_path()), 0u);
  auto reopened = OpenOrDie();  // Not taken for a half-made file.
  ASSERT_NE(reopened, nullptr);
}

TEST_F(SqliteStorageTest, AFailedMigrationStepIsRolledBackWhole) {
  // A version 0 database where a view holds the name of step 1's last index:
  // the step fails after it created the table and the first index.
  RawDb(db_path()).Exec(
      "CREATE TABLE unrelated (x); INSERT INTO unrelated VALUES (1); "
      "CREATE VIEW training_jobs_by_status AS SELECT 1");

  auto storage = SqliteStorage::Open(db_path());
  ASSERT_EQ(storage.status().code(), absl::StatusCode::kInternal) << storage.status();
  EXPECT_THAT(storage.status().message(),
              AllOf(HasSubstr(db_path()), HasSubstr("migrating to schema version 1")));
  RawDb raw(db_path());
  EXPECT_EQ(raw.Value("PRAGMA user_version"), "0");
  EXPECT_THAT(raw.Column("SELECT name FROM sqlite_master WHERE name LIKE 'training_jobs%' AND "
                         "type != 'view'"),
              IsEmpty());
  EXPECT_EQ(raw.Value("SELECT x FROM unrelated"), "1");
}

// Lowers the file size limit of this process for its lifetime, with SIGXFSZ
// ignored so that an oversized write fails with EFBIG instead of killing it.
class ScopedFileSizeLimit {
 public:
  explicit ScopedFileSizeLimit(rlim_t bytes) {
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    EXPECT_EQ(sigaction(SIGXFSZ, &ignore, &old_action_), 0);
    EXPECT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit_), 0);
    struct rlimit limit = old_limit_;
    limit.rlim_cur = std::min(bytes, old_limit_.rlim_max);
    EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  }
  ~ScopedFileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_limit_);
    sigaction(SIGXFSZ, &old_action_, nullptr);
  }

 private:
  struct rlimit old_limit_ = {};
  struct sigaction old_action_ = {};
};

TEST_F(SqliteStorageTest, ABatchThatRunsOutOfFileSpaceAppliesNothing) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  WriteBatch before;
  before.Put(MakeRow("keep", 1));
  ASSERT_TRUE(storage->Write(before).ok());
  // ~3 MiB: more than SQLite's page cache, so pages spill to the WAL while
  // the batch is still being applied, and part of it reaches the file.
  WriteBatch big;
  for (int i = 0; i < 96; ++i) {
    JobRow row = MakeRow(absl::StrCat("big-", i), i);
    row.record = std::string(32 * 1024, static_cast<char>('a' + i % 26));
    big.Put(std::move(row));
  }

  absl::Status failed;
  {
    ScopedFileSizeLimit limit(256 * 1024);
    failed = storage->Write(big);
  }
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  EXPECT_THAT(failed.message(), AllOf(HasSubstr(db_path()), HasSubstr("File too large")));
  EXPECT_THAT(Contents(*storage), ElementsAre(AsTuple(MakeRow("keep", 1))));

  // Space is back: the same batch now goes through, and a reopened database
  // holds exactly what was acknowledged.
  ASSERT_TRUE(storage->Write(big).ok());
  storage.reset();
  storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  EXPECT_EQ(Contents(*storage).size(), 97u);
}

TEST_F(SqliteStorageTest, DataSurvivesCloseAndReopenAndCloseTruncatesTheWal) {
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
  const fs::path wal = db_path() + "-wal";
  EXPECT_TRUE(!fs::exists(wal) || fs::file_size(wal) == 0);

  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  EXPECT_EQ(storage->schema_version(), kSqliteSchemaVersion);
  EXPECT_THAT(Contents(*storage), ElementsAre(AsTuple(MakeRow("b", 2))));
}

// The WAL is folded into the database by the checkpointer's own thread and
// connection (not by the write that takes it past 1000 pages), while writes
// go on; every row stays, before and after a reopen.
TEST_F(SqliteStorageTest, TheWalIsCheckpointedOffTheWritesAndEveryRowStays) {
  constexpr int kBatches = 40;
  constexpr int kRowsPerBatch = 10;
  std::vector<testing::RowTuple> written;
  {
    auto storage = OpenOrDie();
    ASSERT_NE(storage, nullptr);
    EXPECT_EQ(storage->wal_checkpoints(), 0);
    // About 8 KB per row, twice (the row and its change): 1600 pages in all.
    for (int b = 0; b < kBatches; ++b) {
      WriteBatch batch;
      for (int r = 0; r < kRowsPerBatch; ++r) {
        JobRow row = MakeRow(absl::StrCat("job-", b, "-", r), b * kRowsPerBatch + r);
        row.record.append(8000, static_cast<char>('a' + r));
        written.push_back(AsTuple(row));
        batch.Put(std::move(row));
      }
      ASSERT_TRUE(storage->Write(batch).ok());
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (storage->wal_checkpoints() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_GE(storage->wal_checkpoints(), 1);
    // The copied pages are in the database file itself: the first
    // checkpoint starts once the WAL holds 1000 frames, about 900 distinct
    // pages (the B-tree's inner pages are written again by each commit);
    // when it runs, and so how many more pages it finds, is the scheduler's.
    EXPECT_GT(fs::file_size(db_path()), 800 * 4096u);
    std::sort(written.begin(), written.end());
    EXPECT_EQ(Contents(*storage), written);
  }
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  EXPECT_EQ(Contents(*storage), written);
}

TEST_F(SqliteStorageTest, AVersion2DatabaseMigratesToTheLeaseAndReportTablesKeepingJobsAndFeed) {
  {
    auto storage = OpenOrDie();
    ASSERT_NE(storage, nullptr);
    WriteBatch batch;
    batch.Put(MakeRow("a", 1));
    ASSERT_TRUE(storage->Write(batch).ok());
  }
  {
    // What the replicas' schema (v2) left: no lease tables yet.
    RawDb raw(db_path());
    raw.Exec(
        "DROP TABLE job_leases; DROP TABLE live_replicas; DROP TABLE rule_action_outbox; "
        "DROP TABLE profiler_reports; DROP INDEX job_changes_by_name; PRAGMA user_version = 2");
  }
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  EXPECT_EQ(storage->schema_version(), kSqliteSchemaVersion);
  EXPECT_THAT(Contents(*storage), ElementsAre(AsTuple(MakeRow("a", 1))));
  absl::StatusOr<int64_t> latest = storage->LatestChangeSequence();
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 1);
  RawDb raw(db_path());
  EXPECT_THAT(raw.Column("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN "
                         "('job_leases', 'live_replicas', 'profiler_reports', "
                         "'rule_action_outbox') ORDER BY name"),
              ElementsAre("job_leases", "live_replicas", "profiler_reports", "rule_action_outbox"));
}

TEST_F(SqliteStorageTest, ADatabaseOfANewerSchemaIsRefusedUntouched) {
  {
    RawDb raw(db_path());
    raw.Exec("CREATE TABLE future (x); PRAGMA user_version = 99");
  }
  const std::string before = ReadFile(db_path());

  auto storage = SqliteStorage::Open(db_path());
  ASSERT_EQ(storage.status().code(), absl::StatusCode::kFailedPrecondition) << storage.status();
  EXPECT_THAT(storage.status().message(),
              AllOf(HasSubstr(db_path()), HasSubstr("schema version 99"),
                    HasSubstr(absl::StrCat("schema version ", kSqliteSchemaVersion, " "))));
  EXPECT_EQ(ReadFile(db_path()), before);  // Not even switched to WAL.
  EXPECT_FALSE(fs::exists(db_path() + "-wal"));
}

TEST_F(SqliteStorageTest, AFileThatIsNotADatabaseIsDataLossNamingThePath) {
  std::string garbage;
  for (int i = 0; i < 512; ++i) garbage += "this is not a SQLite file. ";
  { std::ofstream(db_path(), std::ios::binary) << garbage; }

  auto storage = SqliteStorage::Open(db_path());
  ASSERT_EQ(storage.status().code(), absl::StatusCode::kDataLoss) << storage.status();
  EXPECT_THAT(storage.status().message(),
              AllOf(HasSubstr(db_path()), HasSubstr("file is not a database")));
  EXPECT_EQ(ReadFile(db_path()), garbage);
}

TEST_F(SqliteStorageTest, CorruptTablePagesAreDataLossOnRead) {
  {
    auto storage = OpenOrDie();
    ASSERT_NE(storage, nullptr);
    WriteBatch batch;
    for (int i = 0; i < 200; ++i) {
      JobRow row = MakeRow(absl::StrCat("job-", i), i);
      row.record = std::string(1000, 'x');
      batch.Put(std::move(row));
    }
    ASSERT_TRUE(storage->Write(batch).ok());
  }  // Closing checkpoints everything into the main file.
  // Keep page 1 (header and schema), scribble over every later page.
  std::string bytes = ReadFile(db_path());
  ASSERT_GT(bytes.size(), 16u * 4096);
  for (size_t i = 4096; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 % 251);
  { std::ofstream(db_path(), std::ios::binary | std::ios::trunc) << bytes; }

  absl::Status status;
  auto storage = SqliteStorage::Open(db_path());
  if (storage.ok()) {
    status = ReadAll(**storage).status();
  } else {
    status = storage.status();
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr(db_path()));
}

TEST_F(SqliteStorageTest, AMissingDirectoryIsUnavailableNamingThePath) {
  const std::string path = (dir_.path() / "no-such-dir" / "jobs.db").string();
  auto storage = SqliteStorage::Open(path);
  ASSERT_EQ(storage.status().code(), absl::StatusCode::kUnavailable) << storage.status();
  EXPECT_THAT(storage.status().message(),
              AllOf(HasSubstr(path), HasSubstr("unable to open database file")));
}

TEST_F(SqliteStorageTest, AWriteWaitsForAnotherConnectionsLock) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  RawDb other(db_path());
  other.Exec("BEGIN IMMEDIATE");
  std::thread release([&] {
    // Real time, on purpose: what is measured is how long the write waits
    // for SQLite's lock.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    other.Exec("COMMIT");
  });
  const auto start = std::chrono::steady_clock::now();
  WriteBatch batch;
  batch.Put(MakeRow("a", 1));
  absl::Status written = storage->Write(batch);
  const auto waited = std::chrono::steady_clock::now() - start;
  release.join();
  EXPECT_TRUE(written.ok()) << written;
  EXPECT_GE(waited, std::chrono::milliseconds(250));
  EXPECT_THAT(Contents(*storage), ElementsAre(AsTuple(MakeRow("a", 1))));
}

TEST_F(SqliteStorageTest, ALockHeldPastTheBusyTimeoutIsUnavailableAndAppliesNothing) {
  auto storage = OpenOrDie();
  ASSERT_NE(storage, nullptr);
  RawDb other(db_path());
  other.Exec("BEGIN IMMEDIATE");
  WriteBatch batch;
  batch.Put(MakeRow("a", 1));
  absl::Status written = storage->Write(batch);  // Waits out the 5 s busy timeout.
  EXPECT_EQ(written.code(), absl::StatusCode::kUnavailable) << written;
  EXPECT_THAT(written.message(), AllOf(HasSubstr(db_path()), HasSubstr("database is locked")));
  other.Exec("COMMIT");

  EXPECT_THAT(Contents(*storage), IsEmpty());
  EXPECT_TRUE(storage->Write(batch).ok());
}

}  // namespace
}  // namespace debugplane::persistence
