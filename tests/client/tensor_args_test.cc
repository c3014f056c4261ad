// The request `debugplane tensor` sends for its flags.

#include "client/cli/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::client {
namespace {

using ::testing::HasSubstr;

v1::GetTensorValuesRequest Build(const std::string& steps, const std::string& mode = "") {
  TensorArgs args{.name = "job", .tensor = "loss", .steps = steps, .mode = mode};
  absl::StatusOr<v1::GetTensorValuesRequest> request = BuildTensorValuesRequest(args);
  EXPECT_TRUE(request.ok()) << request.status();
  return request.ok() ? *request : v1::GetTensorValuesRequest();
}

TEST(TensorArgsTest, StepRangesMapToStartAndEnd) {
  v1::GetTensorValuesRequest range = Build("5:9");
  EXPECT_EQ(range.start_step(), 5);
  EXPECT_EQ(range.end_step(), 9);
  v1::GetTensorValuesRequest open_end = Build("5:");
  EXPECT_EQ(open_end.start_step(), 5);
  EXPECT_FALSE(open_end.has_end_step());
  v1::GetTensorValuesRequest to = Build(":7");
  EXPECT_EQ(to.start_step(), 0);
  EXPECT_EQ(to.end_step(), 7);
  v1::GetTensorValuesRequest one = Build("4");
  EXPECT_EQ(one.start_step(), 4);
  EXPECT_EQ(one.end_step(), 4);
  EXPECT_EQ(Build("", "eval").mode(), v1::TensorMode::EVAL);
  EXPECT_EQ(Build("").mode(), v1::TensorMode::TENSOR_MODE_UNSPECIFIED);
}

TEST(TensorArgsTest, BadStepsAndModesNameTheFlag) {
  for (const char* steps : {"9:1", "a:b", "-1:3", "1:2:3"}) {
    absl::StatusOr<v1::GetTensorValuesRequest> request =
        BuildTensorValuesRequest(TensorArgs{.name = "j", .tensor = "t", .steps = steps});
    ASSERT_FALSE(request.ok()) << steps;
    EXPECT_THAT(request.status().message(), HasSubstr("--steps")) << steps;
  }
  absl::StatusOr<v1::GetTensorValuesRequest> request =
      BuildTensorValuesRequest(TensorArgs{.name = "j", .tensor = "t", .mode = "test"});
  ASSERT_FALSE(request.ok());
  EXPECT_THAT(request.status().message(), HasSubstr("--mode"));
}

}  // namespace
}  // namespace debugplane::client
