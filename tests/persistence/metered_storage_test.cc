// MeteredStorage times every write and read of a real SQLite storage into
// debugplane_database_duration_seconds and counts the failed ones.

#include "persistence/metered_storage.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/registry.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/persistence/persistence_test_util.h"

namespace debugplane::persistence {
namespace {

using ::debugplane::persistence::testing::MakeRow;
using ::debugplane::persistence::testing::ScopedTempDir;
using ::testing::HasSubstr;

// A SQLite storage behind the metering wrapper, counting into `registry`.
class MeteredStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sqlite = SqliteStorage::Open((dir.path() / "jobs.db").string());
    ASSERT_TRUE(sqlite.ok()) << sqlite.status();
    storage = Metered(*std::move(sqlite), &database);
  }

  ScopedTempDir dir;
  metrics::MetricsRegistry registry;
  metrics::DatabaseMetrics database{registry.registry()};
  std::unique_ptr<Storage> storage;
};

TEST_F(MeteredStorageTest, TimesWritesAndReadsAndCountsFailures) {
  WriteBatch batch;
  batch.Put(MakeRow("a", 1));
  batch.Put(MakeRow("b", 2));
  ASSERT_TRUE(storage->Write(batch).ok());
  int rows = 0;
  ASSERT_TRUE(storage
                  ->ForEachJob([&rows](const JobRow&) {
                    ++rows;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(rows, 2);  // Passed through.
  // A scan whose visitor fails is a failed read, and its status comes back.
  EXPECT_TRUE(absl::IsAborted(
      storage->ForEachJob([](const JobRow&) { return absl::AbortedError("stop"); })));

  const std::string text = registry.Scrape();
  EXPECT_THAT(text,
              HasSubstr("debugplane_database_duration_seconds_count{operation=\"write\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("debugplane_database_duration_seconds_count{operation=\"read\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_database_errors_total{operation=\"read\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_database_errors_total{operation=\"write\"} 0\n"));
}

// The change feed and versions reach the engine through the wrapper: a
// Storage default there (UNIMPLEMENTED, no feed) would leave replicas blind.
TEST_F(MeteredStorageTest, PassesTheChangeFeedAndVersionsThrough) {
  WriteBatch batch;
  batch.Put(MakeRow("a", 1));
  absl::StatusOr<WriteResult> written = storage->WriteAndReport(batch);
  ASSERT_TRUE(written.ok()) << written.status();
  absl::StatusOr<std::optional<JobRow>> row = storage->ReadJob("a");
  ASSERT_TRUE(row.ok()) << row.status();
  ASSERT_TRUE(row->has_value());
  EXPECT_EQ((*row)->version, 1);
  absl::StatusOr<std::vector<JobChange>> changes = storage->ReadChangesAfter(0, 10);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ((*changes)[0].name, "a");
  absl::StatusOr<int64_t> latest = storage->LatestChangeSequence();
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, (*changes)[0].sequence);
  EXPECT_THAT(registry.Scrape(),
              HasSubstr("debugplane_database_duration_seconds_count{operation=\"read\"} 3\n"));
}

TEST_F(MeteredStorageTest, WithoutMetricsTheStorageIsItself) {
  auto sqlite = SqliteStorage::Open((dir.path() / "unmetered.db").string());
  ASSERT_TRUE(sqlite.ok());
  Storage* raw = sqlite->get();
  EXPECT_EQ(Metered(*std::move(sqlite), nullptr).get(), raw);
}

}  // namespace
}  // namespace debugplane::persistence
