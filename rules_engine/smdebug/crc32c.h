// CRC32C (Castagnoli), as used by TFRecord framing in smdebug event files.

#ifndef DEBUGPLANE_RULES_ENGINE_SMDEBUG_CRC32C_H_
#define DEBUGPLANE_RULES_ENGINE_SMDEBUG_CRC32C_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace debugplane::rules_engine {

// CRC32C of `data`, continuing from `crc` (the value returned for the
// preceding bytes; 0 to start). Uses the SSE4.2 crc32 instruction when the
// CPU has it, else a slicing-by-8 table.
uint32_t Crc32cExtend(uint32_t crc, const char* data, size_t size);
inline uint32_t Crc32c(absl::string_view data) { return Crc32cExtend(0, data.data(), data.size()); }

// The two implementations, exposed so tests can check they agree. The
// hardware one must only be called when Crc32cHardwareAvailable().
uint32_t Crc32cExtendPortable(uint32_t crc, const char* data, size_t size);
uint32_t Crc32cExtendHardware(uint32_t crc, const char* data, size_t size);
bool Crc32cHardwareAvailable();

// TFRecord's masked CRC: a CRC stored next to the data it covers is
// rotated and offset so that CRCs of data that embeds CRCs stay robust.
inline uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t UnmaskCrc32c(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}
inline uint32_t MaskedCrc32c(absl::string_view data) { return MaskCrc32c(Crc32c(data)); }

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SMDEBUG_CRC32C_H_
