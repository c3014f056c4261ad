// PostgresStorage sends a batch's statements in libpq's pipeline mode (one
// round trip): a real PostgreSQL (PostgresTestServer) checks that every way
// a batch can fail leaves nothing applied and the connection out of the
// pipeline and the transaction (reused, not replaced), that a connection
// lost in the middle of a pipeline fails the batch as before, and that a
// batch far larger than the socket buffers goes through. The Storage
// contract itself is storage_engines_test.cc.

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/lease_fence.h"
#include "persistence/postgres/postgres_storage.h"
#include "tests/persistence/persistence_test_util.h"
#include "tests/persistence/postgres_test_server.h"
#include "tests/support/wait_until.h"

namespace debugplane::persistence {
namespace {

using ::debugplane::persistence::testing::AsTuple;
using ::debugplane::persistence::testing::MakeRow;
using ::debugplane::testing::ScratchPostgresDatabase;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class PostgresPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A PostgreSQL that cannot start fails the test: it never skips.
    ASSERT_TRUE(database_.status().ok()) << database_.status();
    // One pooled connection: every batch runs on the same one unless a
    // failure leaves it unusable (then the pool opens another).
    auto storage = PostgresStorage::Open(database_.Uri(), {.pool_size = 1});
    ASSERT_TRUE(storage.ok()) << storage.status();
    storage_ = *std::move(storage);
  }

  std::string Query(const std::string& sql) {
    auto value = database_.server().Query(database_.name(), sql);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : "";
  }

  // The backend process of the storage's one connection.
  std::string BackendPid() {
    return Query(
        "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE datname = "
        "current_database() AND application_name = 'debugplane'");
  }

  // The database refuses to insert rows named "poison" ("poisoned row
  // refused"); rows named "slow" take `slow_seconds` to insert.
  void InstallTriggers(int slow_seconds) {
    Query(
        absl::StrCat("CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                     "IF NEW.name = 'poison' THEN RAISE EXCEPTION 'poisoned row refused'; END IF; "
                     "IF NEW.name = 'slow' THEN PERFORM pg_sleep(",
                     slow_seconds,
                     "); END IF; RETURN NEW; END $$; "
                     "CREATE TRIGGER poison BEFORE INSERT ON training_jobs FOR EACH ROW "
                     "EXECUTE FUNCTION refuse_poison()"));
  }

  std::vector<testing::RowTuple> Contents() { return testing::Contents(*storage_); }

  ScratchPostgresDatabase database_;
  std::unique_ptr<PostgresStorage> storage_;
};

TEST_F(PostgresPipelineTest, EveryFailedBatchAppliesNothingAndTheConnectionServesTheNextOne) {
  InstallTriggers(0);
  WriteBatch setup;
  setup.Put(MakeRow("kept", 1));
  ASSERT_TRUE(storage_->Write(setup).ok());
  const std::string backend = BackendPid();
  ASSERT_FALSE(backend.empty());
  const int64_t sequence_before = *storage_->LatestChangeSequence();

  // A row the server refuses, between rows it applied in the same pipeline.
  WriteBatch refused;
  refused.Put(MakeRow("new-1", 2));
  refused.Delete("kept");
  refused.Put(MakeRow("poison", 3));
  refused.Put(MakeRow("new-2", 4));
  absl::Status status = storage_->Write(refused);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr(database_.server().address()), HasSubstr("writing job 'poison'"),
                    HasSubstr("poisoned row refused"), HasSubstr("operation 3 of 4"),
                    HasSubstr("no write of the batch was applied")));

  // A version conflict, then a refused row: the conflict is reported (the
  // first failure in the batch's order), with the version the row has.
  WriteBatch conflicted;
  conflicted.Put(MakeRow("kept", 5), /*expected_version=*/7);
  conflicted.Put(MakeRow("poison", 6));
  status = storage_->Write(conflicted);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("'kept'"), HasSubstr("expected version 7"),
                                      HasSubstr("has version 1")));

  // A stale lease fence after a put: refused as a fence, nothing applied.
  WriteBatch fenced;
  fenced.Put(MakeRow("new-3", 7));
  fenced.Check(CheckLease{.job_name = "kept", .owner = "replica-a", .token = 3});
  fenced.Put(MakeRow("new-4", 8));
  status = storage_->Write(fenced);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_EQ(FencedJob(status), "kept") << status;

  EXPECT_THAT(Contents(), ElementsAre(AsTuple(MakeRow("kept", 1))));
  EXPECT_EQ(*storage_->LatestChangeSequence(), sequence_before);
  // The same connection wrote all three and writes again: none of the
  // failures left it in the pipeline or the transaction.
  EXPECT_EQ(BackendPid(), backend);
  WriteBatch after;
  after.Put(MakeRow("new-1", 9));
  after.Put(MakeRow("kept", 10), /*expected_version=*/1);
  auto written = storage_->WriteAndReport(after);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_THAT(written->versions, ElementsAre(1, 2));
  EXPECT_THAT(written->sequences, ElementsAre(sequence_before + 1, sequence_before + 2));
  EXPECT_EQ(BackendPid(), backend);
}

