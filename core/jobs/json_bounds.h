// Bounds on JSON text that users put inside request strings
// (RuleParameters["action_json"], ProfilingParameters["*ProfilingConfig"]),
// checked before the text is parsed.
//
// nlohmann::json parses and destroys iteratively, but dump(), copies and
// comparisons recurse once per nesting level: a value nested tens of
// thousands of levels deep would exhaust the stack of the thread that
// touches it. Checking the length first also keeps the work done on a
// refused value proportional to the limit, not to what was sent.

#ifndef DEBUGPLANE_CORE_JOBS_JSON_BOUNDS_H_
#define DEBUGPLANE_CORE_JOBS_JSON_BOUNDS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace debugplane::core {

// The nesting depth of arrays and objects in `text`, counting brackets
// outside string literals. For any text a JSON parser accepts this is the
// depth of the value it builds; for other text it is a bound the caller may
// still refuse on (the parse would fail anyway). O(size), no allocation.
int JsonNestingDepth(absl::string_view text);

// Limits on a JSON text: its length, and its nesting depth as
// JsonNestingDepth measures it.
struct JsonBounds {
  // Longest accepted text, in characters (code points, as SageMaker counts
  // the map values that carry this JSON).
  size_t max_chars = 256;
  // Deepest accepted nesting of arrays and objects: "[]" is 1, "[{}]" 2.
  int max_depth = 16;
};

// The bounds of the JSON values in rule and profiling parameters: they are
// map values of at most 256 characters, and every format debugplane reads
// there nests at most two levels (a list of action objects).
inline constexpr JsonBounds kRequestJsonBounds = {.max_chars = 256, .max_depth = 16};

// OK if `text` is within `bounds`, else INVALID_ARGUMENT whose message
// describes the value (the caller names the field):
//   "is 300 characters long; at most 256 are allowed"  (nothing else is read)
//   "nests arrays and objects 40 levels deep; at most 16 are allowed"
// Call it before parsing; it does not check that `text` is JSON.
absl::Status CheckJsonBounds(absl::string_view text, const JsonBounds& bounds);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_JSON_BOUNDS_H_
