// Several training workers end to end: the real server, `debugplane-agent
// run` around a command that starts two worker processes writing one smdebug
// trial (torch.distributed with include_workers "all"), as rank 0 and rank 1
// of two. Each writes training_job_end.ts when it exits, as smdebug does; the
// rules must not conclude on the first one.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/service/server_process.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::Context;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::testing::HasSubstr;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `debugplane-agent run` as a child process; its stderr goes to a file.
class AgentProcess {
 public:
  AgentProcess(const std::vector<std::string>& agent_args, const std::vector<std::string>& command,
               const fs::path& log)
      : log_(log) {
    std::vector<std::string> args = {DP_AGENT_BINARY, "run"};
    args.insert(args.end(), agent_args.begin(), agent_args.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~AgentProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  // The exit code, or -1 if it is still running after `timeout`.
  int Wait(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << "the agent did not exit; its log:\n" << ReadAll(log_);
    return -1;
  }
  std::string log() const { return ReadAll(log_); }

 private:
  fs::path log_;
  pid_t pid_ = -1;
};

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
    v1::CreateTrainingJobResponse created;
    grpc::Status status = server_.Stub()->CreateTrainingJob(Context().get(), request, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  v1::DescribeTrainingJobResponse Describe(const std::string& name) {
    v1::DescribeTrainingJobRequest request;
    request.set_training_job_name(name);
    v1::DescribeTrainingJobResponse job;
    grpc::Status status = server_.Stub()->DescribeTrainingJob(Context().get(), request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  template <typename Predicate>
  bool WaitUntil(Predicate done, absl::Duration timeout = absl::Seconds(30)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (done()) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
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
  ASSERT_TRUE(WaitUntil([&] {
    rule = Describe("ranks").debug_rule_evaluation_statuses(0);
    return rule.rule_evaluation_status() != v1::RuleEvaluationStatus::InProgress;
  })) << rule.DebugString();
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
  ASSERT_TRUE(WaitUntil([&] {
    rule = Describe("healthy").debug_rule_evaluation_statuses(0);
    return rule.rule_evaluation_status() != v1::RuleEvaluationStatus::InProgress;
  })) << rule.DebugString();
  EXPECT_EQ(rule.rule_evaluation_status(), v1::RuleEvaluationStatus::NoIssuesFound)
      << rule.status_details();
  EXPECT_THAT(rule.status_details(), HasSubstr("40 evaluations over 20 steps"));
  EXPECT_EQ(rule.last_evaluated_step(), 19);
}

}  // namespace
}  // namespace debugplane
