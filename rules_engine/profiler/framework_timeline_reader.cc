#include "rules_engine/profiler/framework_timeline_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "objectstore/message_text.h"
#include "rules_engine/smdebug/smdebug_json.h"

namespace debugplane::rules_engine {
namespace {

using framework_timeline_internal::ParseState;
using ErrorFn = absl::FunctionRef<void(int64_t line, absl::string_view what)>;

// An element spread over more lines than this is given up on (reported as
// unterminated) so that a stray "{" cannot make every later call rescan the
// rest of the file.
constexpr size_t kMaxElementBytes = 1 << 20;
// Integers beyond 2^53 are not exact in a double; no timeline value is near.
constexpr double kMaxExact = 9007199254740992.0;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

absl::string_view Trim(absl::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// The members of one trace event the reader uses. Views point into the
// parsed text (fast path) or into SlowStrings (nlohmann path).
struct RawEvent {
  absl::string_view name, ph, process_name;  // process_name: args.name.
  double pid = 0, ts = 0, dur = 0, process = 0, start = 0, step_number = 0;
  absl::string_view step_text;  // args.step_num given as a string.
  bool has_name = false, has_ph = false, has_pid = false, has_ts = false, has_dur = false,
       has_process = false, has_start = false, has_process_name = false;
  enum class Step { kNone, kString, kNumber } step = Step::kNone;
};

// Which member a key names (by length, then bytes).
enum class Key { kName, kPh, kPid, kTs, kDur, kArgs, kStepNum, kStartTime, kOther };
inline Key ClassifyTopKey(absl::string_view k) {
  switch (k.size()) {
    case 2:
      if (k[0] == 'p' && k[1] == 'h') return Key::kPh;
      if (k[0] == 't' && k[1] == 's') return Key::kTs;
      return Key::kOther;
    case 3:
      if (std::memcmp(k.data(), "pid", 3) == 0) return Key::kPid;
      if (std::memcmp(k.data(), "dur", 3) == 0) return Key::kDur;
      return Key::kOther;
    case 4:
      if (std::memcmp(k.data(), "name", 4) == 0) return Key::kName;
      if (std::memcmp(k.data(), "args", 4) == 0) return Key::kArgs;
      return Key::kOther;
    default:
      return Key::kOther;
  }
}
inline Key ClassifyArgsKey(absl::string_view k) {
  switch (k.size()) {
    case 3:
      return std::memcmp(k.data(), "pid", 3) == 0 ? Key::kPid : Key::kOther;
    case 4:
      return std::memcmp(k.data(), "name", 4) == 0 ? Key::kName : Key::kOther;
    case 8:
      return std::memcmp(k.data(), "step_num", 8) == 0 ? Key::kStepNum : Key::kOther;
    case 32:
      return std::memcmp(k.data(), "start_time_since_epoch_in_micros", 32) == 0 ? Key::kStartTime
                                                                                : Key::kOther;
    default:
      return Key::kOther;
  }
}

inline const char* SkipSpace(const char* p, const char* end) {
  while (p < end && IsSpace(*p)) ++p;
  return p;
}

// A string without escapes or control characters at *p (the opening
// quote); advances *p past the closing quote. One pass over the bytes: the
// strings of a timeline are short, so this beats memchr plus a check.
inline bool ReadPlainString(const char** p, const char* end, absl::string_view* out) {
  const char* q = *p;
  if (q >= end || *q != '"') return false;
  const char* const begin = ++q;
  while (q < end) {
    const unsigned char c = static_cast<unsigned char>(*q);
    if (c == '"') {
      *out = absl::string_view(begin, q - begin);
      *p = q + 1;
      return true;
    }
    if (c == '\\' || c < 0x20) return false;
    ++q;
  }
  return false;
}

// A JSON number at *p; advances *p past it. Plain integers (all of
// smdebug's) are read digit by digit; anything else by std::from_chars.
inline bool ReadNumber(const char** p, const char* end, double* out) {
  const char* q = *p;
  const bool negative = q < end && *q == '-';
  if (negative) ++q;
  const char* const digits = q;
  uint64_t v = 0;
  while (q < end && *q >= '0' && *q <= '9' && q - digits < 18) v = v * 10 + (*q++ - '0');
  if (q > digits && (q == end || (*q != '.' && *q != 'e' && *q != 'E' && (*q < '0' || *q > '9')))) {
    *out = negative ? -static_cast<double>(v) : static_cast<double>(v);
    *p = q;
    return true;
  }
  auto r = std::from_chars(*p, end, *out);
  if (r.ec != std::errc()) return false;
  *p = r.ptr;
  return true;
}

// The fast path: an object of plain string, number, true/false/null members
// whose only nested value is an "args" object of the same kind. Returns
// false when the text is not of that shape (the caller then asks nlohmann,
// which also words any error). `args`: parsing the nested object.
bool FastObject(const char** pp, const char* end, RawEvent* e, bool args) {
  const char* p = SkipSpace(*pp, end);
  if (p >= end || *p != '{') return false;
  p = SkipSpace(p + 1, end);
  if (p < end && *p == '}') {
    *pp = p + 1;
    return true;
  }
  while (true) {
    absl::string_view key;
    if (!ReadPlainString(&p, end, &key)) return false;
    p = SkipSpace(p, end);
    if (p >= end || *p != ':') return false;
    p = SkipSpace(p + 1, end);
    if (p >= end) return false;
    const Key k = args ? ClassifyArgsKey(key) : ClassifyTopKey(key);
    const char c = *p;
    if (c == '"') {
      absl::string_view v;
      if (!ReadPlainString(&p, end, &v)) return false;
      switch (k) {
        case Key::kName:
          if (args) {
            e->process_name = v, e->has_process_name = true;
          } else {
            e->name = v, e->has_name = true;
          }
          break;
        case Key::kPh:
          e->ph = v, e->has_ph = true;
          break;
        case Key::kStepNum:
          e->step_text = v, e->step = RawEvent::Step::kString;
          break;
        case Key::kOther:
          break;
        default:
          return false;  // A string where a number belongs: nlohmann words it.
      }
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      double d = 0;
      if (!ReadNumber(&p, end, &d)) return false;
      switch (k) {
        case Key::kPid:
          if (args) {
            e->process = d, e->has_process = true;
          } else {
            e->pid = d, e->has_pid = true;
          }
          break;
        case Key::kTs:
          e->ts = d, e->has_ts = true;
          break;
        case Key::kDur:
          e->dur = d, e->has_dur = true;
          break;
        case Key::kStartTime:
          e->start = d, e->has_start = true;
          break;
        case Key::kStepNum:
          e->step_number = d, e->step = RawEvent::Step::kNumber;
          break;
        case Key::kOther:
          break;
        default:
          return false;
      }
    } else if (c == '{' && !args && k == Key::kArgs) {
      if (!FastObject(&p, end, e, /*args=*/true)) return false;
    } else if (k == Key::kOther && (c == 't' || c == 'f' || c == 'n')) {
      const absl::string_view rest(p, end - p);
      if (absl::StartsWith(rest, "true") || absl::StartsWith(rest, "null")) {
        p += 4;
      } else if (absl::StartsWith(rest, "false")) {
        p += 5;
      } else {
        return false;
      }
    } else {
      return false;  // Arrays, other nesting, a literal for a used key.
    }
    p = SkipSpace(p, end);
    if (p < end && *p == ',') {
      p = SkipSpace(p + 1, end);
      continue;
    }
    if (p < end && *p == '}') {
      *pp = p + 1;
      return true;
    }
    return false;
  }
}

// Owned strings of an event read through nlohmann.
struct SlowStrings {
  std::string name, ph, process_name, step_text;
};

bool Number(const nlohmann::json& j, const char* what, double* out, std::string* error) {
  if (!j.is_number()) {
    *error = absl::StrCat(what, " is not a number");
    return false;
  }
  *out = j.get<double>();
  return true;
}

bool String(const nlohmann::json& j, const char* what, std::string* out, std::string* error) {
  if (!j.is_string()) {
    *error = absl::StrCat(what, " is not a string");
    return false;
  }
  *out = j.get<std::string>();
  return true;
}

bool FromJson(const nlohmann::json& j, RawEvent* e, SlowStrings* s, std::string* error) {
  if (!j.is_object()) {
    *error = absl::StrCat("expected an event object, got ", std::string(j.type_name()));
    return false;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    switch (ClassifyTopKey(it.key())) {
      case Key::kName:
        if (!String(*it, "\"name\"", &s->name, error)) return false;
        e->name = s->name, e->has_name = true;
        break;
      case Key::kPh:
        if (!String(*it, "\"ph\"", &s->ph, error)) return false;
        e->ph = s->ph, e->has_ph = true;
        break;
      case Key::kPid:
        if (!Number(*it, "\"pid\"", &e->pid, error)) return false;
        e->has_pid = true;
        break;
      case Key::kTs:
        if (!Number(*it, "\"ts\"", &e->ts, error)) return false;
        e->has_ts = true;
        break;
      case Key::kDur:
        if (!Number(*it, "\"dur\"", &e->dur, error)) return false;
        e->has_dur = true;
        break;
      case Key::kArgs: {
        if (!it->is_object()) {
          *error = "\"args\" is not an object";
          return false;
        }
        for (auto a = it->begin(); a != it->end(); ++a) {
          switch (ClassifyArgsKey(a.key())) {
            case Key::kPid:
              if (!Number(*a, "args.pid", &e->process, error)) return false;
              e->has_process = true;
              break;
            case Key::kName:
              if (!String(*a, "args.name", &s->process_name, error)) return false;
              e->process_name = s->process_name, e->has_process_name = true;
              break;
            case Key::kStartTime:
              if (!Number(*a, "args.start_time_since_epoch_in_micros", &e->start, error)) {
                return false;
              }
              e->has_start = true;
              break;
            case Key::kStepNum:
              if (a->is_string()) {
                s->step_text = a->get<std::string>();
                e->step_text = s->step_text, e->step = RawEvent::Step::kString;
              } else if (a->is_number()) {
                e->step_number = a->get<double>(), e->step = RawEvent::Step::kNumber;
              } else {
                *error = "args.step_num is neither a string nor a number";
                return false;
              }
              break;
            default:
              break;
          }
        }
        break;
      }
      default:
        break;
    }
  }
  return true;
}

// `v` as an exact integer of at most 2^53 in magnitude.
bool Integral(double v, int64_t* out) {
  if (!std::isfinite(v) || std::fabs(v) > kMaxExact || v != std::floor(v)) return false;
  *out = static_cast<int64_t>(v);
  return true;
}
// `v` (microseconds, possibly fractional as Chrome allows) rounded.
bool Micros(double v, int64_t* out) {
  if (!std::isfinite(v) || std::fabs(v) > kMaxExact) return false;
  *out = std::llround(v);
  return true;
}

// Applies one parsed trace event to the file's state; a complete event is
// appended to `out`. False with `*error` for a malformed event.
bool Apply(const RawEvent& e, ParseState& st, std::vector<FrameworkEvent>& out,
           std::string* error) {
  if (!e.has_ph) {
    *error = "missing \"ph\"";
    return false;
  }
  if (e.ph == "M") {
    if (e.has_start && st.start_us < 0) {
      int64_t start = 0;
      if (!Integral(e.start, &start) || start < 0) {
        *error = "args.start_time_since_epoch_in_micros is not a non-negative integer";
        return false;
      }
      st.start_us = start;
    }
    if (e.has_name && e.name == "process_name" && e.has_process_name) {
      int64_t pid = 0;
      if (e.has_pid && !Integral(e.pid, &pid)) {
        *error = "\"pid\" is not an integer";
        return false;
      }
      std::string& name = st.process_names[pid];
      name.assign(e.process_name.data(), e.process_name.size());
    }
    return true;
  }
  if (e.ph != "X") return true;  // Other phases (B/E, instant, counters) are not read.
  const char* missing = !e.has_name ? "name" : !e.has_ts ? "ts" : !e.has_dur ? "dur" : nullptr;
  if (missing != nullptr) {
    *error = absl::StrCat("complete event without \"", missing, "\"");
    return false;
  }
  if (st.start_us < 0) {
    *error = "complete event before any args.start_time_since_epoch_in_micros";
    return false;
  }
  FrameworkEvent ev;
  int64_t ts = 0;
  if (!Micros(e.ts, &ts) || !Micros(e.dur, &ev.duration_us)) {
    *error = "\"ts\" or \"dur\" is out of range";
    return false;
  }
  if (ev.duration_us < 0) {
    *error = absl::StrCat("negative \"dur\" ", ev.duration_us);
    return false;
  }
  if ((e.has_pid && !Integral(e.pid, &ev.track)) ||
      (e.has_process && !Integral(e.process, &ev.process))) {
    *error = "\"pid\" or args.pid is not an integer";
    return false;
  }
  if (e.step == RawEvent::Step::kString) {
    if (!absl::SimpleAtoi(e.step_text, &ev.step)) {
      *error = absl::StrCat("args.step_num ",
                            objectstore::QuoteForMessage(e.step_text, kMaxExcerptChars),
                            " is not an integer");
      return false;
    }
  } else if (e.step == RawEvent::Step::kNumber && !Integral(e.step_number, &ev.step)) {
    *error = "args.step_num is not an integer";
    return false;
  }
  ev.start_us = st.start_us + ts;
  ev.timeline_start_us = st.start_us;
  ev.name.assign(e.name.data(), e.name.size());
  if (auto it = st.process_names.find(ev.track); it != st.process_names.end()) {
    ev.category = it->second;
  }
  ev.node_id = st.node_id;
  out.push_back(std::move(ev));
  return true;
}

// Nesting depth change over `s`, brackets inside strings not counted. A
// string still open at the end counts as one more level (the element is not
// finished).
int BraceDelta(absl::string_view s) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return depth + (in_string ? 1 : 0);
}

// One element's text without the array punctuation around it.
struct Stripped {
  absl::string_view text;
  bool opens = false;   // Began with the array's "[".
  bool closes = false;  // Ended with the array's "]".
};
Stripped StripPunctuation(absl::string_view s, bool array_opened) {
  Stripped r;
  s = Trim(s);
  if (!array_opened && !s.empty() && s.front() == '[') {
    s = Trim(s.substr(1));
    r.opens = true;
  }
  // An element ends with "}"; a trailing "]" after it (or alone) closes the
  // array. A "]" that balances an earlier "[" inside the text is not that.
  if (!s.empty() && s.back() == ']' && BraceDelta(s) < 0) {
    s = Trim(s.substr(0, s.size() - 1));
    r.closes = true;
  }
  if (!s.empty() && s.back() == ',') s = Trim(s.substr(0, s.size() - 1));
  r.text = s;
  return r;
}

enum class Outcome { kDone, kNeedsMore };

// Parses the text of one element (or, on one line, several separated by
// commas); errors are reported at `line`. kNeedsMore (nothing applied) when
// `may_continue` and the text is an object whose brackets are still open:
// its next lines belong to it.
Outcome ParseElements(absl::string_view t, int64_t line, bool may_continue, ParseState& st,
                      std::vector<FrameworkEvent>& out, ErrorFn on_error) {
  if (t.empty()) return Outcome::kDone;
  if (t.front() != '{') {
    on_error(line, absl::StrCat("expected an event object, got ",
                                objectstore::QuoteForMessage(t, kMaxExcerptChars)));
    return Outcome::kDone;
  }
  std::string error;
  {
    RawEvent e;
    const char* p = t.data();
    const char* const end = p + t.size();
    if (FastObject(&p, end, &e, /*args=*/false) && SkipSpace(p, end) == end) {
      if (!Apply(e, st, out, &error)) on_error(line, error);
      return Outcome::kDone;
    }
  }
  if (may_continue && BraceDelta(t) > 0) return Outcome::kNeedsMore;
  nlohmann::json j = nlohmann::json::parse(t.begin(), t.end(), nullptr, false);
  if (j.is_discarded()) {
    // Several elements on one line ("{...}, {...}") form an array.
    std::string wrapped = absl::StrCat("[", t, "]");
    j = nlohmann::json::parse(wrapped, nullptr, false);
    if (j.is_discarded() || !j.is_array()) {
      on_error(line, DescribeJsonError(t));
      return Outcome::kDone;
    }
  } else {
    j = nlohmann::json::array({std::move(j)});
  }
  for (const nlohmann::json& element : j) {
    RawEvent e;
    SlowStrings s;
    if (!FromJson(element, &e, &s, &error) || !Apply(e, st, out, &error)) on_error(line, error);
  }
  return Outcome::kDone;
}

// Whether `line`, met inside an element spread over several lines whose
// nesting depth is `depth`, shows that element to be unterminated: it is a
// whole object by itself, or the array's closing "]" while only the
// element's own brace is open. (So an element over several lines cannot
// hold a line that is a whole object by itself; smdebug never writes one.)
bool EndsUnterminated(absl::string_view line, int depth) {
  const absl::string_view t = Trim(line);
  if (depth <= 1 && absl::StartsWith(t, "]")) return true;
  Stripped s = StripPunctuation(t, /*array_opened=*/true);
  return !s.text.empty() && s.text.front() == '{' && BraceDelta(s.text) == 0;
}

// Parses the lines of `data` (the file's bytes from where the last call
// stopped). Lines end in '\n'; the last one counts without it when `final`
// (the whole file) or when it closes the array. An element still open at
// the end of `data` is left for the next call (`*cut_short` when `final`).
// Returns the bytes consumed; st.lines counts the lines consumed.
size_t Consume(absl::string_view data, bool final, ParseState& st, std::vector<FrameworkEvent>& out,
               ErrorFn on_error, bool* cut_short) {
  // The end of the line starting at `pos` (npos: not complete yet).
  auto line_end = [&](size_t pos) -> size_t {
    const void* nl = std::memchr(data.data() + pos, '\n', data.size() - pos);
    if (nl != nullptr) return static_cast<const char*>(nl) - data.data();
    if (final || absl::EndsWith(Trim(data.substr(pos)), "]")) return data.size();
    return absl::string_view::npos;
  };
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t end = line_end(pos);
    if (end == absl::string_view::npos) break;
    const int64_t line_no = st.lines + 1;
    Stripped s = StripPunctuation(data.substr(pos, end - pos), st.array_opened);
    if (ParseElements(s.text, line_no, /*may_continue=*/true, st, out, on_error) ==
        Outcome::kDone) {
      st.array_opened |= s.opens || !s.text.empty();
      st.closed |= s.closes;
      ++st.lines;
      pos = std::min(end + 1, data.size());
      continue;
    }
    // An element over several lines: find the line that closes it.
    int depth = BraceDelta(s.text);
    size_t next = end + 1;
    int64_t lines = 1;
    bool resolved = false;
    while (next < data.size()) {
      const size_t e = line_end(next);
      if (e == absl::string_view::npos) break;
      const absl::string_view line = data.substr(next, e - next);
      const bool too_long = e - pos > kMaxElementBytes;
      if (too_long || EndsUnterminated(line, depth)) {
        on_error(line_no, too_long
                              ? "unterminated object (over 1 MiB without its closing brace)"
                              : "unterminated object (the next element starts before it closes)");
        // Its lines are dropped; reading resumes at this line.
        st.array_opened = true;
        st.lines += lines;
        pos = next;
        resolved = true;
        break;
      }
      ++lines;
      depth += BraceDelta(line);
      if (depth <= 0) {
        Stripped whole = StripPunctuation(data.substr(pos, e - pos), st.array_opened);
        ParseElements(whole.text, line_no, /*may_continue=*/false, st, out, on_error);
        st.array_opened = true;
        st.closed |= whole.closes;
        st.lines += lines;
        pos = std::min(e + 1, data.size());
        resolved = true;
        break;
      }
      next = e + 1;
    }
    if (!resolved) {
      if (final) *cut_short = true;
      break;
    }
  }
  return final ? data.size() : pos;
}

}  // namespace

