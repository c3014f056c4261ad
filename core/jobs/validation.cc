#include "core/jobs/validation.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/output_path.h"
#include "core/jobs/profiling_parameters.h"
#include "core/jobs/rule_actions.h"
#include "core/jobs/rule_catalog.h"
#include "core/jobs/validation_text.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/map.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"
#include "google/protobuf/wire_format_lite.h"
#include "re2/re2.h"

namespace debugplane::core {
namespace {

using StringMap = google::protobuf::Map<std::string, std::string>;

// At most this many violations, of at most this many bytes in all, are
// listed; the rest are counted. The list travels twice in the gRPC trailers
// (grpc-message, and base64 in grpc-status-details-bin with the BadRequest),
// which must stay under gRPC's default 8 KiB metadata limit, so a request with
// thousands of problems is still refused cleanly.
constexpr int kMaxListedViolations = 20;
constexpr size_t kMaxListedBytes = 1800;

// Longest excerpt of a user value quoted in a description or field path.
constexpr size_t kMaxQuoted = 64;

// Collects violations, listing the first ones within the limits above.
class Violations {
 public:
  void Add(std::string field, std::string description) {
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

  absl::Status ToStatus() const {
    if (unlisted_ == 0) return listed_.ToStatus();
    FieldViolations all = listed_;
    all.Add(first_unlisted_field_,
            absl::StrCat("and ", unlisted_, " more problem", unlisted_ == 1 ? "" : "s",
                         " in this and later fields, not listed to keep the error small"));
    return all.ToStatus();
  }

 private:
  FieldViolations listed_;
  int listed_count_ = 0;
  size_t listed_bytes_ = 0;
  int64_t unlisted_ = 0;
  std::string first_unlisted_field_;
};

// --- Rendering ----------------------------------------------------------------

std::string Excerpt(absl::string_view value) { return EscapeForMessage(value, kMaxQuoted); }

std::string Quote(absl::string_view value) { return QuoteForMessage(value, kMaxQuoted); }

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || absl::ascii_isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// The field path of one map entry: `Map.key` when the key is an identifier
// (as in "RuleParameters.rule_to_invoke"), `Map["key"]` otherwise (keys such
// as "train.save_interval", "" or ones with spaces), as in JavaScript.
std::string EntryField(absl::string_view map_field, absl::string_view key) {
  if (IsIdentifier(key) && key.size() <= kMaxQuoted) return absl::StrCat(map_field, ".", key);
  return absl::StrCat(map_field, "[\"", Excerpt(key), "\"]");
}

std::string Indexed(absl::string_view list_field, int index) {
  return absl::StrCat(list_field, "[", index, "]");
}

std::string JoinInts(absl::Span<const int64_t> values) { return absl::StrJoin(values, ", "); }

// --- Patterns ------------------------------------------------------------------

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

bool Matches(absl::string_view value, absl::string_view pattern) {
  return RE2::FullMatch(re2::StringPiece(value.data(), value.size()), Pattern(pattern));
}

// --- Generic checks --------------------------------------------------------------

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

struct MapLimits {
  int max_entries;
  size_t key_min;
  size_t key_max;
  size_t value_max;
  // Optional pattern keys must match, with its text for messages.
  absl::string_view key_pattern_name = {};
  absl::string_view key_pattern_text = {};
};

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

constexpr MapLimits kConfigMap20 = {
    .max_entries = 20, .key_min = 1, .key_max = 256, .value_max = 256};

std::string DataRootsHint(const ValidationOptions& options) {
  if (options.data_roots.empty()) return "local paths are not allowed by this server";
  return absl::StrCat(
      "local paths must be inside one of: ",
      absl::StrJoin(options.data_roots, ", ", [](std::string* out, const std::filesystem::path& p) {
        out->append(p.string());
      }));
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

// --- Rules -------------------------------------------------------------------------

absl::string_view KindWord(RuleKind kind) {
  return kind == RuleKind::kDebug ? "debugging" : "profiler";
}

absl::string_view ListOf(RuleKind kind) {
  return kind == RuleKind::kDebug ? "DebugRuleConfigurations" : "ProfilerRuleConfigurations";
}

// Levenshtein distance, case-insensitive. Both strings are short (callers
// bound them) so the quadratic cost does not matter.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same = absl::ascii_tolower(static_cast<unsigned char>(a[i - 1])) ==
                        absl::ascii_tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Why `name` is not a built-in rule, with the names it may have meant.
std::string UnknownRuleDescription(absl::string_view name, RuleKind kind) {
  std::vector<std::string> close;
  // Only short names get suggestions: a megabyte of junk is just unknown.
  if (name.size() <= kMaxQuoted) {
    const std::string lower = absl::AsciiStrToLower(name);
    for (const BuiltinRuleInfo& rule : BuiltinRules()) {
      const std::string rule_lower = absl::AsciiStrToLower(rule.name);
      const bool is_close = rule_lower == lower ||
                            EditDistance(name, rule.name) <= std::max<size_t>(2, name.size() / 5) ||
                            (lower.size() >= 4 && rule_lower.find(lower) != std::string::npos);
      if (!is_close) continue;
      close.push_back(rule.kind == kind ? absl::StrCat("'", rule.name, "'")
                                        : absl::StrCat("'", rule.name, "' (a ", KindWord(rule.kind),
                                                       " rule, for ", ListOf(rule.kind), ")"));
    }
  }
  std::string description =
      absl::StrCat(Quote(name), " is not a built-in ", KindWord(kind), " rule");
  if (!close.empty()) {
    absl::StrAppend(&description, "; did you mean ", absl::StrJoin(close, " or "), "?");
    return description;
  }
  std::vector<absl::string_view> names;
  for (const BuiltinRuleInfo& rule : BuiltinRules()) {
    if (rule.kind == kind) names.push_back(rule.name);
  }
  absl::StrAppend(&description, "; the built-in ", KindWord(kind),
                  " rules are: ", absl::StrJoin(names, ", "));
  return description;
}

void CheckTrainingJobName(Violations& v, const std::string& field, absl::string_view name);

// SimilarAcrossRuns' other_trials: another training job's name, or a trial
// path confined to the data roots like any output path. Checked here, at
// Create, rather than found wrong when the rule starts.
void CheckOtherTrials(Violations& v, const std::string& field, absl::string_view value,
                      const ValidationOptions& options) {
  if (absl::StartsWith(value, "/") || absl::StrContains(value, "://")) {
    CheckOutputPath(v, field, value, /*required=*/true, options);
    return;
  }
  Violations as_name;
  CheckTrainingJobName(as_name, field, value);
  if (!as_name.ToStatus().ok()) {
    v.Add(field, absl::StrCat(Quote(value),
                              " is neither a training job name nor an absolute trial path "
                              "(/path, file:///path or s3://bucket/prefix)"));
  }
}

void CheckNoNulInWire(Violations& v, const google::protobuf::Descriptor& descriptor,
                      absl::string_view wire, const std::string& prefix);

// One map entry's wire form (key = field 1, value = field 2) of the map
// field named `path`.
void CheckNoNulInMapEntry(Violations& v, const google::protobuf::Descriptor& entry,
                          absl::string_view wire, const std::string& path) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()),
                                            static_cast<int>(wire.size()));
  std::string key;
  std::string value;
  while (const uint32_t tag = in.ReadTag()) {
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    if ((number != 1 && number != 2) ||
        WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return;
      continue;
    }
    uint32_t length = 0;
    if (!in.ReadVarint32(&length) ||
        !in.ReadString(number == 1 ? &key : &value, static_cast<int>(length))) {
      return;
    }
  }
  if (key.find('\0') != std::string::npos) {
    v.Add(absl::StrCat(path, " key ", Quote(key)), "contains a NUL byte");
    return;
  }
  const std::string entry_path = EntryField(path, key);
  const google::protobuf::FieldDescriptor* value_field = entry.FindFieldByNumber(2);
  if (value_field == nullptr) return;
  if (value_field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
    CheckNoNulInWire(v, *value_field->message_type(), value, entry_path);
  } else if (value.find('\0') != std::string::npos) {
    v.Add(entry_path, "contains a NUL byte");
  }
}

// The fields (recursively) of the message of type `descriptor` whose wire
// form is `wire` and whose strings hold a NUL byte, named as in JSON
// ("DebugRuleConfigurations[0].RuleParameters.regex"). No name, path or
// parameter may: they end up in file names, logs and C APIs that stop at the
// first NUL. The wire form is walked rather than the message by reflection:
// reflection's view of map fields differs between Debian's libprotobuf and
// headers compiled with ThreadSanitizer (a crash in TSan builds).
void CheckNoNulInWire(Violations& v, const google::protobuf::Descriptor& descriptor,
                      absl::string_view wire, const std::string& prefix) {
  using google::protobuf::FieldDescriptor;
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()),
                                            static_cast<int>(wire.size()));
  std::map<int, int> seen;  // Field number -> occurrences so far (list indexes).
  while (const uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return;
      continue;
    }
    std::string payload;
    uint32_t length = 0;
    if (!in.ReadVarint32(&length) || !in.ReadString(&payload, static_cast<int>(length))) return;
    const FieldDescriptor* field =
        descriptor.FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
    if (field == nullptr) continue;
    std::string path =
        prefix.empty() ? field->json_name() : absl::StrCat(prefix, ".", field->json_name());
    const int index = seen[field->number()]++;
    if (field->is_map()) {
      CheckNoNulInMapEntry(v, *field->message_type(), payload, path);
      continue;
    }
    if (field->is_repeated()) path = Indexed(path, index);
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      if (payload.find('\0') != std::string::npos) v.Add(path, "contains a NUL byte");
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      CheckNoNulInWire(v, *field->message_type(), payload, path);
    }
  }
}

