// Incremental reader of SageMaker Debugger system metrics
// (<profiler_dir>/system/incremental/<YYYYMMDDHH>/<epoch>.<node>.json, JSON
// lines, see docs/smdebug-format.md section 2), through an ObjectStore
// (objectstore/object_store.h): it never opens a file itself.
//
//   SystemMetricsReader reader(profiler_location);  // a StoreLocation
//   std::vector<SystemMetricPoint> points = reader.ReadNew();  // again later
//
// Each ReadNew() returns the points added since the previous call, in file
// order (hour directories sorted, then file names sorted). Per file the
// reader remembers the byte offset after the last complete line: a
// half-written last line is left for the next call, and only the bytes after
// that offset are read again (a ranged read). A malformed line is skipped and
// counted (never aborts); its error says where (the file relative to the
// profiler directory, the line) and what, quoting at most a short escaped
// excerpt of the line. A missing directory is not an error (no data yet);
// Summary() says so. A directory or file the store refuses (a symbolic link)
// is not read, and Summary() names it.
//
// Memory: files are read in chunks (kSystemMetricsChunkBytes), never whole,
// so a reader holds one chunk of file bytes whatever a file's size (system
// metrics files of a long job reach hundreds of MB; a sparse file may claim
// 100 GB). One line may have at most kSystemMetricsLineLimit bytes: a longer
// one (a file of NULs, a hole) ends the reading of that file with an error
// naming it and the limit (limit_error()); the other files are read on.
//
// Throughput (bench/profiler_rules_bench.cc): points carry interned strings
// (MetricString), and a reader remembers the byte patterns smdebug repeats
// (line prefixes up to the value, the node suffix, the last timestamp), so a
// typical line costs a few word compares and one number parse.

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_SYSTEM_METRICS_READER_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_SYSTEM_METRICS_READER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "objectstore/object_store.h"
#include "objectstore/read_tally.h"
#include "rules_engine/profiler/hour_directories.h"

namespace debugplane::rules_engine {

// See the file comment. smdebug's lines are ~150 bytes.
inline constexpr objectstore::ReadLimit kSystemMetricsLineLimit{1 << 20, "one system metrics line"};
inline constexpr uint64_t kSystemMetricsChunkBytes = 4 << 20;
// What ReadSystemMetricsFile (one file read whole) reads at most.
inline constexpr objectstore::ReadLimit kSystemMetricsFileLimit{64 << 20,
                                                                "a system metrics file read whole"};

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

// An interned string for the few distinct texts of a metrics stream (node
// ids, device names, dimensions): equal texts share one immutable instance
// that lives as long as the process, so a MetricString is a pointer: copying,
// ==, != and hashing cost no more than for an int, and a point carries no
// allocation. Reads like the std::string it replaced: it converts implicitly
// to absl::string_view, compares with strings (by text), streams, and can be
// assigned from a string (interning it: a lock and a hash lookup, so hot
// loops should intern once; SystemMetricsReader keeps a cache). Ordering
// (<) is by text, so ordered containers iterate as with std::string keys.
// absl::StrCat takes `.view()` (this abseil has no AbslStringify, and StrCat
// does not apply the conversion). Thread-safe.
class MetricString {
 public:
  MetricString() : text_(&kEmptyText) {}  // The empty string.
  // Interns `text` (implicit on purpose: stands in for std::string fields).
  MetricString(absl::string_view text);   // NOLINT(google-explicit-constructor)
  MetricString(const char* text);         // NOLINT(google-explicit-constructor)
  MetricString(const std::string& text);  // NOLINT(google-explicit-constructor)

  // Interns `text` unless the process already holds kMaxInterned distinct
  // texts and `text` is not one of them (then false, `*out` unchanged): the
  // bound for text read from files, whose distinct names would otherwise
  // grow the never-freed pool without limit.
  static constexpr size_t kMaxInterned = 100000;
  static bool InternBounded(absl::string_view text, MetricString* out);

  const std::string& str() const { return *text_; }
  absl::string_view view() const { return *text_; }
  operator absl::string_view() const { return *text_; }  // NOLINT
  bool empty() const { return text_->empty(); }
  size_t size() const { return text_->size(); }

