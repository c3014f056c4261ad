#include "service/http/percent_decoding.h"

namespace debugplane::service::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes `text` into `out`; on a bad escape keeps it as it is (lenient) or
// returns false (strict).
bool Decode(absl::string_view text, PlusMeans plus, bool strict, std::string& out) {
  out.clear();
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+' && plus == PlusMeans::kSpace) {
      out.push_back(' ');
      continue;
    }
    if (c != '%') {
      out.push_back(c);
      continue;
    }
    const int high = i + 2 < text.size() ? HexValue(text[i + 1]) : -1;
    const int low = i + 2 < text.size() ? HexValue(text[i + 2]) : -1;
    if (high < 0 || low < 0) {
      if (strict) return false;
      out.push_back(c);
      continue;
    }
    out.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return true;
}

}  // namespace

std::string PercentDecode(absl::string_view text, PlusMeans plus) {
  std::string out;
  Decode(text, plus, /*strict=*/false, out);
  return out;
}

std::optional<std::string> PercentDecodeStrict(absl::string_view text, PlusMeans plus) {
  std::string out;
  if (!Decode(text, plus, /*strict=*/true, out)) return std::nullopt;
  return out;
}

}  // namespace debugplane::service::http
