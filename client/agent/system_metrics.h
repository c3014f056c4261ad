// System monitoring on the training host, in SageMaker Debugger's on-disk
// format (docs/smdebug-format.md, section 2): the host agent
// samples /proc (and NVML when a GPU driver is present) every
// ProfilingIntervalInMilliseconds and appends JSON lines under
// <profiler_dir>/system/incremental/, where the profiler rules read them.
//
// Lines, in this order per sample (Type / Name / Dimension), as in
// tests/data/profiler/system/*:
//   cpu / cpu<N> / CPUUtilization        per online core N, % busy since the
//                                        previous sample (from /proc/stat)
//   cpu / cpu    / MemoryUsedPercent     100 * (MemTotal - MemAvailable) /
//                                        MemTotal (from /proc/meminfo)
//   gpu / gpu<N> / GPUUtilization        NVML utilization.gpu, %
//   gpu / gpu<N> / GPUMemoryUtilization  NVML memory used / total, %
//   cpu / cpu    / I/OWaitPercentage     % of all CPU time spent in iowait
//                                        since the previous sample (the
//                                        aggregate "cpu" line of /proc/stat)
//   network / net / ReceiveBytesPerSecond, TransmitBytesPerSecond
//                                        bytes/s summed over all interfaces
//                                        but "lo" (from /proc/net/dev); no
//                                        fixture has network lines, so these
//                                        names are ours (readers that only
//                                        know cpu/gpu skip them by Type).
// Values are rounded to 2 decimals, like SageMaker's files.

#ifndef DEBUGPLANE_CLIENT_AGENT_SYSTEM_METRICS_H_
#define DEBUGPLANE_CLIENT_AGENT_SYSTEM_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace debugplane::client {

// One metric line without NodeId and Timestamp (the writer adds them).
// `type` and `dimension` point to string literals; `name` is short enough
// for the small-string buffer, so refilling a reused vector does not allocate.
struct SystemMetric {
  const char* type;
  std::string name;
  const char* dimension;
  double value;
};

// The subset of NVML the sampler uses (signatures from nvml.h, declared here
// so there is no build dependency on the CUDA toolkit). Tests pass fakes.
struct NvmlFunctions {
  using Device = struct nvmlDevice_st*;
  struct Utilization {  // nvmlUtilization_t
    unsigned int gpu;
    unsigned int memory;
  };
  struct Memory {  // nvmlMemory_t (v1)
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
  };
  // All return nvmlReturn_t: 0 is NVML_SUCCESS.
  int (*init)() = nullptr;                                 // nvmlInit_v2
  int (*get_count)(unsigned int*) = nullptr;               // nvmlDeviceGetCount_v2
  int (*get_handle)(unsigned int, Device*) = nullptr;      // nvmlDeviceGetHandleByIndex_v2
  int (*get_utilization)(Device, Utilization*) = nullptr;  // nvmlDeviceGetUtilizationRates
  int (*get_memory)(Device, Memory*) = nullptr;            // nvmlDeviceGetMemoryInfo
  int (*shutdown)() = nullptr;                             // nvmlShutdown
};

// Reads the host's utilization. Create one per agent and call Sample() at
// the profiling interval.
//
// Cost: the /proc files are opened once and re-read with pread(2) into a
// reused buffer (procfs regenerates them on every read from offset 0);
// parsing does not allocate once the per-core state has its size.
//
// Thread-compatible: one thread at a time (the sampling loop's).
class SystemMetricsSampler {
 public:
  struct Options {
    // Root of the proc file system; tests point it at fake files
    // (<root>/stat, <root>/meminfo, <root>/net/dev). The files are kept open,
    // so a test must rewrite them in place, not replace them by rename.
    std::string proc_root = "/proc";
    // dlopen()ed on the first Sample(); "" disables GPU metrics. A missing
    // library or a failing nvmlInit_v2 means "no GPU": no gpu lines, no error.
    std::string nvml_library = "libnvidia-ml.so.1";
    // When set, used instead of dlopen (tests). Must outlive the sampler.
    const NvmlFunctions* nvml_for_testing = nullptr;
  };

  SystemMetricsSampler();
  explicit SystemMetricsSampler(Options options);
  ~SystemMetricsSampler();  // Closes the files; nvmlShutdown; dlclose.
  SystemMetricsSampler(const SystemMetricsSampler&) = delete;
  SystemMetricsSampler& operator=(const SystemMetricsSampler&) = delete;

  // Replaces *metrics (cleared first, capacity kept) with the current sample.
  // `now` is the sample's time; only differences between calls matter (for
  // network bytes/s), so pass a monotonic-enough clock.
  //
  // The delta metrics (CPUUtilization, I/OWaitPercentage, network) need a
  // previous reading: the first call only records it and returns memory and
  // GPU lines. A core that appears later (hotplug) starts with its own first
  // reading. Counters that go backwards (iowait can, on Linux) count as 0.
  //
  // Errors: <root>/stat or <root>/meminfo unreadable or unparseable ->
  // the errno status (or DataLoss), naming the file; *metrics then holds
  // whatever could be read. A missing <root>/net/dev only omits the network
  // lines; NVML errors for one device omit that device's lines.
  absl::Status Sample(absl::Time now, std::vector<SystemMetric>* metrics);

