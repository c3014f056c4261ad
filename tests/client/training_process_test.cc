// The agent's child process (client/agent/training_process.h) and what the
// agent reports when it ends (client/agent/training_reports.h).

#include "client/agent/training_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "base/clock.h"
#include "client/agent/training_reports.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/wait_status.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::client {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using Event = v1::ReportTrainingStatusRequest;

TEST(TrainingProcessTest, SigkillFollowsWhenTheClockHasPassedTheGracePeriod) {
  debugplane::testing::ScopedTempDir dir;
  const std::string ready = (dir.path() / "ready").string();
  base::FakeClock clock;
  std::ostringstream log;
  TrainingProcess training(clock, absl::Seconds(10), log);
  // Ignores SIGTERM (sleep inherits that), and says when it does.
  ASSERT_TRUE(training
                  .Start({"/bin/sh", "-c", "trap '' TERM; touch \"$0\"; exec sleep 30", ready},
                         {"PATH=/usr/bin:/bin"})
                  .ok());
  for (int i = 0; i < 1000 && !std::filesystem::exists(ready); ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_TRUE(std::filesystem::exists(ready));
  const absl::Time ordered_at = clock.Now();
  training.Terminate(SIGTERM, "a stop order");
  EXPECT_TRUE(training.Running());
  // Only the clock ends the grace period: no real time passes here.
  clock.Advance(absl::Seconds(10));
  const TrainingExit exit = training.Wait();
  EXPECT_TRUE(WIFSIGNALED(exit.wait_status) && WTERMSIG(exit.wait_status) == SIGKILL);
  EXPECT_TRUE(exit.killed_after_grace);
  ASSERT_TRUE(exit.terminate_sent_at.has_value());
  EXPECT_EQ(*exit.terminate_sent_at, ordered_at);
  EXPECT_EQ(exit.exited_at, ordered_at + absl::Seconds(10));
  EXPECT_FALSE(training.Running());
  EXPECT_THAT(log.str(), HasSubstr("stopping the training command (SIGTERM"));
  EXPECT_THAT(log.str(), HasSubstr("did not exit within 10s of SIGTERM (signal 15); killing it"));
}

TEST(TrainingProcessTest, AnExitBeforeAnySignalIsTheCommandsOwn) {
  base::FakeClock clock;
  std::ostringstream log;
  TrainingProcess training(clock, absl::Seconds(10), log);
  ASSERT_TRUE(training.Start({"/bin/sh", "-c", "exit 3"}, {}).ok());
  const TrainingExit exit = training.Wait();
  EXPECT_EQ(exit.ExitCode(), 3);
  EXPECT_FALSE(exit.SignalReachedIt());
  EXPECT_FALSE(exit.Succeeded());
  training.Terminate(SIGTERM, "too late");  // A no-op after the exit.
  EXPECT_EQ(log.str(), "");
}

TEST(TrainingProcessTest, TheCommandGetsItsConfigurationButNotTheAgentsKey) {
  const char* const environment[] = {"DEBUGPLANE_TOKEN=AKID:secret", "HOME=/home/x",
                                     "SMDEBUG_CONFIG_FILE_PATH=/elsewhere", nullptr};
  const std::vector<std::string> result =
      TrainingEnvironment(environment, "/c/debughookconfig.json", "/c/profilerconfig.json", "job",
                          /*tensorboard_dir=*/"");
  EXPECT_THAT(result, Contains("HOME=/home/x"));
  EXPECT_THAT(result, Contains("SMDEBUG_CONFIG_FILE_PATH=/c/debughookconfig.json"));
  EXPECT_THAT(result, Contains("SMPROFILER_CONFIG_PATH=/c/profilerconfig.json"));
  EXPECT_THAT(result, Contains("DP_TRAINING_JOB_NAME=job"));
  EXPECT_THAT(result, Not(Contains("DEBUGPLANE_TOKEN=AKID:secret")));
  EXPECT_THAT(result, Not(Contains("SMDEBUG_CONFIG_FILE_PATH=/elsewhere")));
  EXPECT_THAT(result, Not(Contains(::testing::StartsWith("DP_TENSORBOARD_DIR="))));
  EXPECT_THAT(result, Not(Contains(::testing::StartsWith("TENSORBOARD_LOGGING_DIR="))));
}

// A job with TensorBoardOutputConfig: the training's TensorBoard writer is
// pointed at the agent's directory under debugplane's name and Hugging
// Face's, replacing what the agent inherited; without one, an inherited
// TENSORBOARD_LOGGING_DIR is the user's and stays.
TEST(TrainingProcessTest, ATensorBoardJobGetsItsLogDirectoryUnderBothNames) {
  const char* const environment[] = {"TENSORBOARD_LOGGING_DIR=/inherited",
                                     "DP_TENSORBOARD_DIR=/inherited", nullptr};
  const std::vector<std::string> result = TrainingEnvironment(
      environment, "/c/debughookconfig.json", "/c/profilerconfig.json", "job", "/runs/tb");
  EXPECT_THAT(result, Contains("DP_TENSORBOARD_DIR=/runs/tb"));
  EXPECT_THAT(result, Contains("TENSORBOARD_LOGGING_DIR=/runs/tb"));
  EXPECT_THAT(result, Not(Contains(::testing::EndsWith("=/inherited"))));

  const std::vector<std::string> without = TrainingEnvironment(
      environment, "/c/debughookconfig.json", "/c/profilerconfig.json", "job", "");
  EXPECT_THAT(without, Contains("TENSORBOARD_LOGGING_DIR=/inherited"));
}

using ::debugplane::client::testing::WaitStatusOf;

TEST(DescribeTrainingEndTest, EachCauseGetsItsEventAndExitCode) {
  const absl::Time start = absl::FromUnixSeconds(1700000000);
  const TrainingExit own_exit{.wait_status = WaitStatusOf(0), .exited_at = start};
  EndReport end = DescribeTrainingEnd(own_exit, {}, absl::Seconds(10));
  EXPECT_EQ(end.event, Event::EVENT_COMPLETED);
  EXPECT_EQ(end.exit_code, 0);

  const TrainingExit terminated{.wait_status = WaitStatusOf(0, SIGTERM),
                                .exited_at = start + absl::Seconds(1),
                                .terminate_sent_at = start};
  end = DescribeTrainingEnd(terminated, {.agent_signal = SIGINT}, absl::Seconds(10));
  EXPECT_EQ(end.event, Event::EVENT_FAILED);
  EXPECT_EQ(end.exit_code, 128 + SIGINT);
  EXPECT_THAT(end.message, HasSubstr("debugplane-agent received SIGINT"));

  end = DescribeTrainingEnd(terminated, {.stop_ordered = true}, absl::Seconds(10));
  EXPECT_EQ(end.event, Event::EVENT_STOPPED);
  EXPECT_EQ(end.exit_code, 128 + SIGTERM);
  EXPECT_THAT(end.log_line, HasSubstr("the training command was stopped: "));

  // A deleted job has nobody to tell.
  end = DescribeTrainingEnd(terminated, {.stop_ordered = true, .job_deleted = true},
                            absl::Seconds(10));
  EXPECT_FALSE(end.event.has_value());
}

}  // namespace
}  // namespace debugplane::client
