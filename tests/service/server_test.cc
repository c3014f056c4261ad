// End-to-end tests: the real debugplane-server binary, on loopback, through
// gRPC stubs.

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/unknown_field_set.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/service/field_violations.h"
#include "tests/service/server_process.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

using ::debugplane::testing::Context;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// The complete CreateTrainingJob JSON template of the Debugger guide
// (tests/data/README.md), with its `//` comment lines removed, as a user
// would paste it.
std::string CliTemplateJson() {
  const std::string doc = ReadFile(std::filesystem::path(DP_TEST_DATA_DIR) /
                                   "sagemaker/create-training-job-template.jsonc");
  EXPECT_FALSE(doc.empty());
  std::string json;
  for (absl::string_view line : absl::StrSplit(doc, '\n')) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "//")) continue;
    absl::StrAppend(&json, line, "\n");
  }
  return json;
}

v1::CreateTrainingJobRequest TemplateRequest(const std::string& name) {
  v1::CreateTrainingJobRequest request;
  auto parsed = google::protobuf::util::JsonStringToMessage(CliTemplateJson(), &request);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString();
  request.set_training_job_name(name);
  return request;
}

// The fields named by the field violations in a status's details.
std::vector<std::string> ViolatedFields(const grpc::Status& status) {
  std::vector<std::string> fields;
  for (const auto& v : ::debugplane::testing::FieldViolations(status)) fields.push_back(v.field());
  return fields;
}

class ServerTest : public ::testing::Test {
 protected:
  ScopedTempDir dir_;
  ServerProcess server_{dir_.path()};
};

TEST_F(ServerTest, TheSageMakerCliTemplateIsAcceptedAsIsAndDescribedLikeSageMaker) {
  auto stub = server_.Stub();
  v1::CreateTrainingJobRequest request;
  auto parsed = google::protobuf::util::JsonStringToMessage(CliTemplateJson(), &request);
  ASSERT_TRUE(parsed.ok()) << parsed.ToString();
  v1::CreateTrainingJobResponse created;
  grpc::Status status = stub->CreateTrainingJob(Context().get(), request, &created);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(created.training_job_arn(),
            "arn:aws:sagemaker:local:000000000000:training-job/debugger-aws-cli-test");

  v1::DescribeTrainingJobRequest describe;
  describe.set_training_job_name("debugger-aws-cli-test");
  v1::DescribeTrainingJobResponse job;
  ASSERT_TRUE(stub->DescribeTrainingJob(Context().get(), describe, &job).ok());
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(job, &json, options).ok());
  EXPECT_THAT(json, HasSubstr(R"("TrainingJobStatus":"InProgress")"));
  EXPECT_THAT(json, HasSubstr(R"("SecondaryStatus":"Starting")"));
  EXPECT_THAT(json, HasSubstr(R"("DebugRuleEvaluationStatuses":[{"RuleConfigurationName":)"
                              R"("LossNotDecreasing")"));
  // InProgress, or already Error: the template's output paths are in S3,
  // and the tests give the server no AWS credentials (a race with the rule
  // scheduler), so the rule says so.
  for (const auto& rule : job.debug_rule_evaluation_statuses()) {
    EXPECT_THAT(
        rule.rule_evaluation_status(),
        ::testing::AnyOf(v1::RuleEvaluationStatus::InProgress, v1::RuleEvaluationStatus::Error));
    if (rule.rule_evaluation_status() == v1::RuleEvaluationStatus::Error) {
      EXPECT_THAT(rule.status_details(), HasSubstr("no AWS credentials for S3"));
    }
  }
  for (const auto& rule : job.profiler_rule_evaluation_statuses()) {
    EXPECT_THAT(
        rule.rule_evaluation_status(),
        ::testing::AnyOf(v1::RuleEvaluationStatus::InProgress, v1::RuleEvaluationStatus::Error));
    if (rule.rule_evaluation_status() == v1::RuleEvaluationStatus::Error) {
      EXPECT_THAT(rule.status_details(), HasSubstr("no AWS credentials for S3"));
    }
  }
  EXPECT_THAT(json, HasSubstr(R"("ProfilerRuleEvaluationStatuses":[{"RuleConfigurationName":)"
                              R"("ProfilerReport")"));
  EXPECT_THAT(json, HasSubstr(R"("ProfilingStatus":"Enabled")"));
  EXPECT_THAT(json, HasSubstr(R"("ProfilingIntervalInMilliseconds":"500")"));
  EXPECT_THAT(json, HasSubstr(R"("CreationTime":")"));
}

