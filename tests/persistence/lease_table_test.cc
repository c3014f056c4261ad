// LeaseTable, ActionOutbox and fenced writes (CheckLease), run against both
// engines: SQLite (its clock moved by the test) and PostgreSQL (a real
// server; its now() moves by itself, so expiry tests wait out short leases).

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/lease_fence.h"
#include "persistence/postgres/postgres_lease_table.h"
#include "persistence/postgres/postgres_report_store.h"
#include "persistence/postgres/postgres_storage.h"
#include "persistence/sqlite/sqlite_lease_table.h"
#include "persistence/sqlite/sqlite_report_store.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/persistence/persistence_test_util.h"
#include "tests/persistence/postgres_test_server.h"

namespace debugplane::persistence {
namespace {

using ::debugplane::persistence::testing::MakeRow;
using ::debugplane::persistence::testing::ReadAll;
using ::debugplane::persistence::testing::ScopedTempDir;
using ::debugplane::testing::ScratchPostgresDatabase;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Leases in these tests last this long; PassTime(kLease + margin) expires them.
constexpr absl::Duration kLease = absl::Milliseconds(400);

class LeaseEngine {
 public:
  virtual ~LeaseEngine() = default;
  virtual absl::StatusOr<std::unique_ptr<Storage>> OpenStorage() = 0;
  // A new connection to the tables (several act as several replicas).
  virtual std::unique_ptr<LeaseTable> Leases() = 0;
  virtual std::unique_ptr<ActionOutbox> Outbox() = 0;
  // A new connection to the profiler reports (fenced by the same leases).
  virtual std::unique_ptr<ReportStore> Reports() = 0;
  // Lets `duration` pass on the database's clock.
  virtual void PassTime(absl::Duration duration) = 0;
};

class SqliteLeaseEngine final : public LeaseEngine {
 public:
  absl::StatusOr<std::unique_ptr<Storage>> OpenStorage() override {
    auto storage = SqliteStorage::Open(path());
    if (!storage.ok()) return storage.status();
    return std::unique_ptr<Storage>(*std::move(storage));
  }
  std::unique_ptr<LeaseTable> Leases() override { return Open(); }
  std::unique_ptr<ActionOutbox> Outbox() override { return Open(); }
  std::unique_ptr<ReportStore> Reports() override {
    auto store = SqliteReportStore::Open(path());
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  void PassTime(absl::Duration duration) override {
    now_us_ += absl::ToInt64Microseconds(duration);
  }

 private:
  std::string path() const { return (dir_.path() / "jobs.db").string(); }
  std::unique_ptr<SqliteLeaseTable> Open() {
    auto table =
        SqliteLeaseTable::Open(path(), [this] { return absl::FromUnixMicros(now_us_.load()); });
    EXPECT_TRUE(table.ok()) << table.status();
    return table.ok() ? *std::move(table) : nullptr;
  }
  ScopedTempDir dir_;
  std::atomic<int64_t> now_us_{1'700'000'000'000'000};
};

class PostgresLeaseEngine final : public LeaseEngine {
 public:
  const absl::Status& status() const { return database_.status(); }
  absl::StatusOr<std::unique_ptr<Storage>> OpenStorage() override {
    auto storage = PostgresStorage::Open(database_.Uri());
    if (!storage.ok()) return storage.status();
    return std::unique_ptr<Storage>(*std::move(storage));
  }
  std::unique_ptr<LeaseTable> Leases() override { return Open(); }
  std::unique_ptr<ActionOutbox> Outbox() override { return Open(); }
  std::unique_ptr<ReportStore> Reports() override {
    auto store = PostgresReportStore::Open(database_.Uri());
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  // Real time, on purpose: PostgreSQL's leases expire by the database
  // server's clock, which a test cannot advance.
  void PassTime(absl::Duration duration) override { absl::SleepFor(duration); }

 private:
  std::unique_ptr<PostgresLeaseTable> Open() {
    auto table = PostgresLeaseTable::Open(database_.Uri());
    EXPECT_TRUE(table.ok()) << table.status();
    return table.ok() ? *std::move(table) : nullptr;
  }
  ScratchPostgresDatabase database_;
};

class LeaseTableTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "Sqlite") {
      engine_ = std::make_unique<SqliteLeaseEngine>();
    } else {
      auto postgres = std::make_unique<PostgresLeaseEngine>();
      ASSERT_TRUE(postgres->status().ok()) << postgres->status();
      engine_ = std::move(postgres);
    }
    // Opening the storage creates and migrates the schema.
    auto storage = engine_->OpenStorage();
    ASSERT_TRUE(storage.ok()) << storage.status();
    storage_ = *std::move(storage);
  }

