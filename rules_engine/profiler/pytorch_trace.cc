#include "rules_engine/profiler/pytorch_trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/message_text.h"
#include "rules_engine/smdebug/json_scanner.h"

namespace debugplane::rules_engine {
namespace {

constexpr double kMaxExact = 9007199254740992.0;  // 2^53.
constexpr size_t kMaxKeyBytes = 64;               // Longer top-level keys are not ours.

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

bool Integral(double v, int64_t* out) {
  if (!std::isfinite(v) || std::fabs(v) > kMaxExact || v != std::floor(v)) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

// The members of one event the mapping uses.
struct ScannedTraceEvent {
  absl::string_view name, ph, cat;
  double ts = 0, dur = 0;
  bool has_name = false, has_ph = false, has_ts = false, has_dur = false;
  double pid = 0, tid = 0;
  bool pid_is_text = false, tid_is_text = false;
  absl::string_view tid_text;
  std::string scratch[5];
};

// A number or a string (pid and tid are either); a string sets `*text`.
bool ScanId(JsonScanner& s, double* number, bool* is_text, absl::string_view* text,
            std::string* scratch) {
  const JsonKind kind = s.NextKind();
  if (kind == JsonKind::kNumber) {
    JsonNumber n;
    if (!s.Number(&n)) return false;
    *number = n.value;
    *is_text = false;
    return true;
  }
  if (kind == JsonKind::kString) {
    *is_text = true;
    return s.String(text, scratch);
  }
  return s.SkipValue();
}

bool ScanNumber(JsonScanner& s, double* out, bool* has) {
  *has = s.NextKind() == JsonKind::kNumber;
  if (!*has) return s.SkipValue();
  JsonNumber n;
  if (!s.Number(&n)) return false;
  *out = n.value;
  return true;
}

bool ScanText(JsonScanner& s, absl::string_view* out, bool* has, std::string* scratch) {
  *has = s.NextKind() == JsonKind::kString;
  if (!*has) return s.SkipValue();
  return s.String(out, scratch);
}

bool ScanTraceEvent(JsonScanner& s, ScannedTraceEvent& e) {
  absl::string_view pid_text;
  bool has_cat = false;
  return s.Object([&](absl::string_view key) {
    if (key == "name") return ScanText(s, &e.name, &e.has_name, &e.scratch[0]);
    if (key == "ph") return ScanText(s, &e.ph, &e.has_ph, &e.scratch[1]);
    if (key == "cat") return ScanText(s, &e.cat, &has_cat, &e.scratch[2]);
    if (key == "ts") return ScanNumber(s, &e.ts, &e.has_ts);
    if (key == "dur") return ScanNumber(s, &e.dur, &e.has_dur);
    if (key == "pid") return ScanId(s, &e.pid, &e.pid_is_text, &pid_text, &e.scratch[3]);
    if (key == "tid") return ScanId(s, &e.tid, &e.tid_is_text, &e.tid_text, &e.scratch[4]);
    return s.SkipValue();
  });
}

// Which records an event gives; false: none (not a complete event of a
// kind the mapping reads).
bool KindOf(const ScannedTraceEvent& e, TraceKind* kind) {
  const absl::string_view cat = e.cat;
  if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "Kernel" ||
      cat == "Memcpy" || cat == "Memset") {
    *kind = TraceKind::kKernel;
    return true;
  }
  if (!cat.empty() && cat != "cpu_op" && cat != "user_annotation" && cat != "Operator") {
    return false;  // gpu_user_annotation, cuda_runtime, python_function, Trace, ...
  }
  const absl::string_view n = e.name;
  if (absl::StartsWith(n, "ProfilerStep#")) {
    *kind = TraceKind::kStep;
  } else if (absl::StartsWith(n, "enumerate(DataLoader)#")) {
    *kind = TraceKind::kData;
  } else if (absl::StartsWith(n, "autograd::engine::evaluate_function")) {
    *kind = TraceKind::kBackward;
  } else if (absl::StartsWith(n, "Optimizer.step#") ||
             absl::StartsWith(n, "Optimizer.zero_grad#")) {
    *kind = TraceKind::kOptimizer;
  } else {
    *kind = TraceKind::kOperator;
  }
  return true;
}

// The digits at the end of `s` ("stream 7" -> 7), 0 when none.
int64_t TrailingNumber(absl::string_view s) {
  size_t i = s.size();
  while (i > 0 && absl::ascii_isdigit(s[i - 1])) --i;
  int64_t n = 0;
  if (i == s.size() || s.size() - i > 15 || !absl::SimpleAtoi(s.substr(i), &n)) return 0;
  return n;
}

}  // namespace

bool IsPyTorchTraceName(absl::string_view name) {
  return absl::EndsWith(name, ".pt.trace.json") || absl::EndsWith(name, ".pt.trace.json.gz");
}

TraceFileInfo TraceFileInfoFromName(absl::string_view name) {
  TraceFileInfo info;
  const size_t slash = name.rfind('/');
  if (slash != absl::string_view::npos) name.remove_prefix(slash + 1);
  if (!absl::ConsumeSuffix(&name, ".gz")) {
    // Nothing: the name may be plain.
  }
  if (!absl::ConsumeSuffix(&name, ".pt.trace.json")) return info;
  // <host>_<pid>.<time>: the time after the last '.', the pid after the
  // last '_' before it.
  const size_t dot = name.rfind('.');
  if (dot == absl::string_view::npos) return info;
  const absl::string_view time = name.substr(dot + 1);
  const absl::string_view worker = name.substr(0, dot);
  int64_t t = 0;
  if (absl::SimpleAtoi(time, &t) && t > 0) {
    if (time.size() == 13) info.file_time_us = t * 1000;  // ms (torch 1.x).
    if (time.size() == 19) info.file_time_us = t / 1000;  // ns (torch 2.x).
  }
  const size_t underscore = worker.rfind('_');
  int64_t pid = 0;
  if (underscore != absl::string_view::npos &&
      absl::SimpleAtoi(worker.substr(underscore + 1), &pid) && pid >= 0) {
    info.file_pid = pid;
  }
  return info;
}

PyTorchTraceParser::PyTorchTraceParser(std::string shown, size_t record_budget)
    : shown_(std::move(shown)), record_budget_(record_budget) {}

void PyTorchTraceParser::AddError(std::string message) {
  if (errors_.size() < kMaxTraceErrors) errors_.push_back(std::move(message));
}

void PyTorchTraceParser::Fail(std::string what) {
  if (failed_) return;
  failed_ = true;
  AddError(absl::StrCat(shown_, ": not a PyTorch profiler trace: ", what));
}

uint32_t PyTorchTraceParser::Intern(absl::string_view name) {
  auto it = name_index_.find(name);
  if (it != name_index_.end()) return it->second;
  const auto index = static_cast<uint32_t>(names_.size());
  names_.emplace_back(name);
  name_index_.emplace(names_.back(), index);
  return index;
}

void PyTorchTraceParser::ParseElement(absl::string_view text) {
  ++element_index_;
  auto malformed = [&](absl::string_view what) {
    ++malformed_;
    AddError(absl::StrCat(shown_, ": event ", element_index_, ": ", what));
  };
  if (element_too_long_) {
    malformed(absl::StrCat("over ", kTraceEventTextLimit, " bytes; skipped"));
    return;
  }
  JsonScanner s(text);
  ScannedTraceEvent e;
  if (s.NextKind() != JsonKind::kObject) {
    malformed(absl::StrCat("expected an event object, got ",
                           base::QuoteForMessage(text, kMaxExcerptChars)));
    return;
  }
  if (!ScanTraceEvent(s, e) || !s.AtEnd()) {
    malformed(s.DescribeError());
    return;
  }
  if (!e.has_ph || e.ph != "X") return;  // Metadata, flows, instants, counters.
  TraceKind kind;
  if (!KindOf(e, &kind)) return;
  if (!e.has_name || !e.has_ts || !e.has_dur) {
    malformed("complete event without a string \"name\" or numbers \"ts\" and \"dur\"");
    return;
  }
  if (!std::isfinite(e.ts) || !std::isfinite(e.dur) || std::fabs(e.ts) > kMaxExact || e.dur < 0 ||
      e.dur > kMaxExact) {
    malformed("\"ts\" or \"dur\" is out of range (or \"dur\" negative)");
    return;
  }
  TraceRecord r;
  r.kind = kind;
  r.ts = e.ts;
  r.dur = e.dur;
  r.pid_is_text = e.pid_is_text;
  if (!e.pid_is_text && !Integral(e.pid, &r.pid)) r.pid = 0;
  if (e.tid_is_text) {
    r.tid = TrailingNumber(e.tid_text);
  } else if (!Integral(e.tid, &r.tid)) {
    r.tid = 0;
  }
  if (kind == TraceKind::kStep &&
      (!absl::SimpleAtoi(e.name.substr(sizeof("ProfilerStep#") - 1), &r.step) || r.step < 0)) {
    malformed(absl::StrCat("step name ", base::QuoteForMessage(e.name, 40),
                           " does not end in a step number"));
    return;
  }
  const bool minor = kind == TraceKind::kOperator || kind == TraceKind::kKernel;
  if (records_.size() >= 2 * record_budget_ || (minor && records_.size() >= record_budget_)) {
    if (dropped_++ == 0) {
      AddError(absl::StrCat(shown_, ": more than ", record_budget_,
                            " events: later operators and kernels are not read"));
    }
    return;
  }
  r.name = Intern(e.name);
  records_.push_back(r);
}

void PyTorchTraceParser::EndElement() {
  absl::string_view text = element_;
  while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
  ParseElement(text);
  element_.clear();
  element_too_long_ = false;
  capturing_ = false;
}

void PyTorchTraceParser::EndScalar() {
  absl::string_view text = absl::StripAsciiWhitespace(element_);
  JsonScanner s(text);
  JsonNumber n;
  int64_t ns = 0;
  if (s.NextKind() == JsonKind::kNumber && s.Number(&n) && s.AtEnd() &&
      (n.ToInt64(&ns) || Integral(n.value, &ns)) && ns >= 0) {
    base_time_ns_ = ns;
  } else {
    AddError(absl::StrCat(shown_, ": baseTimeNanoseconds is not a non-negative integer"));
  }
  element_.clear();
  capturing_base_ = false;
}

// The first byte of the top-level value.
void PyTorchTraceParser::StartValueAtTop(char c) {
  if (c == '{') {
    top_ = Top::kObject;
    depth_ = 1;
    expect_key_ = true;
  } else if (c == '[') {
    top_ = Top::kArray;
    depth_ = 1;
    events_depth_ = 1;
  } else {
    Fail(absl::StrCat("it starts with ", base::QuoteForMessage(absl::string_view(&c, 1), 8),
                      ", not '{' or '['"));
  }
}

void PyTorchTraceParser::Append(char c) {
  if (element_.size() < kTraceEventTextLimit) {
    element_.push_back(c);
  } else {
    element_too_long_ = true;
  }
}

void PyTorchTraceParser::OnByte(char c) {
  if (in_string_) {
    if (capturing_ || capturing_base_) Append(c);
    bool closes = false;
    if (escaped_) {
      escaped_ = false;
    } else if (c == '\\') {
      escaped_ = true;
    } else if (c == '"') {
      closes = true;
    }
    if (reading_key_ && !closes && key_.size() <= kMaxKeyBytes) key_.push_back(c);
    if (closes) in_string_ = reading_key_ = false;
    return;
  }
  if (IsSpace(c)) {
    if (capturing_ && !element_.empty() && element_.size() < kTraceEventTextLimit) {
      element_.push_back(c);
    }
    return;
  }
  if (top_closed_) {
    Fail("text after the end of its top-level value");
    return;
  }
  if (top_ == Top::kUnknown) {
    // A UTF-8 byte order mark before the value is skipped.
    if (c == '\xEF' || c == '\xBB' || c == '\xBF') return;
    StartValueAtTop(c);
    return;
  }
  // An element of traceEvents (or of the top-level array).
  if (depth_ == events_depth_) {
    if (capturing_ && (c == ',' || c == ']')) EndElement();
    if (c == ',') return;
    if (c == ']') {
      --depth_;
      events_depth_ = -1;
      if (depth_ == 0) top_closed_ = true;
      return;
    }
    capturing_ = true;
  }
  // A member of the top-level object.
  if (top_ == Top::kObject && depth_ == 1) {
    if (capturing_base_ && (c == ',' || c == '}')) EndScalar();
    if (c == ',') {
      expect_key_ = true;
      return;
    }
    if (c == '}') {
      depth_ = 0;
      top_closed_ = true;
      return;
    }
    if (expect_key_) {
      if (c != '"') {
        Fail("a member of the top-level object has no string key");
        return;
      }
      key_.clear();
      reading_key_ = true;
      in_string_ = true;
      expect_key_ = false;
      return;
    }
    if (c == ':') return;
    if (key_ == "traceEvents" && c == '[') {
      depth_ = 2;
      events_depth_ = 2;
      return;
    }
    if (key_ == "baseTimeNanoseconds" && !capturing_base_) capturing_base_ = true;
  }
  if (capturing_ || capturing_base_) Append(c);
  if (c == '"') {
    in_string_ = true;
  } else if (c == '{' || c == '[') {
    ++depth_;
  } else if (c == '}' || c == ']') {
    --depth_;
    if (depth_ < 1) Fail("its brackets do not balance");
  }
}

namespace {

// The bytes that end a run outside strings: a string or a nesting starts or
// ends there.
struct Structural {
  bool table[256] = {};
  constexpr Structural() {
    for (const char c : {'"', '{', '}', '[', ']'}) table[static_cast<unsigned char>(c)] = true;
  }
};
constexpr Structural kStructural;

// The bytes that end a run inside a string.
struct StringStop {
  bool table[256] = {};
  constexpr StringStop() {
    table[static_cast<unsigned char>('"')] = true;
    table[static_cast<unsigned char>('\\')] = true;
  }
};
constexpr StringStop kStringStop;

// The length of the run from `p` before `end` or the first structural byte.
size_t StructuralRun(const char* p, const char* end) {
  const char* q = p;
  while (q < end && !kStructural.table[static_cast<unsigned char>(*q)]) ++q;
  return static_cast<size_t>(q - p);
}

}  // namespace

size_t PyTorchTraceParser::CaptureRun(const char* p, const char* end) {
  // Bounded by the room left, so that every byte taken is kept (past the
  // limit TakeRun and OnByte decide what is too long).
  const size_t room = kTraceEventTextLimit - std::min(element_.size(), kTraceEventTextLimit);
  const char* const stop = p + std::min(room, static_cast<size_t>(end - p));
  const char* q = p;
  while (q < stop) {
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
        ++q;
        continue;
      }
      while (q < stop && !kStringStop.table[static_cast<unsigned char>(*q)]) ++q;
      if (q == stop) break;
      if (*q == '"') {
        in_string_ = false;
      } else {
        escaped_ = true;
      }
      ++q;
      continue;
    }
    while (q < stop && !kStructural.table[static_cast<unsigned char>(*q)]) ++q;
    if (q == stop) break;
    const char c = *q++;
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (--depth_ == events_depth_) {
      break;  // The element's closing bracket: OnByte ends it at ',' or ']'.
    }
  }
  element_.append(p, static_cast<size_t>(q - p));
  return static_cast<size_t>(q - p);
}

