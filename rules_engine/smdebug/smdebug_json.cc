#include "rules_engine/smdebug/smdebug_json.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "nlohmann/json.hpp"
#include "objectstore/message_text.h"

namespace debugplane::rules_engine {
namespace {

using nlohmann::json;

// A file name in messages: escaped (names are data too), built only for an
// error.
std::string ShownFile(absl::string_view file) { return objectstore::EscapeForMessage(file, 256); }

// Parses without exceptions: untrusted input must not throw through callers.
absl::StatusOr<json> ParseObject(absl::string_view text, absl::string_view file) {
  json j = json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::DataLossError(
        absl::StrCat(ShownFile(file), ": not a JSON object: ", DescribeJsonError(text)));
  }
  if (!j.is_object()) {
    return absl::DataLossError(absl::StrCat(ShownFile(file), ": not a JSON object (a JSON ",
                                            std::string(j.type_name()), ")"));
  }
  return j;
}

const json* Member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::vector<std::string> StringList(const json* v) {
  std::vector<std::string> out;
  if (v == nullptr || !v->is_array()) return out;
  for (const json& e : *v) {
    if (e.is_string()) out.push_back(e.get<std::string>());
  }
  return out;
}

// Non-negative integer (index offsets); JSON doubles with integral values
// are accepted since Python may write 12.0.
bool GetUint(const json* v, uint64_t* out) {
  if (v == nullptr) return false;
  if (v->is_number_unsigned()) {
    *out = v->get<uint64_t>();
    return true;
  }
  if (v->is_number_integer()) {
    const int64_t i = v->get<int64_t>();
    if (i < 0) return false;
    *out = static_cast<uint64_t>(i);
    return true;
  }
  return false;
}

// --- Fast path for index files ----------------------------------------------------
// Building nlohmann's DOM (a std::map per object, a string per key) was a
// sixth of rule evaluation: every step has an index file per worker. The
// scanner below reads the plain JSON smdebug writes in place and gives up
// (nullopt: the caller then parses with nlohmann, which stays the reference)
// on anything else: escapes, non-ASCII bytes, numbers that are not plain
// non-negative integers, a key that matters appearing twice, deep nesting,
// and every malformed or error case. So the outcome is always nlohmann's.
class IndexScanner {
 public:
  explicit IndexScanner(absl::string_view text)
      : p_(text.data()), end_(text.data() + text.size()) {}

  std::optional<StepIndex> Scan() {
    StepIndex index;
    bool have_meta = false, have_payload = false;
    const bool ok = Object([&](absl::string_view key) {
      if (key == "meta") {
        if (!First(have_meta)) return false;
        return Peek() == '{' ? Meta(&index) : SkipValue(0);
      }
      if (key == "tensor_payload") {
        if (!First(have_payload)) return false;
        return Payload(&index);
      }
      return SkipValue(0);
    });
    SkipWs();
    if (!ok || p_ != end_ || !have_payload) return std::nullopt;
    return index;
  }

 private:
  static constexpr int kMaxDepth = 32;