  std::unique_ptr<LeaseEngine> engine_;
  std::unique_ptr<Storage> storage_;
};

INSTANTIATE_TEST_SUITE_P(Engines, LeaseTableTest, ::testing::Values("Sqlite", "Postgres"),
                         [](const auto& info) { return info.param; });

std::optional<CheckLease> AcquireOrDie(LeaseTable& table, const std::string& job,
                                       const std::string& owner) {
  auto acquired = table.TryAcquire(job, owner, kLease);
  EXPECT_TRUE(acquired.ok()) << acquired.status();
  return acquired.ok() ? *acquired : std::nullopt;
}

TEST_P(LeaseTableTest, AcquireRenewExpireAndStealWithIncreasingTokens) {
  auto a = engine_->Leases();
  auto b = engine_->Leases();
  std::optional<CheckLease> first = AcquireOrDie(*a, "job", "replica-a");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->token, 1);
  // Live: nobody takes it, its holder included.
  EXPECT_EQ(AcquireOrDie(*b, "job", "replica-b"), std::nullopt);
  EXPECT_EQ(AcquireOrDie(*a, "job", "replica-a"), std::nullopt);

  // Renewed halfway, it outlives its first expiry.
  engine_->PassTime(kLease / 2);
  auto renewed = a->Renew({*first}, kLease);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_THAT(*renewed, ElementsAre("job"));
  engine_->PassTime(kLease * 3 / 4);
  EXPECT_EQ(AcquireOrDie(*b, "job", "replica-b"), std::nullopt);

  // Expired: another replica takes it over with the next token, and the old
  // holder's renewal and release change nothing.
  engine_->PassTime(kLease);
  std::optional<CheckLease> second = AcquireOrDie(*b, "job", "replica-b");
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->token, 2);
  renewed = a->Renew({*first}, kLease);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_THAT(*renewed, IsEmpty());
  ASSERT_TRUE(a->Release(*first).ok());
  auto listed = a->List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].owner, "replica-b");
  EXPECT_EQ((*listed)[0].token, 2);
  EXPECT_TRUE((*listed)[0].live);

  // Released: free at once, and the token goes on growing.
  ASSERT_TRUE(b->Release(*second).ok());
  listed = a->List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_FALSE((*listed)[0].live);
  std::optional<CheckLease> third = AcquireOrDie(*a, "job", "replica-a");
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->token, 3);
}

TEST_P(LeaseTableTest, LiveReplicasAreThoseWhoseHeartbeatHasNotExpired) {
  auto table = engine_->Leases();
  ASSERT_TRUE(table->Heartbeat("replica-a", kLease).ok());
  ASSERT_TRUE(table->Heartbeat("replica-b", kLease).ok());
  ASSERT_TRUE(table->Heartbeat("replica-c", kLease * 10).ok());
  EXPECT_EQ(table->CountLiveReplicas().value_or(-1), 3);
  ASSERT_TRUE(table->RemoveReplica("replica-b").ok());
  EXPECT_EQ(table->CountLiveReplicas().value_or(-1), 2);
  engine_->PassTime(kLease * 2);
  EXPECT_EQ(table->CountLiveReplicas().value_or(-1), 1);
}

