#include "client/agent/system_metrics.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "client/agent/write_fully.h"

namespace debugplane::client {
namespace {

constexpr char kCpu[] = "cpu";
constexpr char kGpu[] = "gpu";
constexpr char kNetwork[] = "network";
constexpr char kCpuUtilization[] = "CPUUtilization";
constexpr char kIoWait[] = "I/OWaitPercentage";
constexpr char kMemoryUsed[] = "MemoryUsedPercent";
constexpr char kGpuUtilization[] = "GPUUtilization";
constexpr char kGpuMemory[] = "GPUMemoryUtilization";
constexpr char kReceive[] = "ReceiveBytesPerSecond";
constexpr char kTransmit[] = "TransmitBytesPerSecond";

double Round2(double value) { return std::round(value * 100.0) / 100.0; }

double Percent(uint64_t part, uint64_t whole) {
  if (whole == 0) return 0.0;
  return std::clamp(100.0 * static_cast<double>(part) / static_cast<double>(whole), 0.0, 100.0);
}

uint64_t Delta(uint64_t now, uint64_t before) { return now > before ? now - before : 0; }

const char* SkipSpaces(const char* p) {
  while (*p == ' ' || *p == '\t') ++p;
  return p;
}

// Parses an unsigned decimal at *p (after blanks); false at end of line.
bool ParseU64(const char** p, uint64_t* value) {
  const char* s = SkipSpaces(*p);
  if (*s < '0' || *s > '9') return false;
  uint64_t v = 0;
  while (*s >= '0' && *s <= '9') v = v * 10 + static_cast<uint64_t>(*s++ - '0');
  *value = v;
  *p = s;
  return true;
}

const char* NextLine(const char* p) {
  while (*p != '\0' && *p != '\n') ++p;
  return *p == '\n' ? p + 1 : p;
}

bool StartsWith(const char* p, const char* prefix) {
  return std::strncmp(p, prefix, std::strlen(prefix)) == 0;
}

// "cpu" + number, built in the string's inline buffer (no allocation).
std::string IndexedName(const char* prefix, unsigned index) {
  char name[16];
  int n = std::snprintf(name, sizeof(name), "%s%u", prefix, index);
  return std::string(name, static_cast<size_t>(n));
}

absl::Status ErrnoStatus(int error, absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(error, absl::StrCat(what, " ", path));
}

}  // namespace

// --- SystemMetricsSampler ----------------------------------------------------

SystemMetricsSampler::SystemMetricsSampler() : SystemMetricsSampler(Options()) {}

SystemMetricsSampler::SystemMetricsSampler(Options options)
    : options_(std::move(options)),
      stat_path_(options_.proc_root + "/stat"),
      meminfo_path_(options_.proc_root + "/meminfo"),
      net_dev_path_(options_.proc_root + "/net/dev"),
      buffer_(16 * 1024) {}

SystemMetricsSampler::~SystemMetricsSampler() {
  for (int fd : {stat_fd_, meminfo_fd_, net_dev_fd_}) {
    if (fd >= 0) close(fd);
  }
  if (nvml_initialized_ && nvml_.shutdown != nullptr) nvml_.shutdown();
  if (nvml_handle_ != nullptr) dlclose(nvml_handle_);
}

absl::Status SystemMetricsSampler::ReadFile(int& fd, const std::string& path, bool optional,
                                            bool* present) {
  *present = false;
  if (fd < 0) {
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (optional && errno == ENOENT) return absl::OkStatus();
      return ErrnoStatus(errno, "cannot open", path);
    }
  }
  // pread from 0 each time: procfs regenerates the file, and a kept fd
  // saves the open/close (and path lookup) of every sample.
  size_t size = 0;
  for (;;) {
    if (size + 1 >= buffer_.size()) buffer_.resize(buffer_.size() * 2);
    ssize_t n = pread(fd, buffer_.data() + size, buffer_.size() - size - 1, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot read", path);
    }
    if (n == 0) break;
    size += static_cast<size_t>(n);
  }
  buffer_[size] = '\0';
  *present = true;
  return absl::OkStatus();
}

