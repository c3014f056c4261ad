// Framework profiler rules throughput: reading the framework timelines of
// tests/data/profiler/framework/pytorch-step-outlier (4 files, about
// 1.4 MB) with FrameworkTimelineReader and evaluating the three framework
// rules (StepOutlier, MaxInitializationTime, OverallFrameworkMetrics, default
// parameters) over the events, against the ceiling of reading the same files
// line by line (std::getline, no parsing, no evaluation) and of parsing each
// file whole with nlohmann::json (a DOM, no evaluation), in one run.
//
//   framework_rules_bench [--dirs DIR,...] [--iterations 50]
//
// Files come from the page cache in every measurement (one warm-up pass of
// each first); the passes of the kinds alternate, so other work on the
// machine weighs on all alike. Also reported: the reader alone (parsing,
// no rules).

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "objectstore/local_object_store.h"
#include "rules_engine/profiler/framework_timeline_reader.h"
#include "rules_engine/profiler_rules/framework_rules.h"

namespace fs = std::filesystem;
using namespace debugplane::rules_engine;

namespace {

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> files;
  fs::path pevents = fs::path(dir) / "framework" / "pevents";
  std::error_code ec;
  if (!fs::is_directory(pevents, ec)) return files;
  for (const auto& e : fs::recursive_directory_iterator(pevents)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The ceiling: every line of every file, nothing done with it.
int64_t ReadLines(const std::vector<std::string>& files, int64_t* bytes) {
  int64_t lines = 0;
  std::string line;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    while (std::getline(in, line)) {
      ++lines;
      *bytes += static_cast<int64_t>(line.size()) + 1;
    }
  }
  return lines;
}

// The plain way to read a complete timeline: the whole array into a DOM.
int64_t ParseDom(const std::vector<std::string>& files) {
  int64_t elements = 0;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_array()) elements += static_cast<int64_t>(j.size());
  }
  return elements;
}

int64_t ReadOnly(const std::string& dir) {
  FrameworkTimelineReader reader(debugplane::objectstore::OpenLocalPath(dir).value());
  return static_cast<int64_t>(reader.ReadNew().size());
}

// Reads and evaluates the three rules; returns the number of IssuesFound.
int EvaluateRules(const std::string& dir) {
  std::vector<std::unique_ptr<ProfilerRule>> rules;
  for (const std::string& name : FrameworkProfilerRuleNames()) {
    auto rule = CreateFrameworkProfilerRule(name, {});
    if (!rule.ok()) {
      std::fprintf(stderr, "%s\n", rule.status().ToString().c_str());
      std::exit(1);
    }
    rules.push_back(std::move(*rule));
  }
  FrameworkTimelineReader reader(debugplane::objectstore::OpenLocalPath(dir).value());
  std::vector<FrameworkEvent> events = reader.ReadNew();
  int issues = 0;
  for (auto& rule : rules) {
    RuleVerdict v = rule->OnFrameworkEvents(events);
    if (v.kind == RuleVerdict::Kind::kContinue) v = rule->OnEnd();
    if (v.kind == RuleVerdict::Kind::kIssuesFound) ++issues;
  }
  return issues;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Framework profiler rules vs. reading the timeline files line by line");
  std::vector<std::string> dirs;
  int iterations = 50;
  app.add_option("--dirs", dirs, "profiler directories (holding framework/pevents)")
      ->delimiter(',');
  app.add_option("--iterations", iterations, "measured passes of each kind");
  CLI11_PARSE(app, argc, argv);
  if (dirs.empty()) {
    dirs.push_back(absl::StrCat(DP_TEST_DATA_DIR, "/profiler/framework/pytorch-step-outlier"));
  }
  std::vector<std::vector<std::string>> files;
  for (const std::string& d : dirs) files.push_back(Files(d));

  // Warm-up (page cache) and the pass sizes.
  int64_t bytes = 0, lines = 0, events = 0;
  int issues = 0;
  for (const auto& f : files) lines += ReadLines(f, &bytes);
  for (const std::string& d : dirs) events += ReadOnly(d), issues += EvaluateRules(d);
  for (const auto& f : files) ParseDom(f);

  double lines_s = 0, dom_s = 0, reader_s = 0, rules_s = 0;
  for (int i = 0; i < iterations; ++i) {
    absl::Time start = absl::Now();
    int64_t b = 0;
    for (const auto& f : files) ReadLines(f, &b);
    lines_s += absl::ToDoubleSeconds(absl::Now() - start);
    start = absl::Now();
    for (const auto& f : files) ParseDom(f);
    dom_s += absl::ToDoubleSeconds(absl::Now() - start);
    start = absl::Now();
    for (const std::string& d : dirs) ReadOnly(d);
    reader_s += absl::ToDoubleSeconds(absl::Now() - start);
    start = absl::Now();
    for (const std::string& d : dirs) EvaluateRules(d);
    rules_s += absl::ToDoubleSeconds(absl::Now() - start);
  }
  const double mb = static_cast<double>(bytes) * iterations / 1e6;
  std::printf(
      "%zu directories, %.2f MB, %lld lines, %lld events, %d IssuesFound per pass; "
      "%d passes\n",
      dirs.size(), static_cast<double>(bytes) / 1e6, static_cast<long long>(lines),
      static_cast<long long>(events), issues, iterations);
  std::printf("read lines only (getline)   : %7.1f MB/s\n", mb / lines_s);
  std::printf("nlohmann parse of each file : %7.1f MB/s\n", mb / dom_s);
  std::printf("reader (parse, no rules)    : %7.1f MB/s  (%.0f%% of getline, %.1fx nlohmann)\n",
              mb / reader_s, 100.0 * lines_s / reader_s, dom_s / reader_s);
  std::printf(
      "reader + 3 framework rules  : %7.1f MB/s  (%.0f%% of getline, %.1fx nlohmann), "
      "%.2f M events/s\n",
      mb / rules_s, 100.0 * lines_s / rules_s, dom_s / rules_s,
      static_cast<double>(events) * iterations / rules_s / 1e6);
  return 0;
}
