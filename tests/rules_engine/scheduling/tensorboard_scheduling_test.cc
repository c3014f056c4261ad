// The scheduler over TensorBoard logs: a job given as TensorBoardOutputConfig
// with debug rules reaches the fixtures' verdicts after the fact and live,
// rules whose data TensorBoard cannot carry end in Error saying why, and a
// job with both an smdebug trial and TensorBoard logs reads both.

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/rules_engine/scheduling/scheduler_test_fixture.h"
#include "tests/rules_engine/tb_event_writer.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class TensorBoardSchedulingTest : public SchedulerTest {
 protected:
  // A job whose TensorBoard logs are at `logs`, with `rules`.
  void CreateTensorBoardJob(const std::string& name, const std::string& logs,
                            const std::vector<RuleSpec>& rules) {
    v1::CreateTrainingJobRequest request = NewJobRequest(name);
    request.mutable_tensor_board_output_config()->set_s3_output_path(logs);
    for (const RuleSpec& spec : rules) AddBuiltinDebugRule(request, spec);
    CreateJobOrFail(*manager_, request);
  }
  // A copy of fixture set `set`'s tb/ under the data root.
  std::string CopyFixture(const std::string& set) {
    const fs::path to = dir_.path() / set;
    fs::copy(fs::path(DP_TEST_DATA_DIR) / "frameworks" / set / "tb", to,
             fs::copy_options::recursive);
    return to.string();
  }
};

TEST_F(TensorBoardSchedulingTest, FixturesReachTheirVerdictsAfterTheFact) {
  CreateTensorBoardJob("pt", CopyFixture("pytorch-h200-phases"),
                       {{"exploding", "ExplodingTensor", {}}});
  CreateTensorBoardJob("hf", CopyFixture("hf-trainer-diverge"),
                       {{"exploding", "ExplodingTensor", {}}});
  CreateTensorBoardJob("hfo", CopyFixture("hf-trainer-overfit"), {{"overfit", "Overfit", {}}});
  CreateTensorBoardJob("pl", CopyFixture("lightning-overfit"), {{"overfit", "Overfit", {}}});
  StartScheduler();
  for (const char* job : {"pt", "hf", "hfo", "pl"}) ReportCompleted(job);
  const auto pt = WaitForRule("pt", "exploding");
  EXPECT_EQ(pt.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(pt.status_details(), HasSubstr("step 183"));
  EXPECT_THAT(pt.status_details(), HasSubstr("loss/train"));
  const auto hf = WaitForRule("hf", "exploding");
  EXPECT_EQ(hf.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(hf.status_details(), HasSubstr("train/grad_norm"));
  EXPECT_EQ(WaitForRule("hfo", "overfit").rule_evaluation_status(),
            v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_EQ(WaitForRule("pl", "overfit").rule_evaluation_status(),
            v1::RuleEvaluationStatus::IssuesFound);
}

TEST_F(TensorBoardSchedulingTest, LiveAppendsReachIssuesFoundBeforeTrainingEnds) {
  const std::string logs = (dir_.path() / "live" / "runs" / "Nov28_h200").string();
  TbEventWriter writer(logs + "/events.out.tfevents.1795819700.h200.1.0");
  for (int step = 0; step < 5; ++step) writer.Scalar(step, "train/loss", 2.0f);
  CreateTensorBoardJob("live", (dir_.path() / "live").string(),
                       {{"exploding", "ExplodingTensor", {}}});
  StartScheduler();
  writer.Scalar(5, "train/loss", std::numeric_limits<float>::quiet_NaN());
  writer.Scalar(6, "train/loss", 2.0f);  // Step 5 is complete once a later one is written.
  const auto status = WaitForRule("live", "exploding");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(status.status_details(), HasSubstr("step 5"));
  EXPECT_THAT(status.status_details(), HasSubstr("train/loss"));
}

TEST_F(TensorBoardSchedulingTest, RulesTensorBoardCannotFeedEndInErrorSayingWhy) {
  CreateTensorBoardJob("gap", CopyFixture("hf-trainer-overfit"),
                       {{"dead", "DeadRelu", {}}, {"classes", "ClassImbalance", {}}});
  StartScheduler();
  const auto dead = WaitForRule("gap", "dead");
  EXPECT_EQ(dead.rule_evaluation_status(), v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(dead.status_details(), HasSubstr("cannot evaluate TensorBoard logs"));
  const auto classes = WaitForRule("gap", "classes");
  EXPECT_EQ(classes.rule_evaluation_status(), v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(classes.status_details(), HasSubstr("labels"));
}

TEST_F(TensorBoardSchedulingTest, SmdebugTrialAndTensorBoardLogsAreReadTogether) {
  const std::string trial = (dir_.path() / "tensors").string();
  TrialWriter smdebug(trial);
  for (int step = 0; step < 4; ++step) {
    smdebug.AddStep(step, Mode::kTrain, step, {{"CrossEntropyLoss_output_0", {}, {0.5}}});
  }
  smdebug.EndTraining();
  const std::string logs = (dir_.path() / "tb").string();
  TbEventWriter writer(logs + "/events.out.tfevents.1.host.1.0");
  writer.Scalar(2, "train/grad_norm", std::numeric_limits<float>::infinity());
  v1::CreateTrainingJobRequest request = NewJobRequest("both");
  request.mutable_debug_hook_config()->set_s3_output_path(trial);
  request.mutable_tensor_board_output_config()->set_s3_output_path(logs);
  AddBuiltinDebugRule(request, {"exploding", "ExplodingTensor", {}});
  CreateJobOrFail(*manager_, request);
  StartScheduler();
  ReportCompleted("both");
  const auto status = WaitForRule("both", "exploding");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(status.status_details(), HasSubstr("train/grad_norm"));
}

}  // namespace
}  // namespace debugplane::rules_engine::testing