size_t PyTorchTraceParser::TakeRun(const char* p, const char* end) {
  if (capturing_ && !capturing_base_ && !reading_key_ && events_depth_ > 0 &&
      depth_ > events_depth_) {
    if (const size_t run = CaptureRun(p, end); run > 0) return run;
  }
  const size_t available = static_cast<size_t>(end - p);
  if (in_string_) {
    // A key (top-level members only) and an escaped byte go through OnByte.
    if (escaped_ || reading_key_) return 0;
    const char* quote = static_cast<const char*>(std::memchr(p, '"', available));
    const size_t upto = quote == nullptr ? available : static_cast<size_t>(quote - p);
    const char* backslash = static_cast<const char*>(std::memchr(p, '\\', upto));
    const size_t run = backslash == nullptr ? upto : static_cast<size_t>(backslash - p);
    if (capturing_ || capturing_base_) {
      // Append() byte by byte: up to the limit, then too long.
      const size_t room = kTraceEventTextLimit - std::min(element_.size(), kTraceEventTextLimit);
      element_.append(p, std::min(run, room));
      if (run > room) element_too_long_ = true;
    }
    return run;
  }
  // Inside a nested value (an event's members, or a top-level member other
  // than traceEvents): bytes other than quotes and brackets change no state.
  if (top_ == Top::kUnknown || top_closed_ || capturing_base_ || depth_ == events_depth_ ||
      (top_ == Top::kObject && depth_ == 1)) {
    return 0;
  }
  const size_t run = StructuralRun(p, end);
  if (capturing_) {
    // OnByte keeps whitespace inside an element (element_ is not empty
    // here: it holds the opening bracket) and every other byte up to the
    // limit; past it, a byte other than whitespace makes it too long.
    const size_t room = kTraceEventTextLimit - std::min(element_.size(), kTraceEventTextLimit);
    element_.append(p, std::min(run, room));
    for (size_t i = room; i < run && !element_too_long_; ++i) {
      if (!IsSpace(p[i])) element_too_long_ = true;
    }
  }
  return run;
}

bool PyTorchTraceParser::Feed(absl::string_view bytes) {
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  while (p < end) {
    if (failed_) return false;
    const size_t run = TakeRun(p, end);
    if (run > 0) {
      p += run;
    } else {
      OnByte(*p++);
    }
  }
  return !failed_;
}

}  // namespace debugplane::rules_engine
