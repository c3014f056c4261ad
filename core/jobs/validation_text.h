// Text helpers shared by the validators: lengths as SageMaker counts them and
// excerpts of user input that are safe to put in status messages.

#ifndef DEBUGPLANE_CORE_JOBS_VALIDATION_TEXT_H_
#define DEBUGPLANE_CORE_JOBS_VALIDATION_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace debugplane::core {

// Length in characters (code points), as SageMaker counts; each byte of
// invalid UTF-8 counts as one.
size_t CharCount(absl::string_view s);

// The first `max_chars` characters (code points, counted as CharCount does)
// of `value`, cut between characters so valid UTF-8 stays valid; `value`
// itself when it is no longer. For texts stored as they came (an agent's
// FailureReason) whose size must be bounded.
std::string CutToChars(absl::string_view value, size_t max_chars);

// At most `max_chars` characters of `value`, with "..." appended when cut.
// Valid UTF-8 is kept (a tag key in any script stays readable); control
// characters, quotes, backslashes and bytes of invalid UTF-8 are escaped C
// style (\n, \', \", \\, \xNN). The result is always valid UTF-8: it goes
// into google.rpc.BadRequest, whose string fields must be.
std::string EscapeForMessage(absl::string_view value, size_t max_chars = 64);

// EscapeForMessage(value) between single quotes: 'value'.
std::string QuoteForMessage(absl::string_view value, size_t max_chars = 64);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_VALIDATION_TEXT_H_
