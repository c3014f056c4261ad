// The SageMaker protocol over a real job manager (SQLite in a temporary
// directory), with no network: requests go straight to Handle() and the
// replies are captured. The end-to-end tests with boto3 and the AWS CLI are
// in sagemaker_clients_test.cc.

#include "service/http/sagemaker_protocol.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/auth/credential_authenticator.h"
#include "service/auth/credential_store.h"
#include "service/http/sagemaker_json.h"
#include "tests/core/test_util.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/support/wait_until.h"

namespace debugplane::service::http {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

std::string TemplateJson(const std::string& name) {
  std::ifstream in(std::string(DP_TEST_DATA_DIR) + "/sagemaker/create-training-job-template.jsonc");
  std::stringstream doc;
  doc << in.rdbuf();
  std::string text;
  for (absl::string_view line : absl::StrSplit(doc.str(), '\n')) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "//")) continue;
    absl::StrAppend(&text, line, "\n");
  }
  Json job = Json::parse(text);
  job["TrainingJobName"] = name;
  return job.dump();
}

// The reply, once the protocol answered (possibly from a core thread).
struct Captured {
  absl::Mutex mu;
  std::optional<HttpResponse> response ABSL_GUARDED_BY(mu);
};

class CapturingResponder final : public HttpResponder {
 public:
  explicit CapturingResponder(std::shared_ptr<Captured> out) : out_(std::move(out)) {}
  void Respond(HttpResponse response) override {
    absl::MutexLock lock(&out_->mu);
    out_->response = std::move(response);
  }

 private:
  std::shared_ptr<Captured> out_;
};

struct Reply {
  int status = 0;
  Json body;
  std::string content_type;
};

class SageMakerProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto manager = testing::OpenTestManager(dir_.path());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    protocol_ = std::make_unique<SageMakerProtocol>(manager_.get(), nullptr);
  }

  Reply Call(SageMakerProtocol& protocol, absl::string_view target, std::string body,
             HttpHeaders headers = {}) {
    HttpRequest request{
        .method = "POST", .path = "/", .headers = std::move(headers), .body = std::move(body)};
    if (!target.empty()) request.headers.emplace_back("X-Amz-Target", std::string(target));
    request.headers.emplace_back("Content-Type", "application/x-amz-json-1.1");
    auto captured = std::make_shared<Captured>();
    protocol.Handle(std::move(request), std::make_unique<CapturingResponder>(captured));
    absl::MutexLock lock(&captured->mu);
    auto answered = [&captured]() ABSL_SHARED_LOCKS_REQUIRED(captured->mu) {
      return captured->response.has_value();
    };
    EXPECT_TRUE(captured->mu.AwaitWithTimeout(absl::Condition(&answered), absl::Seconds(10)));
    if (!captured->response.has_value()) return {};
    Reply reply{.status = captured->response->status,
                .body = Json::parse(captured->response->BodyBytes(), nullptr, false)};
    for (const auto& [name, value] : captured->response->headers) {
      if (name == "Content-Type") reply.content_type = value;
    }
    return reply;
  }
  Reply Call(absl::string_view target, std::string body) {
    return Call(*protocol_, target, std::move(body));
  }

  testing::ScopedTempDir dir_;
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<SageMakerProtocol> protocol_;
};

TEST_F(SageMakerProtocolTest, CreateDescribeListStopDelete) {
  Reply created = Call("SageMaker.CreateTrainingJob", TemplateJson("proto-job"));
  ASSERT_EQ(created.status, 200) << created.body;
  EXPECT_EQ(created.content_type, "application/x-amz-json-1.1");
  EXPECT_THAT(created.body["TrainingJobArn"].get<std::string>(), HasSubstr("proto-job"));

  Reply described = Call("SageMaker.DescribeTrainingJob", R"({"TrainingJobName": "proto-job"})");
  ASSERT_EQ(described.status, 200);
  EXPECT_EQ(described.body["TrainingJobStatus"], "InProgress");
  EXPECT_TRUE(described.body["CreationTime"].is_number());
  EXPECT_TRUE(described.body["ConfigVersion"].is_number_integer());
  EXPECT_EQ(described.body["DebugRuleEvaluationStatuses"][0]["RuleConfigurationName"],
            "LossNotDecreasing");

  Reply listed = Call("SageMaker.ListTrainingJobs", R"({"StatusEquals": "InProgress"})");
  ASSERT_EQ(listed.status, 200);
  ASSERT_EQ(listed.body["TrainingJobSummaries"].size(), 1u);
  Reply none = Call("SageMaker.ListTrainingJobs", R"({"StatusEquals": "Completed"})");
  EXPECT_EQ(none.body, Json::parse(R"({"TrainingJobSummaries": []})"));

  // Deleting a running job: FAILED_PRECONDITION, a ValidationException as in SageMaker.
  Reply busy = Call("SageMaker.DeleteTrainingJob", R"({"TrainingJobName": "proto-job"})");
  EXPECT_EQ(busy.status, 400);
  EXPECT_EQ(busy.body["__type"], "ValidationException");

  Reply stopped = Call("SageMaker.StopTrainingJob", R"({"TrainingJobName": "proto-job"})");
  EXPECT_EQ(stopped.status, 200);
  EXPECT_EQ(stopped.body, Json::object());
}

