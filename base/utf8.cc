#include "base/utf8.h"

namespace debugplane::base {

size_t Utf8MultibyteSequenceLength(absl::string_view text) {
  if (text.empty()) return 0;
  const auto byte = [&text](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  size_t length;
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // Overlong.
    if (lead == 0xED) second_max = 0x9F;  // Surrogates.
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // Overlong.
    if (lead == 0xF4) second_max = 0x8F;  // Beyond U+10FFFF.
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < second_min || byte(1) > second_max) return 0;
  for (size_t i = 2; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;  // Not a continuation byte.
  }
  return length;
}

}  // namespace debugplane::base
