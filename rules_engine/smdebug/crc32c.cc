#include "rules_engine/smdebug/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace debugplane::rules_engine {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // Castagnoli, reflected.

// kTables[k][b]: CRC of byte b followed by k zero bytes, for slicing-by-8.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t;
  constexpr Tables() : t{} {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
      t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b) {
      for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
    }
  }
};
constexpr Tables kTables;

inline uint64_t LoadLE64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // x86 and the other targets we build for are little endian.
  return v;
}

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, const char* data, size_t size) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  const auto& t = kTables.t;
  uint32_t c = ~crc;
  while (size >= 8) {
    uint64_t v = LoadLE64(p) ^ c;
    c = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^ t[4][(v >> 24) & 0xff] ^
        t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^ t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
    p += 8;
    size -= 8;
  }
  while (size-- > 0) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
  return ~c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t Crc32cExtendHardware(uint32_t crc, const char* data,
                                                                size_t size) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  while (size >= 8) {
    c = _mm_crc32_u64(c, LoadLE64(p));
    p += 8;
    size -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (size-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return ~c32;
}

bool Crc32cHardwareAvailable() {
  static const bool available = __builtin_cpu_supports("sse4.2");
  return available;
}
#else
uint32_t Crc32cExtendHardware(uint32_t crc, const char* data, size_t size) {
  return Crc32cExtendPortable(crc, data, size);
}
bool Crc32cHardwareAvailable() { return false; }
#endif

uint32_t Crc32cExtend(uint32_t crc, const char* data, size_t size) {
  if (Crc32cHardwareAvailable()) return Crc32cExtendHardware(crc, data, size);
  return Crc32cExtendPortable(crc, data, size);
}

}  // namespace debugplane::rules_engine