void CheckNoNulAnywhere(Violations& v, const google::protobuf::Message& message) {
  CheckNoNulInWire(v, *message.GetDescriptor(), message.SerializeAsString(), "");
}

// One DebugRuleConfiguration or ProfilerRuleConfiguration (same members).
template <typename Rule>
void CheckRule(Violations& v, const std::string& field, const Rule& rule, RuleKind kind,
               const ValidationOptions& options) {
  CheckLength(v, field + ".RuleConfigurationName", rule.rule_configuration_name(), 1, 256);
  CheckNameCharacters(v, field + ".RuleConfigurationName", rule.rule_configuration_name());
  CheckDirectoryPath(v, field + ".LocalPath", rule.local_path());
  CheckOutputPath(v, field + ".S3OutputPath", rule.s3_output_path(), /*required=*/false, options);
  if (!rule.instance_type().empty()) {
    CheckString(v, field + ".InstanceType", rule.instance_type(), 1, 64, "InstanceType",
                "ml.<family>.<size>, e.g. ml.m5.xlarge");
  }
  if (rule.volume_size_in_gb() < 0) {
    v.Add(field + ".VolumeSizeInGB",
          absl::StrCat(rule.volume_size_in_gb(), " is negative; use 0 or more"));
  }
  const std::string params_field = field + ".RuleParameters";
  // Over-long values are refused here and never parsed (JSON, regexes).
  const bool values_fit =
      CheckMap(v, params_field, rule.rule_parameters(),
               {.max_entries = 100, .key_min = 1, .key_max = 256, .value_max = 256});
  if (auto other = rule.rule_parameters().find("other_trials");
      other != rule.rule_parameters().end() && values_fit) {
    CheckOtherTrials(v, EntryField(params_field, "other_trials"), other->second, options);
  }
  if (auto actions = rule.rule_parameters().find(std::string(kActionJsonParameter));
      actions != rule.rule_parameters().end()) {
    const std::string actions_field = EntryField(params_field, kActionJsonParameter);
    if (kind == RuleKind::kProfiler) {
      v.Add(actions_field,
            "profiler rules take no actions (as in SageMaker Debugger); put the action on a "
            "debugging rule or watch the job with WatchTrainingJob");
    } else if (values_fit) {
      absl::StatusOr<std::vector<RuleActionSpec>> parsed = ParseActionJson(actions->second);
      if (!parsed.ok()) v.Add(actions_field, std::string(parsed.status().message()));
    }
  }

  const std::string& image = rule.rule_evaluator_image();
  const std::string image_field = field + ".RuleEvaluatorImage";
  if (image.empty()) {
    v.Add(image_field,
          "is required: a SageMaker Debugger rules image "
          "(<account>.dkr.ecr.<region>.amazonaws.com/sagemaker-debugger-rules:latest) or "
          "'builtin' to run the built-in rule named by RuleParameters.rule_to_invoke, or a "
          "custom evaluator the server allows");
    return;
  }
  if (!CheckLength(v, image_field, image, 1, 255)) return;
  if (IsBuiltinRuleEvaluatorImage(image)) {
    const std::string invoke_field = EntryField(params_field, "rule_to_invoke");
    auto it = rule.rule_parameters().find("rule_to_invoke");
    if (it == rule.rule_parameters().end() || it->second.empty()) {
      v.Add(invoke_field,
            absl::StrCat("is required with a built-in rules image: the name of the built-in ",
                         KindWord(kind), " rule to run, e.g. '",
                         kind == RuleKind::kDebug ? "LossNotDecreasing" : "ProfilerReport", "'"));
      return;
    }
    const BuiltinRuleInfo* builtin = FindBuiltinRule(it->second);
    if (builtin == nullptr) {
      v.Add(invoke_field, UnknownRuleDescription(it->second, kind));
    } else if (builtin->kind != kind) {
      v.Add(invoke_field, absl::StrCat("'", builtin->name, "' is a built-in ",
                                       KindWord(builtin->kind), " rule; configure it in ",
                                       ListOf(builtin->kind), ", not in ", ListOf(kind)));
    } else if (options.check_rule_parameters && values_fit) {
      const RuleParameterMap parameters(rule.rule_parameters().begin(),
                                        rule.rule_parameters().end());
      absl::Status checked = options.check_rule_parameters(it->second, parameters);
      if (!checked.ok()) v.Add(params_field, std::string(checked.message()));
    }
    return;
  }
  const auto& allowed = options.allowed_custom_evaluators;
  if (std::find(allowed.begin(), allowed.end(), image) == allowed.end()) {
    v.Add(image_field,
          absl::StrCat(Quote(image),
                       " is not a built-in rules image and the server does not allow it as a "
                       "custom rule evaluator; use 'builtin' or a sagemaker-debugger-rules "
                       "image for a built-in rule, or have the server started with "
                       "--allow-evaluator ",
                       Quote(image)));
  }
}