TEST_F(ServerTest, InvalidRequestsAreInvalidArgumentWithFieldViolations) {
  auto stub = server_.Stub();
  v1::CreateTrainingJobRequest request = TemplateRequest("bad");
  request.set_training_job_name("bad_name");
  request.mutable_profiler_config()->set_profiling_interval_in_milliseconds(750);
  request.mutable_debug_rule_configurations(0)->mutable_rule_parameters()->at("rule_to_invoke") =
      "NoSuchRule";
  v1::CreateTrainingJobResponse created;
  grpc::Status status = stub->CreateTrainingJob(Context().get(), request, &created);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto fields = ViolatedFields(status);
  EXPECT_THAT(fields, ::testing::Contains("TrainingJobName"));
  EXPECT_THAT(fields, ::testing::Contains("ProfilerConfig.ProfilingIntervalInMilliseconds"));
  EXPECT_THAT(fields, ::testing::Contains(HasSubstr("rule_to_invoke")));
  EXPECT_THAT(status.error_message(), HasSubstr("750"));
}

TEST_F(ServerTest, ErrorsMapToRealGrpcCodes) {
  auto stub = server_.Stub();
  v1::DescribeTrainingJobRequest describe;
  describe.set_training_job_name("missing");
  v1::DescribeTrainingJobResponse job;
  EXPECT_EQ(stub->DescribeTrainingJob(Context().get(), describe, &job).error_code(),
            grpc::StatusCode::NOT_FOUND);

  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(), TemplateRequest("twice"), &created).ok());
  EXPECT_EQ(
      stub->CreateTrainingJob(Context().get(), TemplateRequest("twice"), &created).error_code(),
      grpc::StatusCode::ALREADY_EXISTS);

  v1::DeleteTrainingJobRequest del;
  del.set_training_job_name("twice");
  v1::DeleteTrainingJobResponse deleted;
  EXPECT_EQ(stub->DeleteTrainingJob(Context().get(), del, &deleted).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(ServerTest, MalformedAndOversizedRequestsAreRefusedAndTheServerLives) {
  // Bytes that are not a CreateTrainingJobRequest.
  grpc::GenericStub generic(server_.Channel());
  grpc::ByteBuffer reply;
  const std::string junk = "\xff\xff\xff\xff\x0f garbage \x08";
  grpc::Slice slice(junk);
  grpc::ByteBuffer request_bytes(&slice, 1);
  grpc::Status junk_status;
  absl::Notification done;
  auto context = Context();
  generic.UnaryCall(context.get(), "/debugplane.v1.TrainingJobService/CreateTrainingJob",
                    grpc::StubOptions(), &request_bytes, &reply, [&](grpc::Status s) {
                      junk_status = s;
                      done.Notify();
                    });
  done.WaitForNotification();
  EXPECT_FALSE(junk_status.ok());

  // A request far above the size limit.
  auto stub = server_.Stub();
  v1::CreateTrainingJobRequest huge = TemplateRequest("huge");
  (*huge.mutable_hyper_parameters())["blob"] = std::string(6 * 1024 * 1024, 'x');
  v1::CreateTrainingJobResponse created;
  EXPECT_EQ(stub->CreateTrainingJob(Context().get(), huge, &created).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);

  // Many map entries and long values: refused by validation.
  v1::CreateTrainingJobRequest wide = TemplateRequest("wide");
  for (int i = 0; i < 5000; ++i) (*wide.mutable_environment())[absl::StrCat("K", i)] = "v";
  EXPECT_EQ(stub->CreateTrainingJob(Context().get(), wide, &created).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  EXPECT_TRUE(server_.running());
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(), TemplateRequest("after"), &created).ok());
}

