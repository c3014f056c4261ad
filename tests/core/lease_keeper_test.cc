// LeaseKeeper on a real SQLite lease table whose database clock is the
// test's base::FakeClock (the keeper's local clock too): fair shares as replicas
// join and leave, and a lease lost locally before another replica can take
// it over when the database stops answering.

#include "core/replication/lease_keeper.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/sqlite/sqlite_lease_table.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/persistence/persistence_test_util.h"
#include "tests/support/wait_until.h"

namespace debugplane::core {
namespace {

using persistence::CheckLease;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr absl::Duration kLease = absl::Seconds(9);
constexpr absl::Duration kMargin = absl::Seconds(2);

// The real table, cut off when the test says (a partitioned replica):
// every call then fails as an unreachable database does.
class PartitionableLeaseTable final : public persistence::LeaseTable {
 public:
  explicit PartitionableLeaseTable(std::unique_ptr<persistence::LeaseTable> table)
      : table_(std::move(table)) {}
  void Cut(bool cut) { cut_ = cut; }

  absl::Status Heartbeat(const std::string& replica, absl::Duration ttl) override {
    if (cut_) return Unreachable();
    return table_->Heartbeat(replica, ttl);
  }
  absl::Status RemoveReplica(const std::string& replica) override {
    if (cut_) return Unreachable();
    return table_->RemoveReplica(replica);
  }
  absl::StatusOr<int> CountLiveReplicas() override {
    if (cut_) return Unreachable();
    return table_->CountLiveReplicas();
  }
  absl::StatusOr<std::optional<CheckLease>> TryAcquire(const std::string& job,
                                                       const std::string& owner,
                                                       absl::Duration duration) override {
    if (cut_) return Unreachable();
    return table_->TryAcquire(job, owner, duration);
  }
  absl::StatusOr<std::vector<std::string>> Renew(const std::vector<CheckLease>& held,
                                                 absl::Duration duration) override {
    if (cut_) return Unreachable();
    return table_->Renew(held, duration);
  }
  absl::Status Release(const CheckLease& lease) override {
    if (cut_) return Unreachable();
    return table_->Release(lease);
  }
  absl::StatusOr<std::vector<persistence::LeaseRow>> List() override {
    if (cut_) return Unreachable();
    return table_->List();
  }

 private:
  static absl::Status Unreachable() {
    return absl::UnavailableError("the database cannot be reached (cut by the test)");
  }
  std::unique_ptr<persistence::LeaseTable> table_;
  std::atomic<bool> cut_{false};
};

class LeaseKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (dir_.path() / "jobs.db").string();
    auto storage = persistence::SqliteStorage::Open(path_);  // Creates the schema.
    ASSERT_TRUE(storage.ok()) << storage.status();
  }

  struct Replica {
    // What the listeners heard, in order: "+job/token" or "-job". Declared
    // first: the keeper's shutdown still reports to it.
    std::vector<std::string> heard;
    std::shared_ptr<PartitionableLeaseTable> table;
    std::unique_ptr<LeaseKeeper> keeper;
  };

  Replica& AddReplica(const std::string& id) {
    auto table =
        persistence::SqliteLeaseTable::Open(path_, [clock = clock_] { return clock->Now(); });
    EXPECT_TRUE(table.ok()) << table.status();
    auto replica = std::make_unique<Replica>();
    replica->table = std::make_shared<PartitionableLeaseTable>(*std::move(table));
    replica->keeper = std::make_unique<LeaseKeeper>(
        replica->table, [this] { return ActiveJobs(); },
        LeaseKeeperOptions{
            .replica_id = id, .lease_duration = kLease, .safety_margin = kMargin, .clock = clock_});
    Replica* raw = replica.get();
    raw->keeper->AddListener(LeaseKeeper::Listener{
        .acquired =
            [raw](const CheckLease& lease) {
              raw->heard.push_back(absl::StrCat("+", lease.job_name, "/", lease.token));
            },
        .lost = [raw](const std::string& job) { raw->heard.push_back("-" + job); }});
    replicas_[id] = std::move(replica);
    return *raw;
  }

  std::vector<std::string> ActiveJobs() {
    absl::MutexLock lock(&mu_);
    return active_;
  }
  void SetActiveJobs(int count) {
    absl::MutexLock lock(&mu_);
    active_.clear();
    for (int i = 0; i < count; ++i) active_.push_back(absl::StrCat("job-", i));
  }

