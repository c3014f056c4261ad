#include "core/jobs/json_bounds.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/json_brackets.h"
#include "core/jobs/validation_text.h"

namespace debugplane::core {

int JsonNestingDepth(absl::string_view text) {
  int depth = 0;
  int deepest = 0;
  base::ForEachJsonBracket(text, [&](char bracket) {
    if (bracket == '[' || bracket == '{') {
      deepest = std::max(deepest, ++depth);
    } else {
      // Unbalanced closers make the text invalid JSON; never go negative so
      // that later openers are still counted.
      depth = std::max(0, depth - 1);
    }
  });
  return deepest;
}

absl::Status CheckJsonBounds(absl::string_view text, const JsonBounds& bounds) {
  // Length first: a refused value is never scanned beyond this count.
  const size_t chars = CharCount(text);
  if (chars > bounds.max_chars) {
    return absl::InvalidArgumentError(
        absl::StrCat("is ", chars, " characters long; at most ", bounds.max_chars, " are allowed"));
  }
  const int depth = JsonNestingDepth(text);
  if (depth > bounds.max_depth) {
    return absl::InvalidArgumentError(absl::StrCat("nests arrays and objects ", depth,
                                                   " levels deep; at most ", bounds.max_depth,
                                                   " are allowed"));
  }
  return absl::OkStatus();
}

}  // namespace debugplane::core