TEST_F(ServerTest, WatchStreamsCurrentStateAndEveryChangeUntilTerminal) {
  auto stub = server_.Stub();
  v1::CreateTrainingJobResponse created;
  // Tensors under the data root, none written yet: the rule waits InProgress.
  v1::CreateTrainingJobRequest request = TemplateRequest("watched");
  request.mutable_debug_hook_config()->set_s3_output_path((dir_.path() / "tensors").string());
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(), request, &created).ok());

  v1::WatchTrainingJobRequest watch;
  watch.set_training_job_name("watched");
  auto watch_context = Context(30);
  auto reader = stub->WatchTrainingJob(watch_context.get(), watch);
  v1::WatchTrainingJobResponse event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.changes(0).kind(), v1::StatusChange::KIND_INITIAL_STATE);
  EXPECT_EQ(event.training_job_status(), v1::TrainingJobStatus::InProgress);

  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name("watched");
  v1::StopTrainingJobResponse stopped;
  ASSERT_TRUE(stub->StopTrainingJob(Context().get(), stop, &stopped).ok());

  std::vector<v1::TrainingJobStatus::Value> statuses;
  while (reader->Read(&event)) statuses.push_back(event.training_job_status());
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_FALSE(statuses.empty());
  EXPECT_EQ(statuses.back(), v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(event.debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::Stopped);

  watch.set_training_job_name("nobody");
  auto missing_context = Context();
  auto missing = stub->WatchTrainingJob(missing_context.get(), watch);
  EXPECT_FALSE(missing->Read(&event));
  EXPECT_EQ(missing->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServerTest, AcknowledgedWritesSurviveSigkill) {
  auto stub = server_.Stub();
  constexpr int kThreads = 8;
  constexpr int kPerThread = 25;
  std::vector<std::thread> threads;
  std::atomic<int> acknowledged{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        v1::CreateTrainingJobResponse created;
        if (stub->CreateTrainingJob(Context().get(), TemplateRequest(absl::StrCat("k", t, "-", i)),
                                    &created)
                .ok()) {
          ++acknowledged;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_EQ(acknowledged.load(), kThreads * kPerThread);
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name("k0-0");
  v1::StopTrainingJobResponse stopped;
  ASSERT_TRUE(stub->StopTrainingJob(Context().get(), stop, &stopped).ok());

  server_.Restart();  // SIGKILL, then start on the same data directory.
  stub = server_.Stub();
  v1::ListTrainingJobsRequest list;
  list.set_max_results(100);
  int count = 0;
  while (true) {
    v1::ListTrainingJobsResponse page;
    ASSERT_TRUE(stub->ListTrainingJobs(Context().get(), list, &page).ok());
    count += page.training_job_summaries_size();
    if (page.next_token().empty()) break;
    list.set_next_token(page.next_token());
  }
  EXPECT_EQ(count, kThreads * kPerThread);
  v1::DescribeTrainingJobRequest describe;
  describe.set_training_job_name("k0-0");
  // Stopping was acknowledged; after the restart the stop completes.
  // Polled while the stop is under way (Stopping).
  grpc::Status described;
  v1::DescribeTrainingJobResponse job;
  WaitUntil(
      [&] {
        job.Clear();
        described = stub->DescribeTrainingJob(Context().get(), describe, &job);
        return !described.ok() || job.training_job_status() != v1::TrainingJobStatus::Stopping;
      },
      absl::Seconds(2));
  ASSERT_TRUE(described.ok());
  ASSERT_NE(job.training_job_status(), v1::TrainingJobStatus::InProgress);
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Stopped)
      << "k0-0 did not reach Stopped after the restart";
}

TEST_F(ServerTest, SigtermShutsDownCleanly) {
  auto stub = server_.Stub();
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(), TemplateRequest("graceful"), &created).ok());
  const int status = server_.Kill(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // A clean close leaves no WAL behind.
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "debugplane.db-wal") &&
               std::filesystem::file_size(dir_.path() / "debugplane.db-wal") > 0);
  server_.Start();
  v1::DescribeTrainingJobRequest describe;
  describe.set_training_job_name("graceful");
  v1::DescribeTrainingJobResponse job;
  EXPECT_TRUE(server_.Stub()->DescribeTrainingJob(Context().get(), describe, &job).ok());
}