  // Ticks every replica in `ids` (in order) `rounds` times, the clock moving
  // a third of a lease before each round.
  void Rounds(const std::vector<std::string>& ids, int rounds) {
    for (int r = 0; r < rounds; ++r) {
      clock_->Advance(kLease / 3);
      for (const std::string& id : ids) {
        EXPECT_TRUE(replicas_.at(id)->keeper->Tick().ok()) << id;
      }
    }
  }
  size_t Owned(const std::string& id) { return replicas_.at(id)->keeper->owned(); }

  persistence::testing::ScopedTempDir dir_;
  std::string path_;
  std::shared_ptr<base::FakeClock> clock_ = std::make_shared<base::FakeClock>();
  absl::Mutex mu_;
  std::vector<std::string> active_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Replica>> replicas_;
};

TEST_F(LeaseKeeperTest, OptionsAreValidated) {
  LeaseKeeperOptions options{
      .replica_id = "a", .lease_duration = kLease, .safety_margin = kLease, .clock = clock_};
  EXPECT_THAT(ValidateLeaseKeeperOptions(options).message(),
              ::testing::HasSubstr("--lease-safety-margin"));
  options.safety_margin = kMargin;
  EXPECT_TRUE(ValidateLeaseKeeperOptions(options).ok());
  options.replica_id.clear();
  EXPECT_THAT(ValidateLeaseKeeperOptions(options).message(), ::testing::HasSubstr("--replica-id"));
}

TEST_F(LeaseKeeperTest, AloneItOwnsEveryActiveJobAndGivesUpThoseThatEnd) {
  SetActiveJobs(5);
  Replica& a = AddReplica("a");
  Rounds({"a"}, 1);
  EXPECT_EQ(Owned("a"), 5u);
  EXPECT_EQ(a.keeper->FenceFor("job-3")->token, 1);
  SetActiveJobs(2);  // job-2, job-3 and job-4 ended.
  Rounds({"a"}, 1);
  EXPECT_THAT(a.keeper->HeldJobs(), ElementsAre("job-0", "job-1"));
  EXPECT_EQ(a.keeper->FenceFor("job-3"), std::nullopt);
}

TEST_F(LeaseKeeperTest, WorkSpreadsEvenlyAsReplicasJoinAndLeave) {
  SetActiveJobs(6);
  AddReplica("a");
  Rounds({"a"}, 1);
  ASSERT_EQ(Owned("a"), 6u);

  // b joins: a gives up one lease per pass down to its share of 3.
  AddReplica("b");
  Rounds({"b"}, 1);
  EXPECT_EQ(Owned("b"), 0u);  // Nothing free yet.
  Rounds({"a", "b"}, 1);
  EXPECT_EQ(Owned("a"), 5u);
  EXPECT_EQ(Owned("b"), 1u);
  Rounds({"a", "b"}, 3);
  EXPECT_EQ(Owned("a"), 3u);
  EXPECT_EQ(Owned("b"), 3u);

  // c joins: 2 each.
  AddReplica("c");
  Rounds({"c", "a", "b", "c"}, 3);
  EXPECT_EQ(Owned("a"), 2u);
  EXPECT_EQ(Owned("b"), 2u);
  EXPECT_EQ(Owned("c"), 2u);
  const std::vector<std::string> c_jobs = replicas_.at("c")->keeper->HeldJobs();
  const int64_t takeovers_before =
      replicas_.at("a")->keeper->takeovers() + replicas_.at("b")->keeper->takeovers();

  // c is killed (it stops renewing): its leases and heartbeat expire by the
  // database's clock, then a and b take its jobs up to 3 each, with higher
  // tokens.
  Rounds({"a", "b"}, 4);
  EXPECT_EQ(Owned("a"), 3u);
  EXPECT_EQ(Owned("b"), 3u);
  for (const std::string& job : c_jobs) {
    std::optional<CheckLease> fence = replicas_.at("a")->keeper->FenceFor(job);
    if (!fence.has_value()) fence = replicas_.at("b")->keeper->FenceFor(job);
    ASSERT_TRUE(fence.has_value()) << job;
    EXPECT_GE(fence->token, 3) << job;  // a, then c, then a or b.
  }
  EXPECT_EQ(replicas_.at("a")->keeper->takeovers() + replicas_.at("b")->keeper->takeovers(),
            takeovers_before + 2);
}

