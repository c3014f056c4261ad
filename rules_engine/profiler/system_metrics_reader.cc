#include "rules_engine/profiler/system_metrics_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/numeric/bits.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "objectstore/message_text.h"
#include "rules_engine/profiler/hour_directories.h"
#include "rules_engine/smdebug/smdebug_json.h"

namespace debugplane::rules_engine {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// A smdebug line is at least about 100 bytes: the points per byte to
// reserve for.
constexpr size_t kMinLineBytes = 96;

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

// Exact powers of ten as doubles (10^22 is the largest one).
constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// A JSON number at p (which is '-' or a digit). The plain decimals smdebug
// writes ("34.23", "1795300000.0") take Clinger's fast path: a mantissa of
// at most 2^53 and at most 22 fraction digits are both exact doubles, so one
// division is correctly rounded, the same double std::from_chars gives.
// Anything else (exponents, long mantissas, "1.") goes to std::from_chars,
// as before. Returns the end of the number or nullptr.
inline const char* ParseNumber(const char* p, const char* end, double* out) {
  const char* q = p;
  const bool negative = q < end && *q == '-';
  if (negative) ++q;
  uint64_t mantissa = 0;
  int digits = 0, fraction = 0;
  while (q < end && *q >= '0' && *q <= '9' && digits < 19) {
    mantissa = mantissa * 10 + static_cast<uint64_t>(*q - '0');
    ++q, ++digits;
  }
  bool fast = digits > 0 && (q >= end || *q < '0' || *q > '9');
  if (fast && q < end && *q == '.') {
    ++q;
    while (q < end && *q >= '0' && *q <= '9' && digits < 19) {
      mantissa = mantissa * 10 + static_cast<uint64_t>(*q - '0');
      ++q, ++digits, ++fraction;
    }
    fast = fraction > 0 && (q >= end || *q < '0' || *q > '9');
  }
  if (fast && q < end && (*q == 'e' || *q == 'E')) fast = false;
  if (fast && mantissa <= (uint64_t{1} << 53) && fraction <= 22) {
    double d = static_cast<double>(mantissa) / kPow10[fraction];
    *out = negative ? -d : d;
    return q;
  }
  auto r = std::from_chars(p, end, *out);
  return r.ec == std::errc() ? r.ptr : nullptr;
}

// The fast path: an object of string and number members, no escapes, no
// nesting. Returns false when the line is not of that shape (the caller
// then asks nlohmann, which also words the error).
struct FastFields {
  absl::string_view type, name, dimension, node_id;
  double value = 0, timestamp = 0;
  bool has_type = false, has_name = false, has_dimension = false, has_node = false,
       has_value = false, has_timestamp = false;
};

// Which member a key names (by length, then bytes: no string compares in
// the common case).
enum class Key { kType, kName, kDimension, kNodeId, kValue, kTimestamp, kOther };
inline Key ClassifyKey(const char* k, size_t len) {
  switch (len) {
    case 4:
      if (std::memcmp(k, "Type", 4) == 0) return Key::kType;
      if (std::memcmp(k, "Name", 4) == 0) return Key::kName;
      return Key::kOther;
    case 5:
      return std::memcmp(k, "Value", 5) == 0 ? Key::kValue : Key::kOther;
    case 6:
      return std::memcmp(k, "NodeId", 6) == 0 ? Key::kNodeId : Key::kOther;
    case 9:
      if (std::memcmp(k, "Dimension", 9) == 0) return Key::kDimension;
      if (std::memcmp(k, "Timestamp", 9) == 0) return Key::kTimestamp;
      return Key::kOther;
    default:
      return Key::kOther;
  }
}

inline const char* SkipSpace(const char* p, const char* end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
  return p;
}

// A string without escapes or control characters starting at *p (at the
// opening quote); advances *p past the closing quote.
inline bool ReadPlainString(const char** p, const char* end, absl::string_view* out) {
  const char* q = *p;
  if (q >= end || *q != '"') return false;
  const char* const start = ++q;
  // One pass (the strings are a few bytes: a memchr call per string and a
  // second pass for escapes cost more).
  for (; q < end; ++q) {
    const unsigned char c = static_cast<unsigned char>(*q);
    if (c == '"') {
      *out = absl::string_view(start, q - start);
      *p = q + 1;
      return true;
    }
    if (c == '\\' || c < 0x20) return false;
  }
  return false;
}

// The end of a plain string whose bytes start at q: the closing quote, or
// nullptr at an escape, a control character or the end (those lines take
// the general path). Eight bytes at a time where the line allows: the
// lowest flagged byte of the three tests is a true match (the classic
// "has zero byte" trick only flags false bytes above a true one).
inline const char* FindClosingQuote(const char* q, const char* end) {
#if defined(ABSL_IS_LITTLE_ENDIAN)
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  while (end - q >= 8) {
    uint64_t w;
    std::memcpy(&w, q, 8);
    const uint64_t quote = w ^ (kOnes * '"'), backslash = w ^ (kOnes * '\\');
    const uint64_t hits = ((quote - kOnes) & ~quote & kHigh) |
                          ((backslash - kOnes) & ~backslash & kHigh) |
                          ((w - kOnes * 0x20) & ~w & kHigh);
    if (hits != 0) {
      const char* at = q + (absl::countr_zero(hits) >> 3);
      return *at == '"' ? at : nullptr;
    }
    q += 8;
  }
#endif
  for (; q < end; ++q) {
    const unsigned char c = static_cast<unsigned char>(*q);
    if (c == '"') return q;
    if (c == '\\' || c < 0x20) return nullptr;
  }
  return nullptr;
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
  const char* close = FindClosingQuote(*p, end);
  if (close == nullptr) return false;
  *out = absl::string_view(*p, close - *p);
  *p = close;
  return Literal(p, end, then);
}

// The line exactly as smdebug writes it (Python's json.dumps of its dict:
// this key order, ", " and ": "), the shape of nearly every line. Anything
// else (other order or spacing, extra members, escapes) returns false for
// the general parser below, which gives the same point for these lines.
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
  const char* q = ParseNumber(p, end, out);
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
  p = ParseNumber(p, end, &point->value);
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

bool FastParse(absl::string_view s, FastFields* f) {
  const char* p = s.data();
  const char* const end = p + s.size();
  p = SkipSpace(p, end);
  if (p >= end || *p != '{') return false;
  p = SkipSpace(p + 1, end);
  if (p < end && *p == '}') {
    ++p;
  } else {
    while (true) {
      absl::string_view key;
      if (!ReadPlainString(&p, end, &key)) return false;
      p = SkipSpace(p, end);
      if (p >= end || *p != ':') return false;
      p = SkipSpace(p + 1, end);
      if (p >= end) return false;
      const Key k = ClassifyKey(key.data(), key.size());
      if (*p == '"') {
        absl::string_view v;
        if (!ReadPlainString(&p, end, &v)) return false;
        switch (k) {
          case Key::kType:
            f->type = v, f->has_type = true;
            break;
          case Key::kName:
            f->name = v, f->has_name = true;
            break;
          case Key::kDimension:
            f->dimension = v, f->has_dimension = true;
            break;
          case Key::kNodeId:
            f->node_id = v, f->has_node = true;
            break;
          case Key::kValue:
          case Key::kTimestamp:
            return false;  // A string where a number belongs: nlohmann words it.
          case Key::kOther:
            break;
        }
      } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
        double d = 0;
        p = ParseNumber(p, end, &d);
        if (p == nullptr) return false;
        switch (k) {
          case Key::kValue:
            f->value = d, f->has_value = true;
            break;
          case Key::kTimestamp:
            f->timestamp = d, f->has_timestamp = true;
            break;
          case Key::kOther:
            break;
          default:
            return false;  // A number where a string belongs.
        }
      } else {
        return false;  // true/false/null/nested: the slow path.
      }
      p = SkipSpace(p, end);
      if (p < end && *p == ',') {
        p = SkipSpace(p + 1, end);
        continue;
      }
      if (p < end && *p == '}') {
        ++p;
        break;
      }
      return false;
    }
  }
  p = SkipSpace(p, end);
  return p == end;
}

