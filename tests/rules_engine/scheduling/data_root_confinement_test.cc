// The scheduler reads a job's output only inside its data root, however the
// directories change after CreateTrainingJob checked the path: a trial that
// became a symbolic link, a link inside the profiler folder, and other_trials
// naming a job whose trial became a link are never followed, and the rules
// say why (naming the link) without quoting what lies outside.

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/rules_engine/scheduling/scheduler_test_fixture.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::TrialWriter;

constexpr char kLinkRefused[] =
    " is a symbolic link; debugplane does not follow links inside a data root";
// What a file outside the data root holds: it must never reach a status.
constexpr char kSecret[] = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

// Steps 0..2 of a loss, NaN at step 1: ExplodingTensor finds it if it reads
// this trial.
void WriteNanTrial(const std::string& dir) {
  TrialWriter writer(dir);
  for (int step = 0; step < 3; ++step) {
    writer.AddStep(step, Mode::kTrain, step,
                   {{"CrossEntropyLoss_output_0",
                     {},
                     {step == 1 ? std::numeric_limits<double>::quiet_NaN() : 1.0}}});
  }
  writer.EndTraining();
}

// With openat2 and with the component walk the kernel lacks it for.
class DataRootConfinementTest
    : public ::testing::TestWithParam<objectstore::LocalObjectStore::Resolution> {
 protected:
  void SetUp() override {
    auto manager = ::debugplane::testing::OpenTestManager(root_.path());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    EvaluationSchedulerOptions options;
    options.data_roots.push_back(root_.path());
    options.data_root_store_options.resolution = GetParam();
    options.poll_interval = absl::Milliseconds(50);
    scheduler_ = std::make_unique<EvaluationScheduler>(manager_.get(), options);
    scheduler_->Start();
  }
  void TearDown() override {
    scheduler_.reset();
    manager_.reset();
  }

  v1::CreateTrainingJobRequest NewJob(const std::string& name) {
    return testing::NewJobRequest(name);
  }
  void AddDebugRule(v1::CreateTrainingJobRequest& request, const std::string& rule_to_invoke,
                    const std::map<std::string, std::string>& parameters = {}) {
    testing::AddBuiltinDebugRule(request, {rule_to_invoke, rule_to_invoke, parameters});
  }
  void Create(const v1::CreateTrainingJobRequest& request) {
    testing::CreateJobOrFail(*manager_, request);
  }
  void ReportCompleted(const std::string& job) {
    testing::ReportTraining(*manager_, job, v1::ReportTrainingStatusRequest::EVENT_COMPLETED);
  }

  // Waits until debug rule `rule` of `job` is terminal; returns its status.
  v1::DebugRuleEvaluationStatus WaitForDebugRule(const std::string& job, const std::string& rule) {
    return testing::WaitForTerminalDebugRule(*manager_, job, rule);
  }
  v1::ProfilerRuleEvaluationStatus WaitForProfilerRule(const std::string& job) {
    v1::ProfilerRuleEvaluationStatus status;
    if (::debugplane::testing::WaitUntil([&] {
          status = manager_->GetJob(job)->profiler_rule_evaluation_statuses(0);
          return core::IsTerminal(status.rule_evaluation_status());
        })) {
      return status;
    }
    ADD_FAILURE() << "the profiler rule of " << job << " never ended";
    return {};
  }

  ScopedTempDir root_;     // The data root.
  ScopedTempDir outside_;  // Outside every data root.
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<EvaluationScheduler> scheduler_;
};

TEST_P(DataRootConfinementTest, TrialThatBecomesASymlinkAfterCreateIsNotRead) {
  // Checked at Create: the trial does not exist yet, which is fine.
  const fs::path trial = root_.path() / "job" / "tensors";
  v1::CreateTrainingJobRequest request = NewJob("linked");
  request.mutable_debug_hook_config()->set_s3_output_path(trial.string());
  AddDebugRule(request, "ExplodingTensor");
  Create(request);

  // Then the trial directory appears as a link to a trial outside the root
  // (read, its NaN would be IssuesFound).
  WriteNanTrial((outside_.path() / "trial").string());
  fs::create_directories(trial.parent_path());
  fs::create_directory_symlink(outside_.path() / "trial", trial);

  const v1::DebugRuleEvaluationStatus status = WaitForDebugRule("linked", "ExplodingTensor");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::Error)
      << status.status_details();
  EXPECT_THAT(status.status_details(), HasSubstr(absl::StrCat(trial.string(), kLinkRefused)));
}

