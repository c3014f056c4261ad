// ForEachJsonBracket: the brackets of a JSON text that open and close arrays
// and objects, telling them apart from brackets inside string literals. For
// code that measures or splits JSON text without parsing it.

#ifndef DEBUGPLANE_BASE_JSON_BRACKETS_H_
#define DEBUGPLANE_BASE_JSON_BRACKETS_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace debugplane::base {

// Calls `on_bracket(c)` for each '[', '{', ']' and '}' of `text` that stands
// outside string literals (inside one, a backslash escapes the next
// character, so an escaped quote does not end it). Returns whether a string
// literal is still open at the end of `text`. O(size), no allocation; the
// text need not be valid JSON.
template <typename OnBracket>
bool ForEachJsonBracket(absl::string_view text, OnBracket on_bracket) {
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // The escaped character cannot end the string.
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{' || c == ']' || c == '}') {
      on_bracket(c);
    }
  }
  return in_string;
}

}  // namespace debugplane::base

#endif  // DEBUGPLANE_BASE_JSON_BRACKETS_H_
