// The agent's words for how a stopped command ended (the Stopped
// transition's StatusMessage, or the FailureReason after a signal to the
// agent), from real exit statuses.

#include "client/agent/agent.h"
#include "client/agent/training_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/wait_status.h"

namespace debugplane::client {
namespace {

using ::testing::HasSubstr;

using ::debugplane::client::testing::WaitStatusOf;

TEST(AgentTest, AStoppedCommandsExitSaysHowAndWhen) {
  EXPECT_EQ(DescribeStoppedExit(WaitStatusOf(0), false, absl::Milliseconds(420), absl::Seconds(10)),
            "the training command exited with code 0 after SIGTERM (signal 15), 0.4 s after the "
            "stop order");
  EXPECT_EQ(
      DescribeStoppedExit(WaitStatusOf(0, SIGTERM), false, absl::Seconds(1), absl::Seconds(10)),
      "the training command was ended by signal 15 (Terminated) after SIGTERM (signal 15), 1.0 s "
      "after the stop order");
  EXPECT_EQ(
      DescribeStoppedExit(WaitStatusOf(0, SIGKILL), true, absl::Seconds(10), absl::Seconds(10)),
      "the training command did not exit within the 10s grace period after SIGTERM and was "
      "killed (SIGKILL, signal 9), 10.0 s after the stop order");
  // Killed by someone else, not by the agent's SIGKILL.
  EXPECT_THAT(
      DescribeStoppedExit(WaitStatusOf(0, SIGKILL), false, absl::Seconds(2), absl::Seconds(10)),
      HasSubstr("was ended by signal 9 (Killed)"));
}

TEST(AgentTest, AnExitAfterASignalToTheAgentSaysWhichSignalAndHowItEnded) {
  EXPECT_EQ(DescribeExitAfterAgentSignal(SIGTERM, WaitStatusOf(0, SIGTERM), false,
                                         absl::Milliseconds(30), absl::Seconds(10)),
            "debugplane-agent received SIGTERM (signal 15) and passed it on to the training "
            "command, which was ended by signal 15 (Terminated) 0.0 s later");
  EXPECT_EQ(DescribeExitAfterAgentSignal(SIGINT, WaitStatusOf(1), false, absl::Milliseconds(300),
                                         absl::Seconds(10)),
            "debugplane-agent received SIGINT (signal 2) and passed it on to the training "
            "command, which exited with code 1 0.3 s later");
  EXPECT_EQ(DescribeExitAfterAgentSignal(SIGTERM, WaitStatusOf(0, SIGKILL), true, absl::Seconds(1),
                                         absl::Seconds(1)),
            "debugplane-agent received SIGTERM (signal 15) and passed it on to the training "
            "command, which did not exit within the 1s grace period and was killed (SIGKILL, "
            "signal 9), 1.0 s later");
}

}  // namespace
}  // namespace debugplane::client
