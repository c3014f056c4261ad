#include "rules_engine/profiler/system_metrics_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/message_text.h"
#include "rules_engine/profiler/hour_directories.h"
#include "rules_engine/profiler/reader_summary.h"
#include "rules_engine/smdebug/json_scanner.h"

namespace debugplane::rules_engine {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// A smdebug line is at least about 100 bytes: the points per byte to
// reserve for.
constexpr size_t kMinLineBytes = 96;
// ReadNew reserves for at most this many new bytes at once.
constexpr uint64_t kMaxReservedBytes = 64 << 20;

using system_metrics_internal::ParseCache;

// The process-wide pool behind MetricString. Never freed (points may outlive
// any reader, and static destruction order is then moot); keys view the
// strings they map to.
struct Pool {
  absl::Mutex mu;
  absl::flat_hash_map<absl::string_view, const std::string*> strings ABSL_GUARDED_BY(mu);
};
Pool& GlobalPool() {
  static Pool* const pool = new Pool;
  return *pool;
}
// nullptr when `bounded` and the pool is full without `text`.
const std::string* Intern(absl::string_view text, bool bounded, const std::string* empty) {
  if (text.empty()) return empty;
  Pool& pool = GlobalPool();
  absl::MutexLock lock(&pool.mu);
  auto it = pool.strings.find(text);
  if (it != pool.strings.end()) return it->second;
  if (bounded && pool.strings.size() >= MetricString::kMaxInterned) return nullptr;
  const std::string* owned = new std::string(text);
  pool.strings.emplace(absl::string_view(*owned), owned);
  return owned;
}

uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// a == b for the short texts of a metrics line, without a memcmp call: up
// to 16 bytes as two overlapping word compares.
inline bool SameText(absl::string_view a, absl::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  const char* x = a.data();
  const char* y = b.data();
  if (n >= 8) {
    if (n > 16) return std::memcmp(x, y, n) == 0;
    return Load64(x) == Load64(y) && Load64(x + n - 8) == Load64(y + n - 8);
  }
  if (n >= 4) return Load32(x) == Load32(y) && Load32(x + n - 4) == Load32(y + n - 4);
  for (size_t i = 0; i < n; ++i) {
    if (x[i] != y[i]) return false;
  }
  return true;
}

// The number at p (which is '-' or a digit), read as std::from_chars reads
// it (as this reader always did: "1." and "007" too): its end, or nullptr.
inline const char* NumberAt(const char* p, const char* end, double* out) {
  JsonNumber n;
  const char* q = ParseFromCharsNumber(p, end, &n);
  if (q != nullptr) *out = n.value;
  return q;
}

inline const char* SkipSpace(const char* p, const char* end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
  return p;
}

// Whether the bytes at *p are `text` (a literal: the compare compiles to a
// few word compares); advances *p past them.
template <size_t N>
inline bool Literal(const char** p, const char* end, const char (&text)[N]) {
  if (static_cast<size_t>(end - *p) < N - 1 || std::memcmp(*p, text, N - 1) != 0) return false;
  *p += N - 1;
  return true;
}

// A string value and the literal after it.
template <size_t N>
inline bool StringThen(const char** p, const char* end, absl::string_view* out,
                       const char (&then)[N]) {
  // Escapes, control characters and non-ASCII bytes are left to ScanLine.
  const char* close = PlainStringEnd(*p, end);
  if (close == end || *close != '"') return false;
  *out = absl::string_view(*p, close - *p);
  *p = close;
  return Literal(p, end, then);
}

// Whether `c` can continue a JSON number (or what std::from_chars reads).
inline bool NumberByte(char c) {
  return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
}

// ParseNumber, trying the memo's text first: the same bytes, not followed
// by more of a number, are the same number.
inline const char* ParseNumberMemo(const char* p, const char* end,
                                   system_metrics_internal::NumberMemo* memo, double* out) {
  const size_t n = memo->length;
  if (n > 0 && static_cast<size_t>(end - p) > n &&
      SameText(absl::string_view(p, n), absl::string_view(memo->text, n)) && !NumberByte(p[n])) {
    *out = memo->value;
    return p + n;
  }
  const char* q = NumberAt(p, end, out);
  if (q != nullptr && static_cast<size_t>(q - p) <= system_metrics_internal::NumberMemo::kMaxText) {
    std::memcpy(memo->text, p, q - p);
    memo->length = static_cast<size_t>(q - p);
    memo->value = *out;
  }
  return q;
}

// a == b over n bytes, a word at a time (the parts compared are tens of
// bytes; a memcmp call costs more than the compare).
inline bool SameBytes(const char* a, const char* b, size_t n) {
  if (n < 8) return SameText(absl::string_view(a, n), absl::string_view(b, n));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (Load64(a + i) != Load64(b + i)) return false;
  }
  return i == n || Load64(a + n - 8) == Load64(b + n - 8);
}

