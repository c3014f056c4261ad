#include "client/agent/system_metrics.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/scoped_temp_dir.h"
#include "tests/support/wait_until.h"

namespace debugplane::client {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::WaitUntil;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Rewrites in place (same inode): the sampler keeps its fds open.
void WriteInPlace(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
}

// "Type/Name/Dimension=Value" per metric, for compact exact comparisons.
std::vector<std::string> Describe(const std::vector<SystemMetric>& metrics) {
  std::vector<std::string> out;
  for (const SystemMetric& m : metrics) {
    char value[32];
    std::snprintf(value, sizeof(value), "%.2f", m.value);
    out.push_back(absl::StrCat(m.type, "/", m.name, "/", m.dimension, "=", value));
  }
  return out;
}

constexpr char kNetDevHeader[] =
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs "
    "drop fifo colls carrier compressed\n";

class FakeProc {
 public:
  FakeProc() { fs::create_directories(dir_.path().string() + "/net"); }
  std::string root() const { return dir_.path().string(); }
  void Set(const std::string& stat, const std::string& meminfo, const std::string& net_dev) {
    WriteInPlace(root() + "/stat", stat);
    WriteInPlace(root() + "/meminfo", meminfo);
    if (!net_dev.empty()) WriteInPlace(root() + "/net/dev", net_dev);
  }

 private:
  ScopedTempDir dir_;
};

SystemMetricsSampler::Options FakeOptions(const FakeProc& proc) {
  SystemMetricsSampler::Options options;
  options.proc_root = proc.root();
  options.nvml_library = "";  // No GPU, whatever the machine has.
  return options;
}

TEST(SystemMetricsSamplerTest, TwoSnapshotsGiveExactValues) {
  FakeProc proc;
  proc.Set(
      "cpu  100 0 100 800 0 0 0 0 0 0\n"
      "cpu0 50 0 50 400 0 0 0 0 0 0\n"
      "cpu1 50 0 50 400 0 0 0 0 0 0\n"
      "intr 1 2 3\nctxt 5\n",
      "MemTotal:        1000 kB\nMemFree:          100 kB\nMemAvailable:     250 kB\n",
      absl::StrCat(kNetDevHeader,
                   "    lo: 9000 10 0 0 0 0 0 0 9000 10 0 0 0 0 0 0\n"
                   "  eth0: 1000 10 0 0 0 0 0 0 500 5 0 0 0 0 0 0\n"
                   "  eth1: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"));
  SystemMetricsSampler sampler(FakeOptions(proc));
  std::vector<SystemMetric> metrics;
  const absl::Time t0 = absl::FromUnixSeconds(1795300020);
  ASSERT_TRUE(sampler.Sample(t0, &metrics).ok());
  // First sample: only the absolute metrics.
  EXPECT_THAT(Describe(metrics), ElementsAre("cpu/cpu/MemoryUsedPercent=75.00"));

  // cpu0: +25 user, +75 idle -> 25% busy. cpu1: +100 user, +50 idle,
  // +50 iowait -> 50% busy. All: 125 user, 125 idle, 50 iowait of 300.
  proc.Set(
      "cpu  225 0 100 925 50 0 0 0 0 0\n"
      "cpu0 75 0 50 475 0 0 0 0 0 0\n"
      "cpu1 150 0 50 450 50 0 0 0 0 0\n"
      "intr 1 2 3\nctxt 5\n",
      "MemTotal:        1000 kB\nMemFree:          100 kB\nMemAvailable:     500 kB\n",
      absl::StrCat(kNetDevHeader,
                   "    lo: 9999000 10 0 0 0 0 0 0 9999000 10 0 0 0 0 0 0\n"
                   "  eth0: 5000 10 0 0 0 0 0 0 1500 5 0 0 0 0 0 0\n"
                   "  eth1: 1000 0 0 0 0 0 0 0 2000 0 0 0 0 0 0 0\n"));
  ASSERT_TRUE(sampler.Sample(t0 + absl::Seconds(2), &metrics).ok());
  EXPECT_THAT(Describe(metrics),
              ElementsAre("cpu/cpu0/CPUUtilization=25.00", "cpu/cpu1/CPUUtilization=50.00",
                          "cpu/cpu/MemoryUsedPercent=50.00", "cpu/cpu/I/OWaitPercentage=16.67",
                          "network/net/ReceiveBytesPerSecond=2500.00",
                          "network/net/TransmitBytesPerSecond=1500.00"));
}

TEST(SystemMetricsSamplerTest, CountersGoingBackwardsCountAsZero) {
  FakeProc proc;
  proc.Set("cpu  10 0 10 80 50 0 0 0\ncpu0 10 0 10 80 50 0 0 0\n",
           "MemTotal: 100 kB\nMemFree: 10 kB\nBuffers: 10 kB\nCached: 20 kB\n", "");
  SystemMetricsSampler sampler(FakeOptions(proc));
  std::vector<SystemMetric> metrics;
  ASSERT_TRUE(sampler.Sample(absl::UnixEpoch(), &metrics).ok());
  // No MemAvailable (old kernel): free + buffers + cached = 40 available.
  EXPECT_THAT(Describe(metrics), ElementsAre("cpu/cpu/MemoryUsedPercent=60.00"));
  // iowait went backwards (Linux allows it): 0%, not a huge number.
  proc.Set("cpu  20 0 10 180 40 0 0 0\ncpu0 20 0 10 180 40 0 0 0\n",
           "MemTotal: 100 kB\nMemFree: 10 kB\nBuffers: 10 kB\nCached: 20 kB\n", "");
  ASSERT_TRUE(sampler.Sample(absl::UnixEpoch() + absl::Seconds(1), &metrics).ok());
  EXPECT_THAT(Describe(metrics),
              ElementsAre("cpu/cpu0/CPUUtilization=10.00", "cpu/cpu/MemoryUsedPercent=60.00",
                          "cpu/cpu/I/OWaitPercentage=0.00"));
}

TEST(SystemMetricsSamplerTest, MissingStatIsAnErrorNamingTheFile) {
  ScopedTempDir empty;
  SystemMetricsSampler::Options options;
  options.proc_root = empty.path().string();
  options.nvml_library = "";
  SystemMetricsSampler sampler(options);
  std::vector<SystemMetric> metrics;
  absl::Status status = sampler.Sample(absl::Now(), &metrics);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(empty.path().string() + "/stat"));
}

