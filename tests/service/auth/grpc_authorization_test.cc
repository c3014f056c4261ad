// Every role against every RPC, through the real server binary started with
// --credentials: who is let through, who gets PERMISSION_DENIED, who gets
// UNAUTHENTICATED. Plus key rotation on SIGHUP, and a server that refuses to
// start on a bad credentials file.

#include <signal.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/profiler_report.grpc.pb.h"
#include "debugplane/v1/training_agent.grpc.pb.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/service/auth/auth_test_util.h"
#include "tests/service/server_process.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::TokenContext;
using ::debugplane::testing::WaitUntil;
using ::debugplane::testing::WriteCredentials;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kCredentials[] = R"(# test keys
admin    ADMIN     admin-secret
operator OPERATOR  operator-secret
reader   READER    reader-secret
agent    AGENT-A   agent-secret job-a
)";

// One RPC, called with a token (or none) for a job; returns its status.
using RpcCall = std::function<grpc::Status(const std::string& token, const std::string& job)>;

class GrpcAuthorizationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteCredentials(credentials(), kCredentials);
    server_ = std::make_unique<ServerProcess>(
        dir_.path() / "data", std::vector<std::string>{"--credentials", credentials()});
    channel_ = server_->Channel();
    jobs_ = v1::TrainingJobService::NewStub(channel_);
    agents_ = v1::TrainingAgentService::NewStub(channel_);
    reports_ = v1::ProfilerReportService::NewStub(channel_);
    for (const char* job : {"job-a", "job-b"}) {
      v1::CreateTrainingJobResponse created;
      grpc::Status status = jobs_->CreateTrainingJob(TokenContext("ADMIN:admin-secret").get(),
                                                     CreateRequest(job), &created);
      ASSERT_TRUE(status.ok()) << status.error_message();
    }
  }

  std::string credentials() const { return (dir_.path() / "credentials").string(); }

  v1::CreateTrainingJobRequest CreateRequest(const std::string& name) const {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(name);
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
    request.mutable_debug_hook_config()->set_s3_output_path(
        (dir_.path() / "data" / name / "tensors").string());
    return request;
  }

  // Every RPC of the three services, by name.
  std::map<std::string, RpcCall> Rpcs() {
    std::map<std::string, RpcCall> rpcs;
    rpcs["CreateTrainingJob"] = [this](const std::string& token, const std::string& job) {
      v1::CreateTrainingJobResponse response;
      return jobs_->CreateTrainingJob(TokenContext(token).get(), CreateRequest(job), &response);
    };
    rpcs["DescribeTrainingJob"] = [this](const std::string& token, const std::string& job) {
      v1::DescribeTrainingJobRequest request;
      request.set_training_job_name(job);
      v1::DescribeTrainingJobResponse response;
      return jobs_->DescribeTrainingJob(TokenContext(token).get(), request, &response);
    };
    rpcs["ListTrainingJobs"] = [this](const std::string& token, const std::string&) {
      v1::ListTrainingJobsResponse response;
      return jobs_->ListTrainingJobs(TokenContext(token).get(), {}, &response);
    };
    rpcs["UpdateTrainingJob"] = [this](const std::string& token, const std::string& job) {
      v1::UpdateTrainingJobRequest request;
      request.set_training_job_name(job);
      v1::UpdateTrainingJobResponse response;
      return jobs_->UpdateTrainingJob(TokenContext(token).get(), request, &response);
    };
    rpcs["StopTrainingJob"] = [this](const std::string& token, const std::string& job) {
      v1::StopTrainingJobRequest request;
      request.set_training_job_name(job + "-missing");  // Keeps the jobs for the agent calls.
      v1::StopTrainingJobResponse response;
      return jobs_->StopTrainingJob(TokenContext(token).get(), request, &response);
    };
    rpcs["DeleteTrainingJob"] = [this](const std::string& token, const std::string& job) {
      v1::DeleteTrainingJobRequest request;
      request.set_training_job_name(job + "-missing");
      v1::DeleteTrainingJobResponse response;
      return jobs_->DeleteTrainingJob(TokenContext(token).get(), request, &response);
    };
    rpcs["WatchTrainingJob"] = [this](const std::string& token, const std::string& job) {
      v1::WatchTrainingJobRequest request;
      request.set_training_job_name(job);
      auto context = TokenContext(token);
      auto reader = jobs_->WatchTrainingJob(context.get(), request);
      v1::WatchTrainingJobResponse event;
      if (reader->Read(&event)) context->TryCancel();  // Let through: the first event came.
      return reader->Finish();
    };
    rpcs["GetProfilerReport"] = [this](const std::string& token, const std::string& job) {
      v1::GetProfilerReportRequest request;
      request.set_training_job_name(job);
      v1::GetProfilerReportResponse response;
      return reports_->GetProfilerReport(TokenContext(token).get(), request, &response);
    };
    rpcs["ConnectAgent"] = [this](const std::string& token, const std::string& job) {
      v1::ConnectAgentRequest request;
      request.set_training_job_name(job);
      request.set_host("test");
      auto context = TokenContext(token);
      auto reader = agents_->ConnectAgent(context.get(), request);
      v1::ConnectAgentResponse directive;
      if (reader->Read(&directive)) context->TryCancel();
      return reader->Finish();
    };
    rpcs["ReportTrainingStatus"] = [this](const std::string& token, const std::string& job) {
      v1::ReportTrainingStatusRequest request;
      request.set_training_job_name(job);
      request.set_event(v1::ReportTrainingStatusRequest::EVENT_PROGRESS);
      request.set_current_step(1);
      v1::ReportTrainingStatusResponse response;
      return agents_->ReportTrainingStatus(TokenContext(token).get(), request, &response);
    };
    return rpcs;
  }

  ScopedTempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::TrainingJobService::Stub> jobs_;
  std::unique_ptr<v1::TrainingAgentService::Stub> agents_;
  std::unique_ptr<v1::ProfilerReportService::Stub> reports_;
};