// The remembered prefix `line` starts with, or nullptr. The last hit and the
// one after it first (a file cycles through its prefixes in order).
const system_metrics_internal::PrefixMemo::Entry* FindPrefix(
    system_metrics_internal::PrefixMemo& memo, absl::string_view line) {
  const size_t n = memo.entries.size();
  if (n == 0) return nullptr;
  auto starts = [&](size_t i) {
    const std::string& b = memo.entries[i].bytes;
    return line.size() > b.size() && SameBytes(line.data(), b.data(), b.size());
  };
  const size_t next = memo.last + 1 < n ? memo.last + 1 : 0;
  for (size_t i : {next, memo.last}) {
    if (starts(i)) return &memo.entries[memo.last = i];
  }
  for (size_t i = 0; i < n; ++i) {
    if (i != next && i != memo.last && starts(i)) return &memo.entries[memo.last = i];
  }
  return nullptr;
}

// A line exactly as smdebug writes it (Python's json.dumps of its dict:
// this key order, ", " and ": "), the shape of nearly every line, straight
// into `*point`. Anything else (other order or spacing, extra members,
// escapes, non-finite numbers, a full pool) returns false for the general
// parser, which gives the same point for the lines accepted here (the
// memos only skip work on bytes seen before) and words the errors.
bool SmdebugLine(absl::string_view line, ParseCache& cache, SystemMetricPoint* point) {
  const char* const begin = line.data();
  const char* const end = begin + line.size();
  const char* p = begin;
  if (const auto* m = FindPrefix(cache.prefix, line)) {
    point->type = m->type, point->name = m->name, point->dimension = m->dimension;
    point->dim = m->dim;
    p += m->bytes.size();
  } else {
    absl::string_view type, name, dimension;
    if (!Literal(&p, end, "{\"Type\": \"") || !StringThen(&p, end, &type, "\", \"Name\": \"") ||
        !StringThen(&p, end, &name, "\", \"Dimension\": \"") ||
        !StringThen(&p, end, &dimension, "\", \"Value\": ") ||
        !cache.type.Get(type, &point->type) || !cache.name.Get(name, &point->name) ||
        !cache.dimension.Get(dimension, &point->dimension, &point->dim)) {
      return false;
    }
    system_metrics_internal::PrefixMemo& memo = cache.prefix;
    if (static_cast<size_t>(p - begin) <= memo.kMaxBytes) {
      system_metrics_internal::PrefixMemo::Entry e{std::string(begin, p - begin), point->type,
                                                   point->name, point->dimension, point->dim};
      if (memo.entries.size() < memo.kMaxEntries) {
        memo.last = memo.entries.size();
        memo.entries.push_back(std::move(e));
      } else {
        memo.last = memo.evict;
        memo.entries[memo.evict] = std::move(e);
        memo.evict = (memo.evict + 1) % memo.kMaxEntries;
      }
    }
  }
  if (p >= end || (*p != '-' && (*p < '0' || *p > '9'))) return false;
  p = NumberAt(p, end, &point->value);
  if (p == nullptr) return false;
  system_metrics_internal::SuffixMemo& suffix = cache.suffix;
  const size_t known = suffix.bytes.size();
  if (known > 0 && static_cast<size_t>(end - p) > known &&
      SameBytes(p, suffix.bytes.data(), known)) {
    point->node_id = suffix.node_id;
    p += known;
  } else {
    const char* const start = p;
    absl::string_view node;
    if (!Literal(&p, end, ", \"NodeId\": \"") ||
        !StringThen(&p, end, &node, "\", \"Timestamp\": ") ||
        !cache.node_id.Get(node, &point->node_id)) {
      return false;
    }
    if (static_cast<size_t>(p - start) <= system_metrics_internal::PrefixMemo::kMaxBytes) {
      suffix.bytes.assign(start, p - start);
      suffix.node_id = point->node_id;
    }
  }
  if (p >= end || (*p != '-' && (*p < '0' || *p > '9'))) return false;
  p = ParseNumberMemo(p, end, &cache.timestamp, &point->timestamp);
  if (p == nullptr || p >= end || *p != '}') return false;
  if (SkipSpace(p + 1, end) != end) return false;
  return std::isfinite(point->value) && std::isfinite(point->timestamp);
}