TEST_P(LeaseTableTest, AStaleTokenFailsTheWholeBatchInItsTransaction) {
  auto a = engine_->Leases();
  auto b = engine_->Leases();
  std::optional<CheckLease> old_lease = AcquireOrDie(*a, "job", "replica-a");
  ASSERT_TRUE(old_lease.has_value());
  WriteBatch fenced;
  fenced.Check(*old_lease);
  fenced.Put(MakeRow("job", 1));
  ASSERT_TRUE(storage_->Write(fenced).ok());

  engine_->PassTime(kLease * 2);
  std::optional<CheckLease> new_lease = AcquireOrDie(*b, "job", "replica-b");
  ASSERT_TRUE(new_lease.has_value());

  // The check comes after a write in the batch: that write is undone too.
  WriteBatch stale;
  stale.Put(MakeRow("other-job", 2));
  stale.Put(MakeRow("job", 3));
  stale.Check(*old_lease);
  const absl::Status refused = storage_->Write(stale);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(),
              AllOf(HasSubstr("'job'"), HasSubstr("replica-a"), HasSubstr("token 1"),
                    HasSubstr("token 2"), HasSubstr("replica-b")));
  EXPECT_EQ(FencedJob(refused), "job");
  auto rows = ReadAll(*storage_);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].record, MakeRow("job", 1).record);

  WriteBatch current;
  current.Check(*new_lease);
  current.Put(MakeRow("job", 4));
  EXPECT_TRUE(storage_->Write(current).ok());

  // A job with no lease row at all refuses every fence.
  WriteBatch unknown;
  unknown.Check(CheckLease{.job_name = "never-leased", .owner = "replica-a", .token = 1});
  unknown.Put(MakeRow("never-leased", 5));
  const absl::Status no_lease = storage_->Write(unknown);
  EXPECT_EQ(no_lease.code(), absl::StatusCode::kFailedPrecondition) << no_lease;
  EXPECT_THAT(no_lease.message(), HasSubstr("holds no lease"));
}

TEST_P(LeaseTableTest, AnActionIsClaimedByOneClaimerUntilDoneOrItsClaimExpires) {
  auto a = engine_->Outbox();
  auto b = engine_->Outbox();
  auto claimed = a->Claim("action-1", "job", "replica-a", kLease);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  ASSERT_EQ(claimed->outcome, ClaimOutcome::kClaimed);
  EXPECT_EQ(claimed->claim.job_name, "job");
  auto other = b->Claim("action-1", "job", "replica-b", kLease);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->outcome, ClaimOutcome::kClaimedByOther);

  // A killed claimer's claim expires and another claims it, with a new claim
  // token; the old claimer can no longer complete it.
  engine_->PassTime(kLease * 2);
  other = b->Claim("action-1", "job", "replica-b", kLease);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_EQ(other->outcome, ClaimOutcome::kClaimed);
  EXPECT_GT(other->claim.claim_token, claimed->claim.claim_token);
  const absl::Status late = a->Complete(claimed->claim);
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_THAT(late.message(), HasSubstr("action-1"));
  ASSERT_TRUE(b->Complete(other->claim).ok());

  // Done: nobody claims it again, even after any claim would have expired.
  engine_->PassTime(kLease * 2);
  auto again = a->Claim("action-1", "job", "replica-a", kLease);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, ClaimOutcome::kDone);
  auto due = a->ClaimDue("replica-a", 10, kLease);
  ASSERT_TRUE(due.ok()) << due.status();
  EXPECT_THAT(*due, IsEmpty());
}

TEST_P(LeaseTableTest, ConcurrentClaimersEachGetDistinctActions) {
  constexpr int kActions = 120;
  constexpr int kClaimers = 4;
  {
    auto outbox = engine_->Outbox();
    for (int i = 0; i < kActions; ++i) {
      ASSERT_TRUE(outbox->Enqueue(absl::StrCat("action-", 1000 + i), "job").ok());
    }
  }
  std::vector<std::vector<std::string>> got(kClaimers);
  std::vector<std::thread> claimers;
  std::atomic<int> errors{0};
  for (int c = 0; c < kClaimers; ++c) {
    claimers.emplace_back([&, c] {
      auto outbox = engine_->Outbox();
      const std::string me = absl::StrCat("replica-", c);
      while (true) {
        auto claims = outbox->ClaimDue(me, 3, absl::Minutes(5));
        if (!claims.ok()) {
          ADD_FAILURE() << claims.status();
          ++errors;
          return;
        }
        if (claims->empty()) return;
        for (const ActionClaim& claim : *claims) {
          got[c].push_back(claim.action_id);
          EXPECT_EQ(claim.claimer, me);
        }
      }
    });
  }
  for (auto& claimer : claimers) claimer.join();
  ASSERT_EQ(errors.load(), 0);
  std::multiset<std::string> all;
  for (const auto& list : got) all.insert(list.begin(), list.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kActions));
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(),
            static_cast<size_t>(kActions));  // None claimed twice.
}

}  // namespace
}  // namespace debugplane::persistence

