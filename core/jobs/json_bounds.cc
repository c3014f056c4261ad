#include "core/jobs/json_bounds.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/jobs/validation_text.h"

namespace debugplane::core {

int JsonNestingDepth(absl::string_view text) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // The escaped character cannot end the string.
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        deepest = std::max(deepest, ++depth);
        break;
      case ']':
      case '}':
        // Unbalanced closers make the text invalid JSON; never go negative
        // so that later openers are still counted.
        depth = std::max(0, depth - 1);
        break;
      default:
        break;
    }
  }
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
