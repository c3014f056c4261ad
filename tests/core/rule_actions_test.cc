#include "core/jobs/rule_actions.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::core {
namespace {

using ::testing::HasSubstr;

const absl::Time kNow = absl::FromUnixSeconds(1700000000);

TEST(ParseActionJsonTest, AcceptsSmdebugsFormsCaseInsensitively) {
  auto one = ParseActionJson(R"({"name": "StopTraining", "training_job_prefix": "job-"})");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].type, RuleActionType::kStopTraining);
  EXPECT_EQ((*one)[0].target, "job-");

  auto list = ParseActionJson(
      R"([{"name": "stoptraining"}, {"name": "email", "endpoint": "a@example.com"},
          {"name": "sms", "endpoint": "+12223334444"}])");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].target, "");
  EXPECT_EQ((*list)[1].type, RuleActionType::kEmail);
  EXPECT_EQ((*list)[2].type, RuleActionType::kSms);
  EXPECT_EQ((*list)[2].target, "+12223334444");
}

TEST(ParseActionJsonTest, RejectsWhatSmdebugWouldIgnoreSilently) {
  auto message = [](const char* json) {
    auto parsed = ParseActionJson(json);
    EXPECT_FALSE(parsed.ok()) << json;
    return std::string(parsed.status().message());
  };
  EXPECT_THAT(message("stoptraining"), HasSubstr("is not JSON"));
  EXPECT_THAT(message("[]"), HasSubstr("lists no action"));
  EXPECT_THAT(message("[1]"), HasSubstr("action 0: must be an object"));
  EXPECT_THAT(message(R"({"endpoint": "a@example.com"})"), HasSubstr("needs \"name\""));
  EXPECT_THAT(message(R"({"name": "slack"})"), HasSubstr("unknown action \"slack\""));
  EXPECT_THAT(message(R"({"name": "email"})"), HasSubstr("an email address"));
  EXPECT_THAT(message(R"({"name": "email", "endpoint": "a@b"})"), HasSubstr("an email address"));
  EXPECT_THAT(message(R"({"name": "sms", "endpoint": "+1 (222) 333-4444"})"),
              HasSubstr("no spaces"));
  EXPECT_THAT(message(R"({"name": "sms", "endpoint": "12223334444"})"), HasSubstr("'+'"));
  EXPECT_THAT(message(R"({"name": "stoptraining", "invalid_job_prefix": "x"})"),
              HasSubstr("takes no \"invalid_job_prefix\""));
  EXPECT_THAT(message(R"({"name": "email", "endpoint": 5})"), HasSubstr("must be a string"));
  // Eleven actions (compact: a RuleParameters value holds at most 256 characters).
  std::string many = "[";
  for (int i = 0; i < 11; ++i) many += std::string(i ? "," : "") + R"({"name":"sms"})";
  EXPECT_THAT(message((many + "]").c_str()), HasSubstr("at most 10"));
}

JobRecord JobWithActions(const std::string& action_json) {
  JobRecord job;
  job.set_training_job_name("job-1");
  job.set_training_job_status(v1::TrainingJobStatus::InProgress);
  auto* config = job.add_debug_rule_configurations();
  config->set_rule_configuration_name("Rule");
  if (!action_json.empty()) (*config->mutable_rule_parameters())["action_json"] = action_json;
  auto* status = job.add_debug_rule_evaluation_statuses();
  status->set_rule_configuration_name("Rule");
  status->set_rule_evaluation_status(v1::RuleEvaluationStatus::InProgress);
  return job;
}

TEST(RuleActionsTest, IssuesFoundRecordsTheActionsPendingOnce) {
  JobRecord job = JobWithActions(R"([{"name": "stoptraining"},
                                     {"name": "email", "endpoint": "a@example.com"}])");
  ASSERT_TRUE(SetRuleStatus(job, "Rule", v1::RuleEvaluationStatus::IssuesFound, "NaN", kNow));
  ASSERT_EQ(job.rule_actions_size(), 2);
  EXPECT_EQ(job.rule_actions(0).action_id(), "job-1/Rule/0");
  EXPECT_EQ(job.rule_actions(0).action(), "StopTraining");
  EXPECT_EQ(job.rule_actions(0).target(), "job-1");  // No prefix: the rule's own job.
  EXPECT_EQ(job.rule_actions(1).action(), "Email");
  EXPECT_EQ(job.rule_actions(1).target(), "a@example.com");
  for (const auto& action : job.rule_actions()) {
    EXPECT_EQ(action.status(), v1::RuleActionStatus::Pending);
    EXPECT_EQ(action.rule_configuration_name(), "Rule");
  }
  // Recording again (e.g. a replayed verdict) adds nothing.
  EXPECT_EQ(RecordTriggeredActions(job, "Rule", kNow), 0);
  EXPECT_EQ(job.rule_actions_size(), 2);
  EXPECT_TRUE(HasPendingActions(job));
}

