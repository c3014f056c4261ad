// Unary calls served raw (service/raw_call.h): the request and the response
// live on an arena whose first block is inside the call. Through the real
// gRPC stack and the real job manager over SQLite, requests that fit in that
// block and requests many times its size arrive whole, concurrently, and the
// call outlives the handler's thread hop (Create completes on the
// committer).

#include "service/raw_call.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/manager/training_job_manager.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "service/server.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::service {
namespace {

using ::debugplane::testing::ScopedTempDir;

// A request with `rules` debug rules of `parameters` parameters each.
v1::CreateTrainingJobRequest Request(const std::string& name, int rules, int parameters) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
  request.mutable_debug_hook_config()->set_s3_output_path("s3://bucket/debug-output");
  for (int r = 0; r < rules; ++r) {
    auto* rule = request.add_debug_rule_configurations();
    rule->set_rule_configuration_name(absl::StrCat("Custom", r));
    rule->set_rule_evaluator_image(
        "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = "VanishingGradient";
    for (int p = 0; p < parameters; ++p) {
      (*rule->mutable_rule_parameters())[absl::StrCat("parameter_", p)] =
          std::string(40, static_cast<char>('a' + p % 26));
    }
  }
  return request;
}

class RawCallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto storage = persistence::SqliteStorage::Open((dir_.path() / "jobs.db").string());
    ASSERT_TRUE(storage.ok()) << storage.status();
    auto manager = core::TrainingJobManager::Create(*std::move(storage), {});
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    GrpcServerOptions options;
    options.listen_address = "127.0.0.1:0";
    auto server = GrpcServer::Start(options, manager_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::TrainingJobService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(1));
  }

  // Creates `request` and checks that the job's configuration is the
  // request's, field for field.
  void CreateAndCompare(const v1::CreateTrainingJobRequest& request) {
    grpc::ClientContext create_context;
    v1::CreateTrainingJobResponse created;
    grpc::Status status = stub_->CreateTrainingJob(&create_context, request, &created);
    ASSERT_TRUE(status.ok()) << request.training_job_name() << ": " << status.error_message();
    EXPECT_NE(created.training_job_arn().find(request.training_job_name()), std::string::npos);
    grpc::ClientContext describe_context;
    v1::DescribeTrainingJobRequest describe;
    describe.set_training_job_name(request.training_job_name());
    v1::DescribeTrainingJobResponse job;
    status = stub_->DescribeTrainingJob(&describe_context, describe, &job);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(job.debug_rule_configurations_size(), request.debug_rule_configurations_size());
    for (int r = 0; r < request.debug_rule_configurations_size(); ++r) {
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
          job.debug_rule_configurations(r), request.debug_rule_configurations(r)))
          << "rule " << r << " of " << request.training_job_name();
    }
    EXPECT_EQ(job.debug_hook_config().s3_output_path(),
              request.debug_hook_config().s3_output_path());
  }

  ScopedTempDir dir_;
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<v1::TrainingJobService::Stub> stub_;
};

TEST_F(RawCallTest, RequestsSmallerAndLargerThanTheFirstArenaBlockArriveWhole) {
  const v1::CreateTrainingJobRequest small = Request("small", 1, 2);
  const v1::CreateTrainingJobRequest large = Request("large", 20, 40);
  ASSERT_LT(small.ByteSizeLong(), kRawCallArenaBlockBytes / 4);
  // Decoded, it takes several times its wire size: many blocks.
  ASSERT_GT(large.ByteSizeLong(), 4 * kRawCallArenaBlockBytes);
  CreateAndCompare(small);
  CreateAndCompare(large);
}

TEST_F(RawCallTest, ConcurrentCallsKeepTheirOwnRequests) {
  // Each call's request lives on its own arena until its reply is encoded
  // on the committer thread; no call sees another's.
  std::vector<std::thread> callers;
  for (int c = 0; c < 8; ++c) {
    callers.emplace_back([this, c] {
      for (int i = 0; i < 5; ++i) {
        CreateAndCompare(Request(absl::StrCat("c", c, "-", i), 1 + (c + i) % 20, 1 + c * 5));
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(manager_->job_count(), 40u);
}

}  // namespace
}  // namespace debugplane::service