  friend bool operator==(MetricString a, MetricString b) { return a.text_ == b.text_; }
  friend bool operator!=(MetricString a, MetricString b) { return a.text_ != b.text_; }
  friend bool operator==(MetricString a, absl::string_view b) { return a.view() == b; }
  friend bool operator==(absl::string_view a, MetricString b) { return a == b.view(); }
  friend bool operator!=(MetricString a, absl::string_view b) { return a.view() != b; }
  friend bool operator!=(absl::string_view a, MetricString b) { return a != b.view(); }
  friend bool operator==(MetricString a, const char* b) { return a.view() == b; }
  friend bool operator==(const char* a, MetricString b) { return a == b.view(); }
  friend bool operator!=(MetricString a, const char* b) { return a.view() != b; }
  friend bool operator!=(const char* a, MetricString b) { return a != b.view(); }
  friend bool operator==(MetricString a, const std::string& b) { return a.view() == b; }
  friend bool operator==(const std::string& a, MetricString b) { return a == b.view(); }
  friend bool operator!=(MetricString a, const std::string& b) { return a.view() != b; }
  friend bool operator!=(const std::string& a, MetricString b) { return a != b.view(); }
  friend bool operator<(MetricString a, MetricString b) {
    return a.text_ != b.text_ && *a.text_ < *b.text_;
  }
  template <typename H>
  friend H AbslHashValue(H h, MetricString s) {
    return H::combine(std::move(h), s.text_);
  }
  friend std::ostream& operator<<(std::ostream& os, MetricString s) { return os << *s.text_; }

 private:
  // What MetricString() and "" point to, so a default-constructed point
  // needs neither the pool nor a guard. Constant-initialized where the
  // standard library's std::string is constexpr (GCC's); with clang and
  // libstdc++ 12 it is not, and `constinit` would not compile there.
  static const std::string kEmptyText;
  explicit MetricString(const std::string* text) : text_(text) {}
  const std::string* text_;  // Owned by the process-wide pool; never null.
};

// One line of a system metrics file. The strings are interned (see
// MetricString): `name` and `node_id` identify a device series by pointer.
struct SystemMetricPoint {
  MetricString type;       // "cpu" | "gpu"
  MetricString name;       // "cpu0", "gpu0", "cpu", ...
  MetricString dimension;  // "CPUUtilization", ...
  double value = 0;
  MetricString node_id;                           // "algo-1"
  double timestamp = 0;                           // Seconds since the epoch.
  MetricDimension dim = MetricDimension::kOther;  // Parsed `dimension`.
};

// Parses one line (without its newline). Returns false and sets `*error`
// (e.g. "missing \"Timestamp\"", "JSON parse error at byte 12 (...)", or
// "more than 100000 distinct names, ..." when the MetricString pool is full)
// for a malformed line; the error quotes at most a short escaped excerpt of
// the line.
// Lines of the exact layout smdebug writes are matched byte for byte (with
// memos of the layouts seen); any other JSON object goes through JsonScanner
// (smdebug/json_scanner.h): other member orders, spacing, escapes, members
// the reader does not use. Repeated keys: the last one counts.
bool ParseSystemMetricLine(absl::string_view line, SystemMetricPoint* point, std::string* error);

// What reading a whole file gave (for single files such as the upstream
// samples; the last line counts even without a trailing newline).
struct SystemMetricsFileResult {
  bool opened = false;  // False: the file could not be read (see errors).
  std::vector<SystemMetricPoint> points;
  int64_t malformed_lines = 0;
  std::vector<std::string> errors;  // "path:line: what", at most kMaxErrors.
};
// Reads the object `key` of `store` whole ("path" in errors is
// store.Describe(key)), up to kSystemMetricsFileLimit. Never fails: an
// unreadable (or larger) object gives opened == false and the store's error.
SystemMetricsFileResult ReadSystemMetricsFile(const objectstore::ObjectStore& store,
                                              absl::string_view key);

namespace system_metrics_internal {

// The texts of one field seen recently -> their MetricString (and parsed
// dimension), so that the reader interns without taking the pool's lock: a
// metrics file repeats a handful of names in a fixed cycle, so the last hit
// and the entry after it are tried first. At most kMaxEntries texts; more
// evict round-robin (then the pool, still correct, is asked more often).
// 256: a cycle of a 96-core node with 8 GPUs has 114 names (64 entries
// evicted on every line: 20% of bench/dashboard_bench.cc's profile).
class MetricStringCache {
 public:
  static constexpr size_t kMaxEntries = 256;
  // False when the pool is full (MetricString::InternBounded).
  bool Get(absl::string_view text, MetricString* out, MetricDimension* dim = nullptr);

