// Mutation fuzzing through the real gRPC stack: valid requests of every
// method, their bytes flipped, cut, repeated and spliced by a seeded
// generator, sent to the real server. Whatever arrives, the server answers
// with a status a client can act on (never INTERNAL or UNKNOWN, never a
// dropped connection) and keeps serving: the parsers' fuzzers cover the
// decoders, this covers the adapters, validation and the job manager as a
// client reaches them.

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "debugplane/v1/profiler_report.pb.h"
#include "debugplane/v1/training_agent.pb.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/service/server_process.h"

namespace debugplane {
namespace {

using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;

struct Seed {
  std::string method;  // "/package.Service/Method".
  std::string body;    // A valid encoded request.
};

v1::CreateTrainingJobRequest ValidCreate(const std::string& name) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
  request.mutable_debug_hook_config()->set_s3_output_path("s3://bucket/debug-output");
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("Loss");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "LossNotDecreasing";
  (*rule->mutable_rule_parameters())["tensor_regex"] = ".*loss.*";
  auto* profiler = request.add_profiler_rule_configurations();
  profiler->set_rule_configuration_name("Report");
  profiler->set_rule_evaluator_image("builtin");
  (*profiler->mutable_rule_parameters())["rule_to_invoke"] = "ProfilerReport";
  request.mutable_profiler_config()->set_profiling_interval_in_milliseconds(500);
  (*request.mutable_profiler_config()->mutable_profiling_parameters())["DetailedProfilingConfig"] =
      R"({"StartStep": 5, "NumSteps": 3})";
  request.mutable_stopping_condition()->set_max_runtime_in_seconds(3600);
  return request;
}

std::vector<Seed> Seeds() {
  const std::string job = "/debugplane.v1.TrainingJobService/";
  std::vector<Seed> seeds;
  seeds.push_back({job + "CreateTrainingJob", ValidCreate("seed-job").SerializeAsString()});
  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("seed-job");
  update.mutable_profiler_config()->set_profiling_interval_in_milliseconds(100);
  (*update.mutable_profiler_config()->mutable_profiling_parameters())["DataloaderProfilingConfig"] =
      R"({"StartStep": 7, "NumSteps": 2})";
  seeds.push_back({job + "UpdateTrainingJob", update.SerializeAsString()});
  v1::DescribeTrainingJobRequest describe;
  describe.set_training_job_name("seed-job");
  seeds.push_back({job + "DescribeTrainingJob", describe.SerializeAsString()});
  v1::ListTrainingJobsRequest list;
  list.set_name_contains("seed");
  list.set_max_results(5);
  list.set_sort_by("CreationTime");
  seeds.push_back({job + "ListTrainingJobs", list.SerializeAsString()});
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name("seed-job");
  seeds.push_back({job + "StopTrainingJob", stop.SerializeAsString()});
  v1::DeleteTrainingJobRequest remove;
  remove.set_training_job_name("other-job");
  seeds.push_back({job + "DeleteTrainingJob", remove.SerializeAsString()});
  v1::ReportTrainingStatusRequest report;
  report.set_training_job_name("seed-job");
  report.set_event(v1::ReportTrainingStatusRequest::EVENT_PROGRESS);
  report.set_current_step(12);
  seeds.push_back(
      {"/debugplane.v1.TrainingAgentService/ReportTrainingStatus", report.SerializeAsString()});
  v1::GetProfilerReportRequest get_report;
  get_report.set_training_job_name("seed-job");
  get_report.set_format(v1::ProfilerReportFormat::JSON);
  seeds.push_back(
      {"/debugplane.v1.ProfilerReportService/GetProfilerReport", get_report.SerializeAsString()});
  return seeds;
}

// One mutation of `body`: byte flips, insertions of interesting bytes,
// deletions, truncation, duplication of a slice, or a splice with another
// seed (which yields valid-looking fields of other messages).
std::string Mutate(std::string body, const std::vector<Seed>& seeds, std::mt19937_64& random) {
  const auto pick = [&random](size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(random);
  };
  static const char kInteresting[] = {'\0', '\x7f', '\x80', '\xff', '{', '[', '(', '\\', '"', 'x'};
  const int steps = 1 + static_cast<int>(pick(4));
  for (int step = 0; step < steps; ++step) {
    switch (pick(6)) {
      case 0:
        if (!body.empty()) body[pick(body.size())] ^= static_cast<char>(1 << pick(8));
        break;
      case 1:
        body.insert(pick(body.size() + 1), 1 + pick(8), kInteresting[pick(sizeof(kInteresting))]);
        break;
      case 2:
        if (!body.empty()) body.erase(pick(body.size()), 1 + pick(8));
        break;
      case 3:
        body.resize(pick(body.size() + 1));
        break;
      case 4: {
        if (body.empty()) break;
        const size_t from = pick(body.size());
        const std::string slice = body.substr(from, 1 + pick(64));
        body.insert(pick(body.size() + 1), slice);
        break;
      }
      default: {
        const std::string& other = seeds[pick(seeds.size())].body;
        body = body.substr(0, pick(body.size() + 1)) + other.substr(pick(other.size() + 1));
      }
    }
  }
  return body;
}

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

TEST(GrpcMutationTest, MutatedRequestsOfEveryMethodGetActionableAnswersAndTheServerServesOn) {
  ScopedTempDir dir;
  ServerProcess server(dir.path() / "data");
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  const std::vector<Seed> seeds = Seeds();
  // The answers a client can act on; INTERNAL, UNKNOWN, UNAVAILABLE (the
  // connection dropped) and DEADLINE_EXCEEDED (a hang) are findings.
  const std::set<grpc::StatusCode> actionable = {
      grpc::StatusCode::OK,        grpc::StatusCode::INVALID_ARGUMENT,
      grpc::StatusCode::NOT_FOUND, grpc::StatusCode::ALREADY_EXISTS,
      grpc::StatusCode::FAILED_PRECONDITION, grpc::StatusCode::RESOURCE_EXHAUSTED};

  std::mt19937_64 random(20261124);  // Seeded: a finding can be replayed.
  constexpr int kCalls = 3000;
  int ok = 0;
  for (int i = 0; i < kCalls; ++i) {
    const Seed& seed = seeds[i % seeds.size()];
    const std::string body = i < static_cast<int>(seeds.size()) ? seed.body
                                                                : Mutate(seed.body, seeds, random);
    const grpc::Status status = CallRaw(stub, seed.method, body);
    ASSERT_TRUE(actionable.count(status.error_code()))
        << "call " << i << " " << seed.method << " answered " << status.error_code() << ": "
        << status.error_message() << " (replay: seed 20261124, call " << i << ")";
    if (status.ok()) ++ok;
  }
  EXPECT_GT(ok, 0) << "no mutated request was ever accepted: the seeds are not valid";

  ASSERT_TRUE(server.running());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::health::v1::HealthCheckResponse health;
  ASSERT_TRUE(grpc::health::v1::Health::NewStub(channel)->Check(&context, {}, &health).ok());
  EXPECT_EQ(health.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

}  // namespace
}  // namespace debugplane
