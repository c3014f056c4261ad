// Rule throughput: evaluating every built-in debugging rule (default
// parameters) over real smdebug trials, against the ceiling of simply reading
// the same event files and checking their CRCs, in one run.
//
//   rules_bench [--trials DIR,...] [--iterations 20] [--dump | --rules-only]
//
// The ceiling reads every file of each trial (collections, index, events) and
// checks the event records' CRCs. Default trials: every folder of
// tests/data/smdebug. Files come from
// the page cache in both measurements (one warm-up pass first), so the ratio
// compares the work done per byte, not the disk. The passes of the two
// alternate. --dump prints each rule's conclusion per trial instead (to check
// that a change leaves every outcome as it was).

#include <time.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/smdebug/tfrecord.h"
#include "rules_engine/smdebug/trial_reader.h"
#include "tests/rules_engine/rule_verdict_names.h"

namespace fs = std::filesystem;
using namespace debugplane::rules_engine;

namespace {

// Test objects are small; reads of them are bounded like every other.
constexpr ::debugplane::objectstore::ReadLimit kTestReadLimit{1 << 20, "a test object"};

// The debugging rules that need nothing but the trial (SimilarAcrossRuns
// needs a second trial).
const char* const kRules[] = {"VanishingGradient",
                              "ExplodingTensor",
                              "LossNotDecreasing",
                              "Overfit",
                              "Overtraining",
                              "DeadRelu",
                              "ClassImbalance",
                              "WeightUpdateRatio",
                              "PoorWeightInitialization",
                              "SaturatedActivation",
                              "TensorVariance",
                              "UnchangedTensor",
                              "AllZero",
                              "CheckInputImages",
                              "NLPSequenceRatio",
                              "Confusion",
                              "FeatureImportanceOverweight",
                              "TreeDepth",
                              "StalledTrainingRule"};

// Reads every file of the trial the reader reads (collections, index and
// event files) and verifies every event record's CRCs. Returns the bytes
// read, or -1 on an unreadable or corrupt file.
int64_t ReadAndCheck(const debugplane::objectstore::StoreLocation& trial) {
  int64_t bytes = 0;
  auto entries = trial.store->ListAll({.prefix = trial.DirectoryPrefix()});
  if (!entries.ok()) return -1;
  for (const auto& entry : entries->objects) {
    auto content = trial.store->ReadAtMost(entry.key, kTestReadLimit);
    if (!content.ok()) return -1;
    if (absl::EndsWith(entry.key, ".tfevents") && !ParseTfRecords(*content, entry.key).ok()) {
      return -1;
    }
    bytes += static_cast<int64_t>(content->size());
  }
  return bytes;
}

// CPU time of this thread (user and system: the reads' kernel work counts),
// in seconds. On a loaded machine wall-clock passes also measure waiting
// for a core; CPU time measures the work done.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

using debugplane::rules_engine::testing::KindName;

// Evaluates every rule over the trial from scratch; returns the steps read.
// With `dump`, prints each rule's conclusion (the first one, as the
// scheduler records it): to compare outcomes across changes.
int64_t EvaluateAll(const debugplane::objectstore::StoreLocation& trial, int* verdicts,
                    bool dump = false) {
  std::vector<std::unique_ptr<Rule>> rules;
  for (const char* name : kRules) {
    auto rule = CreateBuiltinRule(name, {});
    if (rule.ok()) rules.push_back(*std::move(rule));
  }
  TrialReader reader(trial);
  // Decided once per tensor name, as the scheduler does.
  std::unordered_map<std::string, bool> decided;
  auto wanted = [&rules, &decided](const std::string& tensor, const TrialInfo& info) {
    auto [it, inserted] = decided.try_emplace(tensor, false);
    if (inserted) {
      for (const auto& rule : rules) {
        if (rule->Wants(tensor, info)) {
          it->second = true;
          break;
        }
      }
    }
    return it->second;
  };
  auto steps = reader.ReadNewSteps(wanted);
  if (!steps.ok()) {
    std::fprintf(stderr, "%s: %s\n", trial.Describe().c_str(), steps.status().ToString().c_str());
    return -1;
  }
  std::vector<std::string> first(rules.size());
  for (const Step& step : *steps) {
    for (size_t i = 0; i < rules.size(); ++i) {
      RuleVerdict v = rules[i]->OnStep(step, reader.info());
      if (v.kind == RuleVerdict::Kind::kContinue) continue;
      ++*verdicts;
      if (first[i].empty()) first[i] = absl::StrCat(KindName(v.kind), ": ", v.details);
    }
  }
  for (size_t i = 0; i < rules.size(); ++i) {
    RuleVerdict v = rules[i]->OnTrainingEnd(reader.info());
    ++*verdicts;
    if (first[i].empty()) first[i] = absl::StrCat(KindName(v.kind), ": ", v.details);
    if (dump) {
      std::printf("%s %s %s\n", fs::path(trial.Describe()).filename().c_str(),
                  rules[i]->name().c_str(), first[i].c_str());
    }
  }
  return static_cast<int64_t>(steps->size());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Rule throughput vs reading the files and checking CRCs"};
  std::vector<std::string> trials;
  int iterations = 20;
  bool dump = false;
  bool rules_only = false;
  app.add_option("--trials", trials, "Trial directories")->delimiter(',');
  app.add_option("--iterations", iterations, "Passes over all trials")->capture_default_str();
  app.add_flag("--dump", dump, "Print every rule's conclusion on every trial, then exit");
  app.add_flag("--rules-only", rules_only,
               "Run only the rules passes and print no figures (for perf record)");
  CLI11_PARSE(app, argc, argv);
  if (trials.empty()) {
    for (const auto& entry : fs::directory_iterator(fs::path(DP_TEST_DATA_DIR) / "smdebug")) {
      if (entry.is_directory()) trials.push_back(entry.path().string());
    }
    std::sort(trials.begin(), trials.end());
  }
  // Each trial read through a store rooted at it, as the server reads a
  // data root.
  std::vector<debugplane::objectstore::StoreLocation> locations;
  for (const auto& trial : trials) {
    auto location = debugplane::objectstore::OpenLocalPath(trial);
    if (!location.ok()) {
      std::fprintf(stderr, "%s\n", location.status().ToString().c_str());
      return 1;
    }
    locations.push_back(*std::move(location));
  }

  int64_t bytes_per_pass = 0;
  for (const auto& trial : locations) bytes_per_pass += ReadAndCheck(trial);  // Warm-up.
  int verdicts = 0;
  for (const auto& trial : locations) EvaluateAll(trial, &verdicts, dump);
  if (dump) return 0;
  if (rules_only) {
    for (int i = 0; i < iterations; ++i) {
      for (const auto& trial : locations) EvaluateAll(trial, &verdicts);
    }
    return 0;
  }

  // The two measurements alternate pass by pass, so that other work on the
  // machine (or a frequency change) weighs on both alike.
  double read_s = 0, rules_s = 0, read_cpu_s = 0, rules_cpu_s = 0;
  int64_t steps = 0;
  for (int i = 0; i < iterations; ++i) {
    absl::Time start = absl::Now();
    double cpu_start = ThreadCpuSeconds();
    for (const auto& trial : locations) ReadAndCheck(trial);
    read_s += absl::ToDoubleSeconds(absl::Now() - start);
    read_cpu_s += ThreadCpuSeconds() - cpu_start;
    start = absl::Now();
    cpu_start = ThreadCpuSeconds();
    for (const auto& trial : locations) steps += EvaluateAll(trial, &verdicts);
    rules_s += absl::ToDoubleSeconds(absl::Now() - start);
    rules_cpu_s += ThreadCpuSeconds() - cpu_start;
  }

  // Both rates are over the same bytes: the trial files of one pass.
  const double mb = static_cast<double>(bytes_per_pass) * iterations / 1e6;
  std::printf("rules_bench: %zu trials, %.1f MB of trial files per pass, %d passes, %zu rules\n",
              trials.size(), bytes_per_pass / 1e6, iterations, std::size(kRules));
  std::printf("read + CRC check only : %8.1f MB/s\n", mb / read_s);
  std::printf("all rules, evaluated  : %8.1f MB/s (%lld steps/s)\n", mb / rules_s,
              static_cast<long long>(steps / rules_s));
  std::printf("ratio                 : %8.0f%%\n", 100.0 * read_s / rules_s);
  std::printf("per CPU second       : %8.1f / %.1f MB/s, ratio %.0f%%\n", mb / read_cpu_s,
              mb / rules_cpu_s, 100.0 * read_cpu_s / rules_cpu_s);
  return 0;
}
