// libFuzzer target: index and collections JSON parsers (rules_engine/smdebug/smdebug_json.h).
//
// Build and run (see tfrecord_fuzzer.cc for the cmake line):
//   ninja -C /work/main/build-fuzz -j2 index_json_fuzzer
//   mkdir -p /tmp/json_corpus && cd /work/shared/fixtures/smdebug/healthy
//   cp index/000000000/00000000000[0-5]* collections/000000000/* /tmp/json_corpus/
//   /work/main/build-fuzz/index_json_fuzzer -max_total_time=60 -max_len=65536 /tmp/json_corpus

#include <cstddef>
#include <cstdint>

#include "rules_engine/smdebug/smdebug_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  (void)debugplane::rules_engine::ParseIndexJson(text, "fuzz.json");
  (void)debugplane::rules_engine::ParseCollectionsJson(text, "fuzz_collections.json");
  return 0;
}