TEST_F(PostgresPipelineTest, AConnectionLostMidPipelineFailsTheBatchAndTheNextOneReconnects) {
  InstallTriggers(60);
  WriteBatch setup;
  setup.Put(MakeRow("kept", 1));
  ASSERT_TRUE(storage_->Write(setup).ok());
  const std::string backend = BackendPid();

  // The server is killed (its backend terminated) while it runs the 2nd
  // statement of the pipeline, after the 1st was applied in the transaction.
  WriteBatch batch;
  batch.Put(MakeRow("new-1", 2));
  batch.Put(MakeRow("slow", 3));
  batch.Put(MakeRow("new-2", 4));
  std::future<absl::Status> written =
      std::async(std::launch::async, [&] { return storage_->Write(batch); });
  ASSERT_TRUE(debugplane::testing::WaitUntil(
      [&] {
        return database_.server()
                   .Query(database_.name(),
                          "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'")
                   .value_or("") == "1";
      },
      absl::Seconds(30)));
  Query(absl::StrCat("SELECT pg_terminate_backend(", backend, ")"));
  const absl::Status status = written.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr(database_.server().address()), HasSubstr("'slow'"),
                                      HasSubstr("no write of the batch was applied")));

  // The lost connection is replaced at the next call.
  EXPECT_THAT(Contents(), ElementsAre(AsTuple(MakeRow("kept", 1))));
  WriteBatch next;
  next.Put(MakeRow("new-1", 5));
  ASSERT_TRUE(storage_->Write(next).ok());
  EXPECT_NE(BackendPid(), backend);
  EXPECT_THAT(Contents(), ElementsAre(AsTuple(MakeRow("kept", 1)), AsTuple(MakeRow("new-1", 5))));
}

TEST_F(PostgresPipelineTest, RunsOfPutsKeepTheBatchOrderAcrossKindsAndRepeatedNames) {
  WriteBatch setup;
  setup.Put(MakeRow("kept", 1));
  ASSERT_TRUE(storage_->Write(setup).ok());
  const int64_t before = *storage_->LatestChangeSequence();

  // Runs break at a repeated name ("a"), at another kind of put, and at a
  // delete; each change still gets the next sequence number in batch order.
  WriteBatch batch;
  batch.Put(MakeRow("a", 1));
  batch.Put(MakeRow("b", 2));
  batch.Put(MakeRow("a", 3));
  batch.Put(MakeRow("c", 4), kAbsent);
  batch.Put(MakeRow("d", 5), kAbsent);
  batch.Put(MakeRow("b", 6), /*expected_version=*/1);
  batch.Put(MakeRow("kept", 7), /*expected_version=*/1);
  batch.Delete("d");
  batch.Delete("missing");
  batch.Put(MakeRow("e", 8), kAbsent);
  auto written = storage_->WriteAndReport(batch);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_THAT(written->versions, ElementsAre(1, 1, 2, 1, 1, 2, 2, 2, kAbsent, 1));
  EXPECT_THAT(written->sequences,
              ElementsAre(before + 1, before + 2, before + 3, before + 4, before + 5, before + 6,
                          before + 7, before + 8, 0, before + 9));
  auto changes = storage_->ReadChangesAfter(before, 100);
  ASSERT_TRUE(changes.ok()) << changes.status();
  std::vector<std::string> fed;
  for (const JobChange& change : *changes) {
    fed.push_back(absl::StrCat(change.sequence - before, ":", change.name, "@", change.version,
                               change.deleted ? "-" : "", change.row.record));
  }
  EXPECT_THAT(fed, ElementsAre("1:a@1record of a #1", "2:b@1record of b #2", "3:a@2record of a #3",
                               "4:c@1record of c #4", "5:d@1record of d #5", "6:b@2record of b #6",
                               "7:kept@2record of kept #7", "8:d@2-", "9:e@1record of e #8"));
  EXPECT_THAT(Contents(), ElementsAre(AsTuple(MakeRow("a", 3)), AsTuple(MakeRow("b", 6)),
                                      AsTuple(MakeRow("c", 4)), AsTuple(MakeRow("e", 8)),
                                      AsTuple(MakeRow("kept", 7))));

  // A conflict in the middle of a run names its job; nothing is applied.
  WriteBatch conflicted;
  conflicted.Put(MakeRow("x", 9), kAbsent);
  conflicted.Put(MakeRow("c", 10), kAbsent);
  conflicted.Put(MakeRow("y", 11), kAbsent);
  absl::Status status = storage_->Write(conflicted);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("'c'"), HasSubstr("expected no row"), HasSubstr("has version 1")));
  EXPECT_EQ(*storage_->LatestChangeSequence(), before + 9);
  EXPECT_FALSE(storage_->ReadJob("x")->has_value());
}

TEST_F(PostgresPipelineTest, ABatchLargerThanTheSocketBuffersGoesThroughInOrder) {
  // 2000 rows of 16 KiB: 32 MiB sent in one pipeline, while the server
  // answers each row; libpq reads the answers while it sends.
  constexpr int kRows = 2000;
  WriteBatch batch;
  for (int i = 0; i < kRows; ++i) {
    JobRow row = MakeRow(absl::StrCat("job-", i), i);
    row.record.append(16 * 1024, static_cast<char>('a' + i % 26));
    batch.Put(std::move(row), i % 2 == 0 ? std::optional<int64_t>(kAbsent) : std::nullopt);
  }
  const int64_t sequence_before = *storage_->LatestChangeSequence();
  auto written = storage_->WriteAndReport(batch);
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(written->sequences.size(), kRows);
  for (int i = 0; i < kRows; ++i) {
    ASSERT_EQ(written->sequences[i], sequence_before + 1 + i) << i;
    ASSERT_EQ(written->versions[i], 1) << i;
  }
  auto row = storage_->ReadJob("job-1234");
  ASSERT_TRUE(row.ok() && row->has_value()) << row.status();
  EXPECT_EQ((*row)->record.size(), MakeRow("job-1234", 1234).record.size() + 16 * 1024);
  EXPECT_EQ((*row)->record.back(), 'a' + 1234 % 26);
}

}  // namespace
}  // namespace debugplane::persistence