TEST(RuleActionsTest, OtherOutcomesTriggerNothing) {
  for (auto status : {v1::RuleEvaluationStatus::NoIssuesFound, v1::RuleEvaluationStatus::Error}) {
    JobRecord job = JobWithActions(R"({"name": "stoptraining"})");
    ASSERT_TRUE(SetRuleStatus(job, "Rule", status, "", kNow));
    EXPECT_EQ(job.rule_actions_size(), 0);
  }
  JobRecord no_actions = JobWithActions("");
  ASSERT_TRUE(SetRuleStatus(no_actions, "Rule", v1::RuleEvaluationStatus::IssuesFound, "", kNow));
  EXPECT_EQ(no_actions.rule_actions_size(), 0);
}

TEST(RuleActionsTest, PendingActionsKeepTheJobUnsettledAndTheirChangesAreWatched) {
  JobRecord job = JobWithActions(R"({"name": "email", "endpoint": "a@example.com"})");
  ASSERT_TRUE(SetRuleStatus(job, "Rule", v1::RuleEvaluationStatus::IssuesFound, "NaN", kNow));
  job.set_training_job_status(v1::TrainingJobStatus::Stopped);
  EXPECT_FALSE(IsSettled(job));

  JobRecord before = job;
  ASSERT_TRUE(SetRuleActionStatus(job, "job-1/Rule/0", v1::RuleActionStatus::Pending,
                                  "attempt 1 failed", 1, kNow));
  ASSERT_TRUE(SetRuleActionStatus(job, "job-1/Rule/0", v1::RuleActionStatus::Succeeded, "delivered",
                                  2, kNow));
  // Final: no more changes.
  EXPECT_FALSE(
      SetRuleActionStatus(job, "job-1/Rule/0", v1::RuleActionStatus::Failed, "late", 3, kNow));
  EXPECT_FALSE(
      SetRuleActionStatus(job, "job-1/Rule/9", v1::RuleActionStatus::Failed, "none", 1, kNow));
  EXPECT_TRUE(IsSettled(job));

  std::vector<v1::StatusChange> changes = DiffForWatch(before, job);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind(), v1::StatusChange::KIND_RULE_ACTION);
  EXPECT_EQ(changes[0].from(), "Pending");
  EXPECT_EQ(changes[0].to(), "Succeeded");
  EXPECT_EQ(changes[0].details(), "Email a@example.com: delivered");
}

// Details are cut to 1,024 characters between characters: a cut inside a
// UTF-8 sequence would leave a proto string that is not valid UTF-8.
TEST(RuleActionsTest, LongDetailsAreCutBetweenCharacters) {
  JobRecord job = JobWithActions(R"({"name": "email", "endpoint": "a@example.com"})");
  ASSERT_TRUE(SetRuleStatus(job, "Rule", v1::RuleEvaluationStatus::IssuesFound, "NaN", kNow));
  std::string details = "x";
  for (int i = 0; i < 2000; ++i) details += "\u00e9";
  ASSERT_TRUE(
      SetRuleActionStatus(job, "job-1/Rule/0", v1::RuleActionStatus::Failed, details, 1, kNow));
  EXPECT_EQ(job.rule_actions(0).details(), details.substr(0, 1 + 2 * 1023));
}

TEST(RuleProgressTest, OnlyMovesForwardOnRulesStillRunning) {
  JobRecord job = JobWithActions("");
  EXPECT_TRUE(SetRuleProgress(job, "Rule", 5));
  EXPECT_FALSE(SetRuleProgress(job, "Rule", 5));
  EXPECT_FALSE(SetRuleProgress(job, "Rule", 3));
  EXPECT_TRUE(SetRuleProgress(job, "Rule", 9));
  EXPECT_EQ(job.debug_rule_evaluation_statuses(0).last_evaluated_step(), 9);
  EXPECT_FALSE(SetRuleProgress(job, "Missing", 10));
  JobRecord before = job;
  ASSERT_TRUE(SetRuleStatus(job, "Rule", v1::RuleEvaluationStatus::NoIssuesFound, "", kNow));
  EXPECT_FALSE(SetRuleProgress(job, "Rule", 12));
  // Progress alone is not a watched change.
  JobRecord progressed = before;
  SetRuleProgress(progressed, "Rule", 20);
  EXPECT_TRUE(DiffForWatch(before, progressed).empty());
}

}  // namespace
}  // namespace debugplane::core