std::string TimelineFileNodeId(absl::string_view name) {
  if (!absl::ConsumeSuffix(&name, ".json")) return "";
  if (!absl::ConsumeSuffix(&name, "_model_timeline") &&
      !absl::ConsumeSuffix(&name, "_pythontimeline")) {
    const size_t last = name.rfind('_');
    if (last == absl::string_view::npos) return "";
    name = name.substr(0, last);
  }
  const size_t first = name.find('_');
  if (first == absl::string_view::npos) return "";
  absl::string_view middle = name.substr(first + 1);
  // <pid>-<host>: the host (itself possibly with dashes, "algo-1").
  const size_t dash = middle.find('-');
  if (dash != absl::string_view::npos && dash > 0 &&
      std::all_of(middle.begin(), middle.begin() + dash, absl::ascii_isdigit)) {
    middle = middle.substr(dash + 1);
  }
  return std::string(middle);
}

FrameworkTimelineFileResult ParseFrameworkTimeline(absl::string_view data,
                                                   absl::string_view file_name) {
  FrameworkTimelineFileResult result;
  result.opened = true;
  ParseState st;
  const size_t slash = file_name.rfind('/');
  st.node_id = TimelineFileNodeId(slash == absl::string_view::npos ? file_name
                                                                   : file_name.substr(slash + 1));
  bool cut_short = false;
  Consume(
      data, /*final=*/true, st, result.events,
      [&](int64_t line, absl::string_view what) {
        ++result.malformed_events;
        if (result.errors.size() < FrameworkTimelineReader::kMaxErrors) {
          result.errors.push_back(absl::StrCat(file_name, ":", line, ": ", what));
        }
      },
      &cut_short);
  result.complete = st.closed && !cut_short;
  result.start_time_us = st.start_us;
  return result;
}

