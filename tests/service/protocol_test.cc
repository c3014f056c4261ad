// Protocol answers through the real gRPC stack: a request body that does not
// decode is INVALID_ARGUMENT naming the method, on every method (gRPC's own
// answer is UNIMPLEMENTED with no message).

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/service/server_process.h"

namespace debugplane {
namespace {

using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Sends `body` as the raw request of `method` and returns the status.
grpc::Status CallRaw(grpc::GenericStub& stub, const std::string& method, const std::string& body) {
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  absl::Mutex mu;
  bool done = false;
  grpc::Status result;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status status) {
                   absl::MutexLock lock(&mu);
                   result = std::move(status);
                   done = true;
                 });
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(&done));
  return result;
}

// Reads the first message or the status of a server-streaming method.
grpc::Status CallRawStream(grpc::GenericStub& stub, const std::string& method,
                           const std::string& body) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue queue;
  auto call = stub.PrepareCall(&context, method, &queue);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  queue.Next(&tag, &ok);
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1);
  call->WriteLast(request, grpc::WriteOptions(), reinterpret_cast<void*>(2));
  queue.Next(&tag, &ok);
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  queue.Next(&tag, &ok);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  while (queue.Next(&tag, &ok) && tag != reinterpret_cast<void*>(4)) {
  }
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  return status;
}

TEST(ProtocolTest, AnUndecodableBodyIsInvalidArgumentNamingTheMethodOnEveryMethod) {
  ScopedTempDir dir;
  ServerProcess server(dir.path());
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.port()),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  // JSON sent as if it were the protobuf body: '{' starts a group that never ends.
  const std::string body = R"({"TrainingJobName": "job"})";
  const std::vector<std::pair<std::string, std::string>> unary = {
      {"debugplane.v1.TrainingJobService", "CreateTrainingJob"},
      {"debugplane.v1.TrainingJobService", "DescribeTrainingJob"},
      {"debugplane.v1.TrainingJobService", "ListTrainingJobs"},
      {"debugplane.v1.TrainingJobService", "UpdateTrainingJob"},
      {"debugplane.v1.TrainingJobService", "StopTrainingJob"},
      {"debugplane.v1.TrainingJobService", "DeleteTrainingJob"},
      {"debugplane.v1.TrainingAgentService", "ReportTrainingStatus"},
      {"debugplane.v1.ProfilerReportService", "GetProfilerReport"},
  };
  for (const auto& [service, method] : unary) {
    grpc::Status status = CallRaw(stub, absl::StrCat("/", service, "/", method), body);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(status.error_message(),
                AllOf(HasSubstr(method), HasSubstr("is not a valid debugplane.v1.")))
        << method;
  }
  const std::vector<std::pair<std::string, std::string>> streaming = {
      {"debugplane.v1.TrainingJobService", "WatchTrainingJob"},
      {"debugplane.v1.TrainingAgentService", "ConnectAgent"},
  };
  for (const auto& [service, method] : streaming) {
    grpc::Status status = CallRawStream(stub, absl::StrCat("/", service, "/", method), body);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(status.error_message(), HasSubstr(method)) << method;
  }
  EXPECT_TRUE(server.running());
}

}  // namespace
}  // namespace debugplane