absl::Status SystemMetricsSampler::SampleCpu(std::vector<SystemMetric>* metrics,
                                             bool* io_wait_ready, double* io_wait) {
  *io_wait_ready = false;
  bool present = false;
  if (absl::Status status = ReadFile(stat_fd_, stat_path_, false, &present); !status.ok()) {
    return status;
  }
  bool seen_aggregate = false;
  for (const char* p = buffer_.data(); StartsWith(p, "cpu"); p = NextLine(p)) {
    const char* fields = p + 3;
    bool aggregate = *fields == ' ';
    uint64_t core = 0;
    if (!aggregate && !ParseU64(&fields, &core)) continue;
    // user nice system idle iowait irq softirq steal; guest and guest_nice
    // are already counted in user and nice.
    uint64_t v[8] = {};
    int count = 0;
    while (count < 8 && ParseU64(&fields, &v[count])) ++count;
    if (count < 4) {
      return absl::DataLossError(absl::StrCat("cannot parse ", stat_path_, ": short cpu line"));
    }
    CpuTimes now;
    for (uint64_t x : v) now.total += x;
    now.iowait = v[4];
    now.busy = now.total - v[3] - v[4];
    now.valid = true;
    CpuTimes* before;
    if (aggregate) {
      seen_aggregate = true;
      before = &aggregate_;
    } else {
      if (core >= per_core_.size()) per_core_.resize(core + 1);
      before = &per_core_[core];
    }
    if (before->valid) {
      uint64_t total = Delta(now.total, before->total);
      if (aggregate) {
        *io_wait_ready = true;
        *io_wait = Round2(Percent(Delta(now.iowait, before->iowait), total));
      } else {
        metrics->push_back({kCpu, IndexedName("cpu", static_cast<unsigned>(core)), kCpuUtilization,
                            Round2(Percent(Delta(now.busy, before->busy), total))});
      }
    }
    *before = now;
  }
  if (!seen_aggregate) {
    return absl::DataLossError(absl::StrCat("cannot parse ", stat_path_, ": no cpu line"));
  }
  return absl::OkStatus();
}

absl::Status SystemMetricsSampler::SampleMemory(std::vector<SystemMetric>* metrics) {
  bool present = false;
  if (absl::Status status = ReadFile(meminfo_fd_, meminfo_path_, false, &present); !status.ok()) {
    return status;
  }
  uint64_t total = 0, available = 0, free = 0, buffers = 0, cached = 0;
  bool have_total = false, have_available = false;
  for (const char* p = buffer_.data(); *p != '\0'; p = NextLine(p)) {
    const char* value = std::strchr(p, ':');
    if (value == nullptr) break;
    ++value;
    if (StartsWith(p, "MemTotal:")) {
      have_total = ParseU64(&value, &total);
    } else if (StartsWith(p, "MemAvailable:")) {
      have_available = ParseU64(&value, &available);
    } else if (StartsWith(p, "MemFree:")) {
      ParseU64(&value, &free);
    } else if (StartsWith(p, "Buffers:")) {
      ParseU64(&value, &buffers);
    } else if (StartsWith(p, "Cached:")) {
      ParseU64(&value, &cached);
    }
  }
  if (!have_total || total == 0) {
    return absl::DataLossError(absl::StrCat("cannot parse ", meminfo_path_, ": no MemTotal"));
  }
  // Kernels before 3.14 have no MemAvailable: estimate it as free(1) did.
  if (!have_available) available = free + buffers + cached;
  metrics->push_back({kCpu, kCpu, kMemoryUsed, Round2(Percent(Delta(total, available), total))});
  return absl::OkStatus();
}

void SystemMetricsSampler::SampleNetwork(absl::Time now, std::vector<SystemMetric>* metrics) {
  bool present = false;
  if (!ReadFile(net_dev_fd_, net_dev_path_, true, &present).ok() || !present) return;
  uint64_t rx = 0, tx = 0;
  const char* p = NextLine(NextLine(buffer_.data()));  // Two header lines.
  for (; *p != '\0'; p = NextLine(p)) {
    const char* name = SkipSpaces(p);
    const char* colon = std::strchr(name, ':');
    if (colon == nullptr) break;
    // Loopback traffic is the host talking to itself, not training I/O.
    if (colon - name == 2 && std::strncmp(name, "lo", 2) == 0) continue;
    const char* fields = colon + 1;
    uint64_t v[9] = {};
    int count = 0;
    while (count < 9 && ParseU64(&fields, &v[count])) ++count;
    if (count < 9) continue;
    rx += v[0];
    tx += v[8];
  }
  if (have_network_) {
    double seconds = absl::ToDoubleSeconds(now - network_time_);
    if (seconds > 0) {
      metrics->push_back(
          {kNetwork, "net", kReceive, Round2(static_cast<double>(Delta(rx, rx_bytes_)) / seconds)});
      metrics->push_back({kNetwork, "net", kTransmit,
                          Round2(static_cast<double>(Delta(tx, tx_bytes_)) / seconds)});
    }
  }
  have_network_ = true;
  rx_bytes_ = rx;
  tx_bytes_ = tx;
  network_time_ = now;
}