// Names seen in a rule list, to report duplicates against the first use.
using NameIndex = absl::flat_hash_map<absl::string_view, int>;

// Every rule of one list: count, members, names unique within the list and
// not used by `other_list` (the other kind's names, may be null).
template <typename Rule>
NameIndex CheckRuleList(Violations& v, const google::protobuf::RepeatedPtrField<Rule>& rules,
                        RuleKind kind, const ValidationOptions& options,
                        const NameIndex* other_list) {
  const std::string list_field(ListOf(kind));
  CheckListSize(v, list_field, rules.size(), kMaxRulesPerKind, "rule configurations");
  NameIndex names;
  for (int i = 0; i < rules.size(); ++i) {
    const std::string field = Indexed(list_field, i);
    CheckRule(v, field, rules[i], kind, options);
    const std::string& name = rules[i].rule_configuration_name();
    if (name.empty()) continue;
    auto [it, inserted] = names.try_emplace(name, i);
    if (!inserted) {
      v.Add(field + ".RuleConfigurationName",
            absl::StrCat(Quote(name), " is already the name of ", Indexed(list_field, it->second),
                         "; rule configuration names must be unique"));
      continue;
    }
    if (other_list == nullptr) continue;
    if (auto other = other_list->find(name); other != other_list->end()) {
      const RuleKind other_kind = kind == RuleKind::kDebug ? RuleKind::kProfiler : RuleKind::kDebug;
      v.Add(field + ".RuleConfigurationName",
            absl::StrCat(Quote(name), " is already the name of ",
                         Indexed(ListOf(other_kind), other->second),
                         "; rule configuration names must be unique across "
                         "DebugRuleConfigurations and ProfilerRuleConfigurations"));
    }
  }
  return names;
}

// --- Sections ------------------------------------------------------------------

