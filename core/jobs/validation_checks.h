// The field checks every request validator uses: the violation collector,
// field paths and quoting, SageMaker's patterns, and checks of lengths, enums,
// maps, names, paths and NUL bytes. Internal to core/jobs (validation.h is
// the API); see validation.h for the conventions (field paths, limits).
//
// Every Check* function appends one violation per problem it finds to `v`
// and never stops at the first; functions returning bool say whether the
// value is fit for further checks. Thread-safe: all functions are pure
// (CheckOutputPath reads the file system through ResolveOutputPath).

#ifndef DEBUGPLANE_CORE_JOBS_VALIDATION_CHECKS_H_
#define DEBUGPLANE_CORE_JOBS_VALIDATION_CHECKS_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/validation.h"
#include "google/protobuf/map.h"
#include "google/protobuf/message.h"

namespace debugplane::core::validation_internal {

using StringMap = google::protobuf::Map<std::string, std::string>;

// Longest excerpt of a user value quoted in a description or field path.
inline constexpr size_t kMaxQuoted = 64;


// At most this many violations, of at most this many bytes in all, are
// listed; the rest are counted. The list travels twice in the gRPC trailers
// (grpc-message, and base64 in grpc-status-details-bin with the BadRequest),
// which must stay under gRPC's default 8 KiB metadata limit, so a request with
// thousands of problems is still refused cleanly.
inline constexpr int kMaxListedViolations = 20;
inline constexpr size_t kMaxListedBytes = 1800;

// Collects violations, listing the first ones within the limits above and
// counting the rest in one last violation. Not thread-safe.
class Violations {
 public:
  void Add(std::string field, std::string description);

  // OK when nothing was added; else INVALID_ARGUMENT with the listed
  // violations (field_violations.h).
  absl::Status ToStatus() const;

 private:
  FieldViolations listed_;
  int listed_count_ = 0;
  size_t listed_bytes_ = 0;
  int64_t unlisted_ = 0;
  std::string first_unlisted_field_;
};

// --- Field paths and quoting ---------------------------------------------------

// `value` escaped and cut to kMaxQuoted characters (EscapeForMessage).
std::string Excerpt(absl::string_view value);

// Excerpt(value) between single quotes.
std::string Quote(absl::string_view value);

// The field path of one map entry: `Map.key` when the key is an identifier
// (as in "RuleParameters.rule_to_invoke"), `Map["key"]` otherwise (keys such
// as "train.save_interval", "" or ones with spaces), as in JavaScript.
std::string EntryField(absl::string_view map_field, absl::string_view key);

// "list_field[index]".
std::string Indexed(absl::string_view list_field, int index);

// "1, 2, 3".
std::string JoinInts(absl::Span<const int64_t> values);

// --- Checks ----------------------------------------------------------------------

// Whether `value` fully matches SageMaker's pattern named `pattern_name`
// ("TrainingJobName", "RoleArn", "EnvironmentKey", "Tag", "ChannelName",
// "InstanceType", "KmsKeyId", "NameContains", "FileSystemId", "VpcId",
// "ExperimentEntityName"). REQUIRES: a name of that list.
bool Matches(absl::string_view value, absl::string_view pattern_name);

// Length in [min, max] characters; `required` when min > 0. Returns whether
// the length is fine (pattern checks only make sense then).
bool CheckLength(Violations& v, const std::string& field, absl::string_view value, size_t min,
                 size_t max);

// Length, then (if the length is fine and the value non-empty) the pattern
// `pattern_name` (see Matches), described as `pattern_text` in messages.
void CheckString(Violations& v, const std::string& field, absl::string_view value, size_t min,
                 size_t max, absl::string_view pattern_name, absl::string_view pattern_text);

// `value` in [min, max]; else "<value> is out of range; use <min>-<max><unit>"
// (`unit` as " seconds").
void CheckRange(Violations& v, const std::string& field, int64_t value, int64_t min, int64_t max,
                absl::string_view unit = "");

// `value` is one of `allowed` (empty: "is required").
void CheckEnum(Violations& v, const std::string& field, absl::string_view value,
               std::initializer_list<absl::string_view> allowed);

// `value` holds no NUL byte (a path).
void CheckNoNul(Violations& v, const std::string& field, absl::string_view value);

// A name (of a rule, a collection, a metric) holds no C0 control character,
// DEL or line terminator (U+0085, U+2028, U+2029): names go into HTTP and
// mail headers and log lines, where a line break would forge one.
void CheckNameCharacters(Violations& v, const std::string& field, absl::string_view value);

// A path on the training or rule host (DirectoryPath): absolute, without
// "..", at most 4096 characters; empty is fine.
void CheckDirectoryPath(Violations& v, const std::string& field, absl::string_view value);

// A list's size is at most `max`; `what` names its members ("rules").
void CheckListSize(Violations& v, const std::string& field, int size, int max,
                   absl::string_view what);

struct MapLimits {
  int max_entries;
  size_t key_min;
  size_t key_max;
  size_t value_max;
  // Optional pattern keys must match (see Matches), with its text for messages.
  absl::string_view key_pattern_name = {};
  absl::string_view key_pattern_text = {};
};

// The limits of SageMaker's small configuration maps (HookParameters,
// CollectionParameters, ProfilingParameters).
inline constexpr MapLimits kConfigMap20 = {
    .max_entries = 20, .key_min = 1, .key_max = 256, .value_max = 256};

// Entry count and each key and value. Entries are checked in key order so
// that messages do not depend on hash order. Returns whether every value is
// within limits.value_max: values that are not must not be parsed further.
bool CheckMap(Violations& v, const std::string& field, const StringMap& map,
              const MapLimits& limits);

// An output location (S3Uri members): s3://, https://, file:// or a local
// path inside options.data_roots (ResolveOutputPath); empty is a violation
// only when `required`.
void CheckOutputPath(Violations& v, const std::string& field, absl::string_view value,
                     bool required, const ValidationOptions& options);

// A location data is read from (S3DataSource.S3Uri): recorded, never opened
// by the server, so not confined to the data roots: 1-1024 characters, no NUL.
void CheckInputUri(Violations& v, const std::string& field, absl::string_view value);

// A TrainingJobName: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}, 1-63 characters.
void CheckTrainingJobName(Violations& v, const std::string& field, absl::string_view name);

// Every string of `message` (recursively, map keys and values included)
// that holds a NUL byte, one violation each, named as in JSON
// ("DebugRuleConfigurations[0].RuleParameters.regex").
void CheckNoNulAnywhere(Violations& v, const google::protobuf::Message& message);

// The start every request validator shares: no NUL anywhere (checked
// first, and alone, so that no string with a NUL reaches the other checks),
// then the TrainingJobName. Returns false (with the NUL violations in `v`)
// when a NUL was found: the caller returns v.ToStatus() at once.
bool CheckRequestStart(Violations& v, const google::protobuf::Message& request,
                       absl::string_view training_job_name);

}  // namespace debugplane::core::validation_internal

#endif  // DEBUGPLANE_CORE_JOBS_VALIDATION_CHECKS_H_
