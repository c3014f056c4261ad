#include "rules_engine/actions/action_dispatcher.h"

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/core/test_util.h"
#include "tests/rules_engine/actions/fake_receivers.h"
#include "tests/support/wait_until.h"

namespace debugplane::rules_engine {
namespace {

using ::debugplane::testing::CallSync;
using ::debugplane::testing::FakeHttpReceiver;
using ::debugplane::testing::FakeSmtpReceiver;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::WaitUntil;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using H = core::TrainingJobHandler;

class ActionDispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override { OpenManager(); }
  void TearDown() override {
    dispatcher_.reset();
    manager_.reset();
  }

  void OpenManager() {
    auto manager = ::debugplane::testing::OpenTestManager(dir_.path());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
  }

  void StartDispatcher(std::vector<std::shared_ptr<NotificationSink>> sinks, int max_attempts = 5,
                       std::shared_ptr<base::Clock> clock = nullptr) {
    ActionDispatcherOptions options;
    options.sinks = std::move(sinks);
    options.max_attempts = max_attempts;
    options.initial_backoff = clock ? absl::Minutes(1) : absl::Milliseconds(20);
    options.max_backoff = clock ? absl::Minutes(10) : absl::Milliseconds(100);
    options.clock = std::move(clock);
    dispatcher_ = std::make_unique<ActionDispatcher>(manager_.get(), options);
    dispatcher_->Start();
  }

  // A job with one debug rule "Rule" whose action_json is `actions`.
  void CreateJob(const std::string& name, const std::string& actions) {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(name);
    request.set_role_arn("arn:aws:iam::111122223333:role/Test");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
    request.mutable_debug_hook_config()->set_s3_output_path("s3://bucket/tensors");
    auto* rule = request.add_debug_rule_configurations();
    rule->set_rule_configuration_name("Rule");
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
    if (!actions.empty()) (*rule->mutable_rule_parameters())["action_json"] = actions;
    auto created =
        CallSync<v1::CreateTrainingJobResponse>(*manager_, &H::CreateTrainingJob, request);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  void FindIssues(const std::string& job) {
    absl::Notification done;
    manager_->SetRuleEvaluationStatus(job, "Rule", v1::RuleEvaluationStatus::IssuesFound,
                                      "step 3 (TRAIN step 3): loss is NaN",
                                      [&](absl::Status status) {
                                        EXPECT_TRUE(status.ok()) << status;
                                        done.Notify();
                                      });
    done.WaitForNotification();
  }

  // Waits until no action of `job` is Pending; returns them.
  std::vector<v1::RuleAction> WaitForActions(const std::string& job) {
    std::shared_ptr<const core::JobRecord> record;
    if (WaitUntil([&] {
          record = manager_->GetJob(job);
          return record != nullptr && record->rule_actions_size() > 0 &&
                 !core::HasPendingActions(*record);
        })) {
      return {record->rule_actions().begin(), record->rule_actions().end()};
    }
    ADD_FAILURE() << "actions of " << job
                  << " still pending: " << manager_->GetJob(job)->DebugString();
    return {};
  }

  ScopedTempDir dir_;
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<ActionDispatcher> dispatcher_;
};

TEST_F(ActionDispatcherTest, EmailAndSmsReachTheWebhookOnceWithAnIdempotencyKey) {
  FakeHttpReceiver receiver;
  StartDispatcher({MakeWebhookSink({.url = receiver.url()})});
  CreateJob("job-a", R"([{"name": "email", "endpoint": "ml@example.com"},
                         {"name": "sms", "endpoint": "+12223334444"}])");
  FindIssues("job-a");
  std::vector<v1::RuleAction> actions = WaitForActions("job-a");
  ASSERT_EQ(actions.size(), 2u);
  for (const auto& action : actions) {
    EXPECT_EQ(action.status(), v1::RuleActionStatus::Succeeded) << action.DebugString();
    EXPECT_THAT(action.details(), HasSubstr("delivered to webhook http://127.0.0.1:"));
    EXPECT_EQ(action.attempts(), 1);
  }
  auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 2u);
  std::set<std::string> endpoints;
  for (const auto& request : requests) {
    EXPECT_THAT(request.request_line, HasSubstr("POST /hook"));
    auto json = nlohmann::json::parse(request.body);
    endpoints.insert(json["Endpoint"].get<std::string>());
    EXPECT_EQ(json["TrainingJobName"], "job-a");
    EXPECT_EQ(json["RuleConfigurationName"], "Rule");
    EXPECT_EQ(json["RuleEvaluationStatus"], "IssuesFound");
    EXPECT_THAT(json["StatusDetails"].get<std::string>(), HasSubstr("loss is NaN"));
    EXPECT_THAT(request.headers, ::testing::Contains(absl::StrCat(
                                     "Idempotency-Key: ", json["ActionId"].get<std::string>())));
  }
  EXPECT_THAT(endpoints, ElementsAre("+12223334444", "ml@example.com"));
  EXPECT_TRUE(core::IsSettled(*manager_->GetJob("job-a")) == false);  // The job still runs.
}

