#include "base/message_text.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/utf8.h"

namespace debugplane::base {
namespace {

// The characters that EscapeForMessage writes as a backslash and a letter
// (or as themselves after a backslash).
struct ShortEscapeEntry {
  char c;
  absl::string_view escape;
};
constexpr ShortEscapeEntry kShortEscapes[] = {
    {'\n', "\\n"}, {'\r', "\\r"}, {'\t', "\\t"},
    {'\\', "\\\\"}, {'"', "\\\""}, {'\'', "\\'"},
};

// The short escape of `c`, or empty if it has none.
absl::string_view ShortEscape(unsigned char c) {
  for (const ShortEscapeEntry& entry : kShortEscapes) {
    if (static_cast<unsigned char>(entry.c) == c) return entry.escape;
  }
  return {};
}

}  // namespace

std::string EscapeForMessage(absl::string_view text, size_t max_chars) {
  std::string out;
  size_t chars = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (chars == max_chars) {
      out.append("...");
      break;
    }
    ++chars;
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      if (const size_t length = Utf8MultibyteSequenceLength(text.substr(i)); length > 0) {
        out.append(text.data() + i, length);
        i += length;
      } else {
        absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
        ++i;
      }
      continue;
    }
    ++i;
    if (const absl::string_view escape = ShortEscape(c); !escape.empty()) {
      out.append(escape.data(), escape.size());
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string QuoteForMessage(absl::string_view text, size_t max_chars) {
  return absl::StrCat("\"", EscapeForMessage(text, max_chars), "\"");
}

std::string SingleQuoteForMessage(absl::string_view text, size_t max_chars) {
  return absl::StrCat("'", EscapeForMessage(text, max_chars), "'");
}

std::string EscapeControlCharacters(absl::string_view text, bool keep_line_feeds) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (keep_line_feeds && (c == '\n' || c == '\t')) {
      out.push_back(static_cast<char>(c));
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if ((c < 0x20 || c == 0x7f)) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) == 0x85) {
      out += "\\u0085";
      i += 1;
    } else if (c == 0xe2 && i + 2 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(text[i + 2]) == 0xa8 ||
                static_cast<unsigned char>(text[i + 2]) == 0xa9)) {
      out += static_cast<unsigned char>(text[i + 2]) == 0xa8 ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

}  // namespace debugplane::base