// What a caller gets: let through (any other code: the handler answered),
// or refused with one of the two authentication codes.
enum class Outcome { kLetThrough, kDenied, kUnauthenticated };

Outcome OutcomeOf(const grpc::Status& status) {
  if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED) return Outcome::kDenied;
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) return Outcome::kUnauthenticated;
  return Outcome::kLetThrough;
}

TEST_F(GrpcAuthorizationTest, EachRoleGetsExactlyItsRpcs) {
  const std::set<std::string> reads = {"DescribeTrainingJob", "ListTrainingJobs",
                                       "WatchTrainingJob", "GetProfilerReport"};
  const std::set<std::string> agent_rpcs = {"ConnectAgent", "ReportTrainingStatus"};
  struct Caller {
    std::string name;
    std::string token;
    std::function<Outcome(const std::string& rpc, const std::string& job)> expected;
  };
  const std::vector<Caller> callers = {
      {"no token", "", [](auto&, auto&) { return Outcome::kUnauthenticated; }},
      {"wrong secret", "ADMIN:not-the-secret",
       [](auto&, auto&) { return Outcome::kUnauthenticated; }},
      {"unknown key", "NOBODY:admin-secret",
       [](auto&, auto&) { return Outcome::kUnauthenticated; }},
      {"reader", "READER:reader-secret",
       [&](const std::string& rpc, auto&) {
         return reads.count(rpc) ? Outcome::kLetThrough : Outcome::kDenied;
       }},
      {"agent bound to job-a", "AGENT-A:agent-secret",
       [&](const std::string& rpc, const std::string& job) {
         return agent_rpcs.count(rpc) && job == "job-a" ? Outcome::kLetThrough : Outcome::kDenied;
       }},
      {"operator", "OPERATOR:operator-secret",
       [&](const std::string& rpc, auto&) {
         return agent_rpcs.count(rpc) ? Outcome::kDenied : Outcome::kLetThrough;
       }},
      {"admin", "ADMIN:admin-secret", [](auto&, auto&) { return Outcome::kLetThrough; }},
  };
  const std::map<std::string, RpcCall> rpcs = Rpcs();
  ASSERT_EQ(rpcs.size(), 10u);
  for (const Caller& caller : callers) {
    for (const auto& [rpc, call] : rpcs) {
      for (const std::string job : {"job-a", "job-b"}) {
        const grpc::Status status = call(caller.token, job);
        EXPECT_EQ(OutcomeOf(status), caller.expected(rpc, job))
            << caller.name << " " << rpc << "(" << job << "): " << status.error_code() << " "
            << status.error_message();
        EXPECT_THAT(status.error_message(),
                    AllOf(Not(HasSubstr("-secret")), Not(HasSubstr("not-the-secret"))));
      }
    }
  }
}

TEST_F(GrpcAuthorizationTest, RefusalsSayWhatIsWrongAndWhatWouldBeNeeded) {
  const std::map<std::string, RpcCall> rpcs = Rpcs();
  grpc::Status status = rpcs.at("StopTrainingJob")("READER:reader-secret", "job-a");
  EXPECT_EQ(status.error_message(),
            "access key 'READER' (role reader) may not StopTrainingJob: it needs role operator "
            "or admin");
  status = rpcs.at("ConnectAgent")("AGENT-A:agent-secret", "job-b");
  EXPECT_THAT(status.error_message(), HasSubstr("bound to training job 'job-a', not 'job-b'"));
  status = rpcs.at("ListTrainingJobs")("", "");
  EXPECT_THAT(status.error_message(), HasSubstr("no credentials"));
  status = rpcs.at("ListTrainingJobs")("ADMIN:wrong", "");
  EXPECT_EQ(status.error_message(), "wrong secret for access key 'ADMIN'");
}