// Sinks are named by scheme, host and port only (a webhook's path holds its
// secret), so two webhooks on one host look alike: each still gets the
// notification once, and no detail shows a path.
TEST_F(ActionDispatcherTest, TwoWebhooksOnOneHostEachGetItAndDetailsShowNoPath) {
  FakeHttpReceiver receiver;
  StartDispatcher({MakeWebhookSink({.url = receiver.url() + "/services/T/B/SECRET1"}),
                   MakeWebhookSink({.url = receiver.url() + "/services/T/B/SECRET2"})});
  CreateJob("job-two", R"({"name": "email", "endpoint": "ml@example.com"})");
  FindIssues("job-two");
  std::vector<v1::RuleAction> actions = WaitForActions("job-two");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), v1::RuleActionStatus::Succeeded) << actions[0].details();
  EXPECT_THAT(actions[0].details(), Not(HasSubstr("SECRET")));
  EXPECT_THAT(actions[0].details(), Not(HasSubstr("/hook")));
  auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 2u);
  std::set<std::string> lines;
  for (const auto& request : requests) lines.insert(request.request_line);
  EXPECT_THAT(lines, ElementsAre(HasSubstr("POST /hook/services/T/B/SECRET1 "),
                                 HasSubstr("POST /hook/services/T/B/SECRET2 ")));
}

TEST_F(ActionDispatcherTest, RetriesServerErrorsAndRecordsTheAttempts) {
  FakeHttpReceiver receiver;
  receiver.Script({503, 500});
  StartDispatcher({MakeWebhookSink({.url = receiver.url()})});
  CreateJob("job-b", R"({"name": "email", "endpoint": "ml@example.com"})");
  FindIssues("job-b");
  std::vector<v1::RuleAction> actions = WaitForActions("job-b");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), v1::RuleActionStatus::Succeeded);
  EXPECT_EQ(actions[0].attempts(), 3);
  EXPECT_EQ(receiver.requests().size(), 3u);
}

TEST_F(ActionDispatcherTest, ARetryWaitsForItsBackoffOnTheClock) {
  auto clock = std::make_shared<base::FakeClock>();
  FakeHttpReceiver receiver;
  receiver.Script({503});
  StartDispatcher({MakeWebhookSink({.url = receiver.url()})}, 5, clock);
  CreateJob("job-clock", R"({"name": "email", "endpoint": "ml@example.com"})");
  FindIssues("job-clock");
  // The first attempt fails and is recorded with its backoff (1 minute).
  WaitUntil([&] { return manager_->GetJob("job-clock")->rule_actions(0).attempts() >= 1; });
  EXPECT_THAT(manager_->GetJob("job-clock")->rule_actions(0).details(),
              HasSubstr("next attempt in 1m"));
  // Not due before the minute is up on the clock, however long it really is.
  clock->Advance(absl::Seconds(59));
  // Real time, on purpose: an attempt that must not happen leaves nothing to
  // wait on, so the test gives it 100 ms to happen.
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(receiver.requests().size(), 1u);
  // Due once it is: delivered without waiting a real minute.
  clock->Advance(absl::Seconds(1));
  std::vector<v1::RuleAction> actions = WaitForActions("job-clock");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), v1::RuleActionStatus::Succeeded);
  EXPECT_EQ(actions[0].attempts(), 2);
  EXPECT_EQ(receiver.requests().size(), 2u);
}

