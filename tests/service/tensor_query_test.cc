// TensorQueryService and the `tensors`/`tensor` commands against the real
// server, with a fixture trial under the server's data directory and one in
// object storage (moto).

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/tensor_query.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/scoped_temp_dir.h"
#include "tests/objectstore/s3_test_server.h"
#include "tests/service/run_command.h"
#include "tests/service/server_process.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::Context;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kLoss[] = "CrossEntropyLoss_output_0";
const fs::path kOverfit = fs::path(DP_TEST_DATA_DIR) / "smdebug" / "overfit";

void CreateJob(ServerProcess& server, const std::string& name, const std::string& tensors) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_debug_hook_config()->set_s3_output_path(tensors);
  v1::CreateTrainingJobResponse response;
  grpc::Status status = server.Stub()->CreateTrainingJob(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
}

std::vector<v1::TensorPoint> ReadValues(v1::TensorQueryService::Stub& stub,
                                        const v1::GetTensorValuesRequest& request,
                                        grpc::Status* status) {
  auto context = Context(30);
  auto reader = stub.GetTensorValues(context.get(), request);
  std::vector<v1::TensorPoint> points;
  v1::TensorValuesResponse batch;
  while (reader->Read(&batch))
    points.insert(points.end(), batch.points().begin(), batch.points().end());
  *status = reader->Finish();
  return points;
}

using CliResult = ::debugplane::testing::CommandResult;

CliResult RunCli(const std::string& server, const std::string& args) {
  return ::debugplane::testing::RunCommand(
      absl::StrCat(DP_CLI_BINARY, " --server ", server, " --timeout 30 ", args));
}

class TensorQueryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy(kOverfit, dir_.path() / "overfit", fs::copy_options::recursive);
    server_ = std::make_unique<ServerProcess>(dir_.path());
    CreateJob(*server_, "overfit-job", (dir_.path() / "overfit").string());
    stub_ = v1::TensorQueryService::NewStub(server_->Channel());
  }
  ScopedTempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::TensorQueryService::Stub> stub_;
};

TEST_F(TensorQueryTest, ListTensorsNamesTheLossWithItsModes) {
  v1::ListTensorsRequest request;
  request.set_training_job_name("overfit-job");
  v1::ListTensorsResponse response;
  grpc::Status status = stub_->ListTensors(Context(30).get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.tensors_size(), 1);
  EXPECT_EQ(response.tensors(0).tensor_name(), kLoss);
  EXPECT_EQ(response.tensors(0).dtype(), "float32");
  ASSERT_EQ(response.tensors(0).modes_size(), 2);
  EXPECT_EQ(response.tensors(0).modes(0).mode(), v1::TensorMode::TRAIN);
  EXPECT_EQ(response.tensors(0).modes(1).mode(), v1::TensorMode::EVAL);
  EXPECT_EQ(response.tensors(0).modes(0).step_count() + response.tensors(0).modes(1).step_count(),
            response.step_count());
  EXPECT_EQ(response.trial_path(), (dir_.path() / "overfit").string());
}

