// Evaluation leases end to end: real server replicas on one real PostgreSQL
// (PostgresTestServer), a live trial, a loopback webhook; kill -9 of the
// replica that evaluates a job, and a replica cut off from the database by a
// TCP proxy the test controls.
//
// Each replica loads the jobs at its start (the replicas' change feed is not
// used here), so the job is created before the other replicas start.

#include <atomic>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/persistence/postgres_test_server.h"
#include "tests/rules_engine/actions/fake_receivers.h"
#include "tests/rules_engine/trial_writer.h"
#include "tests/service/server_process.h"
#include "tests/service/tcp_proxy.h"
#include "tests/service/training_job_calls.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::CreateJob;
using ::debugplane::testing::DescribeJob;
using ::debugplane::testing::FakeHttpReceiver;
using ::debugplane::testing::PostgresTestServer;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::TcpProxy;
using ::debugplane::testing::WaitUntil;
using rules_engine::Mode;
using rules_engine::testing::TrialWriter;

constexpr char kJob[] = "leased-job";
// Short leases, so that takeovers take seconds.
constexpr double kLeaseSeconds = 2;

v1::CreateTrainingJobRequest Job(const fs::path& trial) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(kJob);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_debug_hook_config()->set_s3_output_path(trial.string());
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("ExplodingTensor");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
  (*rule->mutable_rule_parameters())["action_json"] =
      R"({"name": "email", "endpoint": "ml-team@example.com"})";
  return request;
}

void WriteHealthySteps(TrialWriter& writer, int from, int to) {
  for (int step = from; step < to; ++step) {
    writer.AddStep(step, Mode::kTrain, step, {{"CrossEntropyLoss_output_0", {}, {0.7}}});
  }
}

void WriteNanStep(TrialWriter& writer, int step) {
  writer.AddStep(step, Mode::kTrain, step,
                 {{"CrossEntropyLoss_output_0", {}, {std::numeric_limits<double>::quiet_NaN()}}});
}

class LeaseTakeoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = PostgresTestServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    postgres_ = *std::move(server);
    auto database = postgres_->CreateDatabase();
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = *database;
  }

  // The database's URI for replica `id`, through `port` (the server's own,
  // or a proxy's), with the replica's id as its application_name.
  std::string Uri(const std::string& id, int port) const {
    std::string uri = postgres_->Uri(database_);
    uri = absl::StrReplaceAll(
        uri, {{absl::StrCat(":", postgres_->port(), "/"), absl::StrCat(":", port, "/")}});
    return absl::StrCat(uri, "?application_name=", id);
  }

  std::unique_ptr<ServerProcess> StartReplica(const std::string& id, int port,
                                              const std::string& webhook_url) {
    const fs::path data = shared_.path() / id;
    fs::create_directories(data);
    std::vector<std::string> args = {"--database",
                                     Uri(id, port),
                                     "--data-root",
                                     shared_.path().string(),
                                     "--replica-id",
                                     id,
                                     "--lease-duration",
                                     absl::StrCat(kLeaseSeconds),
                                     "--lease-safety-margin",
                                     "0.5",
                                     "--action-claim-duration",
                                     "5"};
    if (!webhook_url.empty()) args.insert(args.end(), {"--notify-webhook", webhook_url});
    return std::make_unique<ServerProcess>(data, args);
  }

  std::string Query(const std::string& sql) {
    auto value = postgres_->Query(database_, sql);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : "";
  }
  // "owner/token" of the job's live lease, "" if none.
  std::string LiveLease() {
    return Query(absl::StrCat("SELECT owner || '/' || token FROM job_leases WHERE job_name = '",
                              kJob, "' AND expires_at > now()"));
  }

  std::unique_ptr<PostgresTestServer> postgres_;
  std::string database_;
  ScopedTempDir shared_;  // Data root of every replica (the trial is here).
};