// The members of a line the reader uses, as scanned: for each, the kind of
// its value (kInvalid: absent) and the value when of the right kind. The
// last of repeated keys counts.
struct LineMembers {
  static constexpr int kTexts = 4, kNumbers = 2;
  static constexpr const char* kTextNames[kTexts] = {"Type", "Name", "Dimension", "NodeId"};
  static constexpr const char* kNumberNames[kNumbers] = {"Value", "Timestamp"};
  struct Text {
    JsonKind kind = JsonKind::kInvalid;
    absl::string_view view;  // Into the line or `scratch`.
    std::string scratch;     // A string with escapes, decoded.
  };
  struct Number {
    JsonKind kind = JsonKind::kInvalid;
    double value = 0;
  };
  Text texts[kTexts];
  Number numbers[kNumbers];
};

// Which member `key` is: 0-3 a text (kTextNames), 4-5 a number
// (kNumberNames), -1 another.
int MemberIndex(absl::string_view key) {
  for (int i = 0; i < LineMembers::kTexts; ++i) {
    if (key == LineMembers::kTextNames[i]) return i;
  }
  for (int i = 0; i < LineMembers::kNumbers; ++i) {
    if (key == LineMembers::kNumberNames[i]) return LineMembers::kTexts + i;
  }
  return -1;
}

bool ScanMember(JsonScanner& s, absl::string_view key, LineMembers& m) {
  const int index = MemberIndex(key);
  if (index < 0) return s.SkipValue();
  const JsonKind kind = s.NextKind();
  if (index < LineMembers::kTexts) {
    LineMembers::Text& text = m.texts[index];
    text.kind = kind;
    return kind == JsonKind::kString ? s.String(&text.view, &text.scratch) : s.SkipValue();
  }
  LineMembers::Number& number = m.numbers[index - LineMembers::kTexts];
  number.kind = kind;
  if (kind != JsonKind::kNumber) return s.SkipValue();
  JsonNumber n;
  if (!s.Number(&n)) return false;
  number.value = n.value;
  return true;
}