// HTTP Describe prints each committed version of a record once
// (DescribeJsonCache): after every change it must answer the new state,
// exactly as printing the handler's own Describe does, and NOT_FOUND once
// the job is gone.
TEST_F(SageMakerProtocolTest, DescribeAnswersEachCommittedVersionAsPrintedFromTheHandler) {
  const auto direct_json = [this](const std::string& name) -> absl::StatusOr<Json> {
    v1::DescribeTrainingJobRequest request;
    request.set_training_job_name(name);
    auto described = testing::CallSync<v1::DescribeTrainingJobResponse>(
        *manager_, &core::TrainingJobHandler::DescribeTrainingJob, request);
    if (!described.ok()) return described.status();
    return Json::parse(ToSageMakerJson(*described));
  };
  const std::string describe = R"({"TrainingJobName": "cached-job"})";
  ASSERT_EQ(Call("SageMaker.CreateTrainingJob", TemplateJson("cached-job")).status, 200);
  Reply first = Call("SageMaker.DescribeTrainingJob", describe);
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(first.content_type, "application/x-amz-json-1.1");
  EXPECT_EQ(first.body, *direct_json("cached-job"));
  EXPECT_EQ(Call("SageMaker.DescribeTrainingJob", describe).body, first.body);

  // A change (a new version): the next Describe shows it.
  // The stop completes on its own (Stopping, then Stopped: no agent had
  // started the training), so compare once the record stopped changing.
  Reply stopped = Call("SageMaker.StopTrainingJob", describe);
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  ASSERT_TRUE(testing::WaitedFor("the job to be Stopped", [&] {
    return (*direct_json("cached-job"))["TrainingJobStatus"] == "Stopped";
  }));
  Reply after_stop = Call("SageMaker.DescribeTrainingJob", describe);
  ASSERT_EQ(after_stop.status, 200);
  EXPECT_EQ(after_stop.body["TrainingJobStatus"], "Stopped");
  EXPECT_EQ(after_stop.body, *direct_json("cached-job"));

  // Gone: NOT_FOUND, not the last version printed; a new job of the same
  // name is described as itself.
  ASSERT_EQ(Call("SageMaker.DeleteTrainingJob", describe).status, 200);
  Reply missing = Call("SageMaker.DescribeTrainingJob", describe);
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(missing.body["__type"], "ResourceNotFound");
  ASSERT_EQ(Call("SageMaker.CreateTrainingJob", TemplateJson("cached-job")).status, 200);
  Reply recreated = Call("SageMaker.DescribeTrainingJob", describe);
  ASSERT_EQ(recreated.status, 200);
  EXPECT_EQ(recreated.body["TrainingJobStatus"], "InProgress");
  EXPECT_EQ(recreated.body, *direct_json("cached-job"));
}

// A job whose debug rules read TensorBoard logs alone (issue 24): created
// with a Warning for the rule TensorBoard cannot carry; without the logs'
// S3OutputPath it is refused naming the field.
TEST_F(SageMakerProtocolTest, TensorBoardJobIsCreatedWithWarningsForRulesItCannotCarry) {
  Json job = {{"TrainingJobName", "tb-job"},
              {"RoleArn", "arn:aws:iam::111122223333:role/service-role/Test"},
              {"OutputDataConfig", {{"S3OutputPath", "s3://bucket/output"}}},
              {"TensorBoardOutputConfig",
               {{"S3OutputPath", "s3://bucket/tb"}, {"LocalPath", "/opt/ml/output/tensorboard"}}},
              {"DebugRuleConfigurations",
               {{{"RuleConfigurationName", "Exploding"},
                 {"RuleEvaluatorImage", "builtin"},
                 {"RuleParameters", {{"rule_to_invoke", "ExplodingTensor"}}}},
                {{"RuleConfigurationName", "Relu"},
                 {"RuleEvaluatorImage", "builtin"},
                 {"RuleParameters", {{"rule_to_invoke", "DeadRelu"}}}}}}};
  Reply created = Call("SageMaker.CreateTrainingJob", job.dump());
  ASSERT_EQ(created.status, 200) << created.body;
  ASSERT_EQ(created.body["Warnings"].size(), 1u) << created.body;
  EXPECT_THAT(created.body["Warnings"][0].get<std::string>(),
              HasSubstr("DebugRuleConfigurations[1] (Relu, DeadRelu) cannot be evaluated"));

  job["TrainingJobName"] = "tb-no-path";
  job["TensorBoardOutputConfig"].erase("S3OutputPath");
  Reply refused = Call("SageMaker.CreateTrainingJob", job.dump());
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.body["__type"], "ValidationException");
  EXPECT_THAT(refused.body["message"].get<std::string>(),
              HasSubstr("TensorBoardOutputConfig.S3OutputPath"));
}