TEST_F(TensorQueryTest, ValuesStreamPerModeAndBucketToMaxPoints) {
  v1::GetTensorValuesRequest request;
  request.set_training_job_name("overfit-job");
  request.set_tensor_name(kLoss);
  grpc::Status status;
  std::vector<v1::TensorPoint> all = ReadValues(*stub_, request, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(all.size(), 220u);  // Every step of the fixture (index files).
  request.set_mode(v1::TensorMode::EVAL);
  request.set_max_points(5);
  std::vector<v1::TensorPoint> eval = ReadValues(*stub_, request, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_LE(eval.size(), 5u);
  ASSERT_GE(eval.size(), 3u);
  double hi = -1e300;
  double expected_hi = -1e300;
  for (const auto& p : all) {
    if (p.mode() == v1::TensorMode::EVAL) expected_hi = std::max(expected_hi, p.value());
  }
  for (const auto& p : eval) {
    EXPECT_EQ(p.mode(), v1::TensorMode::EVAL);
    hi = std::max(hi, p.max());
  }
  EXPECT_EQ(hi, expected_hi);
}

TEST_F(TensorQueryTest, ErrorsNameTheFieldOrWhatExists) {
  v1::GetTensorValuesRequest request;
  request.set_training_job_name("no-such-job");
  request.set_tensor_name(kLoss);
  grpc::Status status;
  ReadValues(*stub_, request, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("overfit-job"));
  request.set_training_job_name("overfit-job");
  request.set_tensor_name("nope");
  ReadValues(*stub_, request, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr(kLoss));
  request.set_tensor_name(kLoss);
  request.set_max_points(0);
  ReadValues(*stub_, request, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("MaxPoints"));
  request.clear_max_points();
  request.set_start_step(10);
  request.set_end_step(5);
  ReadValues(*stub_, request, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("EndStep"));

  CreateJob(*server_, "empty-job", (dir_.path() / "not-yet").string());
  v1::ListTensorsRequest list;
  list.set_training_job_name("empty-job");
  v1::ListTensorsResponse response;
  status = stub_->ListTensors(Context(30).get(), list, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr((dir_.path() / "not-yet").string()));
}

TEST_F(TensorQueryTest, TheCliPrintsATableAndValueLines) {
  CliResult table = RunCli(server_->address(), "tensors overfit-job");
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_THAT(table.out, HasSubstr("NAME"));
  EXPECT_THAT(table.out, HasSubstr(kLoss));
  EXPECT_THAT(table.out, HasSubstr("float32[]"));
  std::cout << table.out;
  CliResult json = RunCli(server_->address(), "tensors overfit-job -o json");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  EXPECT_EQ(nlohmann::json::parse(json.out)["Tensors"][0]["TensorName"], kLoss);

  CliResult lines =
      RunCli(server_->address(), absl::StrCat("tensor overfit-job ", kLoss, " --steps 0:9"));
  ASSERT_EQ(lines.exit_code, 0) << lines.out;
  std::cout << lines.out;
  EXPECT_EQ(std::count(lines.out.begin(), lines.out.end(), '\n'), 10);
  EXPECT_THAT(lines.out, HasSubstr("TRAIN"));
  CliResult ndjson = RunCli(server_->address(),
                            absl::StrCat("tensor overfit-job ", kLoss, " --mode eval -o json"));
  ASSERT_EQ(ndjson.exit_code, 0) << ndjson.out;
  std::istringstream in(ndjson.out);
  std::string line;
  int count = 0;
  while (std::getline(in, line)) {
    EXPECT_EQ(nlohmann::json::parse(line)["Mode"], "EVAL");
    ++count;
  }
  EXPECT_GT(count, 0);
  EXPECT_EQ(RunCli(server_->address(), absl::StrCat("tensor overfit-job nope")).exit_code, 4);
  EXPECT_EQ(RunCli(server_->address(), absl::StrCat("tensor overfit-job ", kLoss, " --steps 9:1"))
                .exit_code,
            2);
}

// The server reads s3:// with the AWS CLI's environment: set it for the
// server process this test starts (restored afterwards).
class ScopedEnv {
 public:
  void Set(const char* name, const std::string& value) {
    const char* old = getenv(name);
    saved_.emplace_back(name, old == nullptr ? std::nullopt : std::optional<std::string>(old));
    setenv(name, value.c_str(), 1);
  }
  void Unset(const char* name) {
    const char* old = getenv(name);
    saved_.emplace_back(name, old == nullptr ? std::nullopt : std::optional<std::string>(old));
    unsetenv(name);
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        unsetenv(it->first.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(TensorQueryObjectStorageTest, AnS3TrialIsQueriedLikeALocalOne) {
  constexpr char kBucket[] = "training-output";
  absl::StatusOr<std::unique_ptr<testing::S3TestServer>> s3 =
      testing::S3TestServer::Start({.buckets = {kBucket}});
  ASSERT_TRUE(s3.ok()) << s3.status();
  for (const auto& entry : fs::recursive_directory_iterator(kOverfit)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream content;
    content << in.rdbuf();
    absl::Status put = (*s3)->Put(
        kBucket, absl::StrCat("jobs/overfit/", fs::relative(entry.path(), kOverfit).string()),
        content.str());
    ASSERT_TRUE(put.ok()) << put;
  }
  ScopedTempDir dir;
  ScopedEnv env;
  env.Set("AWS_ENDPOINT_URL_S3", (*s3)->endpoint());
  env.Set("AWS_REGION", "us-east-1");
  env.Set("AWS_ACCESS_KEY_ID", (*s3)->access_key_id());
  env.Set("AWS_SECRET_ACCESS_KEY", (*s3)->secret_access_key());
  env.Set("AWS_SHARED_CREDENTIALS_FILE", (dir.path() / "no-credentials").string());
  env.Set("AWS_CONFIG_FILE", (dir.path() / "no-config").string());
  env.Unset("AWS_SESSION_TOKEN");
  env.Unset("AWS_PROFILE");
  env.Unset("AWS_ENDPOINT_URL");
  ServerProcess server(dir.path());
  CreateJob(server, "s3-job", absl::StrCat("s3://", kBucket, "/jobs/overfit"));
  auto stub = v1::TensorQueryService::NewStub(server.Channel());

  v1::ListTensorsRequest list;
  list.set_training_job_name("s3-job");
  v1::ListTensorsResponse listing;
  grpc::Status status = stub->ListTensors(Context(60).get(), list, &listing);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(listing.tensors_size(), 1);
  EXPECT_EQ(listing.tensors(0).tensor_name(), kLoss);
  EXPECT_THAT(listing.trial_path(), HasSubstr("s3://training-output/jobs/overfit"));

  // The same values as the local copy of the fixture.
  fs::copy(kOverfit, dir.path() / "overfit", fs::copy_options::recursive);
  CreateJob(server, "local-job", (dir.path() / "overfit").string());
  v1::GetTensorValuesRequest request;
  request.set_training_job_name("s3-job");
  request.set_tensor_name(kLoss);
  std::vector<v1::TensorPoint> remote = ReadValues(*stub, request, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  request.set_training_job_name("local-job");
  std::vector<v1::TensorPoint> local = ReadValues(*stub, request, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(remote.size(), local.size());
  ASSERT_FALSE(remote.empty());
  for (size_t i = 0; i < remote.size(); ++i) {
    EXPECT_EQ(remote[i].step(), local[i].step());
    EXPECT_EQ(remote[i].value(), local[i].value());
  }
}

// A job whose only trial is its TensorBoard logs (issue 24): Hugging Face's
// tags are its tensors, the TRAIN and EVAL tags of the loss share a series,
// and the CLI prints them.
TEST(TensorBoardTensorQueryTest, TagsOfAHuggingFaceRunAreServedAsTensors) {
  ScopedTempDir dir;
  const fs::path logs = dir.path() / "hf" / "tb";
  fs::create_directories(logs);
  fs::copy(fs::path(DP_TEST_DATA_DIR) / "frameworks" / "hf-trainer-overfit" / "tb", logs,
           fs::copy_options::recursive);
  ServerProcess server(dir.path());
  v1::CreateTrainingJobRequest create;
  create.set_training_job_name("hf-job");
  create.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  create.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  create.mutable_tensor_board_output_config()->set_s3_output_path(logs.string());
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(server.Stub()->CreateTrainingJob(Context().get(), create, &created).ok());
  auto stub = v1::TensorQueryService::NewStub(server.Channel());

  v1::ListTensorsRequest list;
  list.set_training_job_name("hf-job");
  v1::ListTensorsResponse listing;
  grpc::Status status = stub->ListTensors(Context(30).get(), list, &listing);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::map<std::string, v1::TensorSummary> tensors;
  for (const auto& t : listing.tensors()) tensors[t.tensor_name()] = t;
  ASSERT_EQ(tensors.count("train/loss"), 1u);
  ASSERT_EQ(tensors.count("eval/loss"), 1u);
  EXPECT_EQ(tensors["train/loss"].series_name(), "loss");
  EXPECT_EQ(tensors["eval/loss"].series_name(), "loss");
  EXPECT_EQ(tensors["eval/loss"].modes(0).mode(), v1::TensorMode::EVAL);
  EXPECT_EQ(listing.trial_path(), logs.string());

  v1::GetTensorValuesRequest values;
  values.set_training_job_name("hf-job");
  values.set_tensor_name("eval/loss");
  std::vector<v1::TensorPoint> points = ReadValues(*stub, values, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_GE(points.size(), 2u);
  // The run overfits: its eval loss ends higher than it starts (6.2 -> 8.2).
  EXPECT_GT(points.back().value(), points.front().value());

  CliResult table = RunCli(server.address(), "tensors hf-job");
  EXPECT_EQ(table.exit_code, 0) << table.out;
  EXPECT_THAT(table.out, AllOf(HasSubstr("train/grad_norm"), HasSubstr("eval/loss")));
  CliResult one = RunCli(server.address(), "tensor hf-job train/loss --steps 0:20");
  EXPECT_EQ(one.exit_code, 0) << one.out;
  EXPECT_THAT(one.out, HasSubstr("TRAIN"));
}

}  // namespace
}  // namespace debugplane
