#include "rules_engine/smdebug_json.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace debugplane::rules_engine {
namespace {

using nlohmann::json;

// Parses without exceptions: untrusted input must not throw through callers.
absl::StatusOr<json> ParseObject(absl::string_view text, absl::string_view file) {
  json j = json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat(file, ": not a JSON object"));
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

}  // namespace

std::optional<Mode> ParseModeName(absl::string_view name) {
  if (name == "TRAIN") return Mode::kTrain;
  if (name == "EVAL") return Mode::kEval;
  if (name == "PREDICT") return Mode::kPredict;
  if (name == "GLOBAL") return Mode::kGlobal;
  return std::nullopt;
}

absl::StatusOr<StepIndex> ParseIndexJson(absl::string_view text, absl::string_view file) {
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
    return absl::DataLossError(absl::StrCat(file, ": no tensor_payload list"));
  }
  for (size_t i = 0; i < payload->size(); ++i) {
    const json& e = (*payload)[i];
    const json* name = Member(e, "tensorname");
    IndexEntry entry;
    if (name == nullptr || !name->is_string() ||
        !GetUint(Member(e, "start_idx"), &entry.start_idx) ||
        !GetUint(Member(e, "length"), &entry.length)) {
      return absl::DataLossError(
          absl::StrCat(file, ": tensor_payload[", i, "] lacks tensorname/start_idx/length"));
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
    return absl::DataLossError(absl::StrCat(file, ": no collections object"));
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

}  // namespace debugplane::rules_engine