// An agent's 4 MB FailureReason used to be kept whole in the status
// transition, so that every DescribeTrainingJob of the job then failed with
// RESOURCE_EXHAUSTED (gRPC's 4 MiB).
TEST_F(GrpcAuthorizationTest, DescribeWorksAfterAnAgentReportsA4MbFailureReason) {
  v1::ReportTrainingStatusRequest report;
  report.set_training_job_name("job-a");
  report.set_event(v1::ReportTrainingStatusRequest::EVENT_FAILED);
  report.set_failure_reason(std::string(4'000'000, 'x'));
  v1::ReportTrainingStatusResponse reported;
  grpc::Status status =
      agents_->ReportTrainingStatus(TokenContext("AGENT-A:agent-secret").get(), report, &reported);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reported.training_job_status(), v1::TrainingJobStatus::Failed);

  v1::DescribeTrainingJobRequest request;
  request.set_training_job_name("job-a");
  v1::DescribeTrainingJobResponse described;
  status =
      jobs_->DescribeTrainingJob(TokenContext("READER:reader-secret").get(), request, &described);
  ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  EXPECT_EQ(described.failure_reason(), std::string(1024, 'x'));
  EXPECT_LT(described.ByteSizeLong(), 64u * 1024);
}

TEST_F(GrpcAuthorizationTest, HealthStaysOpen) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status =
      health->Check(testing::Context().get(), grpc::health::v1::HealthCheckRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(GrpcAuthorizationTest, SighupRotatesKeysWithoutARestartAndKeepsThemOnABadFile) {
  const RpcCall list = Rpcs().at("ListTrainingJobs");
  ASSERT_TRUE(list("READER:reader-secret", "").ok());
  WriteCredentials(credentials(), "admin ADMIN admin-secret\nreader READER2 new-reader-secret\n");
  server_->Signal(SIGHUP);
  ASSERT_TRUE(WaitUntil([&] { return list("READER2:new-reader-secret", "").ok(); }));
  EXPECT_EQ(list("READER:reader-secret", "").error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // A broken file, then one others can read: both keep the keys in force.
  WriteCredentials(credentials(), "admin ADMIN admin-secret\nboss X y\n");
  server_->Signal(SIGHUP);
  WriteCredentials(credentials(), "admin ADMIN3 s\n", 0644);
  server_->Signal(SIGHUP);
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_TRUE(server_->running());
  EXPECT_TRUE(list("READER2:new-reader-secret", "").ok());
  EXPECT_EQ(list("ADMIN3:s", "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

struct StartResult {
  int exit_code = -1;
  std::string output;
};

// Runs the server binary expecting it to refuse to start.
StartResult StartServer(const fs::path& data_dir, const std::string& args) {
  const std::string command = absl::StrCat(DP_SERVER_BINARY, " --data-dir ", data_dir.string(), " ",
                                           args, " 2>&1 < /dev/null");
  StartResult result;
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[4096];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) result.output += buffer;
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TEST(ServerStartTest, ABadOrExposedCredentialsFileOrAnExposedAddressRefusesToStart) {
  ScopedTempDir dir;
  const fs::path file = dir.path() / "credentials";
  WriteCredentials(file, "admin A secret-a\nreader A secret-b\n");
  StartResult started =
      StartServer(dir.path() / "data", "--listen 127.0.0.1:0 --credentials " + file.string());
  EXPECT_EQ(started.exit_code, 1);
  EXPECT_THAT(started.output, AllOf(HasSubstr(file.string() + ":2: duplicate access key id 'A'"),
                                    Not(HasSubstr("secret-"))));

  WriteCredentials(file, "admin A secret-a\n", 0644);
  started = StartServer(dir.path() / "data", "--listen 127.0.0.1:0 --credentials " + file.string());
  EXPECT_EQ(started.exit_code, 1);
  EXPECT_THAT(started.output, HasSubstr("chmod 600 " + file.string()));

  started = StartServer(dir.path() / "data", "--listen 0.0.0.0:0");
  EXPECT_EQ(started.exit_code, 1);
  EXPECT_THAT(started.output,
              AllOf(HasSubstr("--listen 0.0.0.0:0"), HasSubstr("no --credentials are given"),
                    HasSubstr("--insecure")));

  WriteCredentials(file, "admin A secret-a\n");
  started = StartServer(dir.path() / "data", "--listen 0.0.0.0:0 --credentials " + file.string());
  EXPECT_EQ(started.exit_code, 1);
  EXPECT_THAT(started.output, HasSubstr("without TLS"));

  started = StartServer(dir.path() / "data", "--listen 127.0.0.1:0 --client-ca " + file.string());
  EXPECT_EQ(started.exit_code, 1);
  EXPECT_THAT(started.output, HasSubstr("--client-ca (client certificates) needs TLS"));
}

}  // namespace
}  // namespace debugplane
