// TensorBoard reading: every rule that TensorBoard logs can feed, evaluated
// over one large event file written here, against the ceiling of reading the
// same file and checking its records' CRCs, in one run.
//
//   tensorboard_bench [--gigabytes 1] [--dir /tmp] [--only LossNotDecreasing,Overfit]
//
// --only evaluates the named rules of the eight only (the reader then skips
// the values no rule wants by their length, undecoded).
//
// The file (torch's SummaryWriter shape: per step the scalars train/loss and
// train/grad_norm, every 100th step eval/loss, and HistogramProto histograms
// of two weights and two gradients with 30 buckets) is written first, then
// read once by each side; both read it from the page cache when it fits in
// memory (a warm-up read first). Python's tensorboard is not on this
// machine (Debian has no package), so TensorBoard's own loader is not
// measured.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/smdebug/tfrecord.h"
#include "rules_engine/tensorboard/tensorboard_reader.h"
#include "tests/rules_engine/tb_event_writer.h"

namespace fs = std::filesystem;
using namespace debugplane::rules_engine;

namespace {

// The rules and parameters evaluated (those TensorBoard logs can feed and
// that need no second trial or wall clock).
const std::vector<std::pair<std::string, RuleParameters>> kRules = {
    {"ExplodingTensor", {}},
    {"VanishingGradient", {}},
    {"AllZero", {{"collection_names", "weights,gradients"}}},
    {"UnchangedTensor", {{"collection_names", "weights"}}},
    {"TensorVariance", {{"collection_names", "weights"}, {"max_threshold", "1e6"}}},
    {"LossNotDecreasing", {}},
    {"Overfit", {}},
    {"Overtraining", {}},
};

HistogramStats Histogram(int64_t step, double scale) {
  HistogramStats h;
  const int buckets = 30;
  h.min = -scale;
  h.max = scale * (1 + 1e-6 * static_cast<double>(step % 1000));
  h.num = 4096;
  h.sum = scale * 0.01 * static_cast<double>(step % 7);
  h.sum_squares = scale * scale * 1365.0;
  for (int i = 0; i < buckets; ++i) {
    h.bucket_limit.push_back(-scale + 2 * scale * (i + 1) / buckets);
    h.bucket.push_back(4096.0 / buckets);
  }
  return h;
}

// Writes about `bytes` of events; returns the steps written.
int64_t WriteEventFile(const std::string& path, uint64_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::string chunk;
  uint64_t written = 0;
  int64_t step = 0;
  double wall = 1.7e9;
  for (; written < bytes; ++step) {
    wall += 0.01;
    const float loss = static_cast<float>(2.0 / std::sqrt(1.0 + step));
    chunk += testing::TbRecord(testing::TbScalarEvent(step, "train/loss", loss, wall));
    chunk += testing::TbRecord(testing::TbScalarEvent(step, "train/grad_norm", 1.0f, wall));
    if (step % 100 == 0) {
      chunk += testing::TbRecord(testing::TbScalarEvent(step, "eval/loss", loss * 1.01f, wall));
    }
    for (const char* tag : {"weights/fc1.weight", "weights/fc2.weight"}) {
      chunk += testing::TbRecord(testing::TbHistogramEvent(step, tag, Histogram(step, 0.1), wall));
    }
    for (const char* tag : {"gradients/fc1.weight", "gradients/fc2.weight"}) {
      chunk += testing::TbRecord(testing::TbHistogramEvent(step, tag, Histogram(step, 1e-3), wall));
    }
    if (chunk.size() > (1 << 20)) {
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      written += chunk.size();
      chunk.clear();
    }
  }
  out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  return step;
}

// Reads `path` in pieces of `piece_bytes` (each read straight after the
// partial record the last one left) and checks every record's framing and
// CRCs. 4 MiB pieces, as the reader reads, stay in cache between the read
// and the CRC pass; 64 MiB pieces do not, and are slower.
absl::Duration ReadAndCheck(const std::string& path, size_t piece_bytes, int64_t* records) {
  const absl::Time start = absl::Now();
  std::ifstream in(path, std::ios::binary);
  std::string buf(piece_bytes, '\0');
  size_t carried = 0;
  *records = 0;
  while (in) {
    if (carried == buf.size()) {  // A record longer than a piece.
      if (buf.size() > 2 * static_cast<size_t>(kEventRecordLimit.max_bytes)) {
        std::fprintf(stderr, "%s: a record longer than %zu bytes\n", path.c_str(), buf.size());
        std::exit(1);
      }
      buf.resize(buf.size() * 2);
    }
    in.read(buf.data() + carried, static_cast<std::streamsize>(buf.size() - carried));
    const size_t filled = carried + static_cast<size_t>(in.gcount());
    auto parsed = ParseTfRecords(absl::string_view(buf.data(), filled), path);
    if (!parsed.ok()) {
      std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
      std::exit(1);
    }
    *records += static_cast<int64_t>(parsed->records.size());
    carried = filled - parsed->consumed;
    std::memmove(buf.data(), buf.data() + parsed->consumed, carried);
  }
  return absl::Now() - start;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"TensorBoard rules vs read+CRC of one large event file"};
  double gigabytes = 1.0;
  std::string dir = fs::temp_directory_path().string();
  app.add_option("--gigabytes", gigabytes, "Size of the event file")->capture_default_str();
  app.add_option("--dir", dir, "Where to write it")->capture_default_str();
  std::string only;
  app.add_option("--only", only, "Comma-separated rules of the eight to evaluate (default: all)");
  CLI11_PARSE(app, argc, argv);
  const fs::path run = fs::path(dir) / "tensorboard_bench";
  fs::remove_all(run);
  fs::create_directories(run);
  const std::string path = (run / "events.out.tfevents.1700000000.bench.1.0").string();
  const absl::Time write_start = absl::Now();
  const int64_t steps =
      WriteEventFile(path, static_cast<uint64_t>(gigabytes * (uint64_t{1} << 30)));
  const double size = static_cast<double>(fs::file_size(path));
  std::printf("wrote %.0f MiB, %lld steps in %.1f s\n", size / (1 << 20),
              static_cast<long long>(steps), absl::ToDoubleSeconds(absl::Now() - write_start));