  void SkipWs() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  char Peek() {
    SkipWs();
    return p_ == end_ ? '\0' : *p_;
  }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++p_;
    return true;
  }
  // A string of printable ASCII without escapes.
  bool String(absl::string_view* out) {
    if (!Consume('"')) return false;
    const char* start = p_;
    while (p_ != end_ && *p_ != '"') {
      const unsigned char c = static_cast<unsigned char>(*p_);
      if (c < 0x20 || c >= 0x80 || c == '\\') return false;
      ++p_;
    }
    if (p_ == end_) return false;
    *out = absl::string_view(start, p_ - start);
    ++p_;
    return true;
  }
  // A non-negative integer without fraction or exponent, at most INT64_MAX.
  bool Uint(uint64_t* out) {
    SkipWs();
    const char* start = p_;
    uint64_t v = 0;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
      if (v > (uint64_t{1} << 63) / 10) return false;
      v = v * 10 + static_cast<uint64_t>(*p_ - '0');
      ++p_;
    }
    const size_t digits = p_ - start;
    if (digits == 0 || (digits > 1 && *start == '0') ||
        v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    if (p_ != end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) return false;
    *out = v;
    return true;
  }
  bool Literal(absl::string_view word) {
    SkipWs();
    if (static_cast<size_t>(end_ - p_) < word.size() ||
        absl::string_view(p_, word.size()) != word) {
      return false;
    }
    p_ += word.size();
    return true;
  }
  // {"key": value, ...}: `member(key)` consumes each value.
  template <typename Member>
  bool Object(Member member) {
    if (!Consume('{')) return false;
    if (Consume('}')) return true;
    do {
      absl::string_view key;
      if (!String(&key) || !Consume(':') || !member(key)) return false;
    } while (Consume(','));
    return Consume('}');
  }
  // Marks a member that matters as read; false if it already was (nlohmann
  // keeps the last of repeated keys: that case is left to it).
  static bool First(bool& seen) {
    if (seen) return false;
    seen = true;
    return true;
  }
  // A member that counts only as a string: *out is set when it is one, any
  // other value is skipped (meta's members are ignored when of another type).
  bool StringOrSkip(absl::optional<absl::string_view>* out) {
    if (Peek() != '"') return SkipValue(1);
    absl::string_view s;
    if (!String(&s)) return false;
    *out = s;
    return true;
  }
  bool SkipValue(int depth) {
    if (depth > kMaxDepth) return false;
    absl::string_view s;
    uint64_t n;
    switch (Peek()) {
      case '{':
        return Object([this, depth](absl::string_view) { return SkipValue(depth + 1); });
      case '[':
        ++p_;
        if (Consume(']')) return true;
        do {
          if (!SkipValue(depth + 1)) return false;
        } while (Consume(','));
        return Consume(']');
      case '"':
        return String(&s);
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return Uint(&n);
    }
  }
  bool Meta(StepIndex* index) {
    bool have_mode = false, have_mode_step = false, have_file = false;
    return Object([&](absl::string_view key) {
      absl::optional<absl::string_view> s;
      uint64_t n;
      if (key == "mode") {
        if (!First(have_mode) || !StringOrSkip(&s)) return false;
        if (s) index->mode = ParseModeName(*s);
        return true;
      }
      if (key == "mode_step") {
        if (!First(have_mode_step)) return false;
        const char c = Peek();
        if (c < '0' || c > '9') return c != '-' && SkipValue(1);
        if (!Uint(&n)) return false;
        index->mode_step = static_cast<int64_t>(n);
        return true;
      }
      if (key == "event_file_name") {
        if (!First(have_file) || !StringOrSkip(&s)) return false;
        if (s) index->event_file_name = std::string(*s);
        return true;
      }
      return SkipValue(1);
    });
  }
  bool Payload(StepIndex* index) {
    if (!Consume('[')) return false;
    if (Consume(']')) return true;
    do {
      IndexEntry entry;
      absl::string_view name;
      bool have_name = false, have_start = false, have_length = false;
      const bool ok = Object([&](absl::string_view key) {
        if (key == "tensorname") {
          if (!First(have_name)) return false;
          return String(&name);
        }
        if (key == "start_idx") {
          if (!First(have_start)) return false;
          return Uint(&entry.start_idx);
        }
        if (key == "length") {
          if (!First(have_length)) return false;
          return Uint(&entry.length);
        }
        return SkipValue(2);
      });
      if (!ok || !have_name || !have_start || !have_length) return false;
      entry.tensor_name = std::string(name);
      index->tensors.push_back(std::move(entry));
    } while (Consume(','));
    return Consume(']');
  }

  const char* p_;
  const char* end_;
};

}  // namespace

std::optional<Mode> ParseModeName(absl::string_view name) {
  if (name == "TRAIN") return Mode::kTrain;
  if (name == "EVAL") return Mode::kEval;
  if (name == "PREDICT") return Mode::kPredict;
  if (name == "GLOBAL") return Mode::kGlobal;
  return std::nullopt;
}

absl::StatusOr<StepIndex> ParseIndexJson(absl::string_view text, absl::string_view file) {
  if (std::optional<StepIndex> fast = IndexScanner(text).Scan()) return *std::move(fast);
  return ParseIndexJsonWithNlohmann(text, file);
}

