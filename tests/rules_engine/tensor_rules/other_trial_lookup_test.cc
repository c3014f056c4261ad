// OtherTrialCache (other_trial_lookup.h) over trials written by TrialWriter,
// and SimilarAcrossRuns end to end through it.

#include "rules_engine/tensor_rules/other_trial_lookup.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/smdebug/trial_reader.h"
#include "tests/rules_engine/local_store.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Local;
using testing::TensorSpec;
using testing::TrialWriter;

std::string TempTrial(const std::string& name) {
  return testing::FreshTempDir(absl::StrCat("other_trial_test_", name));
}

// Step s holds "loss" = s and "gradient/w" = {s, -s, 2s} (and `extra`).
void AddSteps(TrialWriter& w, int64_t from, int64_t to, double extra = 0) {
  for (int64_t s = from; s < to; ++s) {
    const double v = static_cast<double>(s);
    w.AddStep(s, Mode::kTrain, s, {{"loss", {}, {v}}, {"gradient/w", {3}, {v, -v, 2 * v + extra}}});
  }
}

TEST(OtherTrialCacheTest, ReadsTheTensorsAskedFor) {
  const std::string dir = TempTrial("basic");
  TrialWriter w(dir);
  AddSteps(w, 0, 5);
  w.EndTraining();
  OtherTrialCache cache;
  const objectstore::StoreLocation trial = Local(dir);

  absl::StatusOr<Tensor> t = cache.Read(trial, 2, "gradient/w");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->values, ElementsAre(2, -2, 4));
  EXPECT_THAT(t->shape, ElementsAre(3));
  EXPECT_EQ(t->name, "gradient/w");
  // A second name: read again from the start, both served.
  t = cache.Read(trial, 1, "loss");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->values, ElementsAre(1));
  t = cache.Read(trial, 4, "gradient/w");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->values, ElementsAre(4, -4, 8));

  EXPECT_EQ(cache.Read(trial, 3, "nope").status().code(), absl::StatusCode::kNotFound);
  absl::Status past = cache.Read(trial, 9, "loss").status();
  EXPECT_EQ(past.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(past.message(), HasSubstr("ended"));
  EXPECT_EQ(cache.Read(Local(TempTrial("empty")), 0, "loss").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(OtherTrialCacheTest, StepNotWrittenYetIsLookedForAgain) {
  const std::string dir = TempTrial("incremental");
  TrialWriter w(dir);
  AddSteps(w, 0, 2);
  OtherTrialCache cache;
  const objectstore::StoreLocation trial = Local(dir);
  ASSERT_TRUE(cache.Read(trial, 0, "loss").ok());
  absl::Status later = cache.Read(trial, 3, "loss").status();
  EXPECT_EQ(later.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(later.message(), HasSubstr("not written yet"));
  AddSteps(w, 2, 4);
  absl::StatusOr<Tensor> t = cache.Read(trial, 3, "loss");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->values, ElementsAre(3));
  // A step skipped by the training is absent once a later one is there.
  w.AddStep(6, Mode::kTrain, 6, {{"loss", {}, {6}}});
  w.EndTraining();
  EXPECT_THAT(cache.Read(trial, 5, "loss").status().message(), HasSubstr("no such step"));
  EXPECT_TRUE(cache.Read(trial, 6, "loss").ok());
}

TEST(OtherTrialCacheTest, MemoryIsBounded) {
  const std::string dir = TempTrial("bounded");
  TrialWriter w(dir);
  AddSteps(w, 0, 40);
  w.EndTraining();
  OtherTrialCache::Options options;
  options.max_bytes_per_trial = 1000;  // A few steps' tensors.
  options.steps_per_read = 4;
  OtherTrialCache cache(options);
  const objectstore::StoreLocation trial = Local(dir);
  for (int64_t s = 0; s < 40; ++s) {
    absl::StatusOr<Tensor> t = cache.Read(trial, s, "gradient/w");
    ASSERT_TRUE(t.ok()) << s << ": " << t.status();
    EXPECT_EQ(t->values[2], 2.0 * s);
    EXPECT_LE(cache.BytesHeld(trial), options.max_bytes_per_trial) << s;
  }
  // A step dropped from memory is read again.
  absl::StatusOr<Tensor> first = cache.Read(trial, 0, "gradient/w");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(first->values, ElementsAre(0, 0, 0));
}

TEST(OtherTrialCacheTest, ConcurrentReadersGetTheirTensors) {
  const std::string a = TempTrial("concurrent_a");
  const std::string b = TempTrial("concurrent_b");
  for (const std::string& dir : {a, b}) {
    TrialWriter w(dir);
    AddSteps(w, 0, 20, dir == b ? 100 : 0);
    w.EndTraining();
  }
  OtherTrialCache::Options options;
  options.max_bytes_per_trial = 2000;
  OtherTrialCache cache(options);
  const objectstore::StoreLocation trial_a = Local(a);
  const objectstore::StoreLocation trial_b = Local(b);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      const std::string& dir = i % 2 ? b : a;
      const char* name = i < 2 ? "gradient/w" : "loss";
      for (int64_t s = 0; s < 20; ++s) {
        absl::StatusOr<Tensor> t = cache.Read(i % 2 ? trial_b : trial_a, s, name);
        const double want = i < 2 ? 2.0 * s + (dir == b ? 100 : 0) : static_cast<double>(s);
        if (!t.ok() || t->values.back() != want) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(OtherTrialCacheTest, LookupResolvesTheTrial) {
  const std::string dir = TempTrial("resolved");
  TrialWriter w(dir);
  AddSteps(w, 0, 2);
  w.EndTraining();
  OtherTrialCache cache;
  const objectstore::StoreLocation trial = Local(dir);
  OtherTrialLookup lookup = cache.AsLookup(
      [&trial](const std::string& job) -> absl::StatusOr<objectstore::StoreLocation> {
        if (job == "job-b") return trial;
        return absl::NotFoundError(absl::StrCat("no training job ", job));
      });
  absl::StatusOr<Tensor> t = lookup("job-b", 1, "loss");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->values, ElementsAre(1));
  EXPECT_THAT(lookup("job-x", 1, "loss").status().message(), HasSubstr("no training job job-x"));
}

// --- SimilarAcrossRuns end to end ----------------------------------------------------

// Evaluates SimilarAcrossRuns on trial `dir` against job "other" (= `other`)
// as the scheduler does: wanted tensors only, steps in order, then the end.
RuleVerdict CompareTrials(const std::string& dir, const std::string& other,
                          RuleParameters params = {}) {
  OtherTrialCache cache;
  const objectstore::StoreLocation other_trial = Local(other);
  RuleContext ctx;
  ctx.other_trial = cache.AsLookup(
      [&other_trial](const std::string& job) -> absl::StatusOr<objectstore::StoreLocation> {
        if (job != "other") return absl::NotFoundError(job);
        return other_trial;
      });
  params["other_trials"] = "other";
  absl::StatusOr<std::unique_ptr<Rule>> rule = CreateBuiltinRule("SimilarAcrossRuns", params, ctx);
  EXPECT_TRUE(rule.ok()) << rule.status();
  if (!rule.ok()) return RuleVerdict::Error("create failed");
  Rule* r = rule->get();
  TrialReader reader(Local(dir));
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(
      [r](const std::string& tensor, const TrialInfo& info) { return r->Wants(tensor, info); });
  EXPECT_TRUE(steps.ok()) << steps.status();
  if (!steps.ok()) return RuleVerdict::Error("read failed");
  for (const Step& step : *steps) {
    RuleVerdict v = r->OnStep(step, reader.info());
    if (v.kind != RuleVerdict::Kind::kContinue) return v;
  }
  return r->OnTrainingEnd(reader.info());
}

TEST(SimilarAcrossRunsEndToEndTest, IdenticalTrialsHaveNoIssue) {
  const std::string a = TempTrial("same_a");
  const std::string b = TempTrial("same_b");
  for (const std::string& dir : {a, b}) {
    TrialWriter w(dir);
    AddSteps(w, 0, 6);
    w.EndTraining();
  }
  RuleVerdict v = CompareTrials(a, b);
  EXPECT_EQ(v.kind, RuleVerdict::Kind::kNoIssuesFound) << v.details;
  v = CompareTrials(a, b, {{"collection_names", "gradients"}});
  EXPECT_EQ(v.kind, RuleVerdict::Kind::kNoIssuesFound) << v.details;
}

TEST(SimilarAcrossRunsEndToEndTest, DifferingTensorIsAnIssue) {
  const std::string a = TempTrial("diff_a");
  const std::string b = TempTrial("diff_b");
  {
    TrialWriter w(a);
    AddSteps(w, 0, 6);
    w.EndTraining();
  }
  {
    TrialWriter w(b);
    AddSteps(w, 0, 3);
    AddSteps(w, 3, 6, /*extra=*/0.5);  // gradient/w differs from step 3 on.
    w.EndTraining();
  }
  RuleVerdict v = CompareTrials(a, b);
  EXPECT_EQ(v.kind, RuleVerdict::Kind::kIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("step 3"));
  EXPECT_THAT(v.details, HasSubstr("gradient/w element 2"));
  // The loss alone is the same in both.
  v = CompareTrials(a, b, {{"tensor_regex", "loss"}});
  EXPECT_EQ(v.kind, RuleVerdict::Kind::kNoIssuesFound) << v.details;
}

TEST(SimilarAcrossRunsEndToEndTest, MissingOtherTrialIsAnError) {
  const std::string a = TempTrial("alone_a");
  TrialWriter w(a);
  AddSteps(w, 0, 3);
  w.EndTraining();
  RuleVerdict v = CompareTrials(a, TempTrial("alone_missing") + "/nothing");
  EXPECT_EQ(v.kind, RuleVerdict::Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("missing from the other trial"));
}

}  // namespace
}  // namespace debugplane::rules_engine
