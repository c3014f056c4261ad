// The job manager's fenced writes (the rules engine's, under an evaluation
// lease): on the real SQLite storage and lease table of one database file, a
// change made under a lease another replica took over is refused by the
// storage in its transaction, naming the job and the tokens, and neither it
// nor anything built on it is applied; other jobs' changes are.

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "core/manager/training_job_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/lease_fence.h"
#include "persistence/sqlite/sqlite_lease_table.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/core/test_util.h"

namespace debugplane::core {
namespace {

using ::debugplane::testing::CallSync;
using ::debugplane::testing::ScopedTempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

v1::CreateTrainingJobRequest JobWithRules(const std::string& name) {
  return ::debugplane::testing::JobWithDebugRules(name);
}

// Waits for a manager completion.
class Result {
 public:
  DoneCallback Callback() {
    return [this](absl::Status status) {
      status_ = status;
      done_.Notify();
    };
  }
  absl::Status Wait() {
    EXPECT_TRUE(done_.WaitForNotificationWithTimeout(absl::Seconds(10)));
    return status_;
  }

 private:
  absl::Notification done_;
  absl::Status status_;
};

RuleStatus StatusOfRule(const JobRecord& job, const std::string& rule) {
  for (const auto& status : job.debug_rule_evaluation_statuses()) {
    if (status.rule_configuration_name() == rule) return status.rule_evaluation_status();
  }
  return v1::RuleEvaluationStatus::RULE_EVALUATION_STATUS_UNSPECIFIED;
}

class FencedWritesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto manager = testing::OpenTestManager(dir_.path());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    auto leases = persistence::SqliteLeaseTable::Open(
        (dir_.path() / "jobs.db").string(), [this] { return absl::FromUnixMicros(now_us_); });
    ASSERT_TRUE(leases.ok()) << leases.status();
    leases_ = *std::move(leases);
    for (const char* name : {"fenced", "other"}) {
      ASSERT_TRUE((CallSync<v1::CreateTrainingJobResponse>(
                       *manager_, &TrainingJobHandler::CreateTrainingJob, JobWithRules(name)))
                      .ok());
    }
  }

  persistence::CheckLease Acquire(const std::string& owner) {
    auto acquired = leases_->TryAcquire("fenced", owner, absl::Seconds(10));
    EXPECT_TRUE(acquired.ok() && acquired->has_value()) << acquired.status();
    return acquired.ok() && acquired->has_value() ? **acquired : persistence::CheckLease{};
  }

  ScopedTempDir dir_;
  std::unique_ptr<TrainingJobManager> manager_;
  std::unique_ptr<persistence::SqliteLeaseTable> leases_;
  int64_t now_us_ = 1'700'000'000'000'000;
};

TEST_F(FencedWritesTest, AStaleLeaseIsRefusedInTheTransactionAndOtherJobsAreWritten) {
  const persistence::CheckLease old_lease = Acquire("replica-a");
  Result current;
  manager_->SetRuleEvaluationStatus("fenced", "VanishingGradient",
                                    v1::RuleEvaluationStatus::NoIssuesFound, "fine",
                                    current.Callback(), old_lease);
  ASSERT_TRUE(current.Wait().ok());

  now_us_ += absl::ToInt64Microseconds(absl::Seconds(11));  // replica-a's lease expires.
  const persistence::CheckLease new_lease = Acquire("replica-b");
  ASSERT_EQ(new_lease.token, 2);

  // Queued back to back, so likely in one group: the stale change, one of
  // the same job built on it (unfenced), and another job's change.
  Result stale;
  Result behind;
  Result other;
  manager_->SetRuleEvaluationStatus("fenced", "ExplodingTensor",
                                    v1::RuleEvaluationStatus::IssuesFound, "stale verdict",
                                    stale.Callback(), old_lease);
  manager_->RecordRuleProgress("fenced", {{.rule = "ExplodingTensor", .last_evaluated_step = 7}},
                               behind.Callback());
  manager_->SetRuleEvaluationStatus("other", "ExplodingTensor",
                                    v1::RuleEvaluationStatus::NoIssuesFound, "fine",
                                    other.Callback());
  const absl::Status refused = stale.Wait();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), AllOf(HasSubstr("'fenced'"), HasSubstr("replica-a"),
                                       HasSubstr("token 1"), HasSubstr("token 2")));
  const absl::Status behind_status = behind.Wait();
  EXPECT_TRUE(behind_status.ok() || absl::IsUnavailable(behind_status)) << behind_status;
  EXPECT_TRUE(other.Wait().ok());

  // Nothing of the stale verdict, in memory or on disk; the other job's is.
  EXPECT_EQ(StatusOfRule(*manager_->GetJob("fenced"), "ExplodingTensor"),
            v1::RuleEvaluationStatus::InProgress);
  EXPECT_EQ(StatusOfRule(*manager_->GetJob("other"), "ExplodingTensor"),
            v1::RuleEvaluationStatus::NoIssuesFound);
  manager_.reset();
  auto reopened = testing::OpenTestManager(dir_.path());
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(StatusOfRule(*(*reopened)->GetJob("fenced"), "ExplodingTensor"),
            v1::RuleEvaluationStatus::InProgress);
  EXPECT_EQ(StatusOfRule(*(*reopened)->GetJob("fenced"), "VanishingGradient"),
            v1::RuleEvaluationStatus::NoIssuesFound);
  EXPECT_EQ(StatusOfRule(*(*reopened)->GetJob("other"), "ExplodingTensor"),
            v1::RuleEvaluationStatus::NoIssuesFound);

  // The new holder's fence writes.
  Result fresh;
  (*reopened)->SetRuleEvaluationStatus("fenced", "ExplodingTensor",
                                       v1::RuleEvaluationStatus::IssuesFound, "new verdict",
                                       fresh.Callback(), new_lease);
  EXPECT_TRUE(fresh.Wait().ok());
  EXPECT_EQ(StatusOfRule(*(*reopened)->GetJob("fenced"), "ExplodingTensor"),
            v1::RuleEvaluationStatus::IssuesFound);
}

}  // namespace
}  // namespace debugplane::core
