// Several training workers end to end: the real server, `debugplane-agent
// run` around a command that starts two worker processes writing one smdebug
// trial (torch.distributed with include_workers "all"), as rank 0 and rank 1
// of two. Each writes training_job_end.ts when it exits, as smdebug does; the
// rules must not conclude on the first one.

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/service/agent_process.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::AgentProcess;
using ::debugplane::testing::CreateJob;
using ::debugplane::testing::DescribeJob;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;

class MultiWorkerTest : public ::testing::Test {
 protected:
  // A job whose tensors go to <data>/<name>/tensors, with ExplodingTensor.
  void Create(const std::string& name) {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(name);
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
    request.mutable_debug_hook_config()->set_s3_output_path(
        (data_.path() / name / "tensors").string());
    (*request.mutable_debug_hook_config()->mutable_hook_parameters())["include_workers"] = "all";
    auto* collection = request.mutable_debug_hook_config()->add_collection_configurations();
    collection->set_collection_name("losses");
    auto* rule = request.add_debug_rule_configurations();
    rule->set_rule_configuration_name("ExplodingTensor");
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
    grpc::Status status = CreateJob(*server_.Stub(), request);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  v1::DescribeTrainingJobResponse Describe(const std::string& name) {
    return DescribeJob(*server_.Stub(), name);
  }

  // Polls the job's first rule into `*rule` until it is no longer
  // InProgress (returns true) or 30 s have passed (returns false).
  bool WaitForRuleVerdict(const std::string& name, v1::DebugRuleEvaluationStatus* rule) {
    return WaitUntil([&] {
      *rule = Describe(name).debug_rule_evaluation_statuses(0);
      return rule->rule_evaluation_status() != v1::RuleEvaluationStatus::InProgress;
    });
  }

  // The job's output is under data_, which the agent may write.
  std::vector<std::string> AgentArgs(const std::string& job) {
    return {"--server",      server_.address(),
            "--job",         job,
            "--config-dir",  (data_.path() / job / "config").string(),
            "--allow-write", data_.path().string(),
            "--stop-grace",  "1"};
  }

  // A shell command that starts two workers of one job, `rank1` in the
  // background and `rank0` in the foreground (fake_training arguments after
  // --rank/--num-workers), and exits with the first failure among them.
  static std::vector<std::string> TwoWorkers(const std::string& rank0, const std::string& rank1) {
    return {"/bin/sh", "-c",
            absl::StrCat("\"$0\" --rank 1 --num-workers 2 ", rank1, " & rank1=$!; ",
                         "\"$0\" --rank 0 --num-workers 2 ", rank0, "; code0=$?; ",
                         "wait $rank1; code1=$?; ",
                         "if [ $code0 -ne 0 ]; then exit $code0; fi; exit $code1"),
            DP_FAKE_TRAINING_BINARY};
  }

  ScopedTempDir data_;
  ServerProcess server_{data_.path()};
};

TEST_F(MultiWorkerTest, ANanWrittenAfterTheFirstWorkerEndedIsFound) {
  // Rank 1 writes its 10 steps and training_job_end.ts, and exits; rank 0 is
  // slower, and writes its step 9, a NaN, well after that.
  Create("ranks");
  AgentProcess agent(AgentArgs("ranks"),
                     TwoWorkers(/*rank0=*/"--steps 10 --step-ms 100 --nan-at 9 "
                                          "--wait-for-end-before 9 --exit-delay-ms 300",
                                /*rank1=*/"--steps 10 --step-ms 20"),
                     data_.path() / "agent.log");
  EXPECT_EQ(agent.Wait(absl::Seconds(60)), 0) << agent.log();
  EXPECT_EQ(Describe("ranks").training_job_status(), v1::TrainingJobStatus::Completed);
  // Both workers wrote into one trial, each announcing two workers.
  const fs::path collections = data_.path() / "ranks" / "tensors" / "collections" / "000000000";
  EXPECT_TRUE(fs::exists(collections / "worker_0_collections.json"));
  EXPECT_TRUE(fs::exists(collections / "worker_1_collections.json"));

  v1::DebugRuleEvaluationStatus rule;
  ASSERT_TRUE(WaitForRuleVerdict("ranks", &rule)) << rule.DebugString();
  EXPECT_EQ(rule.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound)
      << rule.status_details();
  EXPECT_THAT(rule.status_details(), HasSubstr("step 9"));
  EXPECT_THAT(rule.status_details(), HasSubstr("worker_0"));
  EXPECT_EQ(rule.last_evaluated_step(), 9);
}

TEST_F(MultiWorkerTest, RulesConcludeWhenTheCommandExitsNotWhenAWorkerEnds) {
  // Healthy data: rank 1 ends first, rank 0 goes on for a while. The rule
  // concludes once the agent reports the command's exit, over every step of
  // both workers.
  Create("healthy");
  AgentProcess agent(AgentArgs("healthy"),
                     TwoWorkers(/*rank0=*/"--steps 20 --step-ms 50",
                                /*rank1=*/"--steps 20 --step-ms 10"),
                     data_.path() / "agent.log");
  // Rank 1 ended (its training_job_end.ts is there) while rank 0 still runs:
  // the rule waits.
  ASSERT_TRUE(WaitUntil([&] {
    return fs::exists(data_.path() / "healthy" / "tensors" / "training_job_end.ts");
  })) << agent.log();
  absl::SleepFor(absl::Milliseconds(200));
  if (Describe("healthy").training_job_status() == v1::TrainingJobStatus::InProgress) {
    EXPECT_EQ(Describe("healthy").debug_rule_evaluation_statuses(0).rule_evaluation_status(),
              v1::RuleEvaluationStatus::InProgress);
  }
  EXPECT_EQ(agent.Wait(absl::Seconds(60)), 0) << agent.log();
  v1::DebugRuleEvaluationStatus rule;
  ASSERT_TRUE(WaitForRuleVerdict("healthy", &rule)) << rule.DebugString();
  EXPECT_EQ(rule.rule_evaluation_status(), v1::RuleEvaluationStatus::NoIssuesFound)
      << rule.status_details();
  EXPECT_THAT(rule.status_details(), HasSubstr("40 evaluations over 20 steps"));
  EXPECT_EQ(rule.last_evaluated_step(), 19);
}

}  // namespace
}  // namespace debugplane