absl::StatusOr<StepIndex> ParseIndexJsonWithNlohmann(absl::string_view text,
                                                     absl::string_view file) {
  absl::StatusOr<json> j = ParseObject(text, file);
  if (!j.ok()) return j.status();
  StepIndex index;
  if (const json* meta = Member(*j, "meta"); meta != nullptr && meta->is_object()) {
    if (const json* mode = Member(*meta, "mode"); mode != nullptr && mode->is_string()) {
      index.mode = ParseModeName(mode->get<std::string>());
    }
    if (const json* ms = Member(*meta, "mode_step"); ms != nullptr && ms->is_number_integer()) {
      index.mode_step = ms->get<int64_t>();
    }
    if (const json* ef = Member(*meta, "event_file_name"); ef != nullptr && ef->is_string()) {
      index.event_file_name = ef->get<std::string>();
    }
  }
  const json* payload = Member(*j, "tensor_payload");
  if (payload == nullptr || !payload->is_array()) {
    return absl::DataLossError(absl::StrCat(ShownFile(file), ": no tensor_payload list"));
  }
  for (size_t i = 0; i < payload->size(); ++i) {
    const json& e = (*payload)[i];
    const json* name = Member(e, "tensorname");
    IndexEntry entry;
    if (name == nullptr || !name->is_string() ||
        !GetUint(Member(e, "start_idx"), &entry.start_idx) ||
        !GetUint(Member(e, "length"), &entry.length)) {
      return absl::DataLossError(absl::StrCat(ShownFile(file), ": tensor_payload[", i,
                                              "] lacks tensorname/start_idx/length"));
    }
    entry.tensor_name = name->get<std::string>();
    index.tensors.push_back(std::move(entry));
  }
  return index;
}

absl::StatusOr<CollectionsFile> ParseCollectionsJson(absl::string_view text,
                                                     absl::string_view file) {
  absl::StatusOr<json> j = ParseObject(text, file);
  if (!j.ok()) return j.status();
  CollectionsFile out;
  const json* collections = Member(*j, "collections");
  if (collections == nullptr || !collections->is_object()) {
    return absl::DataLossError(absl::StrCat(ShownFile(file), ": no collections object"));
  }
  for (const auto& [key, value] : collections->items()) {
    Collection c;
    c.name = key;
    if (const json* n = Member(value, "name"); n != nullptr && n->is_string()) {
      c.name = n->get<std::string>();
    }
    c.include_regex = StringList(Member(value, "include_regex"));
    c.tensor_names = StringList(Member(value, "tensor_names"));
    out.collections[key] = std::move(c);
  }
  if (const json* meta = Member(*j, "_meta")) {
    uint64_t n = 0;
    if (GetUint(Member(*meta, "num_workers"), &n) && n >= 1) {
      out.num_workers = static_cast<int>(std::min<uint64_t>(n, 1 << 20));
    }
  }
  return out;
}

std::string DescribeJsonError(absl::string_view text) {
  try {
    json again = json::parse(text.begin(), text.end());
    (void)again;
    return "not JSON";
  } catch (const json::parse_error& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 1,
    // column 5: <reason>[; last read: '<the text read>'][; expected ...]".
    const absl::string_view what = e.what();
    const size_t colon = what.find(": ");
    absl::string_view reason = colon == absl::string_view::npos ? "" : what.substr(colon + 2);
    if (const size_t quoted = reason.find("; last read: '"); quoted != absl::string_view::npos) {
      reason = reason.substr(0, quoted);
    }
    const size_t at = std::min<size_t>(e.byte, text.size());
    const size_t from = at > kMaxExcerptChars ? at - kMaxExcerptChars : 0;
    std::string out = absl::StrCat("JSON parse error at byte ", e.byte);
    if (!reason.empty()) absl::StrAppend(&out, " (", reason, ")");
    if (at > 0) {
      absl::StrAppend(&out, " after ",
                      objectstore::QuoteForMessage(text.substr(from, at - from), kMaxExcerptChars));
    }
    return out;
  } catch (const json::exception&) {
    return "not JSON";
  }
}

}  // namespace debugplane::rules_engine
