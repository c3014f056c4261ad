// libFuzzer target: TFRecord framing parser (rules_engine/smdebug/tfrecord.h).
//
// Build and run (instrumenting the library too, so coverage guides the fuzzer):
//   CC=clang CXX=clang++ cmake -S /work/main -B /work/main/build-fuzz -G Ninja \
//     -DDP_FUZZ=ON -DDP_BUILD_TESTS=OFF -DDP_BUILD_BENCH=OFF \
//     -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined"
//   ninja -C /work/main/build-fuzz -j2 tfrecord_fuzzer
//   mkdir -p /tmp/tfrecord_corpus
//   cp /work/shared/fixtures/smdebug/healthy/events/00000000000[0-5]/* /tmp/tfrecord_corpus/
//   /work/main/build-fuzz/tfrecord_fuzzer -max_total_time=60 -max_len=65536 /tmp/tfrecord_corpus

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "rules_engine/smdebug/tfrecord.h"

using debugplane::rules_engine::EncodeTfRecord;
using debugplane::rules_engine::ParseTfRecord;
using debugplane::rules_engine::ParseTfRecordAt;
using debugplane::rules_engine::ParseTfRecords;
using debugplane::rules_engine::TfRecordParse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string buf(reinterpret_cast<const char*>(data), size);
  auto records = ParseTfRecords(buf, "fuzz.tfevents", 7);
  if (records.ok()) {
    if (records->consumed > buf.size()) abort();
    for (const auto& r : records->records) {
      // Payloads lie inside the buffer and re-encode to a record that parses.
      if (r.payload.data() < buf.data() ||
          r.payload.data() + r.payload.size() > buf.data() + buf.size()) {
        abort();
      }
      const std::string encoded = EncodeTfRecord(r.payload);  // Outlives `again`'s view.
      TfRecordParse again = ParseTfRecord(encoded);
      if (again.kind != TfRecordParse::Kind::kOk || again.payload != r.payload) abort();
    }
  }
  // The index-driven path, with offset/length taken from the input itself.
  if (size >= 16) {
    uint64_t offset = 0, length = 0;
    for (int i = 0; i < 8; ++i) offset |= uint64_t{data[i]} << (8 * i);
    for (int i = 0; i < 8; ++i) length |= uint64_t{data[8 + i]} << (8 * i);
    offset %= size;
    const std::string range = buf.substr(offset, length);
    TfRecordParse r = ParseTfRecordAt(range, "fuzz.tfevents", offset, length);
    if (r.kind == TfRecordParse::Kind::kOk && r.size != length) abort();
  }
  return 0;
}
