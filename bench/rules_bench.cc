// Rule throughput: evaluating every built-in debugging rule (default
// parameters) over real smdebug trials, against the ceiling of simply reading
// the same event files and checking their CRCs, in one run.
//
//   rules_bench [--trials DIR,...] [--iterations 20]
//
// Default trials: every folder of ../shared/fixtures/smdebug. Files come from
// the page cache in both measurements (one warm-up pass first), so the ratio
// compares the work done per byte, not the disk.

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/time/clock.h"
#include "rules_engine/rule.h"
#include "rules_engine/tfrecord.h"
#include "rules_engine/trial_reader.h"
#include "rules_engine/trial_storage.h"

namespace fs = std::filesystem;
using namespace debugplane::rules_engine;

namespace {

// The debugging rules that need nothing but the trial (SimilarAcrossRuns
// needs a second trial).
const char* const kRules[] = {
    "VanishingGradient", "ExplodingTensor",  "LossNotDecreasing", "Overfit",
    "Overtraining",      "DeadRelu",         "ClassImbalance",    "WeightUpdateRatio",
    "PoorWeightInitialization", "SaturatedActivation", "TensorVariance", "UnchangedTensor",
    "AllZero",           "CheckInputImages", "NLPSequenceRatio",  "Confusion",
    "FeatureImportanceOverweight", "TreeDepth", "StalledTrainingRule"};

// Reads every event file of the trial and verifies every record's CRCs.
// Returns the bytes read, or -1 on a corrupt file.
int64_t ReadAndCheck(TrialStorage& storage, const std::string& trial) {
  int64_t bytes = 0;
  auto steps = storage.List(trial + "/events");
  if (!steps.ok()) return -1;
  for (const std::string& step : *steps) {
    auto files = storage.List(trial + "/events/" + step);
    if (!files.ok()) return -1;
    for (const std::string& file : *files) {
      const std::string path = trial + "/events/" + step + "/" + file;
      auto content = storage.Read(path);
      if (!content.ok()) return -1;
      auto records = ParseTfRecords(*content, path);
      if (!records.ok()) return -1;
      bytes += static_cast<int64_t>(content->size());
    }
  }
  return bytes;
}

// Evaluates every rule over the trial from scratch; returns the steps read.
int64_t EvaluateAll(const std::shared_ptr<TrialStorage>& storage, const std::string& trial,
                    int* verdicts) {
  std::vector<std::unique_ptr<Rule>> rules;
  for (const char* name : kRules) {
    auto rule = CreateBuiltinRule(name, {});
    if (rule.ok()) rules.push_back(*std::move(rule));
  }
  TrialReader reader(storage, trial);
  auto wanted = [&rules](const std::string& tensor, const TrialInfo& info) {
    for (const auto& rule : rules) {
      if (rule->Wants(tensor, info)) return true;
    }
    return false;
  };
  auto steps = reader.ReadNewSteps(wanted);
  if (!steps.ok()) {
    std::fprintf(stderr, "%s: %s\n", trial.c_str(), steps.status().ToString().c_str());
    return -1;
  }
  for (const Step& step : *steps) {
    for (auto& rule : rules) {
      if (rule->OnStep(step, reader.info()).kind != RuleVerdict::Kind::kContinue) ++*verdicts;
    }
  }
  for (auto& rule : rules) {
    rule->OnTrainingEnd(reader.info());
    ++*verdicts;
  }
  return static_cast<int64_t>(steps->size());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Rule throughput vs reading the files and checking CRCs"};
  std::vector<std::string> trials;
  int iterations = 20;
  app.add_option("--trials", trials, "Trial directories")->delimiter(',');
  app.add_option("--iterations", iterations, "Passes over all trials")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (trials.empty()) {
    for (const auto& entry : fs::directory_iterator(fs::path(DP_SHARED_DIR) / "fixtures/smdebug")) {
      if (entry.is_directory()) trials.push_back(entry.path().string());
    }
    std::sort(trials.begin(), trials.end());
  }
  auto storage = LocalTrialStorage();

  int64_t bytes_per_pass = 0;
  for (const auto& trial : trials) bytes_per_pass += ReadAndCheck(*storage, trial);  // Warm-up.
  int verdicts = 0;
  for (const auto& trial : trials) EvaluateAll(storage, trial, &verdicts);

  absl::Time start = absl::Now();
  for (int i = 0; i < iterations; ++i) {
    for (const auto& trial : trials) ReadAndCheck(*storage, trial);
  }
  const double read_s = absl::ToDoubleSeconds(absl::Now() - start);

  int64_t steps = 0;
  start = absl::Now();
  for (int i = 0; i < iterations; ++i) {
    for (const auto& trial : trials) steps += EvaluateAll(storage, trial, &verdicts);
  }
  const double rules_s = absl::ToDoubleSeconds(absl::Now() - start);

  const double mb = static_cast<double>(bytes_per_pass) * iterations / 1e6;
  std::printf("rules_bench: %zu trials, %.1f MB of event files per pass, %d passes, %zu rules\n",
              trials.size(), bytes_per_pass / 1e6, iterations, std::size(kRules));
  std::printf("read + CRC check only : %8.1f MB/s\n", mb / read_s);
  std::printf("all rules, evaluated  : %8.1f MB/s (%lld steps/s)\n", mb / rules_s,
              static_cast<long long>(steps / rules_s));
  std::printf("ratio                 : %8.0f%%\n", 100.0 * read_s / rules_s);
  return 0;
}