// ProfilerConfig and ProfilerConfigForUpdate share these members.
template <typename Config>
void CheckProfilerSettings(Violations& v, const Config& config, const ValidationOptions& options) {
  CheckOutputPath(v, "ProfilerConfig.S3OutputPath", config.s3_output_path(), /*required=*/false,
                  options);
  if (config.has_profiling_interval_in_milliseconds()) {
    const int64_t interval = config.profiling_interval_in_milliseconds();
    if (std::find(std::begin(kProfilingIntervalsMs), std::end(kProfilingIntervalsMs), interval) ==
        std::end(kProfilingIntervalsMs)) {
      v.Add(
          "ProfilerConfig.ProfilingIntervalInMilliseconds",
          absl::StrCat(interval, " is not allowed; use one of ", JoinInts(kProfilingIntervalsMs)));
    }
  }
  CheckMap(v, "ProfilerConfig.ProfilingParameters", config.profiling_parameters(), kConfigMap20);
  for (const auto& [key, value] : config.profiling_parameters()) {
    // An over-long value is refused by CheckMap and never parsed.
    if (CharCount(value) > kConfigMap20.value_max) continue;
    if (absl::Status checked = CheckProfilingParameter(key, value); !checked.ok()) {
      v.Add(EntryField("ProfilerConfig.ProfilingParameters", key), std::string(checked.message()));
    }
  }
}

void CheckAlgorithmSpecification(Violations& v, const v1::AlgorithmSpecification& spec) {
  const std::string f = "AlgorithmSpecification";
  CheckEnum(v, f + ".TrainingInputMode", spec.training_input_mode(), {"Pipe", "File", "FastFile"});
  CheckLength(v, f + ".TrainingImage", spec.training_image(), 0, 255);
  CheckLength(v, f + ".AlgorithmName", spec.algorithm_name(), 0, 170);
  CheckNameCharacters(v, f + ".AlgorithmName", spec.algorithm_name());
  CheckListSize(v, f + ".MetricDefinitions", spec.metric_definitions_size(), 40,
                "metric definitions");
  for (int i = 0; i < spec.metric_definitions_size(); ++i) {
    const std::string field = Indexed(f + ".MetricDefinitions", i);
    CheckLength(v, field + ".Name", spec.metric_definitions(i).name(), 1, 255);
    CheckNameCharacters(v, field + ".Name", spec.metric_definitions(i).name());
    CheckLength(v, field + ".Regex", spec.metric_definitions(i).regex(), 1, 500);
  }
  CheckListSize(v, f + ".ContainerEntrypoint", spec.container_entrypoint_size(), 100, "entries");
  for (int i = 0; i < spec.container_entrypoint_size(); ++i) {
    CheckLength(v, Indexed(f + ".ContainerEntrypoint", i), spec.container_entrypoint(i), 0, 256);
  }
  CheckListSize(v, f + ".ContainerArguments", spec.container_arguments_size(), 100, "arguments");
  for (int i = 0; i < spec.container_arguments_size(); ++i) {
    CheckLength(v, Indexed(f + ".ContainerArguments", i), spec.container_arguments(i), 0, 256);
  }
}

void CheckChannels(Violations& v, const google::protobuf::RepeatedPtrField<v1::Channel>& channels) {
  // Empty means absent (proto3), so only the upper bound of 1-20 applies.
  CheckListSize(v, "InputDataConfig", channels.size(), 20, "channels");
  absl::flat_hash_map<absl::string_view, int> names;
  for (int i = 0; i < channels.size(); ++i) {
    const v1::Channel& channel = channels[i];
    const std::string f = Indexed("InputDataConfig", i);
    CheckString(v, f + ".ChannelName", channel.channel_name(), 1, 64, "ChannelName",
                "[A-Za-z0-9.-_]+");
    if (!channel.channel_name().empty()) {
      auto [it, inserted] = names.try_emplace(channel.channel_name(), i);
      if (!inserted) {
        v.Add(
            f + ".ChannelName",
            absl::StrCat(Quote(channel.channel_name()), " is already the name of ",
                         Indexed("InputDataConfig", it->second), "; channel names must be unique"));
      }
    }
    if (!channel.content_type().empty())
      CheckLength(v, f + ".ContentType", channel.content_type(), 0, 256);
    if (!channel.compression_type().empty()) {
      CheckEnum(v, f + ".CompressionType", channel.compression_type(), {"None", "Gzip"});
    }
    if (!channel.record_wrapper_type().empty()) {
      CheckEnum(v, f + ".RecordWrapperType", channel.record_wrapper_type(), {"None", "RecordIO"});
    }
    if (!channel.input_mode().empty()) {
      CheckEnum(v, f + ".InputMode", channel.input_mode(), {"Pipe", "File", "FastFile"});
    }
    if (!channel.has_data_source()) {
      v.Add(f + ".DataSource", "is required: give S3DataSource or FileSystemDataSource");
      continue;
    }
    const v1::DataSource& source = channel.data_source();
    const std::string sf = f + ".DataSource";
    if (!source.has_s3_data_source() && !source.has_file_system_data_source()) {
      v.Add(sf, "is empty; give S3DataSource or FileSystemDataSource");
    }
    if (source.has_s3_data_source()) {
      const v1::S3DataSource& s3 = source.s3_data_source();
      CheckEnum(v, sf + ".S3DataSource.S3DataType", s3.s3_data_type(),
                {"ManifestFile", "S3Prefix", "AugmentedManifestFile", "Converse"});
      CheckInputUri(v, sf + ".S3DataSource.S3Uri", s3.s3_uri());
      if (!s3.s3_data_distribution_type().empty()) {
        CheckEnum(v, sf + ".S3DataSource.S3DataDistributionType", s3.s3_data_distribution_type(),
                  {"FullyReplicated", "ShardedByS3Key"});
      }
      CheckListSize(v, sf + ".S3DataSource.AttributeNames", s3.attribute_names_size(), 16,
                    "attribute names");
      for (int j = 0; j < s3.attribute_names_size(); ++j) {
        CheckLength(v, Indexed(sf + ".S3DataSource.AttributeNames", j), s3.attribute_names(j), 1,
                    256);
      }
    }
    if (source.has_file_system_data_source()) {
      const v1::FileSystemDataSource& fsx = source.file_system_data_source();
      const std::string ff = sf + ".FileSystemDataSource";
      CheckString(v, ff + ".FileSystemId", fsx.file_system_id(), 11, 21, "FileSystemId",
                  "fs-[0-9a-f]{8,}");
      CheckEnum(v, ff + ".FileSystemAccessMode", fsx.file_system_access_mode(), {"rw", "ro"});
      CheckEnum(v, ff + ".FileSystemType", fsx.file_system_type(), {"EFS", "FSxLustre"});
      if (CheckLength(v, ff + ".DirectoryPath", fsx.directory_path(), 1, 4096)) {
        CheckNoNul(v, ff + ".DirectoryPath", fsx.directory_path());
      }
    }
  }
}