namespace debugplane::persistence {
namespace {

StoredReport MakeReport(const std::string& job, const std::string& rule, int64_t generated_at_us) {
  return StoredReport{.job_name = job,
                      .rule_configuration_name = rule,
                      .generated_at_us = generated_at_us,
                      .final = false,
                      .json = absl::StrCat("{\"generated\": ", generated_at_us, "}"),
                      // Bytes a report page may hold, a NUL among them.
                      .html = std::string("<html>caf\xc3\xa9\0</html>", 19)};
}

TEST_P(LeaseTableTest, ReportsRoundTripAndAreReplacedPerJobAndRule) {
  auto reports = engine_->Reports();
  ASSERT_NE(reports, nullptr);
  auto none = reports->Read("job", "report");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, std::nullopt);

  ASSERT_TRUE(reports->Put(MakeReport("job", "report", 1), std::nullopt).ok());
  ASSERT_TRUE(reports->Put(MakeReport("job", "other", 2), std::nullopt).ok());
  StoredReport latest = MakeReport("job", "report", 3);
  latest.final = true;
  ASSERT_TRUE(reports->Put(latest, std::nullopt).ok());

  // Another connection (another replica) reads what this one wrote.
  auto read = engine_->Reports()->Read("job", "report");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->generated_at_us, 3);
  EXPECT_TRUE((*read)->final);
  EXPECT_EQ((*read)->json, latest.json);
  EXPECT_EQ((*read)->html, latest.html);
  EXPECT_EQ((*read)->html.size(), 19u);

  // Deleted before 3: the report of 2 goes, the one of 3 (a job created
  // again since) stays; then all.
  ASSERT_TRUE(reports->DeleteJob("job", 3).ok());
  EXPECT_EQ(*reports->Read("job", "other"), std::nullopt);
  EXPECT_NE(*reports->Read("job", "report"), std::nullopt);
  ASSERT_TRUE(reports->DeleteJob("job", 4).ok());
  EXPECT_EQ(*reports->Read("job", "report"), std::nullopt);
}

TEST_P(LeaseTableTest, AReportWithAStaleFenceIsRefusedAndLeavesTheNewOwnersReport) {
  auto a = engine_->Leases();
  auto b = engine_->Leases();
  std::optional<CheckLease> old_owner = AcquireOrDie(*a, "job", "replica-a");
  ASSERT_TRUE(old_owner.has_value());
  auto reports = engine_->Reports();
  ASSERT_TRUE(reports->Put(MakeReport("job", "report", 1), old_owner).ok());

  engine_->PassTime(kLease * 2);
  std::optional<CheckLease> new_owner = AcquireOrDie(*b, "job", "replica-b");
  ASSERT_TRUE(new_owner.has_value());
  ASSERT_TRUE(reports->Put(MakeReport("job", "report", 2), new_owner).ok());

  absl::Status stale = reports->Put(MakeReport("job", "report", 3), old_owner);
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition) << stale;
  EXPECT_THAT(stale.message(),
              AllOf(HasSubstr("'job'"), HasSubstr("replica-a"), HasSubstr("replica-b")));
  EXPECT_EQ(FencedJob(stale), "job");
  auto read = reports->Read("job", "report");
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ((*read)->generated_at_us, 2);

  // No lease at all: refused too.
  CheckLease unknown{.job_name = "other-job", .owner = "replica-a", .token = 1};
  EXPECT_EQ(reports->Put(MakeReport("other-job", "report", 1), unknown).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace debugplane::persistence
