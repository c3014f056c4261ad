// TrainingJobManager::UpdateTrainingJob answers with Warnings for profiling
// changes the training frameworks cannot apply while the job runs, and still
// applies the update (the warnings' content: validation_test.cc).

#include <string>

#include "core/manager/training_job_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"

namespace debugplane::core {
namespace {

using ::debugplane::testing::CallSync;
using ::debugplane::testing::ScopedTempDir;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using H = TrainingJobHandler;

constexpr char kSteps[] = R"({"StartStep": 5, "NumSteps": 2})";

class UpdateTrainingJobWarningsManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto manager = testing::OpenTestManager(dir_.path());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);

    v1::CreateTrainingJobRequest create;
    create.set_training_job_name("MLP-Upper");
    create.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
    create.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
    create.mutable_profiler_config()->set_s3_output_path("s3://bucket/profiler");
    (*create.mutable_profiler_config()->mutable_profiling_parameters())["DetailedProfilingConfig"] =
        kSteps;
    auto created =
        CallSync<v1::CreateTrainingJobResponse>(*manager_, &H::CreateTrainingJob, create);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  absl::StatusOr<v1::UpdateTrainingJobResponse> UpdateParameter(const std::string& key,
                                                                const std::string& value) {
    v1::UpdateTrainingJobRequest update;
    update.set_training_job_name("MLP-Upper");
    (*update.mutable_profiler_config()->mutable_profiling_parameters())[key] = value;
    return CallSync<v1::UpdateTrainingJobResponse>(*manager_, &H::UpdateTrainingJob, update);
  }

  ScopedTempDir dir_;
  std::unique_ptr<TrainingJobManager> manager_;
};

TEST_F(UpdateTrainingJobWarningsManagerTest, AMidRunPythonProfilingConfigIsAppliedWithAWarning) {
  auto updated = UpdateParameter("PythonProfilingConfig", kSteps);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->training_job_arn(),
            "arn:aws:sagemaker:local:000000000000:training-job/MLP-Upper");
  ASSERT_EQ(updated->warnings_size(), 1);
  EXPECT_THAT(updated->warnings(0),
              HasSubstr("ProfilerConfig.ProfilingParameters.PythonProfilingConfig: smdebug"));

  // A warning, not a refusal: the job has the new configuration.
  v1::DescribeTrainingJobRequest describe;
  describe.set_training_job_name("MLP-Upper");
  auto job =
      CallSync<v1::DescribeTrainingJobResponse>(*manager_, &H::DescribeTrainingJob, describe);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->profiler_config().profiling_parameters().at("PythonProfilingConfig"), kSteps);
  EXPECT_EQ(job->config_version(), 2);
}

TEST_F(UpdateTrainingJobWarningsManagerTest, TheJobsCurrentValueIsNoChange) {
  // DetailedProfilingConfig was set at CreateTrainingJob: sending it again
  // changes nothing in the training process.
  auto same = UpdateParameter("DetailedProfilingConfig", kSteps);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_THAT(same->warnings(), IsEmpty());

  auto changed = UpdateParameter("DetailedProfilingConfig", R"({"StartStep": 50})");
  ASSERT_TRUE(changed.ok()) << changed.status();
  ASSERT_EQ(changed->warnings_size(), 1);
  EXPECT_THAT(changed->warnings(0), HasSubstr(".DetailedProfilingConfig: "));

  auto interval = UpdateParameter("RotateMaxFileSizeInBytes", "1048576");
  ASSERT_TRUE(interval.ok()) << interval.status();
  EXPECT_THAT(interval->warnings(), IsEmpty());
}

}  // namespace
}  // namespace debugplane::core
