#include "core/handlers/profiler_report_handler.h"

#include <fstream>

#include "absl/synchronization/notification.h"
#include "core/handlers/profiler_report_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/sqlite/sqlite_report_store.h"
#include "tests/core/test_util.h"

namespace debugplane::core {
namespace {

using ::debugplane::testing::CallSync;
using ::debugplane::testing::ScopedTempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using H = TrainingJobHandler;

class ProfilerReportHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto manager = ::debugplane::testing::OpenTestManager(dir_.path());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    handler_ = std::make_unique<ProfilerReportHandler>(manager_.get(), dir_.path() / "reports");
  }

  // A job with profiler rules named `rules`, each running `rule_to_invoke`.
  void CreateJob(const std::string& name,
                 const std::vector<std::pair<std::string, std::string>>& rules) {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(name);
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
    for (const auto& [rule_name, rule_to_invoke] : rules) {
      auto* rule = request.add_profiler_rule_configurations();
      rule->set_rule_configuration_name(rule_name);
      rule->set_rule_evaluator_image("builtin");
      (*rule->mutable_rule_parameters())["rule_to_invoke"] = rule_to_invoke;
    }
    auto created =
        CallSync<v1::CreateTrainingJobResponse>(*manager_, &H::CreateTrainingJob, request);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  absl::StatusOr<v1::GetProfilerReportResponse> Get(const std::string& job,
                                                    const std::string& rule = "", bool json = false,
                                                    bool path_only = false) {
    v1::GetProfilerReportRequest request;
    request.set_training_job_name(job);
    request.set_rule_configuration_name(rule);
    request.set_format(json ? v1::ProfilerReportFormat::JSON : v1::ProfilerReportFormat::HTML);
    request.set_path_only(path_only);
    v1::GetProfilerReportResponse response;
    absl::Notification done;
    absl::Status result;
    handler_->GetProfilerReport(request, &response, [&](absl::Status status) {
      result = std::move(status);
      done.Notify();
    });
    done.WaitForNotification();
    if (!result.ok()) return result;
    return response;
  }

  void WriteReport(const std::string& job, const std::string& rule, const std::string& html,
                   const std::string& json) {
    const ProfilerReportFiles files = ProfilerReportFilesFor(dir_.path() / "reports", job, rule);
    std::filesystem::create_directories(files.html.parent_path());
    std::ofstream(files.html) << html;
    std::ofstream(files.json) << json;
  }

  ScopedTempDir dir_;
  std::unique_ptr<TrainingJobManager> manager_;
  std::unique_ptr<ProfilerReportHandler> handler_;
};

TEST_F(ProfilerReportHandlerTest, ServesTheOnlyReportOfAJob) {
  CreateJob("job", {{"cpu", "CPUBottleneck"}, {"report", "ProfilerReport"}});
  WriteReport("job", "report", "<html>page</html>", "{\"final\": false}");

  auto html = Get("job");
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_EQ(html->content(), "<html>page</html>");
  EXPECT_EQ(html->rule_configuration_name(), "report");
  EXPECT_EQ(html->format(), v1::ProfilerReportFormat::HTML);
  EXPECT_THAT(html->path(), HasSubstr("/reports/job/report/profiler-report.html"));
  EXPECT_EQ(html->rule_evaluation_status(), v1::RuleEvaluationStatus::InProgress);
  EXPECT_FALSE(html->final());
  EXPECT_GT(html->last_modified_time().seconds(), 1700000000);

  auto json = Get("job", "report", /*json=*/true);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->content(), "{\"final\": false}");

  auto path_only = Get("job", "", /*json=*/false, /*path_only=*/true);
  ASSERT_TRUE(path_only.ok()) << path_only.status();
  EXPECT_TRUE(path_only->content().empty());
  EXPECT_EQ(path_only->path(), html->path());
}

// With a store (the database every replica reads), the report is served
// from it, whichever replica wrote it, and copied to this server's path; a
// stored report older than the job is an earlier job's and is not served.
TEST_F(ProfilerReportHandlerTest, ServesTheDatabasesReportAndCopiesItToThePath) {
  auto store = persistence::SqliteReportStore::Open((dir_.path() / "jobs.db").string());
  ASSERT_TRUE(store.ok()) << store.status();
  handler_ = std::make_unique<ProfilerReportHandler>(manager_.get(), dir_.path() / "reports",
                                                     store->get());
  ASSERT_TRUE((*store)
                  ->Put({.job_name = "job",
                         .rule_configuration_name = "report",
                         .generated_at_us = absl::ToUnixMicros(absl::Now() - absl::Hours(1)),
                         .json = "{\"earlier\": true}",
                         .html = "<html>an earlier job's</html>"},
                        std::nullopt)
                  .ok());
  CreateJob("job", {{"report", "ProfilerReport"}});
  auto earlier = Get("job");
  EXPECT_EQ(earlier.status().code(), absl::StatusCode::kNotFound) << earlier.status();
  EXPECT_THAT(earlier.status().message(), AllOf(HasSubstr("'report'"), HasSubstr("'job'")));

  const absl::Time generated = absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()) + 1);
  ASSERT_TRUE((*store)
                  ->Put({.job_name = "job",
                         .rule_configuration_name = "report",
                         .generated_at_us = absl::ToUnixMicros(generated),
                         .json = "{\"final\": false}",
                         .html = "<html>from another replica</html>"},
                        std::nullopt)
                  .ok());
  auto html = Get("job");
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_EQ(html->content(), "<html>from another replica</html>");
  EXPECT_EQ(html->last_modified_time().seconds(), absl::ToUnixSeconds(generated));
  std::ifstream copy(html->path());
  std::string copied((std::istreambuf_iterator<char>(copy)), std::istreambuf_iterator<char>());
  EXPECT_EQ(copied, "<html>from another replica</html>");

  auto json = Get("job", "report", /*json=*/true, /*path_only=*/true);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_TRUE(json->content().empty());
  std::ifstream json_copy(json->path());
  std::string json_copied((std::istreambuf_iterator<char>(json_copy)),
                          std::istreambuf_iterator<char>());
  EXPECT_EQ(json_copied, "{\"final\": false}");
}

