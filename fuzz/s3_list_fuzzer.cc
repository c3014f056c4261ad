// libFuzzer target: the S3 ListObjectsV2 and error reply parsers
// (objectstore/s3_xml.h), which read whatever a server sends.
//
// Build and run (scripts/fuzz.sh does both):
//   scripts/fuzz.sh s3_list_fuzzer

#include <cstddef>
#include <cstdint>

#include "objectstore/s3_xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  (void)debugplane::objectstore::ParseListObjectsV2(text);
  (void)debugplane::objectstore::ParseS3Error(text);
  return 0;
}