  // Number of GPUs NVML reported (0 before the first Sample() or without
  // NVML).
  int gpu_count() const { return static_cast<int>(gpus_.size()); }

 private:
  struct CpuTimes {
    uint64_t busy = 0;
    uint64_t total = 0;
    uint64_t iowait = 0;
    bool valid = false;
  };

  absl::Status ReadFile(int& fd, const std::string& path, bool optional, bool* present);
  absl::Status SampleCpu(std::vector<SystemMetric>* metrics, bool* io_wait_ready, double* io_wait);
  absl::Status SampleMemory(std::vector<SystemMetric>* metrics);
  void SampleNetwork(absl::Time now, std::vector<SystemMetric>* metrics);
  void InitGpu();
  void SampleGpu(std::vector<SystemMetric>* metrics);

  Options options_;
  std::string stat_path_, meminfo_path_, net_dev_path_;
  int stat_fd_ = -1, meminfo_fd_ = -1, net_dev_fd_ = -1;
  std::vector<char> buffer_;        // The last file read, NUL-terminated.
  std::vector<CpuTimes> per_core_;  // Indexed by core number.
  CpuTimes aggregate_;
  bool have_network_ = false;
  uint64_t rx_bytes_ = 0, tx_bytes_ = 0;
  absl::Time network_time_;

  bool gpu_initialized_ = false;
  bool nvml_initialized_ = false;  // nvmlInit_v2 succeeded: shut down.
  void* nvml_handle_ = nullptr;    // dlopen handle, if we opened one.
  NvmlFunctions nvml_;
  std::vector<NvmlFunctions::Device> gpus_;
};

// Appends samples as JSON lines to
//   <profiler_dir>/system/incremental/<YYYYMMDDHH>/<minute_start>.<node_id>.json
// where minute_start = the sample's epoch seconds rounded down to the minute
// and YYYYMMDDHH is that minute's UTC hour (fixtures: 2026112122/1795300020
// .algo-1.json holds 1795300020.0 .. 1795300079.5). One file per minute; an
// existing file (agent restart within the minute) is appended to.
// Each line:
//   {"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization",
//    "Value": 34.23, "NodeId": "algo-1", "Timestamp": 1795300020.500000}
// A sample goes out in one write(2) on an O_APPEND fd, no user-space
// buffering, so a reader sees whole lines as soon as Write() returns.
//
// Thread-compatible.
class SystemMetricsWriter {
 public:
  explicit SystemMetricsWriter(std::string profiler_dir, std::string node_id = "algo-1");
  ~SystemMetricsWriter();
  SystemMetricsWriter(const SystemMetricsWriter&) = delete;
  SystemMetricsWriter& operator=(const SystemMetricsWriter&) = delete;

  // Appends one line per metric, stamped `timestamp`. Creates directories
  // and switches files as the minute changes. An empty `metrics` writes
  // nothing (and creates no file). Errors: the errno status naming the file.
  absl::Status Write(absl::Time timestamp, absl::Span<const SystemMetric> metrics);

  // The file the last Write() appended to ("" before the first).
  const std::string& current_path() const { return current_path_; }

 private:
  absl::Status OpenFor(int64_t minute_start);

  std::string profiler_dir_;
  std::string node_id_json_;  // node_id, JSON-escaped, without quotes.
  int fd_ = -1;
  int64_t minute_ = INT64_MIN;  // Minute start of the open file.
  std::string current_path_;
  std::string created_dir_;  // Last hour directory known to exist.
  std::string line_buffer_;  // Reused: one sample's lines.
};

// A thread that samples and writes every interval.
//
// Thread-safe: SetInterval, Stop and the accessors may be called from any
// thread.
class MetricsSamplingLoop {
 public:
  struct Options {
    absl::Duration interval = absl::Milliseconds(500);
    // Stamps the samples; tests inject a fake. Default: the system clock.
    std::function<absl::Time()> clock;
  };

  // Starts the thread; the first sample is taken at once.
  // REQUIRES: sampler and writer outlive the loop, and nothing else uses
  // them until Stop() returned; options.interval > 0.
  MetricsSamplingLoop(SystemMetricsSampler* sampler, SystemMetricsWriter* writer, Options options);
  ~MetricsSamplingLoop();  // Stop().
  MetricsSamplingLoop(const MetricsSamplingLoop&) = delete;
  MetricsSamplingLoop& operator=(const MetricsSamplingLoop&) = delete;

  // Takes effect at once: wakes the sleeping thread, which samples when
  // `interval` has passed since the previous sample (right away if it has
  // already passed). REQUIRES: interval > 0.
  void SetInterval(absl::Duration interval) ABSL_LOCKS_EXCLUDED(mu_);

  // Wakes and joins the thread (a sample in progress completes first).
  // Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Samples taken so far (including failed ones).
  int64_t samples() const ABSL_LOCKS_EXCLUDED(mu_);
  // Samples whose Sample() or Write() failed, and the last such error.
  int64_t errors() const ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status last_error() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  SystemMetricsSampler* const sampler_;
  SystemMetricsWriter* const writer_;
  const std::function<absl::Time()> clock_;

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  absl::Duration interval_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool interval_changed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t samples_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t errors_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;  // Last: starts after everything above is set.
};

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_SYSTEM_METRICS_H_
