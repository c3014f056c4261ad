// Incremental reader of SageMaker Debugger system metrics
// (<profiler_dir>/system/incremental/<YYYYMMDDHH>/<epoch>.<node>.json, JSON
// lines, see shared/reference/smdebug-format.md section 2).
//
//   SystemMetricsReader reader(profiler_dir);
//   std::vector<SystemMetricPoint> points = reader.ReadNew();  // again later
//
// Each ReadNew() returns the points added since the previous call, in file
// order (hour directories sorted, then file names sorted). Per file the
// reader remembers the byte offset after the last complete line: a
// half-written last line is left for the next call. A malformed line is
// skipped and counted (never aborts). A missing directory is not an error
// (no data yet); Summary() says so.

#ifndef DEBUGPLANE_RULES_ENGINE_SYSTEM_METRICS_READER_H_
#define DEBUGPLANE_RULES_ENGINE_SYSTEM_METRICS_READER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace debugplane::rules_engine {

// The dimensions the profiler rules read (kOther for anything else).
enum class MetricDimension {
  kCpuUtilization,        // "CPUUtilization" (per core: cpu0, cpu1, ...)
  kGpuUtilization,        // "GPUUtilization" (per GPU: gpu0, ...)
  kGpuMemoryUtilization,  // "GPUMemoryUtilization"
  kMemoryUsedPercent,     // "MemoryUsedPercent"
  kIoWaitPercentage,      // "I/OWaitPercentage"
  kOther,
};
MetricDimension ParseMetricDimension(absl::string_view dimension);

// One line of a system metrics file.
struct SystemMetricPoint {
  std::string type;       // "cpu" | "gpu"
  std::string name;       // "cpu0", "gpu0", "cpu", ...
  std::string dimension;  // "CPUUtilization", ...
  double value = 0;
  std::string node_id;    // "algo-1"
  double timestamp = 0;   // Seconds since the epoch.
  MetricDimension dim = MetricDimension::kOther;  // Parsed `dimension`.
};

// Parses one line (without its newline). Returns false and sets `*error`
// (e.g. "missing \"Timestamp\"", "syntax error ...") for a malformed line.
// Lines of the plain shape smdebug writes are parsed without a DOM; anything
// else goes through nlohmann::json.
bool ParseSystemMetricLine(absl::string_view line, SystemMetricPoint* point, std::string* error);

// What reading a whole file gave (for single files such as the upstream
// samples; the last line counts even without a trailing newline).
struct SystemMetricsFileResult {
  bool opened = false;     // False: the file could not be read (see errors).
  std::vector<SystemMetricPoint> points;
  int64_t malformed_lines = 0;
  std::vector<std::string> errors;  // "path:line: what", at most kMaxErrors.
};
SystemMetricsFileResult ReadSystemMetricsFile(const std::string& path);

class SystemMetricsReader {
 public:
  // How many "file:line: what" messages are kept.
  static constexpr int kMaxErrors = 5;

  // `profiler_dir` holds system/incremental/<hour>/... .
  explicit SystemMetricsReader(std::string profiler_dir);

  // The points appended since the last call (see the file comment).
  std::vector<SystemMetricPoint> ReadNew();

  // Totals over all calls.
  int64_t points_read() const { return points_read_; }
  int64_t malformed_lines() const { return malformed_lines_; }
  int64_t files_seen() const { return static_cast<int64_t>(files_.size()); }
  // The first kMaxErrors problems, "system/incremental/<hour>/<file>:<line>: what"
  // (also files that could not be opened).
  const std::vector<std::string>& errors() const { return errors_; }
  // Whether <profiler_dir>/system/incremental existed at the last ReadNew().
  bool directory_exists() const { return directory_exists_; }
  // One line for status details, e.g. "16 files, 14400 points, 1 malformed
  // line (first: ...)" or "no system metrics yet: <dir> does not exist".
  std::string Summary() const;

 private:
  struct FileState {
    uint64_t offset = 0;  // After the last complete line.
    int64_t lines = 0;    // Complete lines consumed so far.
  };
  void AddError(std::string message);
  void ReadFile(const std::string& relative, FileState& state,
                std::vector<SystemMetricPoint>& out);

  std::string profiler_dir_;
  std::string incremental_dir_;
  std::map<std::string, FileState> files_;  // Keyed by "<hour>/<file>".
  int64_t points_read_ = 0;
  int64_t malformed_lines_ = 0;
  std::vector<std::string> errors_;
  bool directory_exists_ = false;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SYSTEM_METRICS_READER_H_
