// ReadProgress in DescribeTrainingJob (issue 11): through the real server,
// a debugging rule's BytesRead, ObjectsRead and LastStepRead grow as a trial
// grows and equal what the files published hold (the collections, index and
// event files; the end marker is only listed), on a local trial and on an
// s3:// one (moto); once the rule concludes they stay as they were.
//
// Files are published whole (renamed into place locally, put in one request
// on S3), in smdebug's order, so the reader never meets a half-written file
// it would fetch again, and the counts are exact.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/objectstore/s3_test_server.h"
#include "tests/rules_engine/trial_writer.h"
#include "tests/service/aws_environment.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::AwsEnvironment;
using ::debugplane::testing::Context;
using ::debugplane::testing::DescribeRule;
using ::debugplane::testing::S3TestServer;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;

constexpr char kRulesImage[] =
    "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest";
constexpr char kBucket[] = "progress";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

// Publishes one file (relative to the trial) with its whole content.
using Publish = std::function<void(const std::string& relative, const std::string& content)>;

// What the published files hold, as the reader should count it.
struct Published {
  std::set<std::string> files;
  int64_t objects = 0;  // Files a reader fetches (all but training_job_end.ts).
  int64_t bytes = 0;
};

// Publishes the files under `staging` not published yet: data files, then
// index files, then training_job_end.ts (smdebug's order, the agent's too).
void PublishNew(const fs::path& staging, const Publish& publish, Published* published) {
  std::vector<std::string> data, index, end;
  for (const auto& entry : fs::recursive_directory_iterator(staging)) {
    if (!entry.is_regular_file()) continue;
    const std::string relative = fs::relative(entry.path(), staging).string();
    if (published->files.count(relative) > 0) continue;
    if (relative == "training_job_end.ts") {
      end.push_back(relative);
    } else {
      (relative.rfind("index/", 0) == 0 ? index : data).push_back(relative);
    }
  }
  std::sort(data.begin(), data.end());
  std::sort(index.begin(), index.end());
  data.insert(data.end(), index.begin(), index.end());
  data.insert(data.end(), end.begin(), end.end());
  for (const std::string& relative : data) {
    const std::string content = ReadFile(staging / relative);
    publish(relative, content);
    published->files.insert(relative);
    if (relative == "training_job_end.ts") continue;
    ++published->objects;
    published->bytes += static_cast<int64_t>(content.size());
  }
}

v1::CreateTrainingJobRequest ExplodingTensorJob(const std::string& name,
                                                const std::string& output_path) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_debug_hook_config()->set_s3_output_path(output_path);
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("ExplodingTensor");
  rule->set_rule_evaluator_image(kRulesImage);
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
  return request;
}

// Describes the job until `done` holds for its rule (or 30 s pass).
v1::DebugRuleEvaluationStatus DescribeUntil(
    v1::TrainingJobService::Stub& stub, const std::string& job,
    const std::function<bool(const v1::DebugRuleEvaluationStatus&)>& done) {
  v1::DebugRuleEvaluationStatus rule;
  WaitUntil([&] {
    rule = DescribeRule(stub, job);
    return done(rule);
  });
  return rule;
}

void AddSteps(rules_engine::testing::TrialWriter& writer, int from, int to) {
  for (int step = from; step < to; ++step) {
    writer.AddStep(step, rules_engine::Mode::kTrain, step,
                   {{"CrossEntropyLoss_output_0", {}, {0.7 - step * 0.01}}});
  }
}

