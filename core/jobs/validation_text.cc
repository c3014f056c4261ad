#include "core/jobs/validation_text.h"

#include "absl/strings/str_cat.h"
#include "base/message_text.h"

namespace debugplane::core {

size_t CharCount(absl::string_view s) {
  size_t count = 0;
  for (const char c : s) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

std::string CutToChars(absl::string_view value, size_t max_chars) {
  size_t count = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    if ((static_cast<unsigned char>(value[i]) & 0xC0) == 0x80) continue;  // Continuation.
    if (count == max_chars) return std::string(value.substr(0, i));
    ++count;
  }
  return std::string(value);
}

// One escaping for every message, whether the text came from a request or a
// file: objectstore's.
std::string EscapeForMessage(absl::string_view value, size_t max_chars) {
  return base::EscapeForMessage(value, max_chars);
}

std::string QuoteForMessage(absl::string_view value, size_t max_chars) {
  return base::SingleQuoteForMessage(value, max_chars);
}

}  // namespace debugplane::core