void SystemMetricsSampler::InitGpu() {
  gpu_initialized_ = true;
  if (options_.nvml_for_testing != nullptr) {
    nvml_ = *options_.nvml_for_testing;
  } else {
    if (options_.nvml_library.empty()) return;
    // At run time, so the agent runs (without GPU lines) on hosts without
    // the NVIDIA driver and builds without the CUDA toolkit.
    nvml_handle_ = dlopen(options_.nvml_library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (nvml_handle_ == nullptr) return;
    auto load = [&](auto& function, const char* symbol) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(
          dlsym(nvml_handle_, symbol));
    };
    load(nvml_.init, "nvmlInit_v2");
    load(nvml_.get_count, "nvmlDeviceGetCount_v2");
    load(nvml_.get_handle, "nvmlDeviceGetHandleByIndex_v2");
    load(nvml_.get_utilization, "nvmlDeviceGetUtilizationRates");
    load(nvml_.get_memory, "nvmlDeviceGetMemoryInfo");
    load(nvml_.shutdown, "nvmlShutdown");
  }
  if (nvml_.init == nullptr || nvml_.get_count == nullptr || nvml_.get_handle == nullptr ||
      nvml_.get_utilization == nullptr || nvml_.get_memory == nullptr) {
    return;
  }
  if (nvml_.init() != 0) return;  // Library present, no usable driver/GPU.
  nvml_initialized_ = true;
  unsigned int count = 0;
  if (nvml_.get_count(&count) != 0) return;
  for (unsigned int i = 0; i < count; ++i) {
    NvmlFunctions::Device device = nullptr;
    // Keep indexes aligned with nvidia-smi: a failing device stays a hole.
    if (nvml_.get_handle(i, &device) != 0) device = nullptr;
    gpus_.push_back(device);
  }
}

void SystemMetricsSampler::SampleGpu(std::vector<SystemMetric>* metrics) {
  if (!gpu_initialized_) InitGpu();
  for (size_t i = 0; i < gpus_.size(); ++i) {
    if (gpus_[i] == nullptr) continue;
    NvmlFunctions::Utilization utilization{};
    NvmlFunctions::Memory memory{};
    if (nvml_.get_utilization(gpus_[i], &utilization) == 0) {
      metrics->push_back({kGpu, IndexedName("gpu", static_cast<unsigned>(i)), kGpuUtilization,
                          static_cast<double>(std::min(utilization.gpu, 100u))});
    }
    if (nvml_.get_memory(gpus_[i], &memory) == 0) {
      metrics->push_back({kGpu, IndexedName("gpu", static_cast<unsigned>(i)), kGpuMemory,
                          Round2(Percent(memory.used, memory.total))});
    }
  }
}

absl::Status SystemMetricsSampler::Sample(absl::Time now, std::vector<SystemMetric>* metrics) {
  metrics->clear();
  bool io_wait_ready = false;
  double io_wait = 0;
  absl::Status status = SampleCpu(metrics, &io_wait_ready, &io_wait);
  // Fixture order: cores, memory, GPUs, I/O wait (then our network lines).
  if (absl::Status memory = SampleMemory(metrics); status.ok()) status = memory;
  SampleGpu(metrics);
  if (io_wait_ready) metrics->push_back({kCpu, kCpu, kIoWait, io_wait});
  SampleNetwork(now, metrics);
  return status;
}

// --- SystemMetricsWriter -----------------------------------------------------

namespace {

void AppendJsonEscaped(absl::string_view text, std::string* out) {
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out->append(escaped);
    } else {
      out->push_back(c);
    }
  }
}

}  // namespace

SystemMetricsWriter::SystemMetricsWriter(std::string profiler_dir, std::string node_id)
    : profiler_dir_(std::move(profiler_dir)) {
  AppendJsonEscaped(node_id, &node_id_json_);
}

SystemMetricsWriter::~SystemMetricsWriter() {
  if (fd_ >= 0) close(fd_);
}

absl::Status SystemMetricsWriter::OpenFor(int64_t minute_start) {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  const absl::Time start = absl::FromUnixSeconds(minute_start);
  std::string dir = absl::StrCat(profiler_dir_, "/system/incremental/",
                                 absl::FormatTime("%Y%m%d%H", start, absl::UTCTimeZone()));
  if (dir != created_dir_) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::ErrnoToStatus(ec.value(), absl::StrCat("cannot create directory ", dir));
    created_dir_ = dir;
  }
  // node_id_json_ is only escaped for JSON; a node id is a plain host name
  // ("algo-1") in practice, so it is used as is in the file name.
  current_path_ = absl::StrCat(dir, "/", minute_start, ".", node_id_json_, ".json");
  fd_ = open(current_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) return ErrnoStatus(errno, "cannot open", current_path_);
  minute_ = minute_start;
  return absl::OkStatus();
}

