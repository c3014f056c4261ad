// Authorize: every role against every action, and what a refusal says.

#include <map>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/auth/auth.h"

namespace debugplane::service::auth {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::vector<Action>& AllActions() {
  static const std::vector<Action> actions = {
      Action::kCreateTrainingJob, Action::kDescribeTrainingJob,
      Action::kListTrainingJobs,  Action::kUpdateTrainingJob,
      Action::kStopTrainingJob,   Action::kDeleteTrainingJob,
      Action::kWatchTrainingJob,  Action::kGetProfilerReport,
      Action::kQueryTensors,      Action::kAgent};
  return actions;
}

TEST(AuthorizeTest, EachRoleMayDoExactlyItsActions) {
  const std::set<Action> reads = {Action::kDescribeTrainingJob, Action::kListTrainingJobs,
                                  Action::kWatchTrainingJob, Action::kGetProfilerReport,
                                  Action::kQueryTensors};
  std::set<Action> operations = reads;
  operations.insert({Action::kCreateTrainingJob, Action::kUpdateTrainingJob,
                     Action::kStopTrainingJob, Action::kDeleteTrainingJob});
  std::set<Action> everything(AllActions().begin(), AllActions().end());
  const std::map<Role, std::set<Action>> allowed = {{Role::kAdmin, everything},
                                                    {Role::kOperator, operations},
                                                    {Role::kReader, reads},
                                                    {Role::kAgent, {Action::kAgent}}};
  for (const auto& [role, actions] : allowed) {
    const Principal principal{.role = role, .access_key_id = "KEY", .job_name = ""};
    for (Action action : AllActions()) {
      absl::Status status = Authorize(principal, action, "job-a");
      if (actions.count(action) > 0) {
        EXPECT_TRUE(status.ok()) << RoleName(role) << " " << ActionName(action) << ": " << status;
      } else {
        EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied)
            << RoleName(role) << " " << ActionName(action);
        EXPECT_EQ(AwsErrorCode(status), "AccessDeniedException");
      }
    }
  }
}

TEST(AuthorizeTest, ARefusalNamesTheKeyTheRoleTheActionAndWhatIsNeeded) {
  const Principal reader{.role = Role::kReader, .access_key_id = "AKID1", .job_name = ""};
  EXPECT_EQ(Authorize(reader, Action::kStopTrainingJob, "job").message(),
            "access key 'AKID1' (role reader) may not StopTrainingJob: it needs role operator or "
            "admin");
  const Principal agent{.role = Role::kAgent, .access_key_id = "AGENT", .job_name = ""};
  EXPECT_THAT(std::string(Authorize(agent, Action::kDescribeTrainingJob, "job").message()),
              HasSubstr("it needs role reader, operator or admin"));
  const Principal op{.role = Role::kOperator, .access_key_id = "OP", .job_name = ""};
  EXPECT_THAT(std::string(Authorize(op, Action::kAgent, "job").message()),
              AllOf(HasSubstr("'OP' (role operator) may not TrainingAgentService"),
                    HasSubstr("it needs role agent or admin")));
}

TEST(AuthorizeTest, AJobBoundAgentMayServeOnlyItsJob) {
  const Principal bound{.role = Role::kAgent, .access_key_id = "AGENT-A", .job_name = "job-a"};
  EXPECT_TRUE(Authorize(bound, Action::kAgent, "job-a").ok());
  absl::Status other = Authorize(bound, Action::kAgent, "job-b");
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(other.message()),
              AllOf(HasSubstr("'AGENT-A'"), HasSubstr("bound to training job 'job-a'"),
                    HasSubstr("not 'job-b'")));
  EXPECT_FALSE(Authorize(bound, Action::kStopTrainingJob, "job-a").ok());
  EXPECT_FALSE(Authorize(bound, Action::kCreateTrainingJob, "job-a").ok());
  const Principal unbound{.role = Role::kAgent, .access_key_id = "AGENT", .job_name = ""};
  EXPECT_TRUE(Authorize(unbound, Action::kAgent, "job-b").ok());
}

TEST(AwsErrorCodeTest, RoundTripsAndIsAbsentOtherwise) {
  absl::Status status = absl::UnauthenticatedError("x");
  EXPECT_EQ(AwsErrorCode(status), std::nullopt);
  SetAwsErrorCode(status, "InvalidSignatureException");
  EXPECT_EQ(AwsErrorCode(status), "InvalidSignatureException");
}

}  // namespace
}  // namespace debugplane::service::auth
