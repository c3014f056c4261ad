// Synchronous TrainingJobService calls for end-to-end tests, each with a
// deadline (Context()) so that no test waits forever on a hung server.

#ifndef DEBUGPLANE_TESTS_SERVICE_TRAINING_JOB_CALLS_H_
#define DEBUGPLANE_TESTS_SERVICE_TRAINING_JOB_CALLS_H_

#include <filesystem>
#include <string>

#include "debugplane/v1/training_job.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/service/server_process.h"

namespace debugplane::testing {

// A CreateTrainingJob request with what it requires (a role, an output
// path), its tensors written to `tensors` and its profiler output to
// `profiler` when given (each must be under one of the server's data roots).
inline v1::CreateTrainingJobRequest MinimalJob(const std::string& name,
                                               const std::filesystem::path& tensors = {},
                                               const std::filesystem::path& profiler = {}) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  if (!tensors.empty()) request.mutable_debug_hook_config()->set_s3_output_path(tensors.string());
  if (!profiler.empty()) request.mutable_profiler_config()->set_s3_output_path(profiler.string());
  return request;
}

// CreateTrainingJob(`request`); returns the call's status (callers assert
// it, so that a failed creation stops the test).
inline grpc::Status CreateJob(v1::TrainingJobService::Stub& stub,
                              const v1::CreateTrainingJobRequest& request) {
  v1::CreateTrainingJobResponse created;
  return stub.CreateTrainingJob(Context().get(), request, &created);
}

// DescribeTrainingJob(`name`). A failed call is a test failure (with the
// server's message) and yields an empty response.
inline v1::DescribeTrainingJobResponse DescribeJob(v1::TrainingJobService::Stub& stub,
                                                   const std::string& name) {
  v1::DescribeTrainingJobRequest request;
  request.set_training_job_name(name);
  v1::DescribeTrainingJobResponse job;
  grpc::Status status = stub.DescribeTrainingJob(Context().get(), request, &job);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return job;
}

// The job's first debug rule status (empty if it has none), from
// DescribeJob.
inline v1::DebugRuleEvaluationStatus DescribeRule(v1::TrainingJobService::Stub& stub,
                                                  const std::string& job) {
  v1::DescribeTrainingJobResponse response = DescribeJob(stub, job);
  if (response.debug_rule_evaluation_statuses_size() == 0) return {};
  return response.debug_rule_evaluation_statuses(0);
}

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_TRAINING_JOB_CALLS_H_
