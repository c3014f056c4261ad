// Profiler rules throughput: reading the system metrics of every folder of
// tests/data/profiler/system with SystemMetricsReader and evaluating
// the seven system-metric profiler rules (default parameters) over them,
// against the ceiling of reading the same files line by line (std::getline,
// no parsing, no evaluation) and of parsing each line with nlohmann::json
// (no evaluation), in one run.
//
//   profiler_rules_bench [--dirs DIR,...] [--iterations 20] [--rules-only]
//
// Files come from the page cache in both measurements (one warm-up pass of
// each first); the passes of the two alternate, so other work on the machine
// weighs on both alike. Also reported: the reader alone (parsing, no rules).

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
#include "rules_engine/profiler/system_metrics_reader.h"
#include "rules_engine/profiler_rules/profiler_rules.h"

namespace fs = std::filesystem;
using namespace debugplane::rules_engine;

namespace {

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> files;
  fs::path inc = fs::path(dir) / "system" / "incremental";
  std::error_code ec;
  if (!fs::is_directory(inc, ec)) return files;
  for (const auto& e : fs::recursive_directory_iterator(inc)) {
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

// The other reading of "reading the JSON lines without evaluating": every
// line parsed into a nlohmann::json DOM, nothing done with it.
int64_t ParseLinesDom(const std::vector<std::string>& files) {
  int64_t objects = 0;
  std::string line;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    while (std::getline(in, line)) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object()) ++objects;
    }
  }
  return objects;
}

int64_t ReadOnly(const std::string& dir) {
  SystemMetricsReader reader(debugplane::objectstore::OpenLocalPath(dir).value());
  return static_cast<int64_t>(reader.ReadNew().size());
}

// The rules over system metrics (ProfilerRuleNames() also lists the
// framework-timeline rules, which read other files).
const char* const kSystemRules[] = {"BatchSize",         "CPUBottleneck", "GPUMemoryIncrease",
                                    "IOBottleneck",      "LoadBalancing", "LowGPUUtilization",
                                    "OverallSystemUsage"};
constexpr int kRuleCount = sizeof(kSystemRules) / sizeof(kSystemRules[0]);

// Reads and evaluates all the system rules; returns the number of
// IssuesFound.
int EvaluateRules(const std::string& dir) {
  std::vector<std::unique_ptr<ProfilerRule>> rules;
  for (const std::string name : kSystemRules) {
    auto rule = CreateProfilerRule(name, {});
    if (!rule.ok()) {
      std::fprintf(stderr, "%s\n", rule.status().ToString().c_str());
      std::exit(1);
    }
    rules.push_back(std::move(*rule));
  }
  SystemMetricsReader reader(debugplane::objectstore::OpenLocalPath(dir).value());
  std::vector<SystemMetricPoint> points = reader.ReadNew();
  int issues = 0;
  for (auto& rule : rules) {
    RuleVerdict v = rule->OnMetrics(points);
    if (v.kind == RuleVerdict::Kind::kContinue) v = rule->OnEnd();
    if (v.kind == RuleVerdict::Kind::kIssuesFound) ++issues;
  }
  return issues;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Profiler rules over system metrics vs. reading the files line by line");
  std::vector<std::string> dirs;
  int iterations = 20;
  app.add_option("--dirs", dirs, "profiler directories (holding system/incremental)")
      ->delimiter(',');
  app.add_option("--iterations", iterations, "measured passes of each kind");
  bool rules_only = false;
  app.add_flag("--rules-only", rules_only,
               "only run reader + rules passes, no figures (for a profiler such as perf)");
  CLI11_PARSE(app, argc, argv);
  if (dirs.empty()) {
    for (const char* d : {"healthy", "low_gpu_utilization", "cpu_bottleneck", "io_bottleneck",
                          "gpu_memory_increase"}) {
      dirs.push_back(absl::StrCat(DP_TEST_DATA_DIR, "/profiler/system/", d));
    }
  }
  if (rules_only) {
    int issues = 0;
    for (int i = 0; i < iterations; ++i) {
      for (const std::string& d : dirs) issues += EvaluateRules(d);
    }
    std::printf("%d IssuesFound in %d passes\n", issues, iterations);
    return 0;
  }
  std::vector<std::vector<std::string>> files;
  for (const std::string& d : dirs) files.push_back(Files(d));

  // Warm-up (page cache) and the pass sizes.
  int64_t bytes = 0, lines = 0, points = 0;
  int issues = 0;
  for (const auto& f : files) lines += ReadLines(f, &bytes);
  for (const std::string& d : dirs) points += ReadOnly(d), issues += EvaluateRules(d);

  for (const auto& f : files) ParseLinesDom(f);
  double lines_s = 0, dom_s = 0, reader_s = 0, rules_s = 0;
  for (int i = 0; i < iterations; ++i) {
    absl::Time start = absl::Now();
    int64_t b = 0;
    for (const auto& f : files) ReadLines(f, &b);
    lines_s += absl::ToDoubleSeconds(absl::Now() - start);
    start = absl::Now();
    for (const auto& f : files) ParseLinesDom(f);
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
      "%zu directories, %.1f MB, %lld lines, %lld points, %d IssuesFound per pass; "
      "%d passes\n",
      dirs.size(), static_cast<double>(bytes) / 1e6, static_cast<long long>(lines),
      static_cast<long long>(points), issues, iterations);
  std::printf("read lines only (getline) : %7.1f MB/s\n", mb / lines_s);
  std::printf("getline + nlohmann parse  : %7.1f MB/s\n", mb / dom_s);
  std::printf("reader (parse, no rules)  : %7.1f MB/s  (%.0f%% of getline, %.0f%% of nlohmann)\n",
              mb / reader_s, 100.0 * lines_s / reader_s, 100.0 * dom_s / reader_s);
  std::printf(
      "reader + %d profiler rules : %7.1f MB/s  (%.0f%% of getline, %.0f%% of nlohmann), "
      "%.2f M points/s\n",
      kRuleCount, mb / rules_s, 100.0 * lines_s / rules_s, 100.0 * dom_s / rules_s,
      static_cast<double>(points) * iterations / rules_s / 1e6);
  return 0;
}