void CheckResourceConfig(Violations& v, const v1::ResourceConfig& config) {
  if (!config.instance_type().empty()) {
    CheckString(v, "ResourceConfig.InstanceType", config.instance_type(), 1, 64, "InstanceType",
                "ml.<family>.<size>, e.g. ml.p3.2xlarge");
  }
  if (config.instance_count() < 0) {
    v.Add("ResourceConfig.InstanceCount",
          absl::StrCat(config.instance_count(), " is negative; use 0 or more"));
  }
  if (config.volume_size_in_gb() < 0) {
    v.Add("ResourceConfig.VolumeSizeInGB",
          absl::StrCat(config.volume_size_in_gb(), " is negative; use 0 or more"));
  }
  CheckString(v, "ResourceConfig.VolumeKmsKeyId", config.volume_kms_key_id(), 0, 2048, "KmsKeyId",
              "[a-zA-Z0-9:/_-]*");
  if (config.has_keep_alive_period_in_seconds() &&
      (config.keep_alive_period_in_seconds() < 0 ||
       config.keep_alive_period_in_seconds() > 21600)) {
    v.Add("ResourceConfig.KeepAlivePeriodInSeconds",
          absl::StrCat(config.keep_alive_period_in_seconds(),
                       " is out of range; use 0-21600 seconds"));
  }
}

void CheckStoppingCondition(Violations& v, const v1::StoppingCondition& condition) {
  if (condition.has_max_runtime_in_seconds() && condition.max_runtime_in_seconds() < 1) {
    v.Add("StoppingCondition.MaxRuntimeInSeconds",
          absl::StrCat(condition.max_runtime_in_seconds(), " is not allowed; use 1 or more"));
  }
  if (condition.has_max_wait_time_in_seconds()) {
    if (condition.max_wait_time_in_seconds() < 1) {
      v.Add("StoppingCondition.MaxWaitTimeInSeconds",
            absl::StrCat(condition.max_wait_time_in_seconds(), " is not allowed; use 1 or more"));
    } else if (condition.has_max_runtime_in_seconds() &&
               condition.max_wait_time_in_seconds() < condition.max_runtime_in_seconds()) {
      v.Add("StoppingCondition.MaxWaitTimeInSeconds",
            absl::StrCat(condition.max_wait_time_in_seconds(),
                         " is less than MaxRuntimeInSeconds (", condition.max_runtime_in_seconds(),
                         "); the wait time includes the run time, so use at least that"));
    }
  }
  if (condition.has_max_pending_time_in_seconds() &&
      (condition.max_pending_time_in_seconds() < 7200 ||
       condition.max_pending_time_in_seconds() > 2419200)) {
    v.Add("StoppingCondition.MaxPendingTimeInSeconds",
          absl::StrCat(condition.max_pending_time_in_seconds(),
                       " is out of range; use 7200-2419200 seconds (2 hours to 28 days)"));
  }
}

void CheckTags(Violations& v, const google::protobuf::RepeatedPtrField<v1::Tag>& tags) {
  CheckListSize(v, "Tags", tags.size(), 50, "tags");
  constexpr absl::string_view kTagPattern =
      "[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]* (letters, digits, spaces and _.:/=+-@)";
  absl::flat_hash_map<absl::string_view, int> keys;
  for (int i = 0; i < tags.size(); ++i) {
    const std::string f = Indexed("Tags", i);
    CheckString(v, f + ".Key", tags[i].key(), 1, 128, "Tag", kTagPattern);
    CheckString(v, f + ".Value", tags[i].value(), 0, 256, "Tag", kTagPattern);
    if (tags[i].key().empty()) continue;
    auto [it, inserted] = keys.try_emplace(tags[i].key(), i);
    if (!inserted) {
      v.Add(f + ".Key", absl::StrCat(Quote(tags[i].key()), " is already the key of ",
                                     Indexed("Tags", it->second), "; tag keys must be unique"));
    }
  }
}