TEST_F(SageMakerProtocolTest, ErrorsCarryTheCoreMessageUnderSageMakersCode) {
  ASSERT_EQ(Call("SageMaker.CreateTrainingJob", TemplateJson("twice")).status, 200);
  Reply again = Call("SageMaker.CreateTrainingJob", TemplateJson("twice"));
  EXPECT_EQ(again.status, 400);
  EXPECT_EQ(again.body["__type"], "ResourceInUse");

  Reply missing = Call("SageMaker.DescribeTrainingJob", R"({"TrainingJobName": "nope"})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(missing.body["__type"], "ResourceNotFound");
  EXPECT_THAT(missing.body["message"].get<std::string>(), HasSubstr("nope"));

  // The message is the one a gRPC client gets: it names the field.
  Json job = Json::parse(TemplateJson("bad-interval"));
  job["ProfilerConfig"]["ProfilingIntervalInMilliseconds"] = 750;
  Reply invalid = Call("SageMaker.CreateTrainingJob", job.dump());
  EXPECT_EQ(invalid.status, 400);
  EXPECT_EQ(invalid.body["__type"], "ValidationException");
  v1::CreateTrainingJobRequest same;
  ASSERT_TRUE(ParseSageMakerJson(job.dump(), &same).ok());
  auto direct = testing::CallSync<v1::CreateTrainingJobResponse>(
      *manager_, &core::TrainingJobHandler::CreateTrainingJob, same);
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(invalid.body["message"], std::string(direct.status().message()));
  EXPECT_THAT(invalid.body["message"].get<std::string>(),
              HasSubstr("ProfilerConfig.ProfilingIntervalInMilliseconds"));
  EXPECT_EQ(invalid.body.size(), 2u) << invalid.body;
}

TEST_F(SageMakerProtocolTest, RefusesTargetsItDoesNotServeAndBodiesThatAreNotJson) {
  for (absl::string_view target :
       {"", "SageMaker.CreateEndpoint", "DynamoDB_20120810.ListTables", "SageMaker."}) {
    Reply reply = Call(target, "{}");
    EXPECT_EQ(reply.status, 400) << target;
    EXPECT_EQ(reply.body["__type"], "UnknownOperationException") << target;
  }
  Reply not_json = Call("SageMaker.ListTrainingJobs", "{oops");
  EXPECT_EQ(not_json.status, 400);
  EXPECT_EQ(not_json.body["__type"], "SerializationException");
}

TEST_F(SageMakerProtocolTest, TooManyOperationsInFlightIsThrottling) {
  SageMakerProtocol saturated(manager_.get(), nullptr, {.max_operations_in_flight = 0});
  Reply reply = Call(saturated, "SageMaker.ListTrainingJobs", "{}");
  EXPECT_EQ(reply.status, 400);
  EXPECT_EQ(reply.body["__type"], "ThrottlingException");
}

TEST_F(SageMakerProtocolTest, WithCredentialsAnUnsignedRequestIsRefused) {
  const std::string path = (dir_.path() / "credentials").string();
  std::ofstream(path) << "admin AKIDADMIN secret-admin\n";
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  auto store = auth::CredentialStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  std::unique_ptr<auth::Authenticator> authenticator = auth::NewAuthenticator(*store);
  SageMakerProtocol guarded(manager_.get(), authenticator.get());
  Reply reply = Call(guarded, "SageMaker.ListTrainingJobs", "{}");
  EXPECT_EQ(reply.status, 403);
  EXPECT_EQ(reply.body["__type"], "MissingAuthenticationTokenException");
  Reply forged = Call(guarded, "SageMaker.ListTrainingJobs", "{}",
                      {{"Authorization", "AWS4-HMAC-SHA256 Credential=AKIDADMIN"}});
  EXPECT_EQ(forged.status, 400);
  EXPECT_EQ(forged.body["__type"], "IncompleteSignatureException");
}

}  // namespace
}  // namespace debugplane::service::http