TEST(SystemMetricsSamplerTest, RealProcIsSane) {
  SystemMetricsSampler sampler;
  std::vector<SystemMetric> metrics;
  ASSERT_TRUE(sampler.Sample(absl::Now(), &metrics).ok());
  // Real time, on purpose: the CPU counters of the real /proc move with it.
  absl::SleepFor(absl::Milliseconds(100));
  absl::Status status = sampler.Sample(absl::Now(), &metrics);
  ASSERT_TRUE(status.ok()) << status;

  int cores_in_stat = 0;
  for (absl::string_view line : absl::StrSplit(ReadAll("/proc/stat"), '\n')) {
    if (line.size() > 3 && line.substr(0, 3) == "cpu" && line[3] != ' ') ++cores_in_stat;
  }
  int cpu_lines = 0, memory_lines = 0, io_lines = 0;
  for (const SystemMetric& m : metrics) {
    std::string dimension = m.dimension;
    if (dimension == "CPUUtilization") {
      EXPECT_EQ(m.name, absl::StrCat("cpu", cpu_lines));
      ++cpu_lines;
    }
    if (dimension == "MemoryUsedPercent") ++memory_lines;
    if (dimension == "I/OWaitPercentage") ++io_lines;
    if (std::string(m.type) != "network") {
      EXPECT_GE(m.value, 0.0) << m.name << " " << dimension;
      EXPECT_LE(m.value, 100.0) << m.name << " " << dimension;
    } else {
      EXPECT_GE(m.value, 0.0);
    }
  }
  EXPECT_EQ(cpu_lines, cores_in_stat);
  EXPECT_EQ(memory_lines, 1);
  EXPECT_EQ(io_lines, 1);
}