void CheckDebugHookConfig(Violations& v, const v1::DebugHookConfig& hook,
                          const ValidationOptions& options) {
  const std::string f = "DebugHookConfig";
  CheckDirectoryPath(v, f + ".LocalPath", hook.local_path());
  CheckOutputPath(v, f + ".S3OutputPath", hook.s3_output_path(), /*required=*/true, options);
  CheckMap(v, f + ".HookParameters", hook.hook_parameters(), kConfigMap20);
  CheckListSize(v, f + ".CollectionConfigurations", hook.collection_configurations_size(), 20,
                "collection configurations");
  absl::flat_hash_map<absl::string_view, int> names;
  for (int i = 0; i < hook.collection_configurations_size(); ++i) {
    const v1::CollectionConfiguration& collection = hook.collection_configurations(i);
    const std::string cf = Indexed(f + ".CollectionConfigurations", i);
    CheckLength(v, cf + ".CollectionName", collection.collection_name(), 1, 256);
    CheckNameCharacters(v, cf + ".CollectionName", collection.collection_name());
    CheckMap(v, cf + ".CollectionParameters", collection.collection_parameters(), kConfigMap20);
    if (collection.collection_name().empty()) continue;
    // Two configurations of one collection would leave which parameters
    // apply to the order the hook reads them in.
    auto [it, inserted] = names.try_emplace(collection.collection_name(), i);
    if (!inserted) {
      v.Add(cf + ".CollectionName",
            absl::StrCat(Quote(collection.collection_name()), " is already configured by ",
                         Indexed(f + ".CollectionConfigurations", it->second),
                         "; configure each collection once"));
    }
  }
}

void CheckVpcConfig(Violations& v, const v1::VpcConfig& vpc) {
  auto check_ids = [&](const std::string& field, const auto& ids, int max, absl::string_view what) {
    if (ids.empty()) {
      v.Add(field, absl::StrCat("is required with VpcConfig: 1-", max, " ", what));
    }
    CheckListSize(v, field, ids.size(), max, what);
    for (int i = 0; i < ids.size(); ++i) {
      CheckString(v, Indexed(field, i), ids[i], 1, 32, "VpcId", "[-0-9a-zA-Z]+");
    }
  };
  check_ids("VpcConfig.SecurityGroupIds", vpc.security_group_ids(), 5, "security group IDs");
  check_ids("VpcConfig.Subnets", vpc.subnets(), 16, "subnet IDs");
}

void CheckExperimentConfig(Violations& v, const v1::ExperimentConfig& config) {
  constexpr absl::string_view kText = "[a-zA-Z0-9](-*[a-zA-Z0-9]){0,119}";
  const std::pair<const char*, const std::string*> names[] = {
      {"ExperimentConfig.ExperimentName", &config.experiment_name()},
      {"ExperimentConfig.TrialName", &config.trial_name()},
      {"ExperimentConfig.TrialComponentDisplayName", &config.trial_component_display_name()},
      {"ExperimentConfig.RunName", &config.run_name()},
  };
  for (const auto& [field, value] : names) {
    if (!value->empty()) CheckString(v, field, *value, 1, 120, "ExperimentEntityName", kText);
  }
}

// A Timestamp inside the range google.protobuf.Timestamp documents.
bool CheckTimestamp(Violations& v, const std::string& field, const google::protobuf::Timestamp& t) {
  constexpr int64_t kMinSeconds = -62135596800;  // 0001-01-01T00:00:00Z
  constexpr int64_t kMaxSeconds = 253402300799;  // 9999-12-31T23:59:59Z
  if (t.seconds() < kMinSeconds || t.seconds() > kMaxSeconds || t.nanos() < 0 ||
      t.nanos() > 999999999) {
    v.Add(field, absl::StrCat("seconds=", t.seconds(), " nanos=", t.nanos(),
                              " is not a valid time; use 0001-01-01 to 9999-12-31 UTC with "
                              "nanos 0-999999999"));
    return false;
  }
  return true;
}

absl::Time ToTime(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

void CheckTimeRange(Violations& v, absl::string_view name, bool has_after,
                    const google::protobuf::Timestamp& after, bool has_before,
                    const google::protobuf::Timestamp& before) {
  const std::string after_field = absl::StrCat(name, "After");
  const std::string before_field = absl::StrCat(name, "Before");
  bool valid = true;
  if (has_after) valid &= CheckTimestamp(v, after_field, after);
  if (has_before) valid &= CheckTimestamp(v, before_field, before);
  if (!valid || !has_after || !has_before) return;
  if (ToTime(after) >= ToTime(before)) {
    v.Add(after_field,
          absl::StrCat(absl::FormatTime(absl::RFC3339_full, ToTime(after), absl::UTCTimeZone()),
                       " is not before ", before_field, " (",
                       absl::FormatTime(absl::RFC3339_full, ToTime(before), absl::UTCTimeZone()),
                       "); the range would be empty: give ", after_field, " < ", before_field));
  }
}

void CheckTrainingJobName(Violations& v, const std::string& field, absl::string_view name) {
  CheckString(v, field, name, 1, 63, "TrainingJobName",
              "[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}: letters, digits and hyphens, starting and "
              "ending with a letter or digit");
}

}  // namespace

absl::Status ValidateTrainingJobName(absl::string_view name, absl::string_view field) {
  Violations v;
  CheckTrainingJobName(v, std::string(field), name);
  return v.ToStatus();
}

