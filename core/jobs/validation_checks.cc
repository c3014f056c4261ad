#include "core/jobs/validation_checks.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/jobs/output_path.h"
#include "core/jobs/validation_text.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "re2/re2.h"

namespace debugplane::core::validation_internal {

void Violations::Add(std::string field, std::string description) {
  const size_t size = field.size() + description.size();
  const bool fits = listed_count_ < kMaxListedViolations &&
                    (listed_count_ == 0 || listed_bytes_ + size <= kMaxListedBytes);
  if (fits && unlisted_ == 0) {
    ++listed_count_;
    listed_bytes_ += size;
    listed_.Add(std::move(field), std::move(description));
    return;
  }
  if (unlisted_++ == 0) first_unlisted_field_ = std::move(field);
}

absl::Status Violations::ToStatus() const {
  if (unlisted_ == 0) return listed_.ToStatus();
  FieldViolations all = listed_;
  all.Add(first_unlisted_field_,
          absl::StrCat("and ", unlisted_, " more problem", unlisted_ == 1 ? "" : "s",
                       " in this and later fields, not listed to keep the error small"));
  return all.ToStatus();
}

namespace {

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || absl::ascii_isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// Compiled once; RE2 is safe to use from many threads.
const RE2& Pattern(absl::string_view which) {
  static const auto* const kPatterns = [] {
    auto* patterns = new absl::flat_hash_map<std::string, const RE2*>;
    const std::pair<const char*, const char*> sources[] = {
        {"TrainingJobName", R"([a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})"},
        {"RoleArn", R"(arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+)"},
        {"EnvironmentKey", R"([a-zA-Z_][a-zA-Z0-9_]*)"},
        {"Tag", R"([\p{L}\p{Z}\p{N}_.:/=+\-@]*)"},
        {"ChannelName", R"([A-Za-z0-9\.\-_]+)"},
        {"InstanceType", R"(ml\.[a-z0-9][a-z0-9-]*\.[a-z0-9][a-z0-9-]*)"},
        {"KmsKeyId", R"([a-zA-Z0-9:/_-]*)"},
        {"NameContains", R"([a-zA-Z0-9\-]+)"},
        {"FileSystemId", R"(fs-[0-9a-f]{8,})"},
        {"VpcId", R"([-0-9a-zA-Z]+)"},
        {"ExperimentEntityName", R"([a-zA-Z0-9](-*[a-zA-Z0-9]){0,119})"},
    };
    for (const auto& [name, source] : sources) {
      auto* re = new RE2(source);
      if (!re->ok()) std::abort();  // A typo above; caught by every test run.
      patterns->emplace(name, re);
    }
    return patterns;
  }();
  return *kPatterns->at(which);
}

// The first character of `value` that no name may hold: C0 controls and
// DEL (NUL is reported by CheckNoNulAnywhere), and the line terminators
// U+0085, U+2028 and U+2029. SageMaker's pattern for such names is `.*`,
// which matches no line terminator; names go into HTTP and mail headers
// (a rule action's Idempotency-Key and Subject) and into log lines, where a
// line break would forge a header or a log line. Returns the character's
// text, or "" if there is none.
absl::string_view FirstForbiddenNameCharacter(absl::string_view value) {
  for (size_t i = 0; i < value.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if ((c > 0 && c < 0x20) || c == 0x7f) return value.substr(i, 1);
    if (c == 0xc2 && i + 1 < value.size() && static_cast<unsigned char>(value[i + 1]) == 0x85) {
      return value.substr(i, 2);
    }
    if (c == 0xe2 && i + 2 < value.size() && static_cast<unsigned char>(value[i + 1]) == 0x80 &&
        (static_cast<unsigned char>(value[i + 2]) == 0xa8 ||
         static_cast<unsigned char>(value[i + 2]) == 0xa9)) {
      return value.substr(i, 3);
    }
  }
  return {};
}

std::string DataRootsHint(const ValidationOptions& options) {
  if (options.data_roots.empty()) return "local paths are not allowed by this server";
  return absl::StrCat(
      "local paths must be inside one of: ",
      absl::StrJoin(options.data_roots, ", ", [](std::string* out, const std::filesystem::path& p) {
        out->append(p.string());
      }));
}

void CheckNoNulInWire(Violations& v, const google::protobuf::Descriptor& descriptor,
                      absl::string_view wire, const std::string& prefix);

// Reads the length-delimited payload at `in`'s position of `wire` (the
// buffer `in` reads) without copying it. False if it runs past the end.
bool ReadPayload(google::protobuf::io::CodedInputStream& in, absl::string_view wire,
                 absl::string_view& payload) {
  uint32_t length = 0;
  if (!in.ReadVarint32(&length)) return false;
  const size_t at = static_cast<size_t>(in.CurrentPosition());
  if (length > wire.size() - at || !in.Skip(static_cast<int>(length))) return false;
  payload = wire.substr(at, length);
  return true;
}

bool HasNul(absl::string_view bytes) { return bytes.find('\0') != absl::string_view::npos; }

// One map entry's wire form (key = field 1, value = field 2) of the map
// field named `path`.
void CheckNoNulInMapEntry(Violations& v, const google::protobuf::Descriptor& entry,
                          absl::string_view wire, const std::string& path) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()),
                                            static_cast<int>(wire.size()));
  absl::string_view key;
  absl::string_view value;
  while (const uint32_t tag = in.ReadTag()) {
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    if ((number != 1 && number != 2) ||
        WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return;
      continue;
    }
    if (!ReadPayload(in, wire, number == 1 ? key : value)) return;
  }
  if (HasNul(key)) {
    v.Add(absl::StrCat(path, " key ", Quote(key)), "contains a NUL byte");
    return;
  }
  if (!HasNul(value)) return;
  const std::string entry_path = EntryField(path, key);
  const google::protobuf::FieldDescriptor* value_field = entry.FindFieldByNumber(2);
  if (value_field == nullptr) return;
  if (value_field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
    CheckNoNulInWire(v, *value_field->message_type(), value, entry_path);
  } else {
    v.Add(entry_path, "contains a NUL byte");
  }
}

