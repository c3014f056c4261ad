#include "rules_engine/smdebug/smdebug_json.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "nlohmann/json.hpp"
#include "base/message_text.h"
#include "rules_engine/smdebug/json_scanner.h"

namespace debugplane::rules_engine {
namespace {

using nlohmann::json;

// A file name in messages: escaped (names are data too), built only for an
// error.
std::string ShownFile(absl::string_view file) { return base::EscapeForMessage(file, 256); }

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

// Non-negative integer (index offsets); JSON doubles with integral values
// are accepted since Python may write 12.0.
bool GetUintMember(const json* v, uint64_t* out) {
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

// GetUintMember's rule for a number JsonScanner read: an integer literal
// that is non-negative ("-0" included: nlohmann reads it as the integer 0),
// at most 2^64 - 1.
bool GetUint(const JsonNumber& n, uint64_t* out) {
  if (!n.integer || !n.fits || (n.negative && n.magnitude != 0)) return false;
  *out = n.magnitude;
  return true;
}

absl::Status DataLoss(absl::string_view file, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(ShownFile(file), ": ", what));
}

// Reads `text` as one JSON object, `on_member(scanner, key)` consuming each
// member's value (it must read any JSON value: the scan is also the
// validation). DATA_LOSS naming `file` when the text is not a JSON object.
template <typename OnMember>
absl::Status ScanObject(absl::string_view text, absl::string_view file, OnMember on_member) {
  JsonScanner s(text);
  const JsonKind kind = s.NextKind();
  if (kind != JsonKind::kObject) {
    if (s.SkipValue() && s.AtEnd()) {
      return DataLoss(file, absl::StrCat("not a JSON object (a JSON ", JsonKindName(kind), ")"));
    }
    return DataLoss(file, absl::StrCat("not a JSON object: ", s.DescribeError()));
  }
  if (!s.Object([&](absl::string_view key) { return on_member(s, key); }) || !s.AtEnd()) {
    return DataLoss(file, absl::StrCat("not a JSON object: ", s.DescribeError()));
  }
  return absl::OkStatus();
}

// A member whose value counts only as a string: *out is set when it is one
// (else cleared); any other value is read and ignored.
bool StringOrSkip(JsonScanner& s, std::string* out) {
  out->clear();
  if (s.NextKind() != JsonKind::kString) return s.SkipValue();
  absl::string_view view;
  std::string scratch;
  if (!s.String(&view, &scratch)) return false;
  out->assign(view.data(), view.size());
  return true;
}

// A list of strings: the strings of an array (other elements ignored);
// empty for any other value.
bool StringListOrSkip(JsonScanner& s, std::vector<std::string>* out) {
  out->clear();
  if (s.NextKind() != JsonKind::kArray) return s.SkipValue();
  return s.Array([&] {
    if (s.NextKind() != JsonKind::kString) return s.SkipValue();
    std::string item;
    if (!StringOrSkip(s, &item)) return false;
    out->push_back(std::move(item));
    return true;
  });
}

// A number member GetUint accepts: *ok says whether it was one.
bool UintOrSkip(JsonScanner& s, uint64_t* out, bool* ok) {
  *ok = false;
  if (s.NextKind() != JsonKind::kNumber) return s.SkipValue();
  JsonNumber n;
  if (!s.Number(&n)) return false;
  *ok = GetUint(n, out);
  return true;
}

// index/ meta: the members the reader uses, each of the expected type or
// absent. Repeated keys: the last one counts (as in nlohmann's DOM).
bool ScanMeta(JsonScanner& s, StepIndex* index) {
  index->mode.reset();
  index->mode_step.reset();
  index->event_file_name.clear();
  if (s.NextKind() != JsonKind::kObject) return s.SkipValue();
  return s.Object([&](absl::string_view key) {
    if (key == "mode") {
      index->mode.reset();
      if (s.NextKind() != JsonKind::kString) return s.SkipValue();
      absl::string_view mode;
      std::string scratch;
      if (!s.String(&mode, &scratch)) return false;
      index->mode = ParseModeName(mode);
      return true;
    }
    if (key == "mode_step") {
      index->mode_step.reset();
      if (s.NextKind() != JsonKind::kNumber) return s.SkipValue();
      JsonNumber n;
      if (!s.Number(&n)) return false;
      // nlohmann's integers: int64 when negative, uint64 otherwise (read
      // back as int64 the way its get<int64_t>() casts).
      int64_t step = 0;
      if (n.negative ? n.ToInt64(&step) : (n.integer && n.fits)) {
        index->mode_step = n.negative ? step : static_cast<int64_t>(n.magnitude);
      }
      return true;
    }
    if (key == "event_file_name") return StringOrSkip(s, &index->event_file_name);
    return s.SkipValue();
  });
}

// index/ tensor_payload as read: whether it is an array, the index of its
// first element without tensorname, start_idx or length (an element that is
// no object has none), and the entries before that one.
struct Payload {
  bool is_array = false;
  std::optional<size_t> first_bad;
  std::vector<IndexEntry> entries;
};
bool ScanPayload(JsonScanner& s, Payload* payload) {
  *payload = Payload();
  if (s.NextKind() != JsonKind::kArray) return s.SkipValue();
  payload->is_array = true;
  size_t i = 0;
  return s.Array([&] {
    IndexEntry entry;
    bool has_name = false, has_start = false, has_length = false;
    const bool read =
        s.NextKind() != JsonKind::kObject ? s.SkipValue() : s.Object([&](absl::string_view key) {
          if (key == "tensorname") {
            has_name = s.NextKind() == JsonKind::kString;
            return StringOrSkip(s, &entry.tensor_name);
          }
          if (key == "start_idx") return UintOrSkip(s, &entry.start_idx, &has_start);
          if (key == "length") return UintOrSkip(s, &entry.length, &has_length);
          return s.SkipValue();
        });
    if (!read) return false;
    if (!(has_name && has_start && has_length) && !payload->first_bad) payload->first_bad = i;
    if (!payload->first_bad) payload->entries.push_back(std::move(entry));
    ++i;
    return true;
  });
}

}  // namespace

std::optional<Mode> ParseModeName(absl::string_view name) {
  if (name == "TRAIN") return Mode::kTrain;
  if (name == "EVAL") return Mode::kEval;
  if (name == "PREDICT") return Mode::kPredict;
  if (name == "GLOBAL") return Mode::kGlobal;
  return std::nullopt;
}

absl::StatusOr<StepIndex> ParseIndexJson(absl::string_view text, absl::string_view file) {
  StepIndex index;
  Payload payload;
  absl::Status scanned = ScanObject(text, file, [&](JsonScanner& s, absl::string_view key) {
    if (key == "meta") return ScanMeta(s, &index);
    if (key == "tensor_payload") return ScanPayload(s, &payload);
    return s.SkipValue();
  });
  if (!scanned.ok()) return scanned;
  if (!payload.is_array) return DataLoss(file, "no tensor_payload list");
  if (payload.first_bad) {
    return DataLoss(file, absl::StrCat("tensor_payload[", *payload.first_bad,
                                       "] lacks tensorname/start_idx/length"));
  }
  index.tensors = std::move(payload.entries);
  return index;
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
        !GetUintMember(Member(e, "start_idx"), &entry.start_idx) ||
        !GetUintMember(Member(e, "length"), &entry.length)) {
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
  CollectionsFile out;
  bool has_collections = false;
  absl::Status scanned = ScanObject(text, file, [&](JsonScanner& s, absl::string_view key) {
    if (key == "collections") {
      out.collections.clear();
      has_collections = s.NextKind() == JsonKind::kObject;
      if (!has_collections) return s.SkipValue();
      return s.Object([&](absl::string_view collection_key) {
        Collection c;
        c.name = std::string(collection_key);
        const bool read = s.NextKind() != JsonKind::kObject
                              ? s.SkipValue()
                              : s.Object([&](absl::string_view member) {
                                  if (member == "name") {
                                    if (s.NextKind() != JsonKind::kString) {
                                      c.name = std::string(collection_key);
                                      return s.SkipValue();
                                    }
                                    return StringOrSkip(s, &c.name);
                                  }
                                  if (member == "include_regex") {
                                    return StringListOrSkip(s, &c.include_regex);
                                  }
                                  if (member == "tensor_names") {
                                    return StringListOrSkip(s, &c.tensor_names);
                                  }
                                  return s.SkipValue();
                                });
        out.collections[std::string(collection_key)] = std::move(c);
        return read;
      });
    }
    if (key == "_meta") {
      out.num_workers = 1;
      if (s.NextKind() != JsonKind::kObject) return s.SkipValue();
      return s.Object([&](absl::string_view member) {
        if (member != "num_workers") return s.SkipValue();
        uint64_t n = 0;
        bool ok = false;
        if (!UintOrSkip(s, &n, &ok)) return false;
        out.num_workers = ok && n >= 1 ? static_cast<int>(std::min<uint64_t>(n, 1 << 20)) : 1;
        return true;
      });
    }
    return s.SkipValue();
  });
  if (!scanned.ok()) return scanned;
  if (!has_collections) return DataLoss(file, "no collections object");
  return out;
}

std::string DescribeJsonError(absl::string_view text) {
  JsonScanner s(text);
  if (s.SkipValue() && s.AtEnd()) return "not JSON";
  return s.DescribeError();
}

}  // namespace debugplane::rules_engine