bool Finish(const FastFields& f, ParseCache& cache, SystemMetricPoint* p, std::string* error) {
  const char* missing = !f.has_type        ? "Type"
                        : !f.has_name      ? "Name"
                        : !f.has_dimension ? "Dimension"
                        : !f.has_value     ? "Value"
                        : !f.has_node      ? "NodeId"
                        : !f.has_timestamp ? "Timestamp"
                                           : nullptr;
  if (missing != nullptr) {
    *error = absl::StrCat("missing \"", missing, "\"");
    return false;
  }
  if (!std::isfinite(f.value) || !std::isfinite(f.timestamp)) {
    *error = "Value or Timestamp is not finite";
    return false;
  }
  if (!cache.type.Get(f.type, &p->type) || !cache.name.Get(f.name, &p->name) ||
      !cache.dimension.Get(f.dimension, &p->dimension, &p->dim) ||
      !cache.node_id.Get(f.node_id, &p->node_id)) {
    *error = absl::StrCat("more than ", MetricString::kMaxInterned,
                          " distinct names, dimensions and node ids in this process");
    return false;
  }
  p->value = f.value;
  p->timestamp = f.timestamp;
  return true;
}

bool SlowParse(absl::string_view line, ParseCache& cache, SystemMetricPoint* p,
               std::string* error) {
  nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (j.is_discarded()) {
    *error = DescribeJsonError(line);
    return false;
  }
  if (!j.is_object()) {
    *error = absl::StrCat("not a JSON object: ", std::string(j.type_name()));
    return false;
  }
  FastFields f;
  std::string storage[4];
  const char* string_keys[4] = {"Type", "Name", "Dimension", "NodeId"};
  for (int k = 0; k < 4; ++k) {
    auto it = j.find(string_keys[k]);
    if (it == j.end()) continue;
    if (!it->is_string()) {
      *error = absl::StrCat("\"", string_keys[k], "\" is not a string");
      return false;
    }
    storage[k] = it->get<std::string>();
  }
  f.has_type = j.contains("Type"), f.type = storage[0];
  f.has_name = j.contains("Name"), f.name = storage[1];
  f.has_dimension = j.contains("Dimension"), f.dimension = storage[2];
  f.has_node = j.contains("NodeId"), f.node_id = storage[3];
  for (const char* key : {"Value", "Timestamp"}) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    if (!it->is_number()) {
      *error = absl::StrCat("\"", key, "\" is not a number");
      return false;
    }
    if (std::string(key) == "Value") {
      f.value = it->get<double>(), f.has_value = true;
    } else {
      f.timestamp = it->get<double>(), f.has_timestamp = true;
    }
  }
  return Finish(f, cache, p, error);
}

