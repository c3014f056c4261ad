// Text from a store (keys, short excerpts of objects) made safe for status
// messages, which end up in rule details, reports and gRPC replies.

#ifndef DEBUGPLANE_BASE_MESSAGE_TEXT_H_
#define DEBUGPLANE_BASE_MESSAGE_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace debugplane::base {

// At most `max_chars` characters of `text`, with "..." appended when cut.
// Valid UTF-8 is kept; control characters, quotes, backslashes and bytes of
// invalid UTF-8 are escaped C style (\n, \", \\, \xNN), so the result is
// valid UTF-8 on one line. An escape counts as one character.
std::string EscapeForMessage(absl::string_view text, size_t max_chars = 64);

// EscapeForMessage(text, max_chars) between double quotes.
std::string QuoteForMessage(absl::string_view text, size_t max_chars);

// EscapeForMessage(text, max_chars) between single quotes ('value'): the form
// validation messages give user input.
std::string SingleQuoteForMessage(absl::string_view text, size_t max_chars = 64);

// `text` with control characters escaped C style (\r, \n, \t, \xNN) and
// the Unicode line terminators U+0085, U+2028, U+2029 as \uXXXX, so that it
// stays on one line; everything else, invalid UTF-8 included, as it is.
// With `keep_line_feeds`, '\n' and '\t' are kept (text meant to span lines,
// as a rule's details in a mail body). For what must not break a line: log
// lines, mail headers and bodies; names stored by a version that did not
// refuse control characters pass through here.
std::string EscapeControlCharacters(absl::string_view text, bool keep_line_feeds = false);

}  // namespace debugplane::base

#endif  // DEBUGPLANE_BASE_MESSAGE_TEXT_H_
