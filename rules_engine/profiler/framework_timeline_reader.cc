#include "rules_engine/profiler/framework_timeline_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/json_brackets.h"
#include "base/message_text.h"
#include "rules_engine/profiler/reader_summary.h"
#include "rules_engine/smdebug/json_scanner.h"

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

// The members of one trace event the reader uses, typed. Views point into
// the element's text or into its ScannedEvent's scratch strings.
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

// An element as scanned: the typed members (RawEvent; of repeated keys the
// last one counts) and which used members had another type. The errors are
// checked in key order (args, its members, dur, name, ph, pid, ts: the
// order of nlohmann's sorted DOM, whose errors these were), so the bits
// follow that order.
enum WrongType : uint32_t {
  kArgsNotObject = 1u << 0,
  kArgsName = 1u << 1,
  kArgsPid = 1u << 2,
  kArgsStart = 1u << 3,
  kArgsStep = 1u << 4,
  kDur = 1u << 5,
  kName = 1u << 6,
  kPh = 1u << 7,
  kPid = 1u << 8,
  kTs = 1u << 9,
};
constexpr uint32_t kArgsBits = kArgsNotObject | kArgsName | kArgsPid | kArgsStart | kArgsStep;
const char* WrongTypeError(uint32_t bit) {
  switch (bit) {
    case kArgsNotObject:
      return "\"args\" is not an object";
    case kArgsName:
      return "args.name is not a string";
    case kArgsPid:
      return "args.pid is not a number";
    case kArgsStart:
      return "args.start_time_since_epoch_in_micros is not a number";
    case kArgsStep:
      return "args.step_num is neither a string nor a number";
    case kDur:
      return "\"dur\" is not a number";
    case kName:
      return "\"name\" is not a string";
    case kPh:
      return "\"ph\" is not a string";
    case kPid:
      return "\"pid\" is not a number";
    default:
      return "\"ts\" is not a number";
  }
}

struct ScannedEvent {
  JsonKind kind = JsonKind::kInvalid;  // Of the element itself.
  RawEvent event;
  uint32_t wrong = 0;  // WrongType bits.
  // Decoded strings with escapes, for name, ph, args.name, args.step_num.
  std::string scratch[4];

  // As new, keeping the scratch strings' buffers (one ScannedEvent serves
  // every line of a read).
  void Clear() {
    kind = JsonKind::kInvalid;
    event = RawEvent();
    wrong = 0;
  }
};

