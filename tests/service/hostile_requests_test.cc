// Hostile requests through the real gRPC stack (issue 16): JSON nested
// 100,000 levels deep and regular expressions that made std::regex overflow
// the stack are refused naming the field, and the server keeps answering.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/service/field_violations.h"
#include "tests/service/server_process.h"

namespace debugplane {
namespace {

using ::debugplane::testing::Context;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kDetailedField[] = "ProfilerConfig.ProfilingParameters.DetailedProfilingConfig";

std::string NestedArrays(int levels, absl::string_view inner = "1") {
  return absl::StrCat(std::string(levels, '['), inner, std::string(levels, ']'));
}

std::string DeepProfilingConfig(int levels) {
  return absl::StrCat("{\"StartStep\": ", NestedArrays(levels), "}");
}

std::string NestedGroupsLookahead(int levels) {
  return absl::StrCat("(?=", std::string(levels, '('), "a", std::string(levels, ')'), ")");
}

v1::CreateTrainingJobRequest ValidCreate(const std::string& name) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_algorithm_specification()->set_training_input_mode("File");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
  request.mutable_debug_hook_config()->set_s3_output_path("s3://bucket/debug-output");
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("Exploding");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
  return request;
}

// "field: description" for each violation in the status details.
std::vector<std::string> Violations(const grpc::Status& status) {
  std::vector<std::string> out;
  for (const auto& v : ::debugplane::testing::FieldViolations(status)) {
    out.push_back(absl::StrCat(v.field(), ": ", v.description()));
  }
  return out;
}

class HostileRequestsTest : public ::testing::Test {
 protected:
  void ExpectServing() {
    ASSERT_TRUE(server_.running()) << "the server died";
    auto health = grpc::health::v1::Health::NewStub(server_.Channel());
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    ASSERT_TRUE(health->Check(Context().get(), request, &response).ok());
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }

  grpc::Status Create(const v1::CreateTrainingJobRequest& request) {
    v1::CreateTrainingJobResponse response;
    return stub_->CreateTrainingJob(Context().get(), request, &response);
  }

  ScopedTempDir dir_;
  ServerProcess server_{dir_.path()};
  std::unique_ptr<v1::TrainingJobService::Stub> stub_ = server_.Stub();
};

TEST_F(HostileRequestsTest, DeeplyNestedProfilingConfigAtCreateAndUpdate) {
  v1::CreateTrainingJobRequest create = ValidCreate("nested");
  (*create.mutable_profiler_config()->mutable_profiling_parameters())["DetailedProfilingConfig"] =
      DeepProfilingConfig(100000);
  grpc::Status status = Create(create);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(Violations(status), ElementsAre(absl::StrCat(kDetailedField,
                                                           ": has a value of 200016 characters; at "
                                                           "most 256 are allowed")));
  ExpectServing();

  // The same on a running job's update.
  create.mutable_profiler_config()->clear_profiling_parameters();
  ASSERT_TRUE(Create(create).ok());
  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("nested");
  auto& parameters = *update.mutable_profiler_config()->mutable_profiling_parameters();
  for (int levels : {100000, 120}) {
    parameters["DetailedProfilingConfig"] = DeepProfilingConfig(levels);
    v1::UpdateTrainingJobResponse updated;
    status = stub_->UpdateTrainingJob(Context().get(), update, &updated);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << levels;
    EXPECT_THAT(Violations(status), ElementsAre(HasSubstr(kDetailedField))) << levels;
    ExpectServing();
  }
}

TEST_F(HostileRequestsTest, DeeplyNestedActionJson) {
  v1::CreateTrainingJobRequest create = ValidCreate("actions");
  auto& parameters = *create.mutable_debug_rule_configurations(0)->mutable_rule_parameters();
  for (int levels : {100000, 100}) {
    parameters["action_json"] = NestedArrays(levels, R"({"name": "stoptraining"})");
    const grpc::Status status = Create(create);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << levels;
    EXPECT_THAT(Violations(status),
                ElementsAre(HasSubstr("DebugRuleConfigurations[0].RuleParameters.action_json: ")))
        << levels;
    ExpectServing();
  }
}

TEST_F(HostileRequestsTest, RegexesRe2RefusesAreRefusedNamingTheParameter) {
  v1::CreateTrainingJobRequest create = ValidCreate("regex");
  auto& parameters = *create.mutable_debug_rule_configurations(0)->mutable_rule_parameters();
  // Within the value length: RE2's reason, naming the parameter.
  parameters["tensor_regex"] = NestedGroupsLookahead(120);
  grpc::Status status = Create(create);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(Violations(status),
              ElementsAre(AllOf(HasSubstr("DebugRuleConfigurations[0].RuleParameters: "
                                          "ExplodingTensor: parameter 'tensor_regex' has an "
                                          "invalid regular expression"),
                                HasSubstr("invalid perl operator: (?="))));
  ExpectServing();
  // 20 KB of nested groups: refused for its length, never compiled.
  for (int i = 0; i < 20; ++i) {
    parameters["tensor_regex"] = absl::StrCat(i, NestedGroupsLookahead(10000));
    status = Create(create);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(Violations(status),
                ElementsAre(HasSubstr("RuleParameters.tensor_regex: has a value of ")));
  }
  ExpectServing();
  // smdebug's own lookahead pattern is accepted.
  parameters["tensor_regex"] = "^(?!gradient).*weight";
  EXPECT_TRUE(Create(create).ok());
}

}  // namespace
}  // namespace debugplane
