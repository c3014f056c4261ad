// libFuzzer target: TensorBoard event files (rules_engine/tensorboard/
// event_decode.h): TFRecord framing, then each record's Event, its summary
// values, HistogramProto, TF2's [k, 3] histogram tensors and plain
// TensorProtos, through the hand-written wire decoder. Each payload is
// also decoded with only some tags wanted (the reader's way: the others
// skipped by length), which must agree with the full decode, and parsed by
// the generated protobuf parser, whose step, wall time and value count must
// agree wherever both accept the record.
//
// Build and run: scripts/fuzz.sh tensorboard_event_fuzzer (seeds: the event
// files of tests/data/frameworks/).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "rules_engine/smdebug/tfrecord.h"
#include <cstring>

#include "rules_engine/tensorboard/event_decode.h"
#include "rules_engine/tensorboard/tb_event.pb.h"

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

static bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

static void DecodeAndCompare(absl::string_view payload) {
  auto where = [] { return std::string("fuzz"); };
  auto full = tb::DecodeEvent(payload, where);
  tb::DecodedEvent some;
  const absl::Status partial = tb::DecodeEventInto(
      payload, where, [](absl::string_view tag, int64_t) { return tag.size() % 2 == 1; }, some);
  if (!full.ok()) return;
  for (const auto& t : full->values) Check(t);
  // Wanting fewer values never turns a good record bad, nor changes counts.
  if (!partial.ok() || some.numeric != full->numeric || some.histograms != full->histograms ||
      some.skipped != full->skipped || some.step != full->step) {
    abort();
  }
  size_t next = 0;
  for (const auto& t : full->values) {
    if (t.name.size() % 2 == 0) continue;
    if (next >= some.values.size() || some.values[next].name != t.name ||
        some.values[next].histogram.has_value() != t.histogram.has_value() ||
        some.values[next].values.size() != t.values.size()) {
      abort();
    }
    ++next;
  }
  if (next != some.values.size()) abort();
  // The generated parser, where it accepts the record too.
  debugplane::tensorboard_proto::Event proto;
  if (!proto.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) return;
  if (proto.step() != full->step || !SameBits(proto.wall_time(), full->wall_time) ||
      proto.has_summary() != full->has_summary ||
      proto.summary().value_size() != full->numeric + full->skipped) {
    abort();
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The file as framed records, and the whole input as one payload.
  auto records = debugplane::rules_engine::ParseTfRecords(bytes, "fuzz.tfevents");
  if (records.ok()) {
    for (const auto& record : records->records) DecodeAndCompare(record.payload);
  }
  DecodeAndCompare(bytes);
  return 0;
}
