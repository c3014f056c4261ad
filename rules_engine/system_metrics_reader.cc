#include "rules_engine/system_metrics_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace debugplane::rules_engine {
namespace {

namespace fs = std::filesystem;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

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
  ++q;
  const char* close = static_cast<const char*>(std::memchr(q, '"', end - q));
  if (close == nullptr) return false;
  for (const char* c = q; c < close; ++c) {
    if (*c == '\\' || static_cast<unsigned char>(*c) < 0x20) return false;
  }
  *out = absl::string_view(q, close - q);
  *p = close + 1;
  return true;
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
        auto r = std::from_chars(p, end, d);
        if (r.ec != std::errc()) return false;
        p = r.ptr;
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

bool Finish(const FastFields& f, SystemMetricPoint* p, std::string* error) {
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
  p->type.assign(f.type.data(), f.type.size());
  p->name.assign(f.name.data(), f.name.size());
  p->dimension.assign(f.dimension.data(), f.dimension.size());
  p->node_id.assign(f.node_id.data(), f.node_id.size());
  p->value = f.value;
  p->timestamp = f.timestamp;
  p->dim = ParseMetricDimension(f.dimension);
  return true;
}

bool SlowParse(absl::string_view line, SystemMetricPoint* p, std::string* error) {
  nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (j.is_discarded()) {
    // Re-parse with exceptions for nlohmann's wording of the error.
    try {
      nlohmann::json again = nlohmann::json::parse(line.begin(), line.end());
      (void)again;
      *error = "not JSON";
    } catch (const nlohmann::json::exception& e) {
      *error = e.what();
    }
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
  return Finish(f, p, error);
}

// Parses the complete lines of `data` (each ending in '\n'; plus the tail
// when `final_tail`), appending points; returns the bytes consumed.
template <typename OnError>
size_t ParseLines(absl::string_view data, bool final_tail, int64_t* line_no,
                  std::vector<SystemMetricPoint>& out, OnError on_error) {
  size_t pos = 0;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    size_t end = nl;
    if (nl == absl::string_view::npos) {
      if (!final_tail) break;
      end = data.size();
    }
    absl::string_view line = data.substr(pos, end - pos);
    ++*line_no;
    size_t b = 0;
    while (b < line.size() && (IsSpace(line[b]))) ++b;
    if (b < line.size()) {  // Blank lines are ignored.
      out.emplace_back();
      std::string error;
      if (!ParseSystemMetricLine(line, &out.back(), &error)) {
        out.pop_back();
        on_error(*line_no, error);
      }
    }
    pos = nl == absl::string_view::npos ? data.size() : nl + 1;
  }
  return pos;
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

bool ParseSystemMetricLine(absl::string_view line, SystemMetricPoint* point, std::string* error) {
  FastFields f;
  if (FastParse(line, &f)) return Finish(f, point, error);
  return SlowParse(line, point, error);
}

SystemMetricsFileResult ReadSystemMetricsFile(const std::string& path) {
  SystemMetricsFileResult result;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    result.errors.push_back(absl::StrCat(path, ": cannot open"));
    return result;
  }
  result.opened = true;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int64_t line_no = 0;
  ParseLines(data, /*final_tail=*/true, &line_no, result.points,
             [&](int64_t line, const std::string& what) {
               ++result.malformed_lines;
               if (result.errors.size() < SystemMetricsReader::kMaxErrors) {
                 result.errors.push_back(absl::StrCat(path, ":", line, ": ", what));
               }
             });
  return result;
}

SystemMetricsReader::SystemMetricsReader(std::string profiler_dir)
    : profiler_dir_(std::move(profiler_dir)),
      incremental_dir_((fs::path(profiler_dir_) / "system" / "incremental").string()) {}

void SystemMetricsReader::AddError(std::string message) {
  if (errors_.size() < kMaxErrors) errors_.push_back(std::move(message));
}

std::vector<SystemMetricPoint> SystemMetricsReader::ReadNew() {
  std::vector<SystemMetricPoint> out;
  std::error_code ec;
  directory_exists_ = fs::is_directory(incremental_dir_, ec);
  if (!directory_exists_) return out;
  std::vector<std::string> hours;
  for (fs::directory_iterator it(incremental_dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (it->is_directory(e2)) hours.push_back(it->path().filename().string());
  }
  std::sort(hours.begin(), hours.end());
  for (const std::string& hour : hours) {
    std::vector<std::string> names;
    std::error_code e3;
    for (fs::directory_iterator it(fs::path(incremental_dir_) / hour, e3), end; !e3 && it != end;
         it.increment(e3)) {
      std::string name = it->path().filename().string();
      std::error_code e4;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0 &&
          it->is_regular_file(e4)) {
        names.push_back(std::move(name));
      }
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      std::string relative = absl::StrCat(hour, "/", name);
      ReadFile(relative, files_[relative], out);
    }
  }
  points_read_ += static_cast<int64_t>(out.size());
  return out;
}

void SystemMetricsReader::ReadFile(const std::string& relative, FileState& state,
                                   std::vector<SystemMetricPoint>& out) {
  const std::string path = (fs::path(incremental_dir_) / relative).string();
  const std::string shown = absl::StrCat("system/incremental/", relative);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    AddError(absl::StrCat(shown, ": cannot open"));
    return;
  }
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<uint64_t>(size) <= state.offset) return;
  in.seekg(static_cast<std::streamoff>(state.offset));
  std::string data(static_cast<size_t>(size - static_cast<std::streamoff>(state.offset)), '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  // About 100 bytes a line; grow geometrically (an exact reserve per file
  // would copy all earlier points again for every file).
  const size_t need = out.size() + data.size() / 96 + 1;
  if (need > out.capacity()) out.reserve(std::max(need, 2 * out.capacity()));
  int64_t line_no = state.lines;
  size_t consumed = ParseLines(data, /*final_tail=*/false, &line_no, out,
                               [&](int64_t line, const std::string& what) {
                                 ++malformed_lines_;
                                 AddError(absl::StrCat(shown, ":", line, ": ", what));
                               });
  state.offset += consumed;
  state.lines = line_no;
}

std::string SystemMetricsReader::Summary() const {
  if (!directory_exists_) {
    return absl::StrCat("no system metrics yet: ", incremental_dir_, " does not exist");
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