TEST(SystemMetricsSamplerTest, NoGpuMeansNoGpuLinesAndNoError) {
  FakeProc proc;
  proc.Set("cpu  1 0 1 8 0 0 0 0\ncpu0 1 0 1 8 0 0 0 0\n", "MemTotal: 10 kB\nMemAvailable: 5 kB\n",
           "");
  SystemMetricsSampler::Options options = FakeOptions(proc);
  options.nvml_library = "libnvidia-ml-does-not-exist.so.1";
  SystemMetricsSampler sampler(options);
  std::vector<SystemMetric> metrics;
  ASSERT_TRUE(sampler.Sample(absl::Now(), &metrics).ok());
  ASSERT_TRUE(sampler.Sample(absl::Now(), &metrics).ok());
  for (const SystemMetric& m : metrics) EXPECT_NE(std::string(m.type), "gpu");
  EXPECT_EQ(sampler.gpu_count(), 0);

  // The real library name: on a machine without the NVIDIA driver the same.
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml != nullptr) {
    dlclose(nvml);
    GTEST_SKIP() << "this machine has libnvidia-ml.so.1";
  }
  SystemMetricsSampler::Options default_nvml = FakeOptions(proc);
  default_nvml.nvml_library = SystemMetricsSampler::Options().nvml_library;
  SystemMetricsSampler sampler2(default_nvml);
  ASSERT_TRUE(sampler2.Sample(absl::Now(), &metrics).ok());
  for (const SystemMetric& m : metrics) EXPECT_NE(std::string(m.type), "gpu");
}

// A fake NVML with two GPUs; the second one's memory query fails.
struct FakeNvml {
  static int Init() { return 0; }
  static int Count(unsigned int* count) {
    *count = 2;
    return 0;
  }
  static int Handle(unsigned int index, NvmlFunctions::Device* device) {
    *device = reinterpret_cast<NvmlFunctions::Device>(static_cast<uintptr_t>(index + 1));
    return 0;
  }
  static int Utilization(NvmlFunctions::Device device, NvmlFunctions::Utilization* utilization) {
    utilization->gpu = reinterpret_cast<uintptr_t>(device) == 1 ? 90 : 7;
    utilization->memory = 3;  // Memory-controller busy: not what we report.
    return 0;
  }
  static int Memory(NvmlFunctions::Device device, NvmlFunctions::Memory* memory) {
    if (reinterpret_cast<uintptr_t>(device) == 2) return 999;  // NVML_ERROR_UNKNOWN
    memory->total = 16ull << 30;
    memory->used = 4ull << 30;
    memory->free = 12ull << 30;
    return 0;
  }
  static int Shutdown() {
    ++shutdowns;
    return 0;
  }
  static inline std::atomic<int> shutdowns{0};
};

TEST(SystemMetricsSamplerTest, GpuLinesFromNvml) {
  FakeProc proc;
  proc.Set("cpu  1 0 1 8 0 0 0 0\n", "MemTotal: 10 kB\nMemAvailable: 5 kB\n", "");
  NvmlFunctions nvml;
  nvml.init = &FakeNvml::Init;
  nvml.get_count = &FakeNvml::Count;
  nvml.get_handle = &FakeNvml::Handle;
  nvml.get_utilization = &FakeNvml::Utilization;
  nvml.get_memory = &FakeNvml::Memory;
  nvml.shutdown = &FakeNvml::Shutdown;
  SystemMetricsSampler::Options options = FakeOptions(proc);
  options.nvml_for_testing = &nvml;
  const int shutdowns_before = FakeNvml::shutdowns;
  {
    SystemMetricsSampler sampler(options);
    std::vector<SystemMetric> metrics;
    ASSERT_TRUE(sampler.Sample(absl::Now(), &metrics).ok());
    EXPECT_EQ(sampler.gpu_count(), 2);
    EXPECT_THAT(Describe(metrics),
                ElementsAre("cpu/cpu/MemoryUsedPercent=50.00", "gpu/gpu0/GPUUtilization=90.00",
                            "gpu/gpu0/GPUMemoryUtilization=25.00", "gpu/gpu1/GPUUtilization=7.00"));
  }
  EXPECT_EQ(FakeNvml::shutdowns, shutdowns_before + 1);
}