absl::Status ValidateCreateTrainingJobRequest(const v1::CreateTrainingJobRequest& request,
                                              const ValidationOptions& options) {
  Violations v;
  // First, and alone: no string with a NUL reaches the checks below.
  CheckNoNulAnywhere(v, request);
  if (absl::Status nul = v.ToStatus(); !nul.ok()) return nul;
  CheckTrainingJobName(v, "TrainingJobName", request.training_job_name());
  CheckString(v, "RoleArn", request.role_arn(), 20, 2048, "RoleArn",
              "arn:aws[a-z\\-]*:iam::\\d{12}:role/?[a-zA-Z_0-9+=,.@\\-_/]+, e.g. "
              "arn:aws:iam::111122223333:role/MyRole");
  if (request.has_algorithm_specification()) {
    CheckAlgorithmSpecification(v, request.algorithm_specification());
  }
  CheckMap(v, "HyperParameters", request.hyper_parameters(),
           {.max_entries = 100, .key_min = 0, .key_max = 256, .value_max = 2500});
  CheckChannels(v, request.input_data_config());

  if (!request.has_output_data_config()) {
    v.Add("OutputDataConfig", "is required: give OutputDataConfig.S3OutputPath");
  } else {
    const v1::OutputDataConfig& output = request.output_data_config();
    CheckOutputPath(v, "OutputDataConfig.S3OutputPath", output.s3_output_path(),
                    /*required=*/true, options);
    CheckString(v, "OutputDataConfig.KmsKeyId", output.kms_key_id(), 0, 2048, "KmsKeyId",
                "[a-zA-Z0-9:/_-]*");
    if (!output.compression_type().empty()) {
      CheckEnum(v, "OutputDataConfig.CompressionType", output.compression_type(), {"GZIP", "NONE"});
    }
  }
  if (request.has_resource_config()) CheckResourceConfig(v, request.resource_config());
  if (request.has_stopping_condition()) CheckStoppingCondition(v, request.stopping_condition());
  CheckTags(v, request.tags());
  CheckMap(v, "Environment", request.environment(),
           {.max_entries = 100,
            .key_min = 1,
            .key_max = 512,
            .value_max = 512,
            .key_pattern_name = "EnvironmentKey",
            .key_pattern_text = "[a-zA-Z_][a-zA-Z0-9_]*"});
  if (request.has_checkpoint_config()) {
    CheckOutputPath(v, "CheckpointConfig.S3Uri", request.checkpoint_config().s3_uri(),
                    /*required=*/true, options);
    CheckDirectoryPath(v, "CheckpointConfig.LocalPath", request.checkpoint_config().local_path());
  }
  if (request.has_debug_hook_config())
    CheckDebugHookConfig(v, request.debug_hook_config(), options);

  const NameIndex debug_names =
      CheckRuleList(v, request.debug_rule_configurations(), RuleKind::kDebug, options, nullptr);
  CheckRuleList(v, request.profiler_rule_configurations(), RuleKind::kProfiler, options,
                &debug_names);

  if (request.has_tensor_board_output_config()) {
    CheckOutputPath(v, "TensorBoardOutputConfig.S3OutputPath",
                    request.tensor_board_output_config().s3_output_path(), /*required=*/true,
                    options);
    CheckDirectoryPath(v, "TensorBoardOutputConfig.LocalPath",
                       request.tensor_board_output_config().local_path());
  }
  if (request.has_profiler_config()) CheckProfilerSettings(v, request.profiler_config(), options);
  if (request.has_vpc_config()) CheckVpcConfig(v, request.vpc_config());
  if (request.has_experiment_config()) CheckExperimentConfig(v, request.experiment_config());
  if (request.has_retry_strategy()) {
    const int attempts = request.retry_strategy().maximum_retry_attempts();
    if (attempts < 1 || attempts > 30) {
      v.Add("RetryStrategy.MaximumRetryAttempts",
            absl::StrCat(attempts, " is out of range; use 1-30"));
    }
  }
  return v.ToStatus();
}

absl::Status ValidateUpdateTrainingJobRequest(const v1::UpdateTrainingJobRequest& request,
                                              const ValidationOptions& options) {
  Violations v;
  CheckNoNulAnywhere(v, request);
  if (absl::Status nul = v.ToStatus(); !nul.ok()) return nul;
  CheckTrainingJobName(v, "TrainingJobName", request.training_job_name());
  if (request.has_profiler_config()) {
    const v1::ProfilerConfigForUpdate& config = request.profiler_config();
    CheckProfilerSettings(v, config, options);
    if (config.has_disable_profiler() && config.disable_profiler()) {
      std::vector<absl::string_view> others;
      if (!config.s3_output_path().empty()) others.push_back("S3OutputPath");
      if (config.has_profiling_interval_in_milliseconds()) {
        others.push_back("ProfilingIntervalInMilliseconds");
      }
      if (!config.profiling_parameters().empty()) others.push_back("ProfilingParameters");
      // New profiler rules would evaluate metrics that stop being collected.
      if (!request.profiler_rule_configurations().empty()) {
        others.push_back("ProfilerRuleConfigurations");
      }
      if (!others.empty()) {
        v.Add("ProfilerConfig.DisableProfiler",
              absl::StrCat("true turns profiling off and cannot be combined with other "
                           "profiling changes (",
                           absl::StrJoin(others, ", "),
                           "); send DisableProfiler alone, or the changes without it"));
      }
    }
  }
  // Names must also differ from the job's existing rules; the job manager
  // checks that against the job.
  CheckRuleList(v, request.profiler_rule_configurations(), RuleKind::kProfiler, options, nullptr);
  return v.ToStatus();
}

