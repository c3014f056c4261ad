// CreateXgboostReport: how long the XGBoost training report takes on a long
// training. Writes a synthetic 1,000-round binary trial in smdebug's format
// (tests/rules_engine/trial_writer.h: every round saved, as with
// save_interval=1; metrics, predictions and labels of a validation set,
// feature importance of five types, average SHAP, the objective), then per
// iteration: reads it and feeds every round to the rule (as the scheduler
// does), and renders the final report (HTML and JSON) once.
//
//   xgboost_report_bench [--rounds 1000] [--rows 500] [--features 30] [--iterations 5]

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/smdebug/trial_reader.h"
#include "tests/rules_engine/trial_writer.h"

namespace fs = std::filesystem;
using namespace debugplane::rules_engine;
using debugplane::rules_engine::testing::TensorSpec;

namespace {

void WriteTrial(const std::string& dir, int rounds, int rows, int features) {
  testing::TrialWriter writer(dir);
  std::mt19937 random(7);
  std::normal_distribution<double> noise(0, 1);
  std::vector<double> labels(rows), margin(rows);
  for (int i = 0; i < rows; ++i) {
    labels[i] = i % 3 == 0 ? 1 : 0;
    margin[i] = noise(random);
  }
  const char* types[] = {"weight", "gain", "cover", "total_gain", "total_cover"};
  for (int round = 0; round < rounds; ++round) {
    // The model separates the classes better round by round.
    const double strength = 4.0 * (round + 1) / rounds;
    std::vector<double> predictions(rows);
    for (int i = 0; i < rows; ++i) {
      const double z = (labels[i] * 2 - 1) * strength + margin[i];
      predictions[i] = 1 / (1 + std::exp(-z));
    }
    std::vector<TensorSpec> tensors = {
        {"hyperparameters/objective", {1}, {}, {"binary:logistic"}},
        {"train-logloss", {1}, {0.7 / (1 + round * 0.01)}},
        {"validation-logloss", {1}, {0.72 / (1 + round * 0.008)}},
        {"train-auc", {1}, {0.9 + 0.09 * round / rounds}},
        {"validation-auc", {1}, {0.88 + 0.09 * round / rounds}},
        {"predictions", {rows}, predictions},
        {"labels", {rows}, labels}};
    for (int f = 0; f < features; ++f) {
      for (const char* type : types) {
        tensors.push_back({absl::StrCat("feature_importance/", type, "/f", f), {1}, {f + 1.0}});
      }
      tensors.push_back({absl::StrCat("average_shap/f", f), {1}, {0.01 * (f - features / 2)}});
    }
    writer.AddStep(round, Mode::kGlobal, round, tensors);
  }
  writer.EndTraining();
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("CreateXgboostReport on a synthetic long training");
  int rounds = 1000, rows = 500, features = 30, iterations = 5;
  app.add_option("--rounds", rounds);
  app.add_option("--rows", rows);
  app.add_option("--features", features);
  app.add_option("--iterations", iterations);
  CLI11_PARSE(app, argc, argv);
  const std::string dir = (fs::temp_directory_path() / "xgboost_report_bench").string();
  fs::remove_all(dir);
  const absl::Time write_start = absl::Now();
  WriteTrial(dir, rounds, rows, features);
  std::printf("trial: %d rounds x (%d rows, %d features x 5 types + SHAP), written in %.1f s\n",
              rounds, rows, features, absl::ToDoubleSeconds(absl::Now() - write_start));
  // Wall and CPU time (the machine may be shared: CPU time is this
  // process's work alone).
  std::vector<double> feed_s, render_s, feed_cpu_s, render_cpu_s;
  size_t html_bytes = 0, json_bytes = 0;
  for (int i = 0; i < iterations; ++i) {
    std::unique_ptr<Rule> rule = CreateBuiltinRule("CreateXgboostReport", {}).value();
    TrialReader reader(debugplane::objectstore::OpenLocalPath(dir).value());
    const absl::Time start = absl::Now();
    const std::clock_t cpu_start = std::clock();
    auto steps = reader.ReadNewSteps(
        [&](const std::string& tensor, const TrialInfo& info) { return rule->Wants(tensor, info); });
    if (!steps.ok() || static_cast<int>(steps->size()) != rounds) {
      std::fprintf(stderr, "read failed: %s\n", steps.status().ToString().c_str());
      return 1;
    }
    for (const Step& step : *steps) rule->OnStep(step, reader.info());
    const RuleVerdict verdict = rule->OnTrainingEnd(reader.info());
    const absl::Time fed = absl::Now();
    const std::clock_t cpu_fed = std::clock();
    const RuleReport report =
        rule->RenderReport({.training_job_name = "bench", .generated_at = absl::Now(), .final = true});
    const absl::Time rendered = absl::Now();
    const std::clock_t cpu_rendered = std::clock();
    if (verdict.kind != RuleVerdict::Kind::kNoIssuesFound) {
      std::fprintf(stderr, "unexpected verdict: %s\n", verdict.details.c_str());
      return 1;
    }
    feed_s.push_back(absl::ToDoubleSeconds(fed - start));
    render_s.push_back(absl::ToDoubleSeconds(rendered - fed));
    feed_cpu_s.push_back(static_cast<double>(cpu_fed - cpu_start) / CLOCKS_PER_SEC);
    render_cpu_s.push_back(static_cast<double>(cpu_rendered - cpu_fed) / CLOCKS_PER_SEC);
    html_bytes = report.html.size();
    json_bytes = report.json.size();
  }
  std::printf("read + evaluate %d rounds: median %.3f s wall, %.3f s CPU (%d iterations)\n",
              rounds, Median(feed_s), Median(feed_cpu_s), iterations);
  std::printf("render the final report: median %.1f ms wall, %.1f ms CPU; page %zu KiB, JSON %zu KiB\n",
              Median(render_s) * 1000, Median(render_cpu_s) * 1000, html_bytes / 1024,
              json_bytes / 1024);
  fs::remove_all(dir);
  return 0;
}
