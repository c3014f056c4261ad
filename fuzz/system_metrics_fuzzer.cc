// libFuzzer target: the system-metrics reader (rules_engine/profiler/system_metrics_reader.h)
// on arbitrary bytes, differentially. The bytes are written as a metrics
// file in two appends split at a point the first byte picks (the way the
// agent's file grows while it is read), read with SystemMetricsReader after
// each append, and the points must be exactly those ParseSystemMetricLine
// gives for the complete lines, in order: the reader's fast paths (layout
// memos, word-wise scans, the held-back partial line) may not change a point.
//
// Build and run (see tfrecord_fuzzer.cc for the cmake line):
//   ninja -C /work/main/build-fuzz -j2 system_metrics_fuzzer
//   /work/main/build-fuzz/system_metrics_fuzzer -max_total_time=60 -max_len=4096

#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/profiler/system_metrics_reader.h"

using debugplane::rules_engine::ParseSystemMetricLine;
using debugplane::rules_engine::SystemMetricPoint;
using debugplane::rules_engine::SystemMetricsReader;

namespace {

bool Same(const SystemMetricPoint& a, const SystemMetricPoint& b) {
  auto same_number = [](double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; };
  return a.type == b.type && a.name == b.name && a.dimension == b.dimension &&
         a.node_id == b.node_id && a.dim == b.dim && same_number(a.value, b.value) &&
         same_number(a.timestamp, b.timestamp);
}

const std::filesystem::path& Root() {
  static const std::filesystem::path* root = [] {
    char dir[] = "/tmp/dp-system-metrics-fuzz-XXXXXX";
    if (mkdtemp(dir) == nullptr) abort();
    return new std::filesystem::path(dir);
  }();
  return *root;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = text.size() * data[0] / 255;

  std::error_code ignored;
  std::filesystem::remove_all(Root() / "system", ignored);
  const std::filesystem::path hour = Root() / "system" / "incremental" / "2026112207";
  std::filesystem::create_directories(hour);
  const std::filesystem::path file = hour / "1795331436.algo-1.json";
  SystemMetricsReader reader(debugplane::objectstore::OpenLocalPath(Root().string()).value());
  std::vector<SystemMetricPoint> read;
  {
    std::ofstream out(file, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(cut));
  }
  for (SystemMetricPoint& p : reader.ReadNew()) read.push_back(std::move(p));
  {
    std::ofstream out(file, std::ios::binary | std::ios::app);
    out.write(text.data() + cut, static_cast<std::streamsize>(text.size() - cut));
  }
  for (SystemMetricPoint& p : reader.ReadNew()) read.push_back(std::move(p));

  // The reference: every complete line (ending in '\n') parsed on its own;
  // the last line without a newline is held back by the reader.
  std::vector<SystemMetricPoint> expected;
  size_t start = 0;
  for (size_t end = text.find('\n'); end != std::string::npos;
       start = end + 1, end = text.find('\n', start)) {
    SystemMetricPoint point;
    std::string error;
    const absl::string_view line(text.data() + start, end - start);
    if (line.find_first_not_of(" \t\r") == absl::string_view::npos) continue;  // Blank.
    if (ParseSystemMetricLine(line, &point, &error)) expected.push_back(point);
  }
  if (read.size() != expected.size()) abort();
  for (size_t i = 0; i < read.size(); ++i) {
    if (!Same(read[i], expected[i])) abort();
  }
  if (reader.errors().size() > static_cast<size_t>(SystemMetricsReader::kMaxErrors)) abort();
  return 0;
}