// --- Writer ------------------------------------------------------------------

absl::Time At(double seconds) { return absl::FromUnixMicros(static_cast<int64_t>(seconds * 1e6)); }

TEST(SystemMetricsWriterTest, LinesMatchTheSageMakerFormat) {
  ScopedTempDir dir;
  SystemMetricsWriter writer(dir.path().string());
  std::vector<SystemMetric> metrics = {{"cpu", "cpu0", "CPUUtilization", 34.234},
                                       {"cpu", "cpu", "I/OWaitPercentage", 1.5}};
  ASSERT_TRUE(writer.Write(At(1795300020.5), metrics).ok());
  const std::string path =
      dir.path().string() + "/system/incremental/2026112122/1795300020.algo-1.json";
  EXPECT_EQ(writer.current_path(), path);
  EXPECT_EQ(
      ReadAll(path),
      "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", \"Value\": "
      "34.23, \"NodeId\": \"algo-1\", \"Timestamp\": 1795300020.500000}\n"
      "{\"Type\": \"cpu\", \"Name\": \"cpu\", \"Dimension\": \"I/OWaitPercentage\", \"Value\": "
      "1.50, \"NodeId\": \"algo-1\", \"Timestamp\": 1795300020.500000}\n");
  // Every line parses as the fixtures' lines do.
  for (absl::string_view line : absl::StrSplit(ReadAll(path), '\n', absl::SkipEmpty())) {
    nlohmann::json json = nlohmann::json::parse(line);
    EXPECT_EQ(json["NodeId"], "algo-1");
    EXPECT_TRUE(json["Value"].is_number());
    EXPECT_TRUE(json["Timestamp"].is_number_float());
  }
}

TEST(SystemMetricsWriterTest, OneFilePerMinuteAndHourDirectories) {
  ScopedTempDir dir;
  SystemMetricsWriter writer(dir.path().string(), "algo-2");
  std::vector<SystemMetric> metrics = {{"cpu", "cpu0", "CPUUtilization", 1}};
  // Fixtures: 2026112122/1795300020.algo-1.json covers 1795300020.0-79.5;
  // 22:59:59 and 23:00:00 (1795302000) fall in different hour directories.
  for (double t : {1795300020.0, 1795300050.25, 1795300079.999, 1795300080.0, 1795301999.9,
                   1795302000.0, 1795302000.5}) {
    ASSERT_TRUE(writer.Write(At(t), metrics).ok());
  }
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir.path().string())) {
    if (entry.is_regular_file()) {
      files.push_back(absl::StrCat(
          fs::relative(entry.path(), dir.path().string()).string(), ":",
          std::count(std::istreambuf_iterator<char>(*std::make_unique<std::ifstream>(entry.path())),
                     std::istreambuf_iterator<char>(), '\n')));
    }
  }
  std::sort(files.begin(), files.end());
  EXPECT_THAT(files, ElementsAre("system/incremental/2026112122/1795300020.algo-2.json:3",
                                 "system/incremental/2026112122/1795300080.algo-2.json:1",
                                 "system/incremental/2026112122/1795301940.algo-2.json:1",
                                 "system/incremental/2026112123/1795302000.algo-2.json:2"));
}

TEST(SystemMetricsWriterTest, AppendsToAnExistingFileAndEscapesNodeId) {
  ScopedTempDir dir;
  std::vector<SystemMetric> metrics = {{"cpu", "cpu", "MemoryUsedPercent", 50}};
  {
    SystemMetricsWriter writer(dir.path().string());
    ASSERT_TRUE(writer.Write(At(1795300020.0), metrics).ok());
  }
  SystemMetricsWriter restarted(dir.path().string());
  ASSERT_TRUE(restarted.Write(At(1795300021.0), metrics).ok());
  EXPECT_EQ(std::count(std::istreambuf_iterator<char>(
                           *std::make_unique<std::ifstream>(restarted.current_path())),
                       std::istreambuf_iterator<char>(), '\n'),
            2);
  SystemMetricsWriter odd(dir.path().string() + "/odd", "a\"b");
  ASSERT_TRUE(odd.Write(At(1795300020.0), metrics).ok());
  nlohmann::json json = nlohmann::json::parse(ReadAll(odd.current_path()));
  EXPECT_EQ(json["NodeId"], "a\"b");
}