// A member that must be a string: sets *out and *has, or `bit` in *wrong.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool ScanText(JsonScanner& s, uint32_t bit,
                                                  absl::string_view* out, bool* has,
                                                  std::string* scratch, uint32_t* wrong) {
  *wrong &= ~bit;
  *has = s.NextKind() == JsonKind::kString;
  if (*has) return s.String(out, scratch);
  *wrong |= bit;
  return s.SkipValue();
}
// A member that must be a number.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool ScanNumber(JsonScanner& s, uint32_t bit, double* out,
                                                    bool* has, uint32_t* wrong) {
  *wrong &= ~bit;
  *has = s.NextKind() == JsonKind::kNumber;
  if (!*has) {
    *wrong |= bit;
    return s.SkipValue();
  }
  JsonNumber n;
  if (!s.Number(&n)) return false;
  *out = n.value;
  return true;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool ScanArgs(JsonScanner& s, ScannedEvent& scanned) {
  RawEvent& e = scanned.event;
  // A repeated "args" replaces the earlier one whole.
  e.has_process_name = e.has_process = e.has_start = false;
  e.step = RawEvent::Step::kNone;
  scanned.wrong &= ~kArgsBits;
  if (s.NextKind() != JsonKind::kObject) {
    scanned.wrong |= kArgsNotObject;
    return s.SkipValue();
  }
  return s.Object([&](absl::string_view key) {
    switch (ClassifyArgsKey(key)) {
      case Key::kName:
        return ScanText(s, kArgsName, &e.process_name, &e.has_process_name, &scanned.scratch[2],
                        &scanned.wrong);
      case Key::kPid:
        return ScanNumber(s, kArgsPid, &e.process, &e.has_process, &scanned.wrong);
      case Key::kStartTime:
        return ScanNumber(s, kArgsStart, &e.start, &e.has_start, &scanned.wrong);
      case Key::kStepNum: {
        scanned.wrong &= ~kArgsStep;
        e.step = RawEvent::Step::kNone;
        const JsonKind kind = s.NextKind();
        if (kind == JsonKind::kString) {
          e.step = RawEvent::Step::kString;
          return s.String(&e.step_text, &scanned.scratch[3]);
        }
        if (kind == JsonKind::kNumber) {
          e.step = RawEvent::Step::kNumber;
          JsonNumber n;
          if (!s.Number(&n)) return false;
          e.step_number = n.value;
          return true;
        }
        scanned.wrong |= kArgsStep;
        return s.SkipValue();
      }
      default:
        return s.SkipValue();
    }
  });
}

// Reads one element (any JSON value; an object's members are kept).
bool ScanEvent(JsonScanner& s, ScannedEvent& scanned) {
  scanned.kind = s.NextKind();
  if (scanned.kind != JsonKind::kObject) return s.SkipValue();
  RawEvent& e = scanned.event;
  uint32_t* wrong = &scanned.wrong;
  return s.Object([&](absl::string_view key) {
    switch (ClassifyTopKey(key)) {
      case Key::kName:
        return ScanText(s, kName, &e.name, &e.has_name, &scanned.scratch[0], wrong);
      case Key::kPh:
        return ScanText(s, kPh, &e.ph, &e.has_ph, &scanned.scratch[1], wrong);
      case Key::kPid:
        return ScanNumber(s, kPid, &e.pid, &e.has_pid, wrong);
      case Key::kTs:
        return ScanNumber(s, kTs, &e.ts, &e.has_ts, wrong);
      case Key::kDur:
        return ScanNumber(s, kDur, &e.dur, &e.has_dur, wrong);
      case Key::kArgs:
        return ScanArgs(s, scanned);
      default:
        return s.SkipValue();
    }
  });
}

// The scanned element's event, or false with `*error` (no object, or a
// member of the wrong type: the first in key order).
bool CheckedEvent(const ScannedEvent& scanned, std::string* error) {
  if (scanned.kind != JsonKind::kObject) {
    *error = absl::StrCat("expected an event object, got ", JsonKindName(scanned.kind));
    return false;
  }
  if (scanned.wrong == 0) return true;
  // A wrong "args" hides its members' bits (they are cleared with it).
  *error = WrongTypeError(scanned.wrong & (~scanned.wrong + 1));
  return false;
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

// Applies a metadata event ("ph": "M"): the timeline's start time, a
// process's name. False with `*error` for a malformed one.
bool ApplyMetadata(const RawEvent& e, ParseState& st, std::string* error) {
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

// The step, track and process numbers of a complete event into `ev`. False
// with `*error` where one is not an integer.
bool ReadEventNumbers(const RawEvent& e, FrameworkEvent& ev, std::string* error) {
  if ((e.has_pid && !Integral(e.pid, &ev.track)) ||
      (e.has_process && !Integral(e.process, &ev.process))) {
    *error = "\"pid\" or args.pid is not an integer";
    return false;
  }
  if (e.step == RawEvent::Step::kString) {
    if (!absl::SimpleAtoi(e.step_text, &ev.step)) {
      *error = absl::StrCat("args.step_num ", base::QuoteForMessage(e.step_text, kMaxExcerptChars),
                            " is not an integer");
      return false;
    }
  } else if (e.step == RawEvent::Step::kNumber && !Integral(e.step_number, &ev.step)) {
    *error = "args.step_num is not an integer";
    return false;
  }
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
  if (e.ph == "M") return ApplyMetadata(e, st, error);
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
  if (!ReadEventNumbers(e, ev, error)) return false;
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
  const bool in_string = base::ForEachJsonBracket(
      s, [&depth](char bracket) { depth += bracket == '{' || bracket == '[' ? 1 : -1; });
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
// `first` holds the first element while it is parsed (any content: it is
// cleared first).
Outcome ParseElements(absl::string_view t, int64_t line, bool may_continue, ParseState& st,
                      ScannedEvent& first, std::vector<FrameworkEvent>& out, ErrorFn on_error) {
  if (t.empty()) return Outcome::kDone;
  if (t.front() != '{') {
    on_error(line, absl::StrCat("expected an event object, got ",
                                base::QuoteForMessage(t, kMaxExcerptChars)));
    return Outcome::kDone;
  }
  // The elements of the text ("{...}" or, on one line, "{...}, {...}"),
  // all read before any is applied: a text that is not JSON applies none.
  JsonScanner s(t);
  first.Clear();
  std::vector<std::unique_ptr<ScannedEvent>> more;  // Rare: no allocation otherwise.
  bool scanned = ScanEvent(s, first);
  while (scanned && s.Consume(',')) {
    more.push_back(std::make_unique<ScannedEvent>());
    scanned = ScanEvent(s, *more.back());
  }
  if (!scanned || !s.AtEnd()) {
    if (may_continue && BraceDelta(t) > 0) return Outcome::kNeedsMore;
    on_error(line, s.DescribeError());
    return Outcome::kDone;
  }
  std::string error;
  auto apply = [&](const ScannedEvent& scanned_event) {
    if (!CheckedEvent(scanned_event, &error) || !Apply(scanned_event.event, st, out, &error)) {
      on_error(line, error);
    }
  };
  apply(first);
  for (const std::unique_ptr<ScannedEvent>& element : more) apply(*element);
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

// The lines of a chunk of a timeline file.
struct TimelineLines {
  absl::string_view data;
  bool final;  // `data` is the rest of the whole file.

  // The end of the line starting at `pos` (npos: not complete yet). Lines
  // end in '\n'; the last one counts without it when `final` or when it
  // closes the array.
  size_t End(size_t pos) const {
    const void* nl = std::memchr(data.data() + pos, '\n', data.size() - pos);
    if (nl != nullptr) return static_cast<const char*>(nl) - data.data();
    if (final || absl::EndsWith(Trim(data.substr(pos)), "]")) return data.size();
    return absl::string_view::npos;
  }
};

// An element that starts on the line [pos, end) (`first`, stripped, is what
// that line holds of it) and does not close there: finds the line that
// closes it and parses the element whole, or reports it unterminated (its
// lines dropped). Returns where reading goes on; npos if the element is
// still open at the end of the lines (more may come).
size_t ConsumeSpreadElement(const TimelineLines& lines, size_t pos, size_t end,
                            absl::string_view first, ParseState& st, ScannedEvent& scanned,
                            std::vector<FrameworkEvent>& out, ErrorFn on_error) {
  const absl::string_view data = lines.data;
  const int64_t line_no = st.lines + 1;
  int depth = BraceDelta(first);
  size_t next = end + 1;
  int64_t count = 1;
  while (next < data.size()) {
    const size_t e = lines.End(next);
    if (e == absl::string_view::npos) break;
    const absl::string_view line = data.substr(next, e - next);
    const bool too_long = e - pos > kMaxElementBytes;
    if (too_long || EndsUnterminated(line, depth)) {
      on_error(line_no, too_long
                            ? "unterminated object (over 1 MiB without its closing brace)"
                            : "unterminated object (the next element starts before it closes)");
      // Its lines are dropped; reading resumes at this line.
      st.array_opened = true;
      st.lines += count;
      return next;
    }
    ++count;
    depth += BraceDelta(line);
    if (depth <= 0) {
      Stripped whole = StripPunctuation(data.substr(pos, e - pos), st.array_opened);
      ParseElements(whole.text, line_no, /*may_continue=*/false, st, scanned, out, on_error);
      st.array_opened = true;
      st.closed |= whole.closes;
      st.lines += count;
      return std::min(e + 1, data.size());
    }
    next = e + 1;
  }
  return absl::string_view::npos;
}

// Parses the lines of `data` (the file's bytes from where the last call
// stopped). Lines end in '\n'; the last one counts without it when `final`
// (the whole file) or when it closes the array. An element still open at
// the end of `data` is left for the next call (`*cut_short` when `final`).
// Returns the bytes consumed; st.lines counts the lines consumed.
size_t Consume(absl::string_view data, bool final, ParseState& st, std::vector<FrameworkEvent>& out,
               ErrorFn on_error, bool* cut_short) {
  const TimelineLines lines{data, final};
  ScannedEvent scanned;  // Reused for every line.
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t end = lines.End(pos);
    if (end == absl::string_view::npos) break;
    const int64_t line_no = st.lines + 1;
    Stripped s = StripPunctuation(data.substr(pos, end - pos), st.array_opened);
    if (ParseElements(s.text, line_no, /*may_continue=*/true, st, scanned, out, on_error) ==
        Outcome::kDone) {
      st.array_opened |= s.opens || !s.text.empty();
      st.closed |= s.closes;
      ++st.lines;
      pos = std::min(end + 1, data.size());
      continue;
    }
    const size_t next = ConsumeSpreadElement(lines, pos, end, s.text, st, scanned, out, on_error);
    if (next == absl::string_view::npos) {
      if (final) *cut_short = true;
      break;
    }
    pos = next;
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
  absl::StatusOr<std::string> data = store.ReadAtMost(key, kFrameworkTimelineFileLimit);
  if (!data.ok()) {
    FrameworkTimelineFileResult result;
    result.errors.emplace_back(data.status().message());
    return result;
  }
  return ParseFrameworkTimeline(*data, store.Describe(key));
}

namespace {
std::vector<objectstore::StoreLocation> TraceRoots(objectstore::StoreLocation profiler_dir,
                                                   std::vector<objectstore::StoreLocation> more) {
  more.insert(more.begin(), std::move(profiler_dir));
  return more;
}
}  // namespace

FrameworkTimelineReader::FrameworkTimelineReader(
    objectstore::StoreLocation profiler_dir, std::vector<objectstore::StoreLocation> more_trace_roots)
    : pevents_(profiler_dir.Below("framework/pevents")),
      pevents_dir_(pevents_.Describe()),
      traces_(TraceRoots(profiler_dir, std::move(more_trace_roots))) {}

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
  std::optional<std::vector<HourFile>> files = listing_.List(
      pevents_, "framework/pevents",
      [](absl::string_view name) { return absl::EndsWith(name, "timeline.json"); },
      [this](std::string error) { AddError(std::move(error)); });
  if (files.has_value()) {
    for (const HourFile& file : *files) {
      auto [it, inserted] = files_.try_emplace(file.relative);
      if (inserted) it->second.parse.node_id = TimelineFileNodeId(file.name);
      ReadFile(file, it->second, out);
    }
    events_read_ += static_cast<int64_t>(out.size());
    for (const FrameworkEvent& e : out) {
      if (absl::StartsWith(e.name, "Step:ModeKeys.")) ++step_events_read_;
    }
  }
  std::vector<FrameworkEvent> traced = traces_.ReadNew();
  out.insert(out.end(), std::make_move_iterator(traced.begin()),
             std::make_move_iterator(traced.end()));
  for (; trace_errors_taken_ < traces_.errors().size(); ++trace_errors_taken_) {
    AddError(traces_.errors()[trace_errors_taken_]);
  }
  return out;
}

void FrameworkTimelineReader::Restart(const HourFile& file, FileState& state) {
  const bool fetched = state.fetched;
  state = FileState();
  state.fetched = fetched;
  state.parse.node_id = TimelineFileNodeId(file.name);
  ++files_restarted_;
}

bool FrameworkTimelineReader::ReadChunk(const HourFile& file, const std::string& shown,
                                        FileState& state, absl::string_view* data,
                                        bool* restarted) {
  const uint64_t check = state.tail.size();
  const absl::Status read = pevents_.store->ReadRangeInto(
      file.key, state.offset - check, kFrameworkTimelineChunkBytes + check, &buffer_);
  if (!read.ok()) {
    AddError(absl::StrCat(shown, ": ", read.message()));
    return false;
  }
  read_.Add(buffer_.size(), !buffer_.empty() && !std::exchange(state.fetched, true));
  if (absl::string_view(buffer_).substr(0, check) != state.tail) {
    // Not the bytes consumed there: another file under the same name.
    Restart(file, state);
    *restarted = true;
    return false;
  }
  *data = absl::string_view(buffer_).substr(check);
  return true;
}

void FrameworkTimelineReader::ReadFile(const HourFile& file, FileState& state,
                                       std::vector<FrameworkEvent>& out) {
  if (file.size < state.offset) Restart(file, state);  // Truncated.
  // Nothing new (the size from the listing saves a read).
  if (state.over_limit || file.size <= state.offset) return;
  // File names are data too: escaped in messages.
  const std::string shown =
      absl::StrCat("framework/pevents/", base::EscapeForMessage(file.relative, 256));
  // Chunk by chunk from where the last call stopped, up to the size listed.
  while (true) {
    absl::string_view data;
    bool restarted = false;
    if (!ReadChunk(file, shown, state, &data, &restarted)) {
      if (restarted) continue;  // From the start now (the tail is empty: once).
      break;
    }
    if (data.empty()) break;
    const size_t fetched = data.size();
    // A full chunk is parsed up to its last line end: more of the file
    // follows, so a cut line must not pass for a last one ("...]").
    const bool full_chunk = fetched == kFrameworkTimelineChunkBytes;
    if (full_chunk) data = data.substr(0, data.rfind('\n') + 1);  // npos + 1: none.
    // About 120 bytes per line, half of them complete events; grow
    // geometrically (an exact reserve per chunk would copy earlier events).
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
    state.tail.append(data.data(), consumed);
    if (state.tail.size() > kTailCheckBytes) state.tail.erase(0, state.tail.size() - kTailCheckBytes);
    if (consumed == 0 && fetched > kFrameworkTimelineLineLimit.max_bytes) {
      // Nothing ends within the limit: it never will.
      state.over_limit = true;
      const absl::Status over = objectstore::OverReadLimitError(
          absl::StrCat(pevents_.store->Describe(file.key), " line ", state.parse.lines + 1), 0,
          kFrameworkTimelineLineLimit);
      AddError(absl::StrCat(over.message(), "; the rest of the file is not read"));
      if (limit_error_.ok()) limit_error_ = over;
      break;
    }
    // The end as it is now, or as far as it was listed (a file growing
    // while it is read is read on by the next call).
    if (!full_chunk || consumed == 0 || state.offset >= file.size) break;
  }
  if (state.parse.start_us >= 0 &&
      (earliest_start_us_ < 0 || state.parse.start_us < earliest_start_us_)) {
    earliest_start_us_ = state.parse.start_us;
  }
}

std::string FrameworkTimelineReader::Summary() const {
  const std::string traces = traces_.Summary();
  if (!listing_.directory_exists()) {
    if (!traces.empty()) return traces;
    return absl::StrCat("no framework timeline yet: ", pevents_dir_, " does not exist");
  }
  if (!listing_.error().empty()) {
    return absl::StrCat("framework timelines cannot be read: ", listing_.error(),
                        traces.empty() ? "" : "; ", traces);
  }
  std::string s = absl::StrCat(files_.size(), files_.size() == 1 ? " file, " : " files, ",
                               events_read_, events_read_ == 1 ? " event, " : " events, ",
                               step_events_read_, step_events_read_ == 1 ? " step" : " steps");
  AppendSkippedAndFirstError(s, malformed_events_, "event", errors_);
  if (!traces.empty()) absl::StrAppend(&s, "; ", traces);
  return s;
}

}  // namespace debugplane::rules_engine
