#include "service/http/request_id.h"

#include <cstdint>

#include "absl/random/random.h"
#include "absl/strings/str_format.h"

namespace debugplane::service::http {

std::string NewRequestId() {
  // One generator per thread: seeded from the OS, no lock on the hot path.
  thread_local absl::BitGen generator;
  uint64_t high = absl::Uniform<uint64_t>(generator);
  uint64_t low = absl::Uniform<uint64_t>(generator);
  high = (high & ~uint64_t{0xF000}) | uint64_t{0x4000};          // Version 4.
  low = (low & ~(uint64_t{0xC} << 60)) | (uint64_t{0x8} << 60);  // Variant 10.
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", high >> 32, (high >> 16) & 0xFFFF,
                         high & 0xFFFF, low >> 48, low & 0xFFFFFFFFFFFF);
}

}  // namespace debugplane::service::http