TEST_F(LeaseKeeperTest, APartitionedReplicaLosesItsLeaseLocallyBeforeAnotherCanTakeIt) {
  SetActiveJobs(1);
  Replica& a = AddReplica("a");
  Replica& b = AddReplica("b");
  ASSERT_TRUE(a.keeper->Tick().ok());
  ASSERT_EQ(a.keeper->FenceFor("job-0")->token, 1);
  ASSERT_TRUE(b.keeper->Tick().ok());
  const absl::Time renewed_at = clock_->Now();  // a's last successful renewal starts here.
  ASSERT_TRUE(a.keeper->Tick().ok());

  a.table->Cut(true);
  // Until lease - margin after that renewal a still holds it (its passes fail).
  clock_->Advance(kLease - kMargin - absl::Milliseconds(1));
  EXPECT_FALSE(a.keeper->Tick().ok());
  EXPECT_TRUE(a.keeper->Holds("job-0"));
  ASSERT_TRUE(b.keeper->Tick().ok());
  EXPECT_FALSE(b.keeper->Holds("job-0"));

  // Then a stops at once, even before its next pass, while the database
  // still holds the lease for it: b cannot take it yet.
  clock_->Advance(absl::Milliseconds(1));
  EXPECT_EQ(a.keeper->FenceFor("job-0"), std::nullopt);
  EXPECT_FALSE(a.keeper->Tick().ok());
  EXPECT_THAT(a.heard, ElementsAre("+job-0/1", "-job-0"));
  ASSERT_TRUE(b.keeper->Tick().ok());
  EXPECT_FALSE(b.keeper->Holds("job-0"));

  // Once the database's lease expired, b takes it over with the next token.
  clock_->Advance(renewed_at + kLease - clock_->Now());
  ASSERT_TRUE(b.keeper->Tick().ok());
  ASSERT_TRUE(b.keeper->Holds("job-0"));
  EXPECT_EQ(b.keeper->FenceFor("job-0")->token, 2);
  EXPECT_EQ(b.keeper->takeovers(), 1);

  // a comes back: its old lease is gone, and the share is b's.
  a.table->Cut(false);
  ASSERT_TRUE(a.keeper->Tick().ok());
  EXPECT_FALSE(a.keeper->Holds("job-0"));
}

TEST_F(LeaseKeeperTest, TheThreadAnnouncesALocalExpiryWithoutAPass) {
  SetActiveJobs(1);
  Replica& a = AddReplica("a");
  absl::Notification lost;
  a.keeper->AddListener(LeaseKeeper::Listener{.lost = [&](const std::string&) { lost.Notify(); }});
  a.keeper->Start();
  // The first pass runs at once.
  ::debugplane::testing::WaitUntil([&] { return a.keeper->Holds("job-0"); });
  ASSERT_TRUE(a.keeper->Holds("job-0"));
  a.table->Cut(true);
  clock_->Advance(kLease - kMargin);
  EXPECT_TRUE(lost.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_FALSE(a.keeper->Holds("job-0"));
  a.table->Cut(false);
  a.keeper->Shutdown();
}

TEST_F(LeaseKeeperTest, ShutdownReleasesSoAnotherReplicaTakesOverAtOnce) {
  SetActiveJobs(2);
  Replica& a = AddReplica("a");
  Replica& b = AddReplica("b");
  ASSERT_TRUE(a.keeper->Tick().ok());
  ASSERT_EQ(a.keeper->owned(), 2u);
  a.keeper->Shutdown();
  ASSERT_EQ(a.heard.size(), 4u);
  EXPECT_THAT(std::vector<std::string>(a.heard.begin() + 2, a.heard.end()),
              ElementsAre("-job-0", "-job-1"));
  ASSERT_TRUE(b.keeper->Tick().ok());  // Alone now: its share is both.
  EXPECT_EQ(b.keeper->owned(), 2u);
  EXPECT_EQ(b.keeper->FenceFor("job-1")->token, 2);
  EXPECT_THAT(b.heard, ::testing::UnorderedElementsAre("+job-0/2", "+job-1/2"));
}

}  // namespace
}  // namespace debugplane::core
