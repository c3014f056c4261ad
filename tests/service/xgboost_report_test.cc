// CreateXgboostReport end to end: the real server evaluates the debugging
// rule on a real XGBoost trial (tests/data/xgboost/binary, read in place),
// the rule reaches NoIssuesFound, GetProfilerReport serves its report (HTML
// and JSON) and so does the dashboard; a trial without a required
// collection ends in Error saying what to add; the rule in
// ProfilerRuleConfigurations is still refused.

#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/profiler_report.grpc.pb.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/rules_engine/trial_writer.h"
#include "tests/service/dashboard/dashboard_client.h"
#include "tests/service/server_process.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::Context;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;

const fs::path kFixtures = fs::canonical(fs::path(DP_TEST_DATA_DIR));
constexpr char kRulesImage[] =
    "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest";

v1::CreateTrainingJobRequest XgboostJob(const std::string& name, const fs::path& trial) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_debug_hook_config()->set_s3_output_path("file://" + trial.string());
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("CreateXgboostReport");
  rule->set_rule_evaluator_image(kRulesImage);
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "CreateXgboostReport";
  return request;
}

// Watches the job until its one debugging rule is terminal; its status.
v1::DebugRuleEvaluationStatus WaitForRule(v1::TrainingJobService::Stub& stub,
                                          const std::string& job) {
  v1::WatchTrainingJobRequest request;
  request.set_training_job_name(job);
  auto context = Context(60);
  auto reader = stub.WatchTrainingJob(context.get(), request);
  v1::WatchTrainingJobResponse event;
  v1::DebugRuleEvaluationStatus last;
  while (reader->Read(&event)) {
    if (event.debug_rule_evaluation_statuses_size() == 0) continue;
    last = event.debug_rule_evaluation_statuses(0);
    const auto s = last.rule_evaluation_status();
    if (s != v1::RuleEvaluationStatus::InProgress && s != v1::RuleEvaluationStatus::Stopping) {
      context->TryCancel();
      break;
    }
  }
  return last;
}

