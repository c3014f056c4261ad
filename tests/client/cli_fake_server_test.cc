// RunCli against an in-process fake TrainingJobService: the requests the
// CLI builds from its flags, what it prints, and the exit code of each
// server answer. (End-to-end tests against the real server live elsewhere.)

#include <chrono>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "tests/client/cli_test_util.h"

namespace debugplane::client {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing::RunDebugplane;

constexpr int kJobCount = 5;
constexpr int64_t kMay1st2024Noon = 1714564800;

grpc::Status BadRequest(const std::string& field, const std::string& description) {
  google::rpc::BadRequest bad_request;
  auto* violation = bad_request.add_field_violations();
  violation->set_field(field);
  violation->set_description(description);
  google::rpc::Status details;
  details.set_code(grpc::StatusCode::INVALID_ARGUMENT);
  details.set_message(field + ": " + description);
  details.add_details()->PackFrom(bad_request);
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, details.message(),
                      details.SerializeAsString());
}

// Answers by job name: "taken" exists, "missing" does not, "slow" answers
// after a second, "ended" cannot be updated, "deleted" vanishes mid-watch.
class FakeService final : public v1::TrainingJobService::Service {
 public:
  grpc::Status CreateTrainingJob(grpc::ServerContext*, const v1::CreateTrainingJobRequest* request,
                                 v1::CreateTrainingJobResponse* response) override {
    std::lock_guard lock(mu_);
    last_create = *request;
    if (request->training_job_name().empty()) return BadRequest("TrainingJobName", "is required");
    if (request->training_job_name() == "taken") {
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "training job \"taken\" exists");
    }
    response->set_training_job_arn("arn:aws:sagemaker:local:0:training-job/" +
                                   request->training_job_name());
    response->add_warnings("rule LossNotDecreasing reads collection losses");
    return grpc::Status::OK;
  }

  grpc::Status DescribeTrainingJob(grpc::ServerContext*,
                                   const v1::DescribeTrainingJobRequest* request,
                                   v1::DescribeTrainingJobResponse* response) override {
    const std::string& name = request->training_job_name();
    if (name == "missing") return NotFound(name);
    if (name == "slow") std::this_thread::sleep_for(std::chrono::seconds(1));
    response->set_training_job_name(name);
    response->set_training_job_arn("arn:aws:sagemaker:local:0:training-job/" + name);
    response->set_training_job_status(v1::TrainingJobStatus::InProgress);
    response->set_secondary_status(v1::SecondaryStatus::Training);
    response->mutable_creation_time()->set_seconds(kMay1st2024Noon);
    response->set_config_version(2);
    auto* rule = response->add_debug_rule_evaluation_statuses();
    rule->set_rule_configuration_name("LossNotDecreasing");
    rule->set_rule_evaluation_status(v1::RuleEvaluationStatus::IssuesFound);
    rule->set_status_details("loss stalled at step 400");
    rule->set_last_evaluated_step(149);
    response->mutable_profiler_config()->set_profiling_interval_in_milliseconds(500);
    (*response->mutable_hyper_parameters())["epochs"] = "10";
    return grpc::Status::OK;
  }

  grpc::Status ListTrainingJobs(grpc::ServerContext*, const v1::ListTrainingJobsRequest* request,
                                v1::ListTrainingJobsResponse* response) override {
    {
      std::lock_guard lock(mu_);
      list_requests.push_back(*request);
    }
    const int page_size = request->has_max_results() ? request->max_results() : 2;
    const int start = request->next_token().empty() ? 0 : std::stoi(request->next_token());
    for (int i = start; i < kJobCount && i < start + page_size; ++i) {
      auto* summary = response->add_training_job_summaries();
      summary->set_training_job_name("job-" + std::to_string(i));
      summary->set_training_job_status(v1::TrainingJobStatus::Completed);
      summary->set_secondary_status(v1::SecondaryStatus::Completed);
      summary->mutable_creation_time()->set_seconds(kMay1st2024Noon + i);
    }
    if (start + page_size < kJobCount) response->set_next_token(std::to_string(start + page_size));
    return grpc::Status::OK;
  }

  grpc::Status UpdateTrainingJob(grpc::ServerContext*, const v1::UpdateTrainingJobRequest* request,
                                 v1::UpdateTrainingJobResponse* response) override {
    std::lock_guard lock(mu_);
    last_update = *request;
    if (request->training_job_name() == "ended") {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "job is Completed");
    }
    response->set_training_job_arn("arn:aws:sagemaker:local:0:training-job/" +
                                   request->training_job_name());
    if (request->profiler_config().profiling_parameters().contains("PythonProfilingConfig")) {
      response->add_warnings("PythonProfilingConfig crashes smdebug mid-run");
    }
    return grpc::Status::OK;
  }

  grpc::Status StopTrainingJob(grpc::ServerContext*, const v1::StopTrainingJobRequest* request,
                               v1::StopTrainingJobResponse*) override {
    if (request->training_job_name() == "missing") return NotFound("missing");
    return grpc::Status::OK;
  }

  grpc::Status DeleteTrainingJob(grpc::ServerContext*, const v1::DeleteTrainingJobRequest* request,
                                 v1::DeleteTrainingJobResponse*) override {
    if (request->training_job_name() == "missing") return NotFound("missing");
    return grpc::Status::OK;
  }

  grpc::Status WatchTrainingJob(grpc::ServerContext*, const v1::WatchTrainingJobRequest* request,
                                grpc::ServerWriter<v1::WatchTrainingJobResponse>* writer) override {
    const std::string& name = request->training_job_name();
    if (name == "missing") return NotFound(name);
    v1::WatchTrainingJobResponse event;
    event.set_training_job_name(name);
    event.mutable_event_time()->set_seconds(kMay1st2024Noon);
    event.set_training_job_status(v1::TrainingJobStatus::InProgress);
    event.set_secondary_status(v1::SecondaryStatus::Training);
    event.add_changes()->set_kind(v1::StatusChange::KIND_INITIAL_STATE);
    event.set_config_version(2);
    writer->Write(event);
    if (name == "deleted") return NotFound(name);

    event.clear_changes();
    auto* change = event.add_changes();
    change->set_kind(v1::StatusChange::KIND_DEBUG_RULE_STATUS);
    change->set_rule_configuration_name("LossNotDecreasing");
    change->set_from("InProgress");
    change->set_to("IssuesFound");
    writer->Write(event);

    event.clear_changes();
    change = event.add_changes();
    change->set_kind(v1::StatusChange::KIND_JOB_STATUS);
    change->set_from("InProgress");
    change->set_to("Completed");
    event.set_training_job_status(v1::TrainingJobStatus::Completed);
    event.set_secondary_status(v1::SecondaryStatus::Completed);
    writer->Write(event);
    return grpc::Status::OK;
  }

  void Reset() {
    std::lock_guard lock(mu_);
    last_create.Clear();
    last_update.Clear();
    list_requests.clear();
  }

  // What the CLI sent; read once the CLI call returned.
  v1::CreateTrainingJobRequest last_create;
  v1::UpdateTrainingJobRequest last_update;
  std::vector<v1::ListTrainingJobsRequest> list_requests;

 private:
  static grpc::Status NotFound(const std::string& name) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "training job \"" + name + "\" not found");
  }

  std::mutex mu_;
};

class CliFakeServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    service_ = std::make_unique<FakeService>();
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    address_ = "127.0.0.1:" + std::to_string(port);
  }

  static void TearDownTestSuite() {
    server_->Shutdown();
    server_.reset();
    service_.reset();
  }

  void SetUp() override { service_->Reset(); }

  // `debugplane --server <fake> <args...>`.
  static testing::CliResult Cli(std::vector<std::string> args, const std::string& stdin_text = "") {
    args.insert(args.begin(), {"--server", address_});
    return RunDebugplane(args, stdin_text);
  }

  // Suite-wide, so that each test does not pay for a server start.
  static inline std::unique_ptr<FakeService> service_;
  static inline std::unique_ptr<grpc::Server> server_;
  static inline std::string address_;
};

TEST_F(CliFakeServerTest, CreateSendsTheSageMakerTemplate) {
  testing::CliResult result = Cli({"create", "--file", "-"}, testing::SageMakerCliTemplate());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(
      result.out,
      "{\n"
      "  \"TrainingJobArn\": \"arn:aws:sagemaker:local:0:training-job/debugger-aws-cli-test\",\n"
      "  \"Warnings\": [\n"
      "    \"rule LossNotDecreasing reads collection losses\"\n"
      "  ]\n"
      "}\n");
  EXPECT_THAT(result.err, IsEmpty());
  EXPECT_EQ(service_->last_create.training_job_name(), "debugger-aws-cli-test");
  EXPECT_EQ(service_->last_create.profiler_rule_configurations(0).rule_configuration_name(),
            "ProfilerReport");
}