FrameworkTimelineFileResult ReadFrameworkTimelineFile(const objectstore::ObjectStore& store,
                                                      absl::string_view key) {
  absl::StatusOr<std::string> data = store.Read(key);
  if (!data.ok()) {
    FrameworkTimelineFileResult result;
    result.errors.emplace_back(data.status().message());
    return result;
  }
  return ParseFrameworkTimeline(*data, store.Describe(key));
}

FrameworkTimelineReader::FrameworkTimelineReader(objectstore::StoreLocation profiler_dir)
    : pevents_(profiler_dir.Below("framework/pevents")), pevents_dir_(pevents_.Describe()) {}

void FrameworkTimelineReader::AddError(std::string message) {
  if (errors_.size() < kMaxErrors) errors_.push_back(std::move(message));
}

int64_t FrameworkTimelineReader::files_complete() const {
  int64_t n = 0;
  for (const auto& [name, state] : files_) n += state.parse.closed ? 1 : 0;
  return n;
}

std::vector<FrameworkEvent> FrameworkTimelineReader::ReadNew() {
  std::vector<FrameworkEvent> out;
  absl::StatusOr<std::vector<HourFile>> files = ListHourFiles(
      pevents_, [](absl::string_view name) { return absl::EndsWith(name, "timeline.json"); });
  if (!files.ok()) {
    directory_exists_ = !absl::IsNotFound(files.status());
    if (directory_exists_ && listing_error_ != files.status().message()) {
      listing_error_ = std::string(files.status().message());
      AddError(absl::StrCat("framework/pevents: ", listing_error_));
    }
    return out;
  }
  directory_exists_ = true;
  listing_error_.clear();
  for (const HourFile& file : *files) {
    auto [it, inserted] = files_.try_emplace(file.relative);
    if (inserted) it->second.parse.node_id = TimelineFileNodeId(file.name);
    ReadFile(file, it->second, out);
  }
  events_read_ += static_cast<int64_t>(out.size());
  for (const FrameworkEvent& e : out) {
    if (absl::StartsWith(e.name, "Step:ModeKeys.")) ++step_events_read_;
  }
  return out;
}