// The fields (recursively) of the message of type `descriptor` whose wire
// form is `wire` and whose strings hold a NUL byte, named as in JSON
// ("DebugRuleConfigurations[0].RuleParameters.regex"). No name, path or
// parameter may: they end up in file names, logs and C APIs that stop at the
// first NUL. The wire form is walked rather than the message by reflection:
// reflection's view of map fields differs between Debian's libprotobuf and
// headers compiled with ThreadSanitizer (a crash in TSan builds). A string
// with a NUL puts a zero byte in its message's wire form, so wire without
// one (every valid request: this runs for each call) is passed over in one
// scan, and only the payloads with a zero byte are walked, in place.
void CheckNoNulInWire(Violations& v, const google::protobuf::Descriptor& descriptor,
                      absl::string_view wire, const std::string& prefix) {
  using google::protobuf::FieldDescriptor;
  using google::protobuf::internal::WireFormatLite;
  if (!HasNul(wire)) return;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()),
                                            static_cast<int>(wire.size()));
  std::map<int, int> seen;  // Field number -> occurrences so far (list indexes).
  while (const uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return;
      continue;
    }
    absl::string_view payload;
    if (!ReadPayload(in, wire, payload)) return;
    const FieldDescriptor* field =
        descriptor.FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
    if (field == nullptr) continue;
    const int index = seen[field->number()]++;
    if (!HasNul(payload)) continue;
    std::string path =
        prefix.empty() ? field->json_name() : absl::StrCat(prefix, ".", field->json_name());
    if (field->is_map()) {
      CheckNoNulInMapEntry(v, *field->message_type(), payload, path);
      continue;
    }
    if (field->is_repeated()) path = Indexed(path, index);
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      v.Add(path, "contains a NUL byte");
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      CheckNoNulInWire(v, *field->message_type(), payload, path);
    }
  }
}

}  // namespace