TEST_F(CliFakeServerTest, CreateNameOverrideAndTextOutput) {
  testing::CliResult result = Cli({"-o", "text", "create", "--file", "-", "--name", "job-7"},
                                  testing::SageMakerCliTemplate());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "arn:aws:sagemaker:local:0:training-job/job-7\n");
  EXPECT_EQ(result.err, "warning: rule LossNotDecreasing reads collection losses\n");
  EXPECT_EQ(service_->last_create.training_job_name(), "job-7");
}

TEST_F(CliFakeServerTest, CreateExistingNameExitsFive) {
  testing::CliResult result = Cli({"create", "--file", "-"}, R"({"TrainingJobName": "taken"})");
  EXPECT_EQ(result.exit_code, 5);
  EXPECT_EQ(result.err, "error: ALREADY_EXISTS: training job \"taken\" exists\n");
  EXPECT_THAT(result.out, IsEmpty());
}

TEST_F(CliFakeServerTest, InvalidRequestExitsThreeListingViolations) {
  testing::CliResult result = Cli({"create", "--file", "-"}, R"({"RoleArn": "arn:x"})");
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.err,
            "error: INVALID_ARGUMENT: TrainingJobName: is required\n"
            "  - TrainingJobName: is required\n");
}

TEST_F(CliFakeServerTest, DescribePrintsSageMakerJson) {
  testing::CliResult result = Cli({"describe", "job-1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, AllOf(HasSubstr("\"TrainingJobName\": \"job-1\""),
                                HasSubstr("\"TrainingJobStatus\": \"InProgress\""),
                                HasSubstr("\"SecondaryStatus\": \"Training\""),
                                HasSubstr("\"CreationTime\": \"2024-05-01T12:00:00Z\""),
                                HasSubstr("\"RuleEvaluationStatus\": \"IssuesFound\"")));
  v1::DescribeTrainingJobResponse parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &parsed).ok());
}

