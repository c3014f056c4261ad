// libFuzzer target: TensorBoard event files (rules_engine/tensorboard/
// event_decode.h): TFRecord framing, then each record's Event, its summary
// values, HistogramProto, TF2's [k, 3] histogram tensors and plain
// TensorProtos.
//
// Build and run: scripts/fuzz.sh tensorboard_event_fuzzer (seeds: the event
// files of tests/data/frameworks/).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "rules_engine/smdebug/tfrecord.h"
#include "rules_engine/tensorboard/event_decode.h"

namespace tb = debugplane::rules_engine::tensorboard;

// Every decoded value is consistent: a histogram has as many counts as
// limits, within the limit, and no values; other values match their shape.
static void Check(const debugplane::rules_engine::Tensor& t) {
  if (t.histogram) {
    if (t.histogram->bucket.size() != t.histogram->bucket_limit.size()) abort();
    if (t.histogram->bucket.size() > static_cast<size_t>(tb::kMaxHistogramBuckets)) abort();
    if (!t.values.empty()) abort();
    return;
  }
  int64_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 0) abort();
    n = d == 0 ? 0 : (n > INT64_MAX / d ? INT64_MAX : n * d);
  }
  if (!t.values.empty() && !t.shape.empty() && static_cast<int64_t>(t.values.size()) != n) {
    abort();
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The file as framed records, and the whole input as one payload.
  auto records = debugplane::rules_engine::ParseTfRecords(bytes, "fuzz.tfevents");
  if (records.ok()) {
    for (const auto& record : records->records) {
      auto event = tb::DecodeEvent(record.payload, [] { return std::string("fuzz"); });
      if (event.ok()) {
        for (const auto& t : event->values) Check(t);
      }
    }
  }
  auto event = tb::DecodeEvent(bytes, [] { return std::string("fuzz"); });
  if (event.ok()) {
    for (const auto& t : event->values) Check(t);
  }
  return 0;
}
