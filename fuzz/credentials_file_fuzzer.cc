// libFuzzer target: the credentials file parser (service/auth/credentials_file.h).
//   scripts/fuzz.sh credentials_file_fuzzer

#include <cstddef>
#include <cstdint>

#include "service/auth/credentials_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto set = debugplane::service::auth::ParseCredentials(text, "fuzz");
  if (set.ok()) (void)set->Summary();
  return 0;
}
