// UTF-8 well-formedness, in one place for every room that checks it (message
// text, the JSON scanner, evaluator output).

#ifndef DEBUGPLANE_BASE_UTF8_H_
#define DEBUGPLANE_BASE_UTF8_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace debugplane::base {

// The length (2 to 4) of the well-formed multi-byte UTF-8 sequence at the
// start of `text`, or 0 if there is none: `text` is empty, starts with an
// ASCII byte, or starts with an ill-formed or truncated sequence. Well-formed
// as in RFC 3629 (Unicode table 3-7): no overlong forms, no surrogates,
// nothing above U+10FFFF. Thread-safe (pure).
size_t Utf8MultibyteSequenceLength(absl::string_view text);

}  // namespace debugplane::base

#endif  // DEBUGPLANE_BASE_UTF8_H_