TEST_F(ActionDispatcherTest, AClientErrorFailsAtOnceNamingTheAnswer) {
  FakeHttpReceiver receiver;
  receiver.Script({404});
  StartDispatcher({MakeWebhookSink({.url = receiver.url()})});
  CreateJob("job-c", R"({"name": "email", "endpoint": "ml@example.com"})");
  FindIssues("job-c");
  std::vector<v1::RuleAction> actions = WaitForActions("job-c");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), v1::RuleActionStatus::Failed);
  EXPECT_THAT(actions[0].details(), HasSubstr("answered HTTP 404"));
  EXPECT_EQ(receiver.requests().size(), 1u);
}

TEST_F(ActionDispatcherTest, GivesUpAfterMaxAttemptsOnAnUnreachableSink) {
  int dead_port;
  {
    FakeHttpReceiver closed;  // Take a free port, then close it.
    dead_port = closed.port();
  }
  StartDispatcher({MakeWebhookSink({.url = absl::StrCat("http://127.0.0.1:", dead_port, "/hook")})},
                  /*max_attempts=*/3);
  CreateJob("job-d", R"({"name": "sms", "endpoint": "+12223334444"})");
  FindIssues("job-d");
  std::vector<v1::RuleAction> actions = WaitForActions("job-d");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), v1::RuleActionStatus::Failed);
  EXPECT_EQ(actions[0].attempts(), 3);
  EXPECT_THAT(actions[0].details(), HasSubstr("gave up after 3 attempts"));
}

TEST_F(ActionDispatcherTest, WithoutASinkTheNotificationIsSkippedSayingHowToConfigureOne) {
  StartDispatcher({});
  CreateJob("job-e", R"({"name": "email", "endpoint": "ml@example.com"})");
  FindIssues("job-e");
  std::vector<v1::RuleAction> actions = WaitForActions("job-e");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), v1::RuleActionStatus::Skipped);
  EXPECT_THAT(actions[0].details(), HasSubstr("--notify-webhook"));
}

TEST_F(ActionDispatcherTest, EmailGoesThroughSmtp) {
  FakeSmtpReceiver smtp;
  StartDispatcher({MakeSmtpSink({.url = smtp.url(), .from = "debugplane@example.com"})});
  CreateJob("job-f", R"({"name": "email", "endpoint": "ml@example.com"})");
  FindIssues("job-f");
  std::vector<v1::RuleAction> actions = WaitForActions("job-f");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), v1::RuleActionStatus::Succeeded) << actions[0].details();
  auto mails = smtp.mails();
  ASSERT_EQ(mails.size(), 1u);
  EXPECT_EQ(mails[0].from, "<debugplane@example.com>");
  EXPECT_THAT(mails[0].recipients, ElementsAre("<ml@example.com>"));
  EXPECT_THAT(mails[0].data, HasSubstr("Subject: debugplane: rule Rule found issues in training "
                                       "job job-f"));
  EXPECT_THAT(mails[0].data, HasSubstr("loss is NaN"));
}

TEST_F(ActionDispatcherTest, AnUnknownRecipientFailsWithTheSmtpAnswer) {
  FakeSmtpReceiver smtp;
  smtp.RejectRecipients(true);
  StartDispatcher({MakeSmtpSink({.url = smtp.url(), .from = "debugplane@example.com"})});
  CreateJob("job-g", R"({"name": "email", "endpoint": "nobody@example.com"})");
  FindIssues("job-g");
  std::vector<v1::RuleAction> actions = WaitForActions("job-g");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), v1::RuleActionStatus::Failed);
  EXPECT_THAT(actions[0].details(), HasSubstr("nobody@example.com"));
}