// Any line: a JSON object with the six members (others ignored), read with
// JsonScanner (numbers as std::from_chars reads them, like the layout
// matcher above); the errors name the member or the JSON error.
bool ScanLine(absl::string_view line, ParseCache& cache, SystemMetricPoint* p, std::string* error) {
  JsonScanner s(line, JsonNumbers::kFromChars);
  const JsonKind kind = s.NextKind();
  if (kind != JsonKind::kObject) {
    *error = s.SkipValue() && s.AtEnd() ? absl::StrCat("not a JSON object: ", JsonKindName(kind))
                                        : s.DescribeError();
    return false;
  }
  LineMembers m;
  if (!s.Object([&](absl::string_view key) { return ScanMember(s, key, m); }) || !s.AtEnd()) {
    *error = s.DescribeError();
    return false;
  }
  for (int i = 0; i < LineMembers::kTexts; ++i) {
    const JsonKind k = m.texts[i].kind;
    if (k != JsonKind::kInvalid && k != JsonKind::kString) {
      *error = absl::StrCat("\"", LineMembers::kTextNames[i], "\" is not a string");
      return false;
    }
  }
  for (int i = 0; i < LineMembers::kNumbers; ++i) {
    const JsonKind k = m.numbers[i].kind;
    if (k != JsonKind::kInvalid && k != JsonKind::kNumber) {
      *error = absl::StrCat("\"", LineMembers::kNumberNames[i], "\" is not a number");
      return false;
    }
  }
  auto has = [](JsonKind k) { return k != JsonKind::kInvalid; };
  const LineMembers::Text &type = m.texts[0], &name = m.texts[1], &dimension = m.texts[2],
                          &node = m.texts[3];
  const LineMembers::Number &value = m.numbers[0], &timestamp = m.numbers[1];
  const char* missing = !has(type.kind)        ? "Type"
                        : !has(name.kind)      ? "Name"
                        : !has(dimension.kind) ? "Dimension"
                        : !has(value.kind)     ? "Value"
                        : !has(node.kind)      ? "NodeId"
                        : !has(timestamp.kind) ? "Timestamp"
                                               : nullptr;
  if (missing != nullptr) {
    *error = absl::StrCat("missing \"", missing, "\"");
    return false;
  }
  if (!std::isfinite(value.value) || !std::isfinite(timestamp.value)) {
    *error = "Value or Timestamp is not finite";
    return false;
  }
  if (!cache.type.Get(type.view, &p->type) || !cache.name.Get(name.view, &p->name) ||
      !cache.dimension.Get(dimension.view, &p->dimension, &p->dim) ||
      !cache.node_id.Get(node.view, &p->node_id)) {
    *error = absl::StrCat("more than ", MetricString::kMaxInterned,
                          " distinct names, dimensions and node ids in this process");
    return false;
  }
  p->value = value.value;
  p->timestamp = timestamp.value;
  return true;
}

bool ParseLine(absl::string_view line, ParseCache& cache, SystemMetricPoint* point,
               std::string* error) {
  return SmdebugLine(line, cache, point) || ScanLine(line, cache, point, error);
}

// Parses the complete lines of `data` (each ending in '\n'; plus the tail
// when `final_tail`), appending points; returns the bytes consumed.
template <typename OnError>
size_t ParseLines(absl::string_view data, bool final_tail, int64_t* line_no, ParseCache& cache,
                  std::vector<SystemMetricPoint>& out, OnError on_error) {
  const char* const begin = data.data();
  const char* const end = begin + data.size();
  const char* pos = begin;
  std::string error;
  while (pos < end) {
    const char* nl = static_cast<const char*>(std::memchr(pos, '\n', end - pos));
    const char* line_end = nl;
    if (nl == nullptr) {
      if (!final_tail) break;
      line_end = end;
    }
    ++*line_no;
    const char* b = pos;
    while (b < line_end && IsSpace(*b)) ++b;
    if (b < line_end) {  // Blank lines are ignored.
      out.emplace_back();
      if (!ParseLine(absl::string_view(pos, line_end - pos), cache, &out.back(), &error)) {
        out.pop_back();
        on_error(*line_no, error);
      }
    }
    pos = nl == nullptr ? end : nl + 1;
  }
  return static_cast<size_t>(pos - begin);
}

}  // namespace

MetricDimension ParseMetricDimension(absl::string_view d) {
  if (d == "CPUUtilization") return MetricDimension::kCpuUtilization;
  if (d == "GPUUtilization") return MetricDimension::kGpuUtilization;
  if (d == "GPUMemoryUtilization") return MetricDimension::kGpuMemoryUtilization;
  if (d == "MemoryUsedPercent") return MetricDimension::kMemoryUsedPercent;
  if (d == "I/OWaitPercentage") return MetricDimension::kIoWaitPercentage;
  return MetricDimension::kOther;
}

const std::string MetricString::kEmptyText;

MetricString::MetricString(absl::string_view text)
    : text_(Intern(text, /*bounded=*/false, &kEmptyText)) {}
