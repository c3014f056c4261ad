// Where the agent points a job's TensorBoard writer (issue 24): the job's
// local TensorBoardOutputConfig.S3OutputPath, else its LocalPath, else the
// agent's state directory, inside the agent's write confinement, and only
// for a job that has a TensorBoardOutputConfig.

#include <filesystem>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "client/agent/training_config_writer.h"
#include "client/agent/write_confinement.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::client {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;
using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class TensorBoardPathsTest : public ::testing::Test {
 protected:
  fs::path allowed() const { return dir_.path() / "allowed"; }

  absl::StatusOr<TrainingPaths> Choose(const v1::ConnectAgentResponse& directive) {
    absl::StatusOr<WriteConfinement> confinement =
        WriteConfinement::Create({{allowed().string(), "--allow-write"}});
    EXPECT_TRUE(confinement.ok()) << confinement.status();
    TrainingPathFlags flags;
    flags.job = "tb-job";
    // Tensors and profiler output in the confinement: only TensorBoard's
    // choice is under test.
    flags.tensor_dir = (allowed() / "tensors").string();
    flags.profiler_dir = (allowed() / "profiler").string();
    flags.config_dir = (allowed() / "config").string();
    log_.str("");
    return ChooseTrainingPaths(flags, *confinement, directive, log_);
  }

  ScopedTempDir dir_;
  std::ostringstream log_;
};

TEST_F(TensorBoardPathsTest, ALocalS3OutputPathIsWhereTheTrainingWritesAndIsCreated) {
  v1::ConnectAgentResponse directive;
  const fs::path logs = allowed() / "jobs" / "tb";
  directive.mutable_tensor_board_output_config()->set_s3_output_path("file://" + logs.string());
  directive.mutable_tensor_board_output_config()->set_local_path("/opt/ml/output/tensorboard");
  absl::StatusOr<TrainingPaths> paths = Choose(directive);
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_EQ(paths->tensorboard_dir, logs.string());
  EXPECT_TRUE(fs::is_directory(logs));
  EXPECT_THAT(log_.str(), AllOf(HasSubstr("TensorBoard logs in " + logs.string()),
                                HasSubstr("DP_TENSORBOARD_DIR")));
}

TEST_F(TensorBoardPathsTest, AnS3JobWritesToItsLocalPathElseTheStateDirectory) {
  v1::ConnectAgentResponse directive;
  directive.mutable_tensor_board_output_config()->set_s3_output_path("s3://bucket/tb");
  const fs::path local = allowed() / "opt" / "tensorboard";
  directive.mutable_tensor_board_output_config()->set_local_path(local.string());
  absl::StatusOr<TrainingPaths> paths = Choose(directive);
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_EQ(paths->tensorboard_dir, local.string());

  directive.mutable_tensor_board_output_config()->clear_local_path();
  paths = Choose(directive);
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_THAT(paths->tensorboard_dir, EndsWith("/debugplane-agent/tb-job/tensorboard"));
}

TEST_F(TensorBoardPathsTest, AJobWithoutTensorBoardOutputConfigGetsNoDirectory) {
  absl::StatusOr<TrainingPaths> paths = Choose(v1::ConnectAgentResponse());
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_THAT(paths->tensorboard_dir, IsEmpty());
  EXPECT_THAT(log_.str(), ::testing::Not(HasSubstr("TensorBoard")));
}

TEST_F(TensorBoardPathsTest, ALocalPathOutsideTheConfinementIsRefusedNamingTheField) {
  v1::ConnectAgentResponse directive;
  directive.mutable_tensor_board_output_config()->set_s3_output_path("s3://bucket/tb");
  const fs::path outside = dir_.path() / "outside" / "tb";
  directive.mutable_tensor_board_output_config()->set_local_path(outside.string());
  absl::StatusOr<TrainingPaths> paths = Choose(directive);
  ASSERT_FALSE(paths.ok());
  EXPECT_EQ(paths.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(paths.status().message(),
              AllOf(HasSubstr("TensorBoardOutputConfig.LocalPath " + outside.string()),
                    HasSubstr("--allow-write")));
  EXPECT_FALSE(fs::exists(outside));
}

}  // namespace
}  // namespace debugplane::client