TEST_F(ActionDispatcherTest, StopTrainingStopsTheRulesOwnJobWithTheReason) {
  StartDispatcher({});
  CreateJob("job-h", R"({"name": "stoptraining"})");
  FindIssues("job-h");
  std::vector<v1::RuleAction> actions = WaitForActions("job-h");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), v1::RuleActionStatus::Succeeded);
  EXPECT_EQ(actions[0].target(), "job-h");
  EXPECT_THAT(actions[0].details(), HasSubstr("stopped training job 'job-h'"));
  std::shared_ptr<const core::JobRecord> job;
  WaitUntil([&] {
    job = manager_->GetJob("job-h");
    return job->training_job_status() == v1::TrainingJobStatus::Stopped;
  });
  EXPECT_EQ(job->training_job_status(), v1::TrainingJobStatus::Stopped);
  bool reason_recorded = false;
  for (const auto& transition : job->secondary_status_transitions()) {
    if (transition.status() == v1::SecondaryStatus::Stopping) {
      EXPECT_THAT(transition.status_message(), HasSubstr("Stopped by rule Rule of training job "
                                                         "job-h (StopTraining action): step 3"));
      reason_recorded = true;
    }
  }
  EXPECT_TRUE(reason_recorded);
  EXPECT_TRUE(core::IsSettled(*job));
}

TEST_F(ActionDispatcherTest, StopTrainingByPrefixStopsOneMatchAndNoneOfSeveral) {
  StartDispatcher({});
  CreateJob("train-x-1", "");
  CreateJob("watcher-1", R"({"name": "stoptraining", "training_job_prefix": "train-x"})");
  FindIssues("watcher-1");
  std::vector<v1::RuleAction> actions = WaitForActions("watcher-1");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), v1::RuleActionStatus::Succeeded);
  EXPECT_THAT(actions[0].details(), HasSubstr("'train-x-1'"));

  CreateJob("train-y-1", "");
  CreateJob("train-y-2", "");
  CreateJob("watcher-2", R"({"name": "stoptraining", "training_job_prefix": "train-y"})");
  FindIssues("watcher-2");
  actions = WaitForActions("watcher-2");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), v1::RuleActionStatus::Skipped);
  EXPECT_THAT(actions[0].details(), HasSubstr("2 InProgress training jobs start with 'train-y' "
                                              "(train-y-1, train-y-2); stopping none"));
  EXPECT_EQ(manager_->GetJob("train-y-1")->training_job_status(),
            v1::TrainingJobStatus::InProgress);
}

TEST_F(ActionDispatcherTest, APendingNotificationIsDeliveredAfterARestartAndNeverTwice) {
  FakeHttpReceiver receiver;
  receiver.Script({503, 503, 503, 503, 503, 503, 503, 503});
  StartDispatcher({MakeWebhookSink({.url = receiver.url()})}, /*max_attempts=*/100);
  CreateJob("job-r", R"({"name": "email", "endpoint": "ml@example.com"})");
  FindIssues("job-r");
  // Let it fail a few times, then "crash" (close everything) while Pending.
  WaitUntil([&] { return receiver.requests().size() >= 3; });
  dispatcher_.reset();
  manager_.reset();
  const size_t before_restart = receiver.requests().size();
  receiver.Script({});

  OpenManager();
  auto reloaded = manager_->GetJob("job-r");
  ASSERT_EQ(reloaded->rule_actions_size(), 1);
  EXPECT_EQ(reloaded->rule_actions(0).status(), v1::RuleActionStatus::Pending);
  EXPECT_GE(reloaded->rule_actions(0).attempts(), 1);
  StartDispatcher({MakeWebhookSink({.url = receiver.url()})}, /*max_attempts=*/100);
  std::vector<v1::RuleAction> actions = WaitForActions("job-r");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), v1::RuleActionStatus::Succeeded);
  EXPECT_EQ(receiver.requests().size(), before_restart + 1);

  // Another restart delivers nothing again.
  dispatcher_.reset();
  manager_.reset();
  OpenManager();
  StartDispatcher({MakeWebhookSink({.url = receiver.url()})});
  // Real time, on purpose: a delivery that must not happen leaves nothing to
  // wait on.
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(receiver.requests().size(), before_restart + 1);
  EXPECT_EQ(dispatcher_->pending_actions(), 0u);
}

}  // namespace
}  // namespace debugplane::rules_engine
