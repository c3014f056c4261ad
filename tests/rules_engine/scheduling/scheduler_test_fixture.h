// The shared fixture of the scheduler tests: an EvaluationScheduler over a
// SQLite-backed TrainingJobManager in a temporary directory, and the steps
// the tests take with it (create a job with built-in rules, report that
// training ended, read and wait for a rule's status).

#ifndef DEBUGPLANE_TESTS_RULES_ENGINE_SCHEDULING_SCHEDULER_TEST_FIXTURE_H_
#define DEBUGPLANE_TESTS_RULES_ENGINE_SCHEDULING_SCHEDULER_TEST_FIXTURE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "base/clock.h"
#include "gtest/gtest.h"
#include "rules_engine/scheduling/evaluation_scheduler.h"
#include "tests/core/test_util.h"
#include "tests/support/wait_until.h"

namespace debugplane::rules_engine::testing {

// A debug rule configuration: its name, the built-in rule it invokes, and
// its parameters.
struct RuleSpec {
  std::string name;
  std::string rule;
  std::map<std::string, std::string> parameters;
};

// A CreateTrainingJob request for `name` with a valid role and s3:// model
// output, and nothing else (no hook, no rules).
inline v1::CreateTrainingJobRequest NewJobRequest(const std::string& name) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  return request;
}

// Adds the built-in debug rule `spec` to `request`.
inline void AddBuiltinDebugRule(v1::CreateTrainingJobRequest& request, const RuleSpec& spec) {
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name(spec.name);
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = spec.rule;
  for (const auto& [key, value] : spec.parameters) (*rule->mutable_rule_parameters())[key] = value;
}

// Creates the job of `request` through the manager's handler API; a failure
// fails the test (callers ASSERT_NO_FATAL_FAILURE where it matters).
inline void CreateJobOrFail(core::TrainingJobManager& manager,
                            const v1::CreateTrainingJobRequest& request) {
  auto created = ::debugplane::testing::CallSync<v1::CreateTrainingJobResponse>(
      manager, &core::TrainingJobHandler::CreateTrainingJob, request);
  ASSERT_TRUE(created.ok()) << created.status();
}

// What an agent reports about the training command of `job` (e.g.
// EVENT_COMPLETED when it exits 0); waits until the manager has recorded it.
inline void ReportTraining(core::TrainingJobManager& manager, const std::string& job,
                           v1::ReportTrainingStatusRequest::Event event) {
  v1::ReportTrainingStatusRequest request;
  request.set_training_job_name(job);
  request.set_event(event);
  v1::ReportTrainingStatusResponse response;
  absl::Notification done;
  absl::Status result;
  manager.ReportTrainingStatus(request, &response, [&](absl::Status status) {
    result = status;
    done.Notify();
  });
  done.WaitForNotification();
  ASSERT_TRUE(result.ok()) << result;
}

// The current status of debug rule `rule` of `job`, or an empty status (and
// a test failure) when the job has no such rule.
inline v1::DebugRuleEvaluationStatus DebugRuleStatus(core::TrainingJobManager& manager,
                                                     const std::string& job,
                                                     const std::string& rule) {
  // The record is held while its statuses are read: the commit thread may
  // publish a newer one and drop this one meanwhile.
  const std::shared_ptr<const core::JobRecord> record = manager.GetJob(job);
  for (const auto& status : record->debug_rule_evaluation_statuses()) {
    if (status.rule_configuration_name() == rule) return status;
  }
  ADD_FAILURE() << "no rule " << rule << " in " << job;
  return {};
}

// Waits (real time, kDefaultPatience) until debug rule `rule` of `job` is
// terminal and returns that status; on timeout, fails the test and returns
// an empty status.
inline v1::DebugRuleEvaluationStatus WaitForTerminalDebugRule(core::TrainingJobManager& manager,
                                                              const std::string& job,
                                                              const std::string& rule) {
  v1::DebugRuleEvaluationStatus status;
  if (::debugplane::testing::WaitUntil([&] {
        status = DebugRuleStatus(manager, job, rule);
        return core::IsTerminal(status.rule_evaluation_status());
      })) {
    return status;
  }
  ADD_FAILURE() << rule << " of " << job << " never ended";
  return {};
}

// A manager over <dir_>/jobs.db with dir_ as a data root, and a scheduler
// with options_ (dir_ as its data root) that tests start when they have set
// the options they need. Destroys the scheduler before the manager.
class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto manager = ::debugplane::testing::OpenTestManager(dir_.path());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    options_.data_roots.push_back(dir_.path());
  }
  void TearDown() override {
    scheduler_.reset();
    manager_.reset();
  }

  void StartScheduler() {
    scheduler_ = std::make_unique<EvaluationScheduler>(manager_.get(), options_);
    scheduler_->Start();
  }

  // A job whose hook writes to `trial`, with the built-in debug rules `rules`.
  void CreateJobWithRules(const std::string& name, const std::string& trial,
                          const std::vector<RuleSpec>& rules) {
    v1::CreateTrainingJobRequest request = NewJobRequest(name);
    request.mutable_debug_hook_config()->set_s3_output_path(trial);
    for (const RuleSpec& spec : rules) AddBuiltinDebugRule(request, spec);
    CreateJobOrFail(*manager_, request);
  }
  // A job with one built-in debug rule, named after the rule it invokes.
  void CreateJob(const std::string& name, const std::string& trial, const std::string& rule,
                 const std::map<std::string, std::string>& parameters = {}) {
    CreateJobWithRules(name, trial, {{rule, rule, parameters}});
  }

  // What the agent reports when the training command exits 0.
  void ReportCompleted(const std::string& job) {
    ReportTraining(*manager_, job, v1::ReportTrainingStatusRequest::EVENT_COMPLETED);
  }

  v1::DebugRuleEvaluationStatus RuleStatus(const std::string& job, const std::string& rule) {
    return DebugRuleStatus(*manager_, job, rule);
  }
  v1::DebugRuleEvaluationStatus WaitForRule(const std::string& job, const std::string& rule) {
    return WaitForTerminalDebugRule(*manager_, job, rule);
  }

  ::debugplane::testing::ScopedTempDir dir_;
  EvaluationSchedulerOptions options_;
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<EvaluationScheduler> scheduler_;
};

// A SchedulerTest whose scheduler's time is clock_, a FakeClock: polling,
// stall thresholds and budgets move only when the test advances it.
class FakeClockSchedulerTest : public SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerTest::SetUp();
    options_.clock = clock_;
  }

  std::shared_ptr<base::FakeClock> clock_ = std::make_shared<base::FakeClock>();
};

}  // namespace debugplane::rules_engine::testing

#endif  // DEBUGPLANE_TESTS_RULES_ENGINE_SCHEDULING_SCHEDULER_TEST_FIXTURE_H_