TEST_P(DataRootConfinementTest, TrialDirectorySwappedForASymlinkIsNotRead) {
  // A healthy trial inside the root, being written...
  const fs::path trial = root_.path() / "swapped" / "tensors";
  {
    TrialWriter writer(trial.string());
    writer.AddStep(0, Mode::kTrain, 0, {{"CrossEntropyLoss_output_0", {}, {1.0}}});
  }
  v1::CreateTrainingJobRequest request = NewJob("swapped");
  request.mutable_debug_hook_config()->set_s3_output_path(trial.string());
  AddDebugRule(request, "ExplodingTensor");
  Create(request);
  // ... is moved away and replaced by a link to one outside.
  WriteNanTrial((outside_.path() / "trial").string());
  fs::rename(trial, root_.path() / "swapped" / "moved-away");
  fs::create_directory_symlink(outside_.path() / "trial", trial);
  ReportCompleted("swapped");

  const v1::DebugRuleEvaluationStatus status = WaitForDebugRule("swapped", "ExplodingTensor");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::Error)
      << status.status_details();
  EXPECT_THAT(status.status_details(), HasSubstr(absl::StrCat(trial.string(), kLinkRefused)));
}

TEST_P(DataRootConfinementTest, SymlinkInsideTheProfilerFolderIsNotFollowed) {
  // Outside: a CPU bottleneck (95% CPU, 2% GPU), then a secret.
  const fs::path outside_metrics = outside_.path() / "metrics.json";
  {
    std::ofstream out(outside_metrics);
    for (int i = 0; i < 400; ++i) {
      for (int core = 0; core < 4; ++core) {
        out << absl::StrFormat(
            "{\"Type\": \"cpu\", \"Name\": \"cpu%d\", \"Dimension\": \"CPUUtilization\", "
            "\"Value\": 95.0, \"NodeId\": \"algo-1\", \"Timestamp\": %d.0}\n",
            core, 1795300000 + i);
      }
      out << absl::StrFormat(
          "{\"Type\": \"gpu\", \"Name\": \"gpu0\", \"Dimension\": \"GPUUtilization\", "
          "\"Value\": 2.0, \"NodeId\": \"algo-1\", \"Timestamp\": %d.0}\n",
          1795300000 + i);
    }
    out << kSecret << "\n";
  }
  const fs::path profiler = root_.path() / "profiled" / "profiler";
  const fs::path hour = profiler / "system" / "incremental" / "2026112207";
  fs::create_directories(hour);
  const fs::path link = hour / "1795300000.algo-1.json";
  fs::create_symlink(outside_metrics, link);

  v1::CreateTrainingJobRequest request = NewJob("profiled");
  request.mutable_profiler_config()->set_s3_output_path(profiler.string());
  auto* rule = request.add_profiler_rule_configurations();
  rule->set_rule_configuration_name("CPUBottleneck");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "CPUBottleneck";
  (*rule->mutable_rule_parameters())["patience"] = "0";
  Create(request);
  ReportCompleted("profiled");

  const v1::ProfilerRuleEvaluationStatus status = WaitForProfilerRule("profiled");
  EXPECT_NE(status.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound)
      << status.status_details();
  EXPECT_THAT(status.status_details(), HasSubstr(absl::StrCat(link.string(), kLinkRefused)));
  EXPECT_THAT(status.status_details(), Not(HasSubstr("wJalrXUtnFEMI")));
}