void FrameworkTimelineReader::ReadFile(const HourFile& file, FileState& state,
                                       std::vector<FrameworkEvent>& out) {
  // Nothing new (the size from the listing saves a read).
  if (file.size <= state.offset) return;
  // File names are data too: escaped in messages.
  const std::string shown =
      absl::StrCat("framework/pevents/", objectstore::EscapeForMessage(file.relative, 256));
  // From where the last call stopped to the end as it is now.
  const absl::Status read =
      pevents_.store->ReadRangeInto(file.key, state.offset, objectstore::kToEnd, &buffer_);
  if (!read.ok()) {
    AddError(absl::StrCat(shown, ": ", read.message()));
    return;
  }
  const absl::string_view data = buffer_;
  if (data.empty()) return;
  // About 120 bytes per line, half of them complete events; grow
  // geometrically (an exact reserve per file would copy earlier events).
  const size_t need = out.size() + data.size() / 240 + 1;
  if (need > out.capacity()) out.reserve(std::max(need, 2 * out.capacity()));
  bool cut_short = false;
  const size_t consumed = Consume(
      data, /*final=*/false, state.parse, out,
      [&](int64_t line, absl::string_view what) {
        ++malformed_events_;
        AddError(absl::StrCat(shown, ":", line, ": ", what));
      },
      &cut_short);
  state.offset += consumed;
  if (state.parse.start_us >= 0 &&
      (earliest_start_us_ < 0 || state.parse.start_us < earliest_start_us_)) {
    earliest_start_us_ = state.parse.start_us;
  }
}

std::string FrameworkTimelineReader::Summary() const {
  if (!directory_exists_) {
    return absl::StrCat("no framework timeline yet: ", pevents_dir_, " does not exist");
  }
  if (!listing_error_.empty()) {
    return absl::StrCat("framework timelines cannot be read: ", listing_error_);
  }
  std::string s = absl::StrCat(files_.size(), files_.size() == 1 ? " file, " : " files, ",
                               events_read_, events_read_ == 1 ? " event, " : " events, ",
                               step_events_read_, step_events_read_ == 1 ? " step" : " steps");
  if (malformed_events_ > 0) {
    absl::StrAppend(
        &s, ", ", malformed_events_,
        malformed_events_ == 1 ? " malformed event skipped" : " malformed events skipped");
    if (!errors_.empty()) absl::StrAppend(&s, " (first: ", errors_.front(), ")");
  } else if (!errors_.empty()) {
    absl::StrAppend(&s, " (", errors_.front(), ")");
  }
  return s;
}

}  // namespace debugplane::rules_engine