MetricString::MetricString(const char* text)
    : MetricString(absl::string_view(text == nullptr ? "" : text)) {}
MetricString::MetricString(const std::string& text) : MetricString(absl::string_view(text)) {}

bool MetricString::InternBounded(absl::string_view text, MetricString* out) {
  const std::string* s = Intern(text, /*bounded=*/true, &kEmptyText);
  if (s == nullptr) return false;
  *out = MetricString(s);
  return true;
}

namespace system_metrics_internal {

bool MetricStringCache::Get(absl::string_view text, MetricString* out, MetricDimension* dim) {
  const size_t n = entries_.size();
  auto hit = [&](size_t i) {
    const Entry& e = entries_[i];
    if (!SameText(e.text.view(), text)) return false;
    *out = e.text;
    if (dim != nullptr) *dim = e.dim;
    last_ = i;
    return true;
  };
  if (n > 0) {
    // The last hit (the same node, type), the one after it (the next core),
    // then all of them.
    const size_t next = last_ + 1 < n ? last_ + 1 : 0;
    if (hit(last_) || hit(next)) return true;
    for (size_t i = 0; i < n; ++i) {
      if (i != last_ && i != next && hit(i)) return true;
    }
  }
  Entry e;
  if (!MetricString::InternBounded(text, &e.text)) return false;
  e.dim = ParseMetricDimension(text);
  if (n < kMaxEntries) {
    last_ = n;
    entries_.push_back(e);
  } else {
    last_ = evict_;
    entries_[evict_] = e;
    evict_ = (evict_ + 1) % kMaxEntries;
  }
  *out = e.text;
  if (dim != nullptr) *dim = e.dim;
  return true;
}

}  // namespace system_metrics_internal

bool ParseSystemMetricLine(absl::string_view line, SystemMetricPoint* point, std::string* error) {
  ParseCache cache;
  return ParseLine(line, cache, point, error);
}

SystemMetricsFileResult ReadSystemMetricsFile(const objectstore::ObjectStore& store,
                                              absl::string_view key) {
  SystemMetricsFileResult result;
  absl::StatusOr<std::string> data = store.ReadAtMost(key, kSystemMetricsFileLimit);
  if (!data.ok()) {
    result.errors.emplace_back(data.status().message());
    return result;
  }
  result.opened = true;
  const std::string path = store.Describe(key);
  int64_t line_no = 0;
  ParseCache cache;
  ParseLines(*data, /*final_tail=*/true, &line_no, cache, result.points,
             [&](int64_t line, const std::string& what) {
               ++result.malformed_lines;
               if (result.errors.size() < SystemMetricsReader::kMaxErrors) {
                 result.errors.push_back(absl::StrCat(path, ":", line, ": ", what));
               }
             });
  return result;
}

SystemMetricsReader::SystemMetricsReader(objectstore::StoreLocation profiler_dir)
    : incremental_(profiler_dir.Below("system/incremental")) {}

void SystemMetricsReader::AddError(std::string message) {
  if (errors_.size() < kMaxErrors) errors_.push_back(std::move(message));
}

std::vector<SystemMetricPoint> SystemMetricsReader::ReadNew() {
  return ReadNew(std::numeric_limits<uint64_t>::max());
}

