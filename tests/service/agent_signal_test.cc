// SIGTERM to the real `debugplane-agent` (what a service manager or a test
// harness sends to stop it) ends its training command too: the signal goes
// to the command's process group, SIGKILL after --stop-grace, the exit is
// reported and the agent exits with 128 + 15. Before the fix, a gRPC thread
// could take the signal and the agent died at once, leaving the training
// running as an orphan.

#include <signal.h>
#include <sys/types.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
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
using ::debugplane::testing::MinimalJob;
using ::debugplane::testing::ReadFile;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;

bool ProcessExists(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

class AgentSignalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::Status status = CreateJob(
        *server_.Stub(), MinimalJob(kJob, data_.path() / "tensors", data_.path() / "profiler"));
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  void TearDown() override {
    // The old agent left it running: do not leave it behind the test.
    if (training_pid_ > 0 && ProcessExists(training_pid_)) kill(training_pid_, SIGKILL);
  }

  // Starts the agent around a long training (which ignores SIGTERM if
  // `ignore_term`), waits until it trains and returns the agent; the
  // training's pid is in training_pid_.
  std::unique_ptr<AgentProcess> StartTraining(bool ignore_term) {
    const fs::path pid_file = data_.path() / "training.pid";
    std::vector<std::string> command = {
        DP_FAKE_TRAINING_BINARY, "--steps", "100000", "--step-ms", "20", "--pid-file",
        pid_file.string()};
    if (ignore_term) command.push_back("--ignore-term");
    auto agent = std::make_unique<AgentProcess>(
        std::vector<std::string>{"--server", server_.address(), "--job", kJob, "--config-dir",
                                 (data_.path() / "config").string(), "--allow-write",
                                 data_.path().string(), "--stop-grace", "1"},
        command, data_.path() / "agent.log");
    EXPECT_TRUE(WaitUntil([&] {
      return DescribeJob(*server_.Stub(), kJob).secondary_status() ==
                 v1::SecondaryStatus::Training &&
             fs::exists(pid_file);
    })) << agent->log();
    int pid = 0;
    EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(pid_file)), &pid))
        << ReadFile(pid_file);
    training_pid_ = pid;
    return agent;
  }

  static constexpr char kJob[] = "signalled";
  ScopedTempDir data_;
  ServerProcess server_{data_.path()};
  pid_t training_pid_ = 0;
};

TEST_F(AgentSignalTest, SigtermToTheAgentEndsTheTrainingAndReportsItsEnd) {
  std::unique_ptr<AgentProcess> agent = StartTraining(/*ignore_term=*/false);
  ASSERT_GT(training_pid_, 0);
  ASSERT_TRUE(ProcessExists(training_pid_));

  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(30)), 128 + SIGTERM) << agent->log();
  // The agent waited for the training (and reaped it) before it exited.
  EXPECT_FALSE(ProcessExists(training_pid_)) << agent->log();
  const v1::DescribeTrainingJobResponse job = DescribeJob(*server_.Stub(), kJob);
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Failed) << job.DebugString();
  EXPECT_EQ(job.failure_reason().rfind(
                "debugplane-agent received SIGTERM (signal 15) and passed it on to the training "
                "command, which was ended by signal 15 (Terminated)",
                0),
            0u)
      << job.failure_reason();
  EXPECT_TRUE(job.has_training_end_time());
}

TEST_F(AgentSignalTest, ATrainingThatIgnoresTheSignalIsKilledAfterTheGracePeriod) {
  std::unique_ptr<AgentProcess> agent = StartTraining(/*ignore_term=*/true);
  ASSERT_GT(training_pid_, 0);

  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(30)), 128 + SIGTERM) << agent->log();
  EXPECT_FALSE(ProcessExists(training_pid_)) << agent->log();
  const v1::DescribeTrainingJobResponse job = DescribeJob(*server_.Stub(), kJob);
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Failed) << job.DebugString();
  EXPECT_THAT(job.failure_reason(),
              HasSubstr("did not exit within the 1s grace period and was killed (SIGKILL, "
                        "signal 9)"));
  EXPECT_THAT(agent->log(), HasSubstr("killing it"));
}

}  // namespace
}  // namespace debugplane