absl::Status ValidateListTrainingJobsRequest(const v1::ListTrainingJobsRequest& request) {
  Violations v;
  if (request.has_max_results() && (request.max_results() < 1 || request.max_results() > 100)) {
    v.Add("MaxResults", absl::StrCat(request.max_results(), " is out of range; use 1-100"));
  }
  if (!request.name_contains().empty()) {
    CheckString(v, "NameContains", request.name_contains(), 1, 63, "NameContains",
                "[a-zA-Z0-9\\-]+ (letters, digits and hyphens)");
  }
  CheckTimeRange(v, "CreationTime", request.has_creation_time_after(),
                 request.creation_time_after(), request.has_creation_time_before(),
                 request.creation_time_before());
  CheckTimeRange(v, "LastModifiedTime", request.has_last_modified_time_after(),
                 request.last_modified_time_after(), request.has_last_modified_time_before(),
                 request.last_modified_time_before());
  CheckLength(v, "NextToken", request.next_token(), 0, 8192);
  if (!v1::TrainingJobStatus::Value_IsValid(request.status_equals())) {
    v.Add("StatusEquals", absl::StrCat(request.status_equals(),
                                       " is not a training job status; use InProgress, "
                                       "Completed, Failed, Stopping, Stopped or Deleting"));
  }
  if (!request.sort_by().empty()) {
    CheckEnum(v, "SortBy", request.sort_by(), {"Name", "CreationTime", "Status"});
  }
  if (!request.sort_order().empty()) {
    CheckEnum(v, "SortOrder", request.sort_order(), {"Ascending", "Descending"});
  }
  return v.ToStatus();
}

std::vector<std::string> CreateTrainingJobWarnings(const v1::CreateTrainingJobRequest& request,
                                                   const ValidationOptions& options) {
  std::vector<std::string> warnings;
  if (request.debug_rule_configurations().empty()) return warnings;
  if (!request.has_debug_hook_config()) {
    warnings.push_back(
        "DebugRuleConfigurations are set but DebugHookConfig is not: no tensors will be saved, "
        "so the rules will end in Error; add a DebugHookConfig with S3OutputPath and the "
        "collections the rules read");
    return warnings;
  }
  if (!options.rule_collections) return warnings;
  std::set<std::string> saved = {"losses"};  // smdebug saves losses by default.
  for (const auto& collection : request.debug_hook_config().collection_configurations()) {
    saved.insert(collection.collection_name());
  }
  for (int i = 0; i < request.debug_rule_configurations_size(); ++i) {
    const auto& rule = request.debug_rule_configurations(i);
    if (!IsBuiltinRuleEvaluatorImage(rule.rule_evaluator_image())) continue;
    auto invoke = rule.rule_parameters().find("rule_to_invoke");
    if (invoke == rule.rule_parameters().end()) continue;
    const RuleParameterMap parameters(rule.rule_parameters().begin(), rule.rule_parameters().end());
    for (const std::string& needed : options.rule_collections(invoke->second, parameters)) {
      if (saved.count(needed) != 0) continue;
      warnings.push_back(absl::StrCat(
          "DebugRuleConfigurations[", i, "] (", rule.rule_configuration_name(), ", ",
          invoke->second, ") reads the '", needed,
          "' collection, which DebugHookConfig.CollectionConfigurations does not save: the "
          "rule will find no data unless the training script saves it; add {\"CollectionName\": \"",
          needed, "\"}"));
    }
  }
  return warnings;
}

namespace {

// A framework-profiling parameter that cannot take effect mid-run: what
// happens there, and where.
struct RunTimeLimitation {
  absl::string_view parameter;
  absl::string_view what_happens;
};

constexpr RunTimeLimitation kRunTimeLimitations[] = {
    {"PythonProfilingConfig",
     "smdebug 0.x-1.0 with PyTorch 1.9 or later crashes the training process when Python "
     "profiling is set or changed while it runs"},
    {"DataloaderProfilingConfig",
     "smdebug 0.x-1.0 with PyTorch 1.9 or later crashes the training process when data loader "
     "profiling is set or changed while it runs, and AWS TensorFlow cannot change data loader "
     "profiling while a job runs"},
    {"DetailedProfilingConfig",
     "smdebug 0.x-1.0 with PyTorch 1.9 or later ignores detailed profiling set or changed while "
     "the training runs (no framework profile is written), and TensorFlow 2.11 and later has no "
     "detailed profiling at all"},
};

}  // namespace

std::vector<std::string> UpdateTrainingJobWarnings(const v1::UpdateTrainingJobRequest& request,
                                                   const v1::ProfilerConfig& current) {
  std::vector<std::string> warnings;
  if (!request.has_profiler_config() || request.profiler_config().disable_profiler()) {
    return warnings;
  }
  // Sorted, so that the warnings come in the same order every time.
  const std::map<std::string, std::string> changes(
      request.profiler_config().profiling_parameters().begin(),
      request.profiler_config().profiling_parameters().end());
  for (const auto& [key, value] : changes) {
    auto unchanged = current.profiling_parameters().find(key);
    if (unchanged != current.profiling_parameters().end() && unchanged->second == value) continue;
    for (const RunTimeLimitation& limitation : kRunTimeLimitations) {
      if (!absl::EqualsIgnoreCase(key, limitation.parameter)) continue;
      warnings.push_back(absl::StrCat(
          EntryField("ProfilerConfig.ProfilingParameters", key), ": ", limitation.what_happens,
          "; set ", limitation.parameter,
          " in the ProfilerConfig of CreateTrainingJob instead (for this job: stop it and start "
          "the training again as a new job with it)"));
    }
  }
  return warnings;
}

}  // namespace debugplane::core