TEST_P(DataRootConfinementTest, OtherTrialsNamingAJobWhoseTrialBecameASymlinkIsNotRead) {
  // "base" is created with its own trial path inside the root, then that
  // path becomes a link to a trial outside.
  const fs::path base_trial = root_.path() / "base" / "tensors";
  v1::CreateTrainingJobRequest base = NewJob("base");
  base.mutable_debug_hook_config()->set_s3_output_path(base_trial.string());
  Create(base);
  WriteNanTrial((outside_.path() / "trial").string());
  fs::create_directories(base_trial.parent_path());
  fs::create_directory_symlink(outside_.path() / "trial", base_trial);

  // "compare" holds the same steps as the outside trial: read through the
  // link, SimilarAcrossRuns would find nothing wrong.
  const fs::path compare_trial = root_.path() / "compare" / "tensors";
  WriteNanTrial(compare_trial.string());
  v1::CreateTrainingJobRequest compare = NewJob("compare");
  compare.mutable_debug_hook_config()->set_s3_output_path(compare_trial.string());
  AddDebugRule(compare, "SimilarAcrossRuns",
               {{"other_trials", "base"}, {"tensor_regex", "CrossEntropyLoss.*"}});
  Create(compare);

  const v1::DebugRuleEvaluationStatus status = WaitForDebugRule("compare", "SimilarAcrossRuns");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::Error)
      << status.status_details();
  EXPECT_THAT(status.status_details(), HasSubstr(absl::StrCat(base_trial.string(), kLinkRefused)));
}

TEST_P(DataRootConfinementTest, ParseErrorsDoNotQuoteTheFile) {
  // A system metrics file whose second line is not JSON, with a secret in
  // it: the rule's details say where and what, not the secret.
  const fs::path profiler = root_.path() / "malformed" / "profiler";
  const fs::path hour = profiler / "system" / "incremental" / "2026112207";
  fs::create_directories(hour);
  {
    std::ofstream out(hour / "1795300000.algo-1.json");
    out << "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", "
           "\"Value\": 5.0, \"NodeId\": \"algo-1\", \"Timestamp\": 1795300000.0}\n";
    out << "{\"Type\": \"" << kSecret << "\x01\"}\n";
  }
  v1::CreateTrainingJobRequest request = NewJob("malformed");
  request.mutable_profiler_config()->set_s3_output_path(profiler.string());
  auto* rule = request.add_profiler_rule_configurations();
  // ProfilerReport's details say what was read, malformed lines included.
  rule->set_rule_configuration_name("ProfilerReport");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ProfilerReport";
  Create(request);
  ReportCompleted("malformed");

  const v1::ProfilerRuleEvaluationStatus status = WaitForProfilerRule("malformed");
  EXPECT_THAT(status.status_details(),
              HasSubstr("system/incremental/2026112207/1795300000.algo-1.json:2: JSON parse error"))
      << status.status_details();
  EXPECT_THAT(status.status_details(), Not(HasSubstr("wJalrXUtnFEMI")));
}

TEST_P(DataRootConfinementTest, TensorNamesInDetailsAreEscapedAndCut) {
  // A rule that finds nothing it wants says which tensors the trial held:
  // names from the trial's files, shown escaped and cut.
  const std::string name = std::string(200, 'n') + "\n\x01";
  const fs::path trial = root_.path() / "named" / "tensors";
  {
    TrialWriter writer(trial.string());
    writer.AddStep(0, Mode::kTrain, 0, {{name, {}, {1.0}}});
    writer.EndTraining();
  }
  v1::CreateTrainingJobRequest request = NewJob("named");
  request.mutable_debug_hook_config()->set_s3_output_path(trial.string());
  AddDebugRule(request, "VanishingGradient");
  Create(request);
  const v1::DebugRuleEvaluationStatus status = WaitForDebugRule("named", "VanishingGradient");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(status.status_details(), HasSubstr("with tensors [" + std::string(40, 'n') + "...]"))
      << status.status_details();
  EXPECT_THAT(status.status_details(), Not(HasSubstr(std::string(41, 'n'))));
}

INSTANTIATE_TEST_SUITE_P(
    Resolutions, DataRootConfinementTest,
    ::testing::Values(objectstore::LocalObjectStore::Resolution::kAuto,
                      objectstore::LocalObjectStore::Resolution::kWalk),
    [](const ::testing::TestParamInfo<objectstore::LocalObjectStore::Resolution>& info) {
      return std::string(info.param == objectstore::LocalObjectStore::Resolution::kWalk
                             ? "Walk"
                             : "Openat2WhereAvailable");
    });

}  // namespace
}  // namespace debugplane::rules_engine