TEST_F(LeaseTakeoverTest, AKilledOwnersJobIsTakenOverWithinTheBoundAndItsWebhookFiresOnce) {
  FakeHttpReceiver webhook;
  const fs::path trial = shared_.path() / "trial";
  TrialWriter writer(trial.string());
  auto a = StartReplica("replica-a", postgres_->port(), webhook.url());
  ASSERT_TRUE(CreateJob(*a->Stub(), Job(trial)).ok());
  WriteHealthySteps(writer, 0, 4);
  ASSERT_TRUE(WaitUntil([&] { return LiveLease() == "replica-a/1"; }, absl::Seconds(20)))
      << LiveLease();
  // a evaluates and records its progress.
  ASSERT_TRUE(WaitUntil(
      [&] {
        v1::DescribeTrainingJobResponse job = DescribeJob(*a->Stub(), kJob);
        return job.debug_rule_evaluation_statuses(0).last_evaluated_step() >= 3;
      },
      absl::Seconds(20)));
  auto b = StartReplica("replica-b", postgres_->port(), webhook.url());
  auto c = StartReplica("replica-c", postgres_->port(), webhook.url());

  // The step that trips the rule lands as its evaluator dies.
  a->Kill(SIGKILL);
  const absl::Time killed = absl::Now();
  WriteNanStep(writer, 4);
  std::string lease;
  ASSERT_TRUE(WaitUntil(
      [&] {
        lease = LiveLease();
        return absl::StartsWith(lease, "replica-b/") || absl::StartsWith(lease, "replica-c/");
      },
      absl::Seconds(20)))
      << lease;
  const absl::Duration takeover = absl::Now() - killed;
  // Bound: the lease runs out (2 s after a's last renewal, at most 2 s before
  // the kill), then a pass of the others (every 2/3 s), plus polling.
  EXPECT_LT(takeover, absl::Seconds(kLeaseSeconds + kLeaseSeconds / 3 + 1.5));
  EXPECT_THAT(lease, ::testing::EndsWith("/2"));
  ServerProcess& owner = absl::StartsWith(lease, "replica-b/") ? *b : *c;

  // The same verdict a would have reached, and the webhook delivered once.
  v1::DescribeTrainingJobResponse job;
  ASSERT_TRUE(WaitUntil(
      [&] {
        job = DescribeJob(*owner.Stub(), kJob);
        return job.rule_actions_size() == 1 &&
               job.rule_actions(0).status() != v1::RuleActionStatus::Pending;
      },
      absl::Seconds(30)))
      << job.DebugString();
  EXPECT_EQ(job.debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(job.debug_rule_evaluation_statuses(0).status_details(),
              ::testing::HasSubstr("step 4"));
  EXPECT_EQ(job.rule_actions(0).status(), v1::RuleActionStatus::Succeeded)
      << job.rule_actions(0).details();
  absl::SleepFor(absl::Seconds(2 * kLeaseSeconds));  // Time for any second delivery.
  const std::string action_id = job.rule_actions(0).action_id();
  int deliveries = 0;
  for (const auto& request : webhook.requests()) {
    deliveries += absl::StrContains(request.body, action_id) ? 1 : 0;
  }
  EXPECT_EQ(deliveries, 1);
  EXPECT_EQ(webhook.requests().size(), 1u);
  EXPECT_EQ(Query(absl::StrCat("SELECT done::int4 FROM rule_action_outbox WHERE action_id = '",
                               action_id, "'")),
            "1");
}

TEST_F(LeaseTakeoverTest, AReplicaCutOffFromTheDatabaseWritesNothingAfterTheTakeover) {
  TcpProxy proxy(postgres_->port());
  const fs::path trial = shared_.path() / "trial";
  TrialWriter writer(trial.string());
  auto a = StartReplica("replica-a", proxy.port(), "");
  // Every write to the jobs and every change of a lease's holder, with the
  // time it was made and the writer's application_name (the replica).
  Query(
      "CREATE TABLE audit (at timestamptz, app text, tbl text, owner text, token bigint); "
      "CREATE FUNCTION audit_jobs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "INSERT INTO audit VALUES (clock_timestamp(), current_setting('application_name'), "
      "'jobs', NULL, NULL); RETURN NEW; END $$; "
      "CREATE TRIGGER audit_jobs AFTER INSERT OR UPDATE ON training_jobs FOR EACH ROW "
      "EXECUTE FUNCTION audit_jobs(); "
      "CREATE FUNCTION audit_leases() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "INSERT INTO audit VALUES (clock_timestamp(), current_setting('application_name'), "
      "'leases', NEW.owner, NEW.token); RETURN NEW; END $$; "
      "CREATE TRIGGER audit_leases AFTER INSERT OR UPDATE OF owner, token ON job_leases "
      "FOR EACH ROW EXECUTE FUNCTION audit_leases()");
  ASSERT_TRUE(CreateJob(*a->Stub(), Job(trial)).ok());
  int step = 0;
  WriteHealthySteps(writer, step, step + 3);
  step += 3;
  ASSERT_TRUE(WaitUntil([&] { return LiveLease() == "replica-a/1"; }, absl::Seconds(20)));
  auto b = StartReplica("replica-b", postgres_->port(), "");

  // a keeps recording progress while steps come.
  const auto steps_for = [&](absl::Duration duration) {
    const absl::Time end = absl::Now() + duration;
    while (absl::Now() < end) {
      WriteHealthySteps(writer, step, step + 1);
      ++step;
      absl::SleepFor(absl::Milliseconds(150));
    }
  };
  steps_for(absl::Seconds(2));
  ASSERT_NE(Query("SELECT count(*) FROM audit WHERE tbl = 'jobs' AND app = 'replica-a'"), "0");

  proxy.SetMode(TcpProxy::Mode::kBlackhole);
  const absl::Time cut = absl::Now();
  std::string lease;
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (absl::Now() < give_up && !absl::StartsWith(lease = LiveLease(), "replica-b/")) {
    steps_for(absl::Milliseconds(300));
  }
  ASSERT_THAT(lease, ::testing::StartsWith("replica-b/")) << "no takeover";
  EXPECT_LT(absl::Now() - cut, absl::Seconds(kLeaseSeconds + kLeaseSeconds / 3 + 2));
  const std::string takeover_at =
      Query("SELECT max(at) FROM audit WHERE tbl = 'leases' AND owner = 'replica-b'");

  // a can reach the database again: anything it still had to write would
  // land now, with its stale token.
  proxy.SetMode(TcpProxy::Mode::kForward);
  steps_for(absl::Seconds(3 * kLeaseSeconds));
  EXPECT_EQ(Query(absl::StrCat("SELECT count(*) FROM audit WHERE tbl = 'jobs' AND app = "
                               "'replica-a' AND at >= '",
                               takeover_at, "'")),
            "0");
  // b writes (so the audit would have seen a's writes too).
  EXPECT_NE(Query(absl::StrCat("SELECT count(*) FROM audit WHERE tbl = 'jobs' AND app = "
                               "'replica-b' AND at >= '",
                               takeover_at, "'")),
            "0");
  // And a does not take the lease back: the share is b's (one job).
  EXPECT_THAT(LiveLease(), ::testing::StartsWith("replica-b/"));
}

}  // namespace
}  // namespace debugplane
