// Text from a store (keys, short excerpts of objects) made safe for status
// messages, which end up in rule details, reports and gRPC replies.

#ifndef DEBUGPLANE_OBJECTSTORE_MESSAGE_TEXT_H_
#define DEBUGPLANE_OBJECTSTORE_MESSAGE_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace debugplane::objectstore {

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

}  // namespace debugplane::objectstore

#endif  // DEBUGPLANE_OBJECTSTORE_MESSAGE_TEXT_H_