absl::Status SystemMetricsWriter::Write(absl::Time timestamp,
                                        absl::Span<const SystemMetric> metrics) {
  if (metrics.empty()) return absl::OkStatus();
  const int64_t seconds = absl::ToUnixSeconds(timestamp);  // Rounds down.
  const int64_t minute_start = seconds - ((seconds % 60) + 60) % 60;
  if (fd_ < 0 || minute_start != minute_) {
    if (absl::Status status = OpenFor(minute_start); !status.ok()) {
      // Retry at the next sample, re-creating the directories in case they
      // were removed under us.
      minute_ = INT64_MIN;
      created_dir_.clear();
      return status;
    }
  }
  char stamp[32];
  std::snprintf(stamp, sizeof(stamp), "%.6f",
                static_cast<double>(absl::ToUnixMicros(timestamp)) / 1e6);
  line_buffer_.clear();
  for (const SystemMetric& metric : metrics) {
    char value[64];
    std::snprintf(value, sizeof(value), "%.2f", metric.value);
    absl::StrAppend(&line_buffer_, "{\"Type\": \"", metric.type, "\", \"Name\": \"", metric.name,
                    "\", \"Dimension\": \"", metric.dimension, "\", \"Value\": ", value,
                    ", \"NodeId\": \"", node_id_json_, "\", \"Timestamp\": ", stamp, "}\n");
  }
  // One write(2): with O_APPEND the sample lands as a unit after any earlier
  // one, and nothing waits in a user-space buffer.
  if (int error = WriteFully(fd_, line_buffer_); error != 0) {
    return ErrnoStatus(error, "cannot append to", current_path_);
  }
  return absl::OkStatus();
}

// --- MetricsSamplingLoop -----------------------------------------------------

MetricsSamplingLoop::MetricsSamplingLoop(SystemMetricsSampler* sampler, SystemMetricsWriter* writer,
                                         Options options)
    : sampler_(sampler),
      writer_(writer),
      clock_(options.clock ? std::move(options.clock)
                           : [clock = base::SystemClock()] { return clock->Now(); }),
      interval_(options.interval),
      thread_([this] { Run(); }) {}

MetricsSamplingLoop::~MetricsSamplingLoop() { Stop(); }

void MetricsSamplingLoop::SetInterval(absl::Duration interval) {
  absl::MutexLock lock(&mu_);
  interval_ = interval;
  // The sleeper recomputes its deadline from the new interval.
  wake_.Signal();
}

void MetricsSamplingLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    wake_.Signal();
  }
  if (thread_.joinable()) thread_.join();
}

int64_t MetricsSamplingLoop::samples() const {
  absl::MutexLock lock(&mu_);
  return samples_;
}

int64_t MetricsSamplingLoop::errors() const {
  absl::MutexLock lock(&mu_);
  return errors_;
}

absl::Status MetricsSamplingLoop::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

void MetricsSamplingLoop::Run() {
  using Clock = std::chrono::steady_clock;
  std::vector<SystemMetric> metrics;
  metrics.reserve(64);
  // Deadlines on the monotonic clock, so a wall-clock step neither stalls
  // nor floods the samples; the injected clock only stamps them.
  Clock::time_point due = Clock::now();  // The first sample is due at once.
  bool first = true;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      for (;;) {
        if (stop_) return;
        // Recomputed on every wake-up: SetInterval applies to this sleep.
        Clock::time_point next = first ? due : due + absl::ToChronoNanoseconds(interval_);
        Clock::time_point now = Clock::now();
        if (now >= next) {
          // Fixed rate while on time; after a stall (suspend, overload)
          // restart the schedule from now instead of catching up in a burst.
          due = now - next > absl::ToChronoNanoseconds(interval_) ? now : next;
          break;
        }
        wake_.WaitWithTimeout(&mu_, absl::FromChrono(next - now));
      }
    }
    first = false;
    const absl::Time stamp = clock_();
    absl::Status status = sampler_->Sample(stamp, &metrics);
    // Whatever was read is still written: a failing meminfo should not hide
    // the CPU lines.
    absl::Status write_status = writer_->Write(stamp, metrics);
    if (status.ok()) status = write_status;
    absl::MutexLock lock(&mu_);
    ++samples_;
    if (!status.ok()) {
      ++errors_;
      last_error_ = std::move(status);
    }
  }
}

}  // namespace debugplane::client
