// Helpers for tests that drive a TrainingJobHandler directly.

#ifndef DEBUGPLANE_TESTS_CORE_TEST_UTIL_H_
#define DEBUGPLANE_TESTS_CORE_TEST_UTIL_H_

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "core/manager/training_job_handler.h"
#include "core/manager/training_job_manager.h"
#include "gtest/gtest.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::testing {

// A job manager over a new SQLite database <dir>/jobs.db, with `options`
// and `dir` as a data root (local output paths under it are valid).
inline absl::StatusOr<std::unique_ptr<core::TrainingJobManager>> OpenTestManager(
    const std::filesystem::path& dir, core::TrainingJobManagerOptions options = {}) {
  auto storage = persistence::SqliteStorage::Open((dir / "jobs.db").string());
  if (!storage.ok()) return storage.status();
  options.validation.data_roots.push_back(dir);
  return core::TrainingJobManager::Create(*std::move(storage), std::move(options));
}

// A CreateTrainingJob request with two built-in debug rules
// (VanishingGradient, ExplodingTensor) on s3:// output paths.
inline v1::CreateTrainingJobRequest JobWithDebugRules(const std::string& name) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_algorithm_specification()->set_training_input_mode("File");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
  request.mutable_debug_hook_config()->set_s3_output_path("s3://bucket/debug-output");
  for (const char* rule_name : {"VanishingGradient", "ExplodingTensor"}) {
    auto* rule = request.add_debug_rule_configurations();
    rule->set_rule_configuration_name(rule_name);
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = rule_name;
  }
  return request;
}

// Calls an asynchronous handler method and waits for its completion.
template <typename Response, typename Request, typename Method>
absl::StatusOr<Response> CallSync(core::TrainingJobHandler& handler, Method method,
                                  const Request& request) {
  Response response;
  absl::Notification done;
  absl::Status result;
  (handler.*method)(request, &response, [&](absl::Status status) {
    result = status;
    done.Notify();
  });
  done.WaitForNotification();
  if (!result.ok()) return result;
  return response;
}

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_CORE_TEST_UTIL_H_