std::string Excerpt(absl::string_view value) { return EscapeForMessage(value, kMaxQuoted); }

std::string Quote(absl::string_view value) { return QuoteForMessage(value, kMaxQuoted); }

std::string EntryField(absl::string_view map_field, absl::string_view key) {
  if (IsIdentifier(key) && key.size() <= kMaxQuoted) return absl::StrCat(map_field, ".", key);
  return absl::StrCat(map_field, "[\"", Excerpt(key), "\"]");
}

std::string Indexed(absl::string_view list_field, int index) {
  return absl::StrCat(list_field, "[", index, "]");
}

std::string JoinInts(absl::Span<const int64_t> values) { return absl::StrJoin(values, ", "); }

bool Matches(absl::string_view value, absl::string_view pattern_name) {
  return RE2::FullMatch(re2::StringPiece(value.data(), value.size()), Pattern(pattern_name));
}

// Length in [min, max] characters; `required` when min > 0. Returns whether
// the length is fine (pattern checks only make sense then).
bool CheckLength(Violations& v, const std::string& field, absl::string_view value, size_t min,
                 size_t max) {
  const size_t length = CharCount(value);
  if (length < min) {
    if (length == 0) {
      v.Add(field, absl::StrCat("is required (", min, "-", max, " characters)"));
    } else {
      v.Add(field, absl::StrCat(Quote(value), " is ", length, " characters long; ", min, "-", max,
                                " are allowed"));
    }
    return false;
  }
  if (length > max) {
    v.Add(field, absl::StrCat("is ", length, " characters long; at most ", max, " are allowed"));
    return false;
  }
  return true;
}

// Length, then (if the length is fine and the value non-empty) the pattern.
void CheckString(Violations& v, const std::string& field, absl::string_view value, size_t min,
                 size_t max, absl::string_view pattern_name, absl::string_view pattern_text) {
  if (!CheckLength(v, field, value, min, max) || value.empty()) return;
  if (!Matches(value, pattern_name)) {
    v.Add(field, absl::StrCat(Quote(value), " must match ", pattern_text));
  }
}

void CheckRange(Violations& v, const std::string& field, int64_t value, int64_t min, int64_t max,
                absl::string_view unit) {
  if (value < min || value > max) {
    v.Add(field, absl::StrCat(value, " is out of range; use ", min, "-", max, unit));
  }
}

void CheckEnum(Violations& v, const std::string& field, absl::string_view value,
               std::initializer_list<absl::string_view> allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
  v.Add(field, absl::StrCat(value.empty() ? "is required" : Quote(value) + " is not allowed",
                            "; use one of ", absl::StrJoin(allowed, ", ")));
}

void CheckNoNul(Violations& v, const std::string& field, absl::string_view value) {
  if (value.find('\0') != absl::string_view::npos) {
    v.Add(field, "contains a NUL byte; paths must not");
  }
}

// A name (of a rule, a collection, a metric): see FirstForbiddenNameCharacter.
void CheckNameCharacters(Violations& v, const std::string& field, absl::string_view value) {
  const absl::string_view forbidden = FirstForbiddenNameCharacter(value);
  if (forbidden.empty()) return;
  v.Add(field,
        absl::StrCat(Quote(value), " contains the control character ", QuoteForMessage(forbidden),
                     "; names may not contain control characters or line breaks"));
}

// A path on the training or rule host (DirectoryPath): recorded, not used
// here, but it ends up in files and command lines, and the agent writes
// there: absolute (as SageMaker's /opt/ml/... defaults are), without "..".
void CheckDirectoryPath(Violations& v, const std::string& field, absl::string_view value) {
  if (!CheckLength(v, field, value, 0, 4096) || value.empty()) return;
  CheckNoNul(v, field, value);
  if (value.front() != '/') {
    v.Add(field, absl::StrCat(Quote(value), " is not an absolute path; use e.g. /opt/ml/output"));
  } else if (absl::StrContains(absl::StrCat(value, "/"), "/../")) {
    v.Add(field, absl::StrCat(Quote(value), " contains '..'; give the directory itself"));
  }
}