 private:
  struct Entry {
    MetricString text;
    MetricDimension dim;
  };
  std::vector<Entry> entries_;
  size_t last_ = 0;   // The last hit.
  size_t evict_ = 0;  // Round-robin victim when full.
};

// The text and value of the last number parsed for a field: the points of
// one sample share their Timestamp, so most lines repeat the previous one.
struct NumberMemo {
  static constexpr size_t kMaxText = 24;
  char text[kMaxText];
  size_t length = 0;  // 0: none yet.
  double value = 0;
};

// Raw bytes of a line part -> what they parse to. A smdebug line is
// `{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": `
// + value + `, "NodeId": "algo-1", "Timestamp": ` + timestamp + `}`: a
// file cycles through a few prefixes and one node suffix, so a line that
// starts with a remembered prefix's exact bytes has its type, name and
// dimension without scanning or interning them again.
struct PrefixMemo {
  // As MetricStringCache::kMaxEntries: one prefix per device and dimension.
  static constexpr size_t kMaxEntries = 256;
  static constexpr size_t kMaxBytes = 256;  // Longer parts are not kept.
  struct Entry {
    std::string bytes;
    MetricString type, name, dimension;
    MetricDimension dim = MetricDimension::kOther;
  };
  std::vector<Entry> entries;
  size_t last = 0;   // The last hit.
  size_t evict = 0;  // Round-robin victim when full.
};
struct SuffixMemo {
  std::string bytes;  // Empty: none yet.
  MetricString node_id;
};

struct ParseCache {
  MetricStringCache type, name, dimension, node_id;
  NumberMemo timestamp;
  PrefixMemo prefix;
  SuffixMemo suffix;
};

}  // namespace system_metrics_internal

class SystemMetricsReader {
 public:
  // How many "file:line: what" messages are kept.
  static constexpr int kMaxErrors = 5;

  // `profiler_dir` holds system/incremental/<hour>/... . Does no I/O.
  explicit SystemMetricsReader(objectstore::StoreLocation profiler_dir);

  // The points appended since the last call (see the file comment).
  std::vector<SystemMetricPoint> ReadNew();
  // As ReadNew(), but stops once about `max_bytes` new bytes were read (at
  // least one chunk; files are taken in order and a file may be left
  // partly read), so that a caller catching up with a long job holds a
  // bounded batch of points; more_pending() then says that a next call has
  // more at once. Either reads a file at most up to its size as listed at
  // the start of the call (a file that grows meanwhile is read on by the
  // next call).
  std::vector<SystemMetricPoint> ReadNew(uint64_t max_bytes);
  bool more_pending() const { return more_pending_; }

  // What was fetched from the store over all calls (a half-written last
  // line is fetched again with the rest of it).
  const objectstore::ReadTally& read_tally() const { return read_; }
  // Totals over all calls.
  int64_t points_read() const { return points_read_; }
  int64_t malformed_lines() const { return malformed_lines_; }
  int64_t files_seen() const { return static_cast<int64_t>(files_.size()); }
  // The first kMaxErrors problems, "system/incremental/<hour>/<file>:<line>: what"
  // (also files and listings the store refused, with its error).
  const std::vector<std::string>& errors() const { return errors_; }
  // OK, or RESOURCE_EXHAUSTED for the first file found over a limit
  // (kSystemMetricsLineLimit), naming it and the limit: that file is read
  // no further (the rest are), so the data is known to be incomplete.
  const absl::Status& limit_error() const { return limit_error_; }
  // Whether <profiler_dir>/system/incremental existed at the last ReadNew()
  // (true also when it is there but could not be listed).
  bool directory_exists() const { return listing_.directory_exists(); }
  // One line for status details, e.g. "16 files, 14400 points, 1 malformed
  // line (first: ...)", "no system metrics yet: <dir> does not exist", or
  // "system metrics cannot be read: <the store's error>".
  std::string Summary() const;

 private:
  struct FileState {
    bool fetched = false;     // Some bytes were (for the tally's distinct objects).
    uint64_t offset = 0;      // After the last complete line.
    int64_t lines = 0;        // Complete lines consumed so far.
    bool over_limit = false;  // A line over its limit: not read any further.
  };
  void AddError(std::string message);
  // Reads `key` from state.offset in chunks, up to `listed_size` (at least
  // one chunk), taking new bytes from `*budget`. False when it stopped for
  // the budget with bytes of the file left.
  bool ReadFile(const std::string& relative, const std::string& key, uint64_t listed_size,
                FileState& state, std::vector<SystemMetricPoint>& out, uint64_t* budget);

  objectstore::StoreLocation incremental_;  // <profiler_dir>/system/incremental.
  std::map<std::string, FileState> files_;  // Keyed by "<hour>/<file>".
  int64_t points_read_ = 0;
  int64_t malformed_lines_ = 0;
  std::vector<std::string> errors_;
  bool more_pending_ = false;  // The last ReadNew(max_bytes) left changed files.
  HourFileListing listing_;
  absl::Status limit_error_;  // See limit_error().
  system_metrics_internal::ParseCache cache_;
  objectstore::ReadTally read_;
  std::string buffer_;  // File bytes, reused across files and calls.
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_SYSTEM_METRICS_READER_H_