v1::GetProfilerReportResponse FetchReport(const ServerProcess& server, const std::string& job,
                                          bool json, const std::string& rule = "") {
  auto stub = v1::ProfilerReportService::NewStub(server.Channel());
  v1::GetProfilerReportRequest request;
  request.set_training_job_name(job);
  request.set_rule_configuration_name(rule);
  request.set_format(json ? v1::ProfilerReportFormat::JSON : v1::ProfilerReportFormat::HTML);
  v1::GetProfilerReportResponse response;
  const grpc::Status status = stub->GetProfilerReport(Context().get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

TEST(XgboostReportServiceTest, BinaryTrialReachesNoIssuesFoundAndServesTheReport) {
  ScopedTempDir dir;
  ServerProcess server(dir.path(), testing::WithHttp({"--data-root", kFixtures.string()}));
  auto stub = server.Stub();
  v1::CreateTrainingJobResponse created;
  const grpc::Status create = stub->CreateTrainingJob(
      Context().get(), XgboostJob("xgb-binary", kFixtures / "xgboost" / "binary"), &created);
  ASSERT_TRUE(create.ok()) << create.error_message();
  const v1::DebugRuleEvaluationStatus status = WaitForRule(*stub, "xgb-binary");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::NoIssuesFound)
      << status.status_details();
  EXPECT_THAT(status.status_details(), HasSubstr("binary classification"));
  EXPECT_THAT(status.status_details(), HasSubstr("validation AUC 0.99"));

  // The job's only report rule: no name needed.
  const v1::GetProfilerReportResponse html = FetchReport(server, "xgb-binary", false);
  EXPECT_THAT(html.path(), EndsWith("/CreateXgboostReport/xgboost_report.html"));
  EXPECT_EQ(html.rule_evaluation_status(), v1::RuleEvaluationStatus::NoIssuesFound);
  EXPECT_TRUE(html.final()) << "the rule concluded: no later version follows";
  EXPECT_THAT(html.content(), HasSubstr("XGBoost training report"));
  EXPECT_THAT(html.content(), HasSubstr("id=\"roc\""));
  EXPECT_THAT(html.content(), HasSubstr("mode final"));
  const v1::GetProfilerReportResponse json =
      FetchReport(server, "xgb-binary", true, "CreateXgboostReport");
  const nlohmann::json summary = nlohmann::json::parse(json.content());
  EXPECT_EQ(summary["task"], "binary classification");
  EXPECT_EQ(summary["final"], true);
  EXPECT_GT(summary["classification"]["roc"]["auc"].get<double>(), 0.99);

  // The dashboard serves the page under its own policy: no script at all.
  const testing::DashboardReply page = testing::CallDashboard(
      "GET", absl::StrCat("http://127.0.0.1:", server.http_port(),
                          "/api/jobs/xgb-binary/report?rule=CreateXgboostReport"));
  EXPECT_EQ(page.status, 200) << page.body << page.error;
  EXPECT_THAT(page.Header("Content-Type"), HasSubstr("text/html"));
  EXPECT_THAT(page.Header("Content-Security-Policy"), HasSubstr("default-src 'none'"));
  EXPECT_THAT(page.body, HasSubstr("XGBoost training report"));
  EXPECT_THAT(page.body, HasSubstr("id=\"auc\""));
  EXPECT_THAT(page.body, Not(HasSubstr("<script")));
  const testing::DashboardReply bad = testing::CallDashboard(
      "GET", absl::StrCat("http://127.0.0.1:", server.http_port(),
                          "/api/jobs/xgb-binary/report?format=pdf"));
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_THAT(bad.body, HasSubstr("format"));
}

// One round of a small binary training, as the hook saves it.
void WriteRound(rules_engine::testing::TrialWriter& writer, int round) {
  writer.AddStep(round, rules_engine::Mode::kGlobal, round,
                 {{"hyperparameters/objective", {1}, {}, {"binary:logistic"}},
                  {"train-logloss", {1}, {0.7 - 0.01 * round}},
                  {"validation-logloss", {1}, {0.72 - 0.01 * round}},
                  {"predictions", {4}, {0.2, 0.6, 0.7, 0.4}},
                  {"labels", {4}, {0, 1, 1, 0}},
                  {"feature_importance/gain/f0", {1}, {2.0 + round}},
                  {"feature_importance/gain/f1", {1}, {1.0}}});
}

// The JSON report's rounds_seen now, or -1 while there is none.
int64_t RoundsInReport(const ServerProcess& server, const std::string& job, bool* final) {
  auto stub = v1::ProfilerReportService::NewStub(server.Channel());
  v1::GetProfilerReportRequest request;
  request.set_training_job_name(job);
  request.set_format(v1::ProfilerReportFormat::JSON);
  v1::GetProfilerReportResponse response;
  if (!stub->GetProfilerReport(Context().get(), request, &response).ok()) return -1;
  const nlohmann::json summary = nlohmann::json::parse(response.content(), nullptr, false);
  if (summary.is_discarded()) return -1;
  *final = summary["final"].get<bool>();
  return summary["rounds_seen"].get<int64_t>();
}

TEST(XgboostReportServiceTest, LiveReportFollowsTheRoundsThenTurnsFinal) {
  ScopedTempDir dir;
  ServerProcess server(dir.path());
  const fs::path trial = dir.path() / "live";
  rules_engine::testing::TrialWriter writer(trial.string());
  auto stub = server.Stub();
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(), XgboostJob("xgb-live", trial), &created).ok());
  for (int round = 0; round < 3; ++round) WriteRound(writer, round);
  bool final = true;
  EXPECT_TRUE(WaitUntil([&] { return RoundsInReport(server, "xgb-live", &final) == 3; },
                        absl::Seconds(20)));
  EXPECT_FALSE(final);
  v1::DescribeTrainingJobRequest describe;
  describe.set_training_job_name("xgb-live");
  v1::DescribeTrainingJobResponse job;
  ASSERT_TRUE(stub->DescribeTrainingJob(Context().get(), describe, &job).ok());
  EXPECT_EQ(job.debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::InProgress);
  // More rounds: the report is regenerated (at most every 2 s).
  for (int round = 3; round < 6; ++round) WriteRound(writer, round);
  EXPECT_TRUE(WaitUntil([&] { return RoundsInReport(server, "xgb-live", &final) == 6; },
                        absl::Seconds(20)));
  writer.EndTraining();
  EXPECT_EQ(WaitForRule(*stub, "xgb-live").rule_evaluation_status(),
            v1::RuleEvaluationStatus::NoIssuesFound);
  EXPECT_EQ(RoundsInReport(server, "xgb-live", &final), 6);
  EXPECT_TRUE(final);
}

TEST(XgboostReportServiceTest, MissingCollectionEndsInErrorSayingWhatToAdd) {
  ScopedTempDir dir;
  ServerProcess server(dir.path());
  const fs::path trial = dir.path() / "no-importance";
  rules_engine::testing::TrialWriter writer(trial.string());
  writer.AddStep(0, rules_engine::Mode::kGlobal, 0,
                 {{"train-rmse", {1}, {2.0}},
                  {"predictions", {2}, {0.5, 1.5}},
                  {"labels", {2}, {1, 2}}});
  writer.EndTraining();
  auto stub = server.Stub();
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(
      stub->CreateTrainingJob(Context().get(), XgboostJob("xgb-missing", trial), &created).ok());
  const v1::DebugRuleEvaluationStatus status = WaitForRule(*stub, "xgb-missing");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(status.status_details(), HasSubstr("collection 'feature_importance' saved no"));
  EXPECT_THAT(status.status_details(), HasSubstr("CollectionConfigurations"));
  // The report is written all the same, saying what is missing.
  const v1::GetProfilerReportResponse html = FetchReport(server, "xgb-missing", false);
  EXPECT_THAT(html.content(), HasSubstr("feature_importance"));
}

TEST(XgboostReportServiceTest, RefusedAsAProfilerRule) {
  ScopedTempDir dir;
  ServerProcess server(dir.path());
  v1::CreateTrainingJobRequest request = XgboostJob("xgb-wrong-list", dir.path());
  request.clear_debug_rule_configurations();
  auto* rule = request.add_profiler_rule_configurations();
  rule->set_rule_configuration_name("CreateXgboostReport");
  rule->set_rule_evaluator_image(kRulesImage);
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "CreateXgboostReport";
  v1::CreateTrainingJobResponse created;
  const grpc::Status refused =
      server.Stub()->CreateTrainingJob(Context().get(), request, &created);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("configure it in DebugRuleConfigurations"));
}

}  // namespace
}  // namespace debugplane