TEST(SystemMetricsWriterTest, UnwritableDirectoryNamesThePath) {
  ScopedTempDir dir;
  const std::string blocker = dir.path().string() + "/file";
  std::ofstream(blocker) << "x";
  SystemMetricsWriter writer(blocker);
  std::vector<SystemMetric> metrics = {{"cpu", "cpu", "MemoryUsedPercent", 50}};
  absl::Status status = writer.Write(At(1795300020.0), metrics);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(blocker + "/system/incremental/2026112122"));
}

// --- Loop --------------------------------------------------------------------

TEST(MetricsSamplingLoopTest, InjectedClockDrivesFileRotation) {
  ScopedTempDir dir;
  SystemMetricsSampler sampler;
  SystemMetricsWriter writer(dir.path().string());
  std::atomic<int64_t> ticks{0};
  MetricsSamplingLoop::Options options;
  options.interval = absl::Milliseconds(5);
  // Each sample is 20 s later: three samples per minute file.
  options.clock = [&] { return absl::FromUnixSeconds(1795300020 + 20 * ticks.fetch_add(1)); };
  MetricsSamplingLoop loop(&sampler, &writer, options);
  WaitUntil([&] { return loop.samples() >= 7; });
  loop.Stop();
  ASSERT_GE(loop.samples(), 7);
  EXPECT_EQ(loop.errors(), 0) << loop.last_error();
  const std::string hour = dir.path().string() + "/system/incremental/2026112122/";
  EXPECT_TRUE(fs::exists(hour + "1795300020.algo-1.json"));
  EXPECT_TRUE(fs::exists(hour + "1795300080.algo-1.json"));
  // The first sample has no CPU delta yet; later ones have one line per core.
  std::string second_minute = ReadAll(hour + "1795300080.algo-1.json");
  EXPECT_THAT(second_minute, HasSubstr("\"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\""));
  EXPECT_THAT(second_minute, HasSubstr("\"Timestamp\": 1795300080.000000}"));
}

TEST(MetricsSamplingLoopTest, SetIntervalChangesTheRateAtOnce) {
  ScopedTempDir dir;
  SystemMetricsSampler sampler;
  SystemMetricsWriter writer(dir.path().string());
  MetricsSamplingLoop::Options options;
  options.interval = absl::Seconds(30);
  MetricsSamplingLoop loop(&sampler, &writer, options);
  // The first sample is immediate; then the thread sleeps for 30 s.
  WaitUntil([&] { return loop.samples() >= 1; });
  // Real time, on purpose (here and below): the loop sleeps by the real
  // clock (its clock option only stamps the samples), and what is checked is
  // how many samples come in a stretch of real time.
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(loop.samples(), 1);

  // Wakes the 30 s sleep: ~50 samples in 1 s at 20 ms (generous bounds for a
  // loaded 2-core machine).
  loop.SetInterval(absl::Milliseconds(20));
  absl::SleepFor(absl::Seconds(1));
  int64_t fast = loop.samples() - 1;
  EXPECT_GE(fast, 15);
  EXPECT_LE(fast, 60);

  loop.SetInterval(absl::Seconds(30));
  absl::SleepFor(absl::Milliseconds(50));  // Let a sample in flight finish.
  int64_t before = loop.samples();
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_LE(loop.samples() - before, 1);

  absl::Time stop_start = absl::Now();
  loop.Stop();  // Wakes the 30 s sleep too.
  EXPECT_LT(absl::Now() - stop_start, absl::Seconds(5));
  EXPECT_EQ(loop.errors(), 0) << loop.last_error();
}

}  // namespace
}  // namespace debugplane::client