bool ParseLine(absl::string_view line, ParseCache& cache, SystemMetricPoint* point,
               std::string* error) {
  if (SmdebugLine(line, cache, point)) return true;
  FastFields f;
  if (FastParse(line, &f)) return Finish(f, cache, point, error);
  return SlowParse(line, cache, point, error);
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
  absl::StatusOr<std::string> data = store.Read(key);
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
  std::vector<SystemMetricPoint> out;
  absl::StatusOr<std::vector<HourFile>> files = ListHourFiles(
      incremental_, [](absl::string_view name) { return absl::EndsWith(name, ".json"); });
  if (!files.ok()) {
    directory_exists_ = !absl::IsNotFound(files.status());
    if (directory_exists_ && listing_error_ != files.status().message()) {
      listing_error_ = std::string(files.status().message());
      AddError(absl::StrCat("system/incremental: ", listing_error_));
    }
    return out;
  }
  directory_exists_ = true;
  listing_error_.clear();
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
    if (file.size <= state.offset) continue;
    new_bytes += file.size - state.offset;
    changed.push_back({&file, &state});
  }
  out.reserve(new_bytes / kMinLineBytes + changed.size());
  for (const Changed& c : changed) ReadFile(c.file->relative, c.file->key, *c.state, out);
  points_read_ += static_cast<int64_t>(out.size());
  return out;
}

void SystemMetricsReader::ReadFile(const std::string& relative, const std::string& key,
                                   FileState& state, std::vector<SystemMetricPoint>& out) {
  // From the offset after the last complete line to the end as it is now
  // (the file may have grown since it was listed).
  const absl::Status read =
      incremental_.store->ReadRangeInto(key, state.offset, objectstore::kToEnd, &buffer_);
  // File names are data too: escaped in messages.
  const std::string shown =
      absl::StrCat("system/incremental/", objectstore::EscapeForMessage(relative, 256));
  if (!read.ok()) {
    AddError(absl::StrCat(shown, ": ", read.message()));
    return;
  }
  const absl::string_view data = buffer_;
  if (data.empty()) return;
  // Normally reserved by ReadNew; the file may have grown since its listing.
  // Grow geometrically (an exact reserve per file would copy all earlier
  // points again for every file).
  const size_t need = out.size() + data.size() / kMinLineBytes + 1;
  if (need > out.capacity()) out.reserve(std::max(need, 2 * out.capacity()));
  int64_t line_no = state.lines;
  size_t consumed = ParseLines(data, /*final_tail=*/false, &line_no, cache_, out,
                               [&](int64_t line, const std::string& what) {
                                 ++malformed_lines_;
                                 AddError(absl::StrCat(shown, ":", line, ": ", what));
                               });
  state.offset += consumed;
  state.lines = line_no;
}

std::string SystemMetricsReader::Summary() const {
  if (!directory_exists_) {
    return absl::StrCat("no system metrics yet: ", incremental_.Describe(), " does not exist");
  }
  if (!listing_error_.empty()) {
    return absl::StrCat("system metrics cannot be read: ", listing_error_);
  }
  std::string s = absl::StrCat(files_.size(), files_.size() == 1 ? " file, " : " files, ",
                               points_read_, points_read_ == 1 ? " point" : " points");
  if (malformed_lines_ > 0) {
    absl::StrAppend(&s, ", ", malformed_lines_,
                    malformed_lines_ == 1 ? " malformed line skipped" : " malformed lines skipped");
    if (!errors_.empty()) absl::StrAppend(&s, " (first: ", errors_.front(), ")");
  } else if (!errors_.empty()) {
    absl::StrAppend(&s, " (", errors_.front(), ")");
  }
  return s;
}

}  // namespace debugplane::rules_engine
