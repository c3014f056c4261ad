// libFuzzer target: Event protobuf parsing and tensor decoding
// (rules_engine/smdebug/tensor_decode.h).
//
// Build and run (see tfrecord_fuzzer.cc for the cmake line):
//   ninja -C /work/main/build-fuzz -j2 event_fuzzer
//   /work/main/build-fuzz/event_fuzzer -max_total_time=60 -max_len=65536 /tmp/event_corpus
// Seeds: the payloads of fixture records (written by tfrecord splitting,
// e.g. with the test helper), or start from an empty corpus.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "rules_engine/smdebug/tensor_decode.h"

using debugplane::rules_engine::DecodeEvent;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto values = DecodeEvent(absl::string_view(reinterpret_cast<const char*>(data), size),
                            "fuzz.tfevents offset 0");
  if (values.ok()) {
    for (const auto& v : *values) {
      // Decoded values never exceed what the shape allows.
      int64_t n = 1;
      for (int64_t d : v.tensor.shape) {
        if (d < 0) abort();
        n = d == 0 ? 0 : (n > INT64_MAX / d ? INT64_MAX : n * d);
      }
      if (!v.tensor.values.empty() && static_cast<int64_t>(v.tensor.values.size()) != n &&
          !v.tensor.shape.empty()) {
        abort();
      }
      // STRING tensors: as many strings as elements, within the byte limit.
      int64_t string_bytes = 0;
      for (const auto& s : v.tensor.strings) string_bytes += static_cast<int64_t>(s.size());
      if (string_bytes > debugplane::rules_engine::kMaxDecodedStringBytes) abort();
      if (!v.tensor.strings.empty() && static_cast<int64_t>(v.tensor.strings.size()) != n) {
        abort();
      }
    }
  }
  return 0;
}