TEST_F(ServerTest, HealthServiceAnswersServing) {
  auto health = grpc::health::v1::Health::NewStub(server_.Channel());
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(Context().get(), request, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

// Server reflection, spoken on the wire with hand-encoded messages (the
// reflection protos are compiled into libgrpc++_reflection, so tests cannot
// link their own copy).
class Reflection {
 public:
  explicit Reflection(std::shared_ptr<grpc::Channel> channel) : stub_(std::move(channel)) {}

  // Sends one ServerReflectionRequest with `field` = `value` and returns the
  // response's fields.
  void Ask(int field, const std::string& value, google::protobuf::UnknownFieldSet* fields) {
    std::string request;
    request.push_back(static_cast<char>((field << 3) | 2));
    request.push_back(static_cast<char>(value.size()));
    request += value;
    auto context = Context();
    grpc::CompletionQueue cq;
    auto call = stub_.PrepareCall(
        context.get(), "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
    void* tag;
    bool ok;
    call->StartCall(reinterpret_cast<void*>(1));
    cq.Next(&tag, &ok);
    grpc::Slice slice(request);
    grpc::ByteBuffer buffer(&slice, 1);
    call->Write(buffer, reinterpret_cast<void*>(2));
    cq.Next(&tag, &ok);
    grpc::ByteBuffer reply;
    call->Read(&reply, reinterpret_cast<void*>(3));
    cq.Next(&tag, &ok);
    call->WritesDone(reinterpret_cast<void*>(4));
    cq.Next(&tag, &ok);
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(5));
    cq.Next(&tag, &ok);
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    std::vector<grpc::Slice> slices;
    reply.Dump(&slices);
    std::string bytes;
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    fields->ParseFromString(bytes);
  }

 private:
  grpc::GenericStub stub_;
};

TEST_F(ServerTest, ReflectionServesTheApiAndTheHealthService) {
  Reflection reflection(server_.Channel());
  // list_services = 7 -> list_services_response = 6 { repeated service = 1 { name = 1 } }.
  google::protobuf::UnknownFieldSet listed;
  reflection.Ask(7, "", &listed);
  std::vector<std::string> services;
  for (int i = 0; i < listed.field_count(); ++i) {
    if (listed.field(i).number() != 6) continue;
    google::protobuf::UnknownFieldSet list;
    list.ParseFromString(listed.field(i).length_delimited());
    for (int j = 0; j < list.field_count(); ++j) {
      google::protobuf::UnknownFieldSet service;
      service.ParseFromString(list.field(j).length_delimited());
      services.push_back(service.field(0).length_delimited());
    }
  }
  EXPECT_THAT(services, ::testing::Contains("debugplane.v1.TrainingJobService"));
  EXPECT_THAT(services, ::testing::Contains("grpc.health.v1.Health"));

  // file_containing_symbol = 4 -> file_descriptor_response = 4 { repeated bytes = 1 }.
  google::protobuf::UnknownFieldSet file;
  reflection.Ask(4, "grpc.health.v1.Health", &file);
  bool found = false;
  for (int i = 0; i < file.field_count(); ++i) {
    if (file.field(i).number() != 4) continue;
    google::protobuf::UnknownFieldSet descriptors;
    descriptors.ParseFromString(file.field(i).length_delimited());
    for (int j = 0; j < descriptors.field_count(); ++j) {
      google::protobuf::FileDescriptorProto proto;
      proto.ParseFromString(descriptors.field(j).length_delimited());
      if (proto.name() == "grpc/health/v1/health.proto") found = true;
    }
  }
  EXPECT_TRUE(found) << "reflection did not serve health.proto";
}

TEST(ServerDataRootTest, LocalOutputPathsAreConfinedToDataRoots) {
  ScopedTempDir data_dir;
  ScopedTempDir root;
  ServerProcess server(data_dir.path(), {"--data-root", root.path().string()});
  auto stub = server.Stub();
  v1::CreateTrainingJobRequest inside = TemplateRequest("inside");
  inside.mutable_debug_hook_config()->set_s3_output_path("file://" +
                                                         (root.path() / "debug").string());
  v1::CreateTrainingJobResponse created;
  grpc::Status ok = stub->CreateTrainingJob(Context().get(), inside, &created);
  EXPECT_TRUE(ok.ok()) << ok.error_message();

  v1::CreateTrainingJobRequest outside = TemplateRequest("outside");
  outside.mutable_debug_hook_config()->set_s3_output_path((root.path() / "../elsewhere").string());
  grpc::Status refused = stub->CreateTrainingJob(Context().get(), outside, &created);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(ViolatedFields(refused), ::testing::Contains("DebugHookConfig.S3OutputPath"));
}

// Runs the server with `args` (it must refuse them and exit); returns its
// exit code and what it printed.
std::pair<int, std::string> RunRefusedServer(const std::string& args,
                                             const std::string& listen = "127.0.0.1:0") {
  const std::string command =
      absl::StrCat(DP_SERVER_BINARY, " --listen ", listen, " ", args, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  return {WEXITSTATUS(status), output};
}

TEST(ServerStartupTest, BadActionAndEvaluatorFlagsAreRefusedNamingThem) {
  ScopedTempDir dir;
  const std::string data = absl::StrCat("--data-dir ", dir.path().string(), " ");
  auto [code, output] = RunRefusedServer(data + "--notify-webhook ftp://example.com/hook");
  EXPECT_NE(code, 0);
  // Scheme and host only: a webhook's path may hold its secret.
  EXPECT_THAT(output, HasSubstr("--notify-webhook ftp://example.com is not an http://"));

  std::tie(code, output) = RunRefusedServer(data + "--smtp-url smtp://127.0.0.1:25");
  EXPECT_NE(code, 0);
  EXPECT_THAT(output, HasSubstr("--smtp-url needs --smtp-from"));

  std::tie(code, output) = RunRefusedServer(
      data + "--smtp-url smtp://127.0.0.1:25 --smtp-from a@example.com --smtp-password-file " +
      (dir.path() / "missing").string());
  EXPECT_NE(code, 0);
  EXPECT_THAT(output, HasSubstr("--smtp-password-file"));

  std::tie(code, output) = RunRefusedServer(data + "--allow-evaluator relative/rule.sh");
  EXPECT_NE(code, 0);
  EXPECT_THAT(output, HasSubstr("give an absolute executable path"));

  std::tie(code, output) = RunRefusedServer(
      data + "--allow-evaluator 'my-rule:latest=" + (dir.path() / "nope").string() + "'");
  EXPECT_NE(code, 0);
  EXPECT_THAT(output, HasSubstr("is not an executable file"));
}

// A second server on the same data directory used to start and serve its
// own view of the database (duplicate Creates, lost Stops); with
// SO_REUSEPORT it even shared the first one's port.
TEST(ServerStartupTest, ASecondServerOnTheSameDataDirectoryOrPortIsRefused) {
  ScopedTempDir dir;
  ServerProcess first(dir.path() / "data");
  ASSERT_TRUE(first.running());

  auto [code, output] = RunRefusedServer("--data-dir " + (dir.path() / "data").string());
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, AllOf(HasSubstr("is in use by another debugplane-server (PID "),
                            HasSubstr("another --data-dir")));

  std::tie(code, output) = RunRefusedServer("--data-dir " + (dir.path() / "other").string(),
                                            absl::StrCat("127.0.0.1:", first.port()));
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr(absl::StrCat("127.0.0.1:", first.port())));
  EXPECT_TRUE(first.running());
}

TEST(ServerStartupTest, UnusableDataDirectoryFailsWithAClearMessage) {
  ScopedTempDir dir;
  const std::filesystem::path file = dir.path() / "not-a-dir";
  std::ofstream(file) << "x";
  auto [code, output] = RunRefusedServer("--data-dir " + (file / "sub").string());
  EXPECT_NE(code, 0);
  EXPECT_THAT(output, HasSubstr("data directory"));
}

}  // namespace
}  // namespace debugplane