  int64_t records = 0;
  ReadAndCheck(path, 4 << 20, &records);  // Warm-up: the page cache.
  // The ceiling: the faster of the two piece sizes.
  const absl::Duration big_pieces = ReadAndCheck(path, 64 << 20, &records);
  const absl::Duration ceiling = std::min(big_pieces, ReadAndCheck(path, 4 << 20, &records));
  std::printf("read+CRC in 64 MiB pieces: %.2f s\n", absl::ToDoubleSeconds(big_pieces));

  std::vector<std::unique_ptr<Rule>> rules;
  std::vector<std::pair<std::string, RuleParameters>> selected;
  const std::vector<std::string> names = absl::StrSplit(only, ',', absl::SkipEmpty());
  for (const auto& rule : kRules) {
    if (names.empty() || absl::c_linear_search(names, rule.first)) selected.push_back(rule);
  }
  if (selected.size() != (names.empty() ? kRules.size() : names.size())) {
    std::fprintf(stderr, "--only names a rule that is not one of the eight\n");
    return 2;
  }
  for (const auto& [name, params] : selected) rules.push_back(*CreateBuiltinRule(name, params));
  std::vector<bool> done(rules.size(), false);
  std::vector<std::string> verdicts(rules.size(), "still running at the end");
  tensorboard::TensorBoardReader reader(*debugplane::objectstore::OpenLocalPath(run.string()));
  reader.SetTrainingEnded();
  const absl::Time start = absl::Now();
  int64_t evaluated_steps = 0;
  auto wanted = [&](const std::string& tag, const TrialInfo& info) {
    for (size_t i = 0; i < rules.size(); ++i) {
      if (!done[i] && rules[i]->Wants(tag, info)) return true;
    }
    return false;
  };
  while (!reader.finished()) {
    auto read = reader.ReadNewSteps(wanted, ReadBudget{.max_steps = 4096});
    if (!read.ok()) {
      std::fprintf(stderr, "%s\n", read.status().ToString().c_str());
      return 1;
    }
    for (const Step& step : *read) {
      ++evaluated_steps;
      for (size_t i = 0; i < rules.size(); ++i) {
        if (done[i]) continue;
        RuleVerdict v = rules[i]->OnStep(step, reader.info());
        if (v.kind != RuleVerdict::Kind::kContinue) {
          done[i] = true;
          verdicts[i] =
              absl::StrCat("concluded at step ", step.global_step, ": ", v.details.substr(0, 100));
        }
      }
    }
  }
  for (size_t i = 0; i < rules.size(); ++i) {
    if (!done[i]) verdicts[i] = rules[i]->OnTrainingEnd(reader.info()).details.substr(0, 100);
  }
  const absl::Duration rules_time = absl::Now() - start;
  const double mib = size / (1 << 20);
  std::printf("read+CRC: %lld records in %.2f s (%.0f MiB/s)\n", static_cast<long long>(records),
              absl::ToDoubleSeconds(ceiling), mib / absl::ToDoubleSeconds(ceiling));
  std::printf("all rules: %lld steps in %.2f s (%.0f MiB/s) = %.0f%% of read+CRC\n",
              static_cast<long long>(evaluated_steps), absl::ToDoubleSeconds(rules_time),
              mib / absl::ToDoubleSeconds(rules_time),
              100.0 * absl::ToDoubleSeconds(ceiling) / absl::ToDoubleSeconds(rules_time));
  for (size_t i = 0; i < rules.size(); ++i) {
    std::printf("  %-18s %s\n", selected[i].first.c_str(), verdicts[i].c_str());
  }
  fs::remove_all(run);
  return 0;
}