// A list's size; `what` names its members ("rules").
void CheckListSize(Violations& v, const std::string& field, int size, int max,
                   absl::string_view what) {
  if (size > max) {
    v.Add(field, absl::StrCat("has ", size, " ", what, "; at most ", max, " are allowed"));
  }
}

// Entry count and each key and value. Entries are checked in key order so
// that messages do not depend on hash order. Returns whether every value is
// within limits.value_max: values that are not must not be parsed further.
bool CheckMap(Violations& v, const std::string& field, const StringMap& map,
              const MapLimits& limits) {
  bool values_fit = true;
  if (static_cast<int64_t>(map.size()) > limits.max_entries) {
    v.Add(field, absl::StrCat("has ", map.size(), " entries; at most ", limits.max_entries,
                              " are allowed"));
  }
  std::vector<const StringMap::value_type*> entries;
  entries.reserve(map.size());
  for (const auto& entry : map) entries.push_back(&entry);
  std::sort(entries.begin(), entries.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  for (const auto* entry : entries) {
    const std::string& key = entry->first;
    const std::string& value = entry->second;
    const size_t key_length = CharCount(key);
    const std::string entry_field = EntryField(field, key);
    if (key_length < limits.key_min) {
      v.Add(entry_field, absl::StrCat("has an empty key; keys must be ", limits.key_min, "-",
                                      limits.key_max, " characters"));
    } else if (key_length > limits.key_max) {
      v.Add(entry_field, absl::StrCat("has a key of ", key_length, " characters; at most ",
                                      limits.key_max, " are allowed"));
    } else if (!limits.key_pattern_name.empty() && !Matches(key, limits.key_pattern_name)) {
      v.Add(entry_field, absl::StrCat("key ", Quote(key), " must match ", limits.key_pattern_text));
    }
    const size_t value_length = CharCount(value);
    if (value_length > limits.value_max) {
      values_fit = false;
      v.Add(entry_field, absl::StrCat("has a value of ", value_length, " characters; at most ",
                                      limits.value_max, " are allowed"));
    }
  }
  return values_fit;
}

// An output location (S3Uri members): s3://, https://, file:// or a local
// path inside the data roots.
void CheckOutputPath(Violations& v, const std::string& field, absl::string_view value,
                     bool required, const ValidationOptions& options) {
  if (value.empty()) {
    if (required) {
      v.Add(field, absl::StrCat("is required: s3://bucket[/prefix], https://host/path, "
                                "file:///absolute/path or /absolute/path (",
                                DataRootsHint(options), ")"));
    }
    return;
  }
  absl::StatusOr<OutputLocation> location = ResolveOutputPath(value, options.data_roots);
  if (!location.ok()) v.Add(field, std::string(location.status().message()));
}

// A location data is read from (S3DataSource.S3Uri): recorded, never opened
// by the server, so not confined to the data roots.
void CheckInputUri(Violations& v, const std::string& field, absl::string_view value) {
  if (CheckLength(v, field, value, 1, 1024)) CheckNoNul(v, field, value);
}

void CheckTrainingJobName(Violations& v, const std::string& field, absl::string_view name) {
  CheckString(v, field, name, 1, 63, "TrainingJobName",
              "[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}: letters, digits and hyphens, starting and "
              "ending with a letter or digit");
}

void CheckNoNulAnywhere(Violations& v, const google::protobuf::Message& message) {
  CheckNoNulInWire(v, *message.GetDescriptor(), message.SerializeAsString(), "");
}

bool CheckRequestStart(Violations& v, const google::protobuf::Message& request,
                       absl::string_view training_job_name) {
  CheckNoNulAnywhere(v, request);
  if (!v.ToStatus().ok()) return false;
  CheckTrainingJobName(v, "TrainingJobName", training_job_name);
  return true;
}

}  // namespace debugplane::core::validation_internal