std::vector<SystemMetricPoint> SystemMetricsReader::ReadNew(uint64_t max_bytes) {
  std::vector<SystemMetricPoint> out;
  more_pending_ = false;
  std::optional<std::vector<HourFile>> files = listing_.List(
      incremental_, "system/incremental",
      [](absl::string_view name) { return absl::EndsWith(name, ".json"); },
      [this](std::string error) { AddError(std::move(error)); });
  if (!files.has_value()) return out;
  struct Changed {
    const HourFile* file;
    FileState* state;  // In files_ (a std::map: stable).
  };
  std::vector<Changed> changed;
  uint64_t new_bytes = 0;
  for (const HourFile& file : *files) {
    FileState& state = files_[file.relative];
    // The sizes first: an unchanged file costs no read, and the new bytes of
    // all files size `out` once (growing it file by file copied the points
    // again and again and touched fresh pages each time).
    if (state.over_limit || file.size <= state.offset) continue;
    if (!changed.empty() && new_bytes >= max_bytes) {
      // The rest waits for the next call (in file order, so time order).
      more_pending_ = true;
      break;
    }
    new_bytes += file.size - state.offset;
    changed.push_back({&file, &state});
  }
  // Sizes are the store's word (a sparse file claims what it likes): the
  // reserve is bounded; `out` grows with what the files really hold.
  out.reserve(std::min({new_bytes, max_bytes, kMaxReservedBytes}) / kMinLineBytes + changed.size());
  uint64_t budget = max_bytes;
  for (const Changed& c : changed) {
    if (!ReadFile(c.file->relative, c.file->key, c.file->size, *c.state, out, &budget)) {
      more_pending_ = true;  // The rest of this file, and the files after it.
      break;
    }
  }
  points_read_ += static_cast<int64_t>(out.size());
  return out;
}

bool SystemMetricsReader::ReadFile(const std::string& relative, const std::string& key,
                                   uint64_t listed_size, FileState& state,
                                   std::vector<SystemMetricPoint>& out, uint64_t* budget) {
  // File names are data too: escaped in messages.
  const std::string shown =
      absl::StrCat("system/incremental/", base::EscapeForMessage(relative, 256));
  // Chunk by chunk from the offset after the last complete line, each chunk
  // ending where a line is cut.
  while (true) {
    const absl::Status read =
        incremental_.store->ReadRangeInto(key, state.offset, kSystemMetricsChunkBytes, &buffer_);
    if (!read.ok()) {
      AddError(absl::StrCat(shown, ": ", read.message()));
      return true;
    }
    read_.Add(buffer_.size(), !buffer_.empty() && !std::exchange(state.fetched, true));
    const absl::string_view data = buffer_;
    if (data.empty()) return true;
    // Normally reserved by ReadNew. Grow geometrically (an exact reserve per
    // chunk would copy all earlier points again for every chunk).
    const size_t need = out.size() + data.size() / kMinLineBytes + 1;
    if (need > out.capacity()) out.reserve(std::max(need, 2 * out.capacity()));
    int64_t line_no = state.lines;
    const size_t consumed = ParseLines(data, /*final_tail=*/false, &line_no, cache_, out,
                                       [&](int64_t line, const std::string& what) {
                                         ++malformed_lines_;
                                         AddError(absl::StrCat(shown, ":", line, ": ", what));
                                       });
    state.offset += consumed;
    state.lines = line_no;
    if (consumed == 0 && data.size() > kSystemMetricsLineLimit.max_bytes) {
      // No line ends within the limit: it never will.
      state.over_limit = true;
      const absl::Status over = objectstore::OverReadLimitError(
          absl::StrCat(incremental_.store->Describe(key), " line ", state.lines + 1), 0,
          kSystemMetricsLineLimit);
      AddError(absl::StrCat(over.message(), "; the rest of the file is not read"));
      if (limit_error_.ok()) limit_error_ = over;
      return true;
    }
    // The end as it is now, or as far as it was listed (a file growing
    // while it is read is read on by the next call).
    if (data.size() < kSystemMetricsChunkBytes || state.offset >= listed_size) return true;
    *budget -= std::min<uint64_t>(*budget, consumed);
    if (*budget == 0) return false;
  }
}

std::string SystemMetricsReader::Summary() const {
  if (!listing_.directory_exists()) {
    return absl::StrCat("no system metrics yet: ", incremental_.Describe(), " does not exist");
  }
  if (!listing_.error().empty()) {
    return absl::StrCat("system metrics cannot be read: ", listing_.error());
  }
  std::string s = absl::StrCat(files_.size(), files_.size() == 1 ? " file, " : " files, ",
                               points_read_, points_read_ == 1 ? " point" : " points");
  AppendSkippedAndFirstError(s, malformed_lines_, "line", errors_);
  return s;
}

}  // namespace debugplane::rules_engine