TEST_F(CliFakeServerTest, DescribePrintsNumbersAsNumbers) {
  testing::CliResult result = Cli({"describe", "job-1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // The gRPC JSON mapping would print "500", "149" and "2".
  EXPECT_THAT(result.out,
              AllOf(HasSubstr("\"ProfilingIntervalInMilliseconds\": 500"),
                    HasSubstr("\"LastEvaluatedStep\": 149"), HasSubstr("\"ConfigVersion\": 2"),
                    HasSubstr("\"epochs\": \"10\"")));  // A string stays one.
}

TEST_F(CliFakeServerTest, DescribeAsText) {
  testing::CliResult result = Cli({"describe", "job-1", "--output", "text"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, AllOf(HasSubstr("TrainingJobStatus:  InProgress (Training)\n"),
                                HasSubstr("CreationTime:       2024-05-01T12:00:00Z\n"),
                                HasSubstr("DebugRuleEvaluationStatuses:\n"
                                          "  LossNotDecreasing  IssuesFound  loss stalled")));
}

TEST_F(CliFakeServerTest, DescribeUnknownJobExitsFour) {
  testing::CliResult result = Cli({"describe", "missing"});
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_EQ(result.err, "error: NOT_FOUND: training job \"missing\" not found\n");
}

TEST_F(CliFakeServerTest, TimeoutExitsSeven) {
  testing::CliResult result = Cli({"--timeout", "0.2", "describe", "slow"});
  EXPECT_EQ(result.exit_code, 7);
  EXPECT_THAT(result.err, HasSubstr("error: DEADLINE_EXCEEDED"));
}

TEST_F(CliFakeServerTest, ListMapsFlagsOntoTheRequest) {
  testing::CliResult result =
      Cli({"list", "--status", "Stopped", "--name-contains", "job", "--sort-by", "Name",
           "--sort-order", "Ascending", "--created-after", "2024-05-01T12:00:00Z",
           "--created-before", "2024-05-01T14:00:00+02:00", "--modified-after",
           "2024-05-01T00:00:00Z", "--max-results", "3", "--next-token", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_EQ(service_->list_requests.size(), 1u);
  const v1::ListTrainingJobsRequest& request = service_->list_requests[0];
  EXPECT_EQ(request.status_equals(), v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(request.name_contains(), "job");
  EXPECT_EQ(request.sort_by(), "Name");
  EXPECT_EQ(request.sort_order(), "Ascending");
  EXPECT_EQ(request.creation_time_after().seconds(), kMay1st2024Noon);
  EXPECT_EQ(request.creation_time_before().seconds(), kMay1st2024Noon);
  EXPECT_EQ(request.last_modified_time_after().seconds(), kMay1st2024Noon - 12 * 3600);
  EXPECT_FALSE(request.has_last_modified_time_before());
  EXPECT_EQ(request.max_results(), 3);
  EXPECT_EQ(request.next_token(), "1");
  // One page: job-1..job-3, and where to go on.
  v1::ListTrainingJobsResponse page;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &page).ok());
  EXPECT_EQ(page.training_job_summaries_size(), 3);
  EXPECT_EQ(page.next_token(), "4");
}

TEST_F(CliFakeServerTest, ListDefaultsLeaveTheRequestEmpty) {
  testing::CliResult result = Cli({"list"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_EQ(service_->list_requests.size(), 1u);
  EXPECT_EQ(service_->list_requests[0].ByteSizeLong(), 0u);
}

TEST_F(CliFakeServerTest, ListAllFollowsNextToken) {
  testing::CliResult result = Cli({"list", "--all"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> tokens;
  for (const auto& request : service_->list_requests) tokens.push_back(request.next_token());
  EXPECT_THAT(tokens, ElementsAre("", "2", "4"));
  v1::ListTrainingJobsResponse all;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &all).ok()) << result.out;
  ASSERT_EQ(all.training_job_summaries_size(), kJobCount);
  EXPECT_EQ(all.training_job_summaries(4).training_job_name(), "job-4");
  EXPECT_THAT(result.out, Not(HasSubstr("NextToken")));
}

TEST_F(CliFakeServerTest, ListAsTextTable) {
  testing::CliResult result = Cli({"list", "-o", "text"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out,
            "NAME   STATUS     SECONDARY  CREATED\n"
            "job-0  Completed  Completed  2024-05-01T12:00:00Z\n"
            "job-1  Completed  Completed  2024-05-01T12:00:01Z\n"
            "(more: --next-token 2, or --all)\n");
}

TEST_F(CliFakeServerTest, UpdateSendsFlags) {
  testing::CliResult result =
      Cli({"update", "job-1", "--interval", "1000", "--profiling-parameter", "A=b=c"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(service_->last_update.training_job_name(), "job-1");
  EXPECT_EQ(service_->last_update.profiler_config().profiling_interval_in_milliseconds(), 1000);
  // Only the first '=' separates: values may contain '='.
  EXPECT_EQ(service_->last_update.profiler_config().profiling_parameters().at("A"), "b=c");
  EXPECT_THAT(result.out, HasSubstr("\"TrainingJobArn\""));
}

TEST_F(CliFakeServerTest, UpdateWarningsAreInTheJsonAndOnStderrInText) {
  const std::vector<std::string> update = {
      "update", "job-1", "--profiling-parameter",
      R"(PythonProfilingConfig={"StartStep": 5, "NumSteps": 2})"};
  testing::CliResult result = Cli(update);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("  \"Warnings\": [\n"
                                    "    \"PythonProfilingConfig crashes smdebug mid-run\"\n"
                                    "  ]\n"));
  EXPECT_THAT(result.err, IsEmpty());

  std::vector<std::string> as_text = update;
  as_text.insert(as_text.end(), {"-o", "text"});
  result = Cli(as_text);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "arn:aws:sagemaker:local:0:training-job/job-1\n");
  EXPECT_EQ(result.err, "warning: PythonProfilingConfig crashes smdebug mid-run\n");

  // No warning, no noise.
  result = Cli({"update", "job-1", "--interval", "100", "-o", "text"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.err, IsEmpty());
}

TEST_F(CliFakeServerTest, UpdateOfEndedJobExitsSix) {
  testing::CliResult result = Cli({"update", "ended", "--disable-profiler"});
  EXPECT_EQ(result.exit_code, 6);
  EXPECT_EQ(result.err, "error: FAILED_PRECONDITION: job is Completed\n");
}

TEST_F(CliFakeServerTest, StopAndDelete) {
  testing::CliResult result = Cli({"stop", "job-1"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "{}\n");
  result = Cli({"delete", "job-1", "-o", "text"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, IsEmpty());
  EXPECT_EQ(Cli({"delete", "missing"}).exit_code, 4);
  EXPECT_EQ(Cli({"stop", "missing"}).exit_code, 4);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_F(CliFakeServerTest, WatchPrintsOneJsonLinePerEvent) {
  testing::CliResult result = Cli({"watch", "job-1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 3u) << result.out;
  for (const std::string& line : lines) {
    v1::WatchTrainingJobResponse event;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(line, &event).ok()) << line;
    EXPECT_EQ(event.training_job_name(), "job-1");
  }
  EXPECT_THAT(lines[0], HasSubstr(R"("Changes":[{"Kind":"KIND_INITIAL_STATE"}])"));
  EXPECT_THAT(lines[0], HasSubstr(R"("ConfigVersion":2)"));  // A number, not "2".
  EXPECT_THAT(lines[2], HasSubstr(R"("TrainingJobStatus":"Completed")"));
  EXPECT_THAT(result.err, IsEmpty());
}

TEST_F(CliFakeServerTest, WatchAsText) {
  testing::CliResult result = Cli({"watch", "job-1", "--until-terminal", "-o", "text"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out,
            "2024-05-01T12:00:00Z  job-1  InProgress/Training  initial state\n"
            "2024-05-01T12:00:00Z  job-1  InProgress/Training  "
            "LossNotDecreasing: InProgress -> IssuesFound\n"
            "2024-05-01T12:00:00Z  job-1  Completed/Completed  InProgress -> Completed\n");
}

TEST_F(CliFakeServerTest, WatchOfDeletedJobPrintsEventsThenExitsFour) {
  testing::CliResult result = Cli({"watch", "deleted"});
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_EQ(Lines(result.out).size(), 1u);
  EXPECT_EQ(result.err, "error: NOT_FOUND: training job \"deleted\" not found\n");
}

TEST_F(CliFakeServerTest, WatchStopsWhenOutputCannotBeWritten) {
  const std::vector<const char*> argv = {"debugplane", "--server", address_.c_str(), "watch",
                                         "job-1"};
  std::ostream closed_pipe(nullptr);  // Every write fails, like EPIPE.
  std::ostringstream err;
  EXPECT_EQ(RunCli(static_cast<int>(argv.size()), argv.data(), closed_pipe, err), 1);
  EXPECT_THAT(err.str(), HasSubstr("cannot write the output"));
}

TEST_F(CliFakeServerTest, WatchOfUnknownJobExitsFour) {
  testing::CliResult result = Cli({"watch", "missing"});
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_THAT(result.out, IsEmpty());
}

}  // namespace
}  // namespace debugplane::client