// A database that cannot be reached: the read fails with its error, nothing
// is made up.
TEST_F(ProfilerReportHandlerTest, AnUnreachableDatabaseIsUnavailable) {
  class DownStore final : public persistence::ReportStore {
   public:
    absl::Status Put(const persistence::StoredReport&,
                     const std::optional<persistence::CheckLease>&) override {
      return Down();
    }
    absl::StatusOr<std::optional<persistence::StoredReport>> Read(const std::string&,
                                                                  const std::string&) override {
      return Down();
    }
    absl::Status DeleteJob(const std::string&, int64_t) override { return Down(); }

   private:
    static absl::Status Down() {
      return absl::UnavailableError("PostgreSQL at db:5432: connection refused");
    }
  } down;
  handler_ =
      std::make_unique<ProfilerReportHandler>(manager_.get(), dir_.path() / "reports", &down);
  CreateJob("job", {{"report", "ProfilerReport"}});
  auto report = Get("job");
  EXPECT_EQ(report.status().code(), absl::StatusCode::kUnavailable) << report.status();
  EXPECT_THAT(report.status().message(), HasSubstr("db:5432"));
  handler_.reset();  // Before `down` goes.
}

// ForgetJob drops the stored reports of a job deleted at a time; a report
// written after it (a job created again) stays.
TEST_F(ProfilerReportHandlerTest, ForgetJobDropsTheReportsOfADeletedJob) {
  auto store = persistence::SqliteReportStore::Open((dir_.path() / "jobs.db").string());
  ASSERT_TRUE(store.ok()) << store.status();
  handler_ = std::make_unique<ProfilerReportHandler>(manager_.get(), dir_.path() / "reports",
                                                     store->get());
  const absl::Time deleted = absl::Now();
  for (const auto& [rule, at] :
       {std::pair<std::string, absl::Time>{"old", deleted - absl::Seconds(1)},
        {"new", deleted + absl::Seconds(1)}}) {
    ASSERT_TRUE((*store)
                    ->Put({.job_name = "job",
                           .rule_configuration_name = rule,
                           .generated_at_us = absl::ToUnixMicros(at),
                           .json = "{}",
                           .html = "<html></html>"},
                          std::nullopt)
                    .ok());
  }
  handler_->ForgetJob("job", deleted);
  handler_.reset();  // Runs what was queued, then stops.
  EXPECT_EQ(*(*store)->Read("job", "old"), std::nullopt);
  EXPECT_NE(*(*store)->Read("job", "new"), std::nullopt);
}

TEST_F(ProfilerReportHandlerTest, ErrorsNameTheJobRuleOrFile) {
  CreateJob("plain", {{"cpu", "CPUBottleneck"}});
  CreateJob("two", {{"a", "ProfilerReport"}, {"b", "ProfilerReport"}});
  CreateJob("fresh", {{"report", "ProfilerReport"}});

  auto bad_name = Get("not a name");
  EXPECT_EQ(bad_name.status().code(), absl::StatusCode::kInvalidArgument);
  auto missing = Get("missing");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("'missing'"));

  auto none = Get("plain");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("no ProfilerReport rule"));
  auto not_report = Get("plain", "cpu");
  EXPECT_EQ(not_report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_report.status().message(), HasSubstr("RuleConfigurationName"));
  auto unknown_rule = Get("plain", "nope");
  EXPECT_EQ(unknown_rule.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown_rule.status().message(), HasSubstr("'nope'"));

  auto several = Get("two");
  EXPECT_EQ(several.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(several.status().message(), HasSubstr("a, b"));

  // A format this server does not know (a newer client's, or a bad number).
  v1::GetProfilerReportRequest unknown_format;
  unknown_format.set_training_job_name("fresh");
  unknown_format.set_format(static_cast<v1::ProfilerReportFormat::Value>(7));
  v1::GetProfilerReportResponse ignored;
  absl::Notification answered;
  absl::Status format_status;
  handler_->GetProfilerReport(unknown_format, &ignored, [&](absl::Status status) {
    format_status = std::move(status);
    answered.Notify();
  });
  answered.WaitForNotification();
  EXPECT_EQ(format_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(format_status.message(), AllOf(HasSubstr("Format"), HasSubstr("HTML or JSON")));

  // The rule exists but has not written its first report yet.
  auto not_yet = Get("fresh");
  EXPECT_EQ(not_yet.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(not_yet.status().message(), HasSubstr("no report yet"));
  EXPECT_THAT(not_yet.status().message(), HasSubstr("profiler-report.html"));
}

TEST(ProfilerReportFilesTest, RuleNamesCannotLeaveTheirDirectory) {
  const std::filesystem::path root = "/data/reports";
  EXPECT_EQ(ProfilerReportFilesFor(root, "job", "Profiler Report").html,
            root / "job" / "Profiler%20Report" / "profiler-report.html");
  EXPECT_EQ(ProfilerReportFilesFor(root, "job", "..").json,
            root / "job" / "%2E%2E" / "profiler-report.json");
  EXPECT_EQ(ProfilerReportFilesFor(root, "job", "a/../../b").html.parent_path(),
            root / "job" / "a%2F..%2F..%2Fb");
}

}  // namespace
}  // namespace debugplane::core
