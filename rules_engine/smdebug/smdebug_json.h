// Parsers for smdebug's JSON files in a trial directory: the per-step index
// files and the collections file (docs/smdebug-format.md).

#ifndef DEBUGPLANE_RULES_ENGINE_SMDEBUG_SMDEBUG_JSON_H_
#define DEBUGPLANE_RULES_ENGINE_SMDEBUG_SMDEBUG_JSON_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rules_engine/smdebug/json_scanner.h"
#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine {

// Where one tensor's record sits in the step's event file.
struct IndexEntry {
  std::string tensor_name;
  uint64_t start_idx = 0;
  uint64_t length = 0;  // Of the whole record, framing included.
};

// index/<prefix>/<step:012d>_<worker>.json
struct StepIndex {
  std::optional<Mode> mode;          // meta.mode ("TRAIN", ...), if valid.
  std::optional<int64_t> mode_step;  // meta.mode_step, if present.
  std::string event_file_name;       // meta.event_file_name, as written.
  std::vector<IndexEntry> tensors;   // tensor_payload, in file order.
};

// DATA_LOSS naming `file` (escaped) if the text is not a JSON object of that
// shape (the caller decides whether that means "still being written"); the
// message quotes at most a short escaped excerpt of the text. Read in place
// with JsonScanner (json_scanner.h); repeated keys: the last one counts.
absl::StatusOr<StepIndex> ParseIndexJson(absl::string_view json, absl::string_view file);
// The same with nlohmann::json's DOM, the reference ParseIndexJson was
// written against: exposed so tests can check both agree (errors are worded
// by DescribeJsonError in both).
absl::StatusOr<StepIndex> ParseIndexJsonWithNlohmann(absl::string_view json,
                                                     absl::string_view file);

// collections/000000000/<worker>_collections.json
struct CollectionsFile {
  std::map<std::string, Collection> collections;
  int num_workers = 1;  // _meta.num_workers; 1 if absent.
};
absl::StatusOr<CollectionsFile> ParseCollectionsJson(absl::string_view json,
                                                     absl::string_view file);

// "TRAIN" -> kTrain, ...; nullopt for anything else.
std::optional<Mode> ParseModeName(absl::string_view name);

// Why `text` (which failed to parse) is not valid JSON, saying where and
// what without quoting the text beyond an excerpt (JsonScanner::DescribeError):
//   JSON parse error at byte 12 (invalid literal) after "{\"Type\": cpu"
// with at most kMaxExcerptChars characters, escaped, up to the error. "not
// JSON" if it does parse.
std::string DescribeJsonError(absl::string_view text);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SMDEBUG_SMDEBUG_JSON_H_