// The scenario, wherever the trial is published: 3 steps, then 3 more, then
// the end; the counts after each equal the files published.
void ExpectReadProgressFollowsTheFiles(v1::TrainingJobService::Stub& stub, const std::string& job,
                                       const std::string& output_path, const fs::path& staging,
                                       const Publish& publish) {
  rules_engine::testing::TrialWriter writer(staging.string());
  Published published;
  AddSteps(writer, 0, 3);
  PublishNew(staging, publish, &published);
  v1::CreateTrainingJobResponse created;
  grpc::Status status =
      stub.CreateTrainingJob(Context().get(), ExplodingTensorJob(job, output_path), &created);
  ASSERT_TRUE(status.ok()) << status.error_message();

  auto read_to = [](int64_t step) {
    return [step](const v1::DebugRuleEvaluationStatus& rule) {
      return rule.has_read_progress() && rule.read_progress().last_step_read() >= step;
    };
  };
  const v1::DebugRuleEvaluationStatus first = DescribeUntil(stub, job, read_to(2));
  ASSERT_TRUE(first.has_read_progress()) << job << ": no ReadProgress after 30 s";
  EXPECT_EQ(first.read_progress().last_step_read(), 2);
  EXPECT_EQ(first.read_progress().objects_read(), published.objects);  // 1 + 3 index + 3 events.
  EXPECT_EQ(first.read_progress().bytes_read(), published.bytes);
  EXPECT_EQ(published.objects, 7);

  AddSteps(writer, 3, 6);
  PublishNew(staging, publish, &published);
  const v1::DebugRuleEvaluationStatus second = DescribeUntil(stub, job, read_to(5));
  EXPECT_EQ(second.read_progress().last_step_read(), 5);
  EXPECT_EQ(second.read_progress().objects_read(), published.objects);
  EXPECT_EQ(second.read_progress().bytes_read(), published.bytes);
  EXPECT_GT(second.read_progress().bytes_read(), first.read_progress().bytes_read());
  EXPECT_EQ(second.rule_evaluation_status(), v1::RuleEvaluationStatus::InProgress);

  // The end: the marker is listed, not fetched; the verdict keeps the counts.
  writer.EndTraining();
  PublishNew(staging, publish, &published);
  const v1::DebugRuleEvaluationStatus concluded =
      DescribeUntil(stub, job, [](const v1::DebugRuleEvaluationStatus& rule) {
        return rule.rule_evaluation_status() == v1::RuleEvaluationStatus::NoIssuesFound;
      });
  EXPECT_EQ(concluded.rule_evaluation_status(), v1::RuleEvaluationStatus::NoIssuesFound)
      << concluded.status_details();
  EXPECT_EQ(concluded.read_progress().objects_read(), published.objects);
  EXPECT_EQ(concluded.read_progress().bytes_read(), published.bytes);
  EXPECT_EQ(concluded.read_progress().last_step_read(), 5);
  EXPECT_EQ(concluded.last_evaluated_step(), 5);
}

TEST(ReadProgressTest, ALocalTrialsCountsGrowWithTheFilesRead) {
  ScopedTempDir dir;
  ServerProcess server(dir.path() / "server");
  auto stub = server.Stub();
  const fs::path trial = dir.path() / "server" / "trial";
  // Renamed into place: a reader never sees a file half-written.
  const Publish publish = [&trial](const std::string& relative, const std::string& content) {
    const fs::path target = trial / relative;
    fs::create_directories(target.parent_path());
    const fs::path part = fs::path(target.string() + ".part");
    ASSERT_TRUE(rules_engine::testing::WriteFile(part.string(), content)) << part;
    fs::rename(part, target);
  };
  ExpectReadProgressFollowsTheFiles(*stub, "progress-local", "file://" + trial.string(),
                                    dir.path() / "staging", publish);
}

TEST(ReadProgressTest, AnS3TrialsCountsGrowWithTheObjectsRead) {
  ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<S3TestServer>> s3 = S3TestServer::Start({.buckets = {kBucket}});
  ASSERT_TRUE(s3.ok()) << s3.status();
  AwsEnvironment env(dir.path(), (*s3)->endpoint(), (*s3)->access_key_id(),
                     (*s3)->secret_access_key());
  ServerProcess server(dir.path() / "server");
  auto stub = server.Stub();
  const S3TestServer& store = **s3;
  const Publish publish = [&store](const std::string& relative, const std::string& content) {
    absl::Status put = store.Put(kBucket, absl::StrCat("run/", relative), content);
    ASSERT_TRUE(put.ok()) << relative << ": " << put;
  };
  ExpectReadProgressFollowsTheFiles(*stub, "progress-s3", absl::StrCat("s3://", kBucket, "/run"),
                                    dir.path() / "staging", publish);
}

}  // namespace
}  // namespace debugplane
