// Decoding of TensorBoard event records (the payload of one TFRecord of an
// `events.out.tfevents.*` file) into tagged tensors.
//
// Summary values become Tensors (name = tag):
//  - simple_value (torch's SummaryWriter default): a FLOAT scalar;
//  - a tensor with plugin "scalars" (TF2's tf.summary.scalar, torch's
//    new_style=True): a scalar of its dtype;
//  - histo (HistogramProto): a Tensor with `histogram` set, no values;
//  - a tensor with plugin "histograms" of shape [k, 3] (TF2's
//    tf.summary.histogram: left edge, right edge, count per bucket): the
//    same, with estimated moments (HistogramStats::exact_moments false);
//  - any other numeric tensor (plain TensorProto): its values, decoded by
//    rules_engine/smdebug/tensor_decode.h (the same limits).
// Text, image and audio summaries, string tensors and the plugins that are
// not numbers (hparams, graphs, meshes, pr_curves' raw data...) are counted
// in `skipped`, never decoded.

#ifndef DEBUGPLANE_RULES_ENGINE_TENSORBOARD_EVENT_DECODE_H_
#define DEBUGPLANE_RULES_ENGINE_TENSORBOARD_EVENT_DECODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine::tensorboard {

// A histogram of more buckets than this is refused (TensorBoard writes at
// most a few hundred; the limit stops a hostile record from making rules
// walk millions per step).
inline constexpr int64_t kMaxHistogramBuckets = 1 << 16;

// One event record.
struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  bool has_summary = false;    // False for file_version, graphs, session logs.
  std::vector<Tensor> values;  // The wanted values (name = tag), in record order.
  int64_t numeric = 0;         // Values that are numbers, wanted or not.
  int64_t histograms = 0;      // Of those, the histograms.
  int64_t skipped = 0;         // Text, image, audio and non-numeric values.
};

// Asked once per numeric value, in record order, with its tag and the
// event's step, before the value is decoded: whether to decode it. A value
// not wanted is skipped by its length (and not checked further).
using ValueWanted = absl::FunctionRef<bool(absl::string_view tag, int64_t step)>;

// Decodes `payload` into `event` (reset first; `event.values` keeps its
// capacity). The Event, Summary, Summary.Value, SummaryMetadata and
// HistogramProto fields are read straight from the wire (wire_reader.h):
// unknown fields are skipped by their length; a field the format defines
// with another wire type, a varint cut short or longer than 10 bytes, a
// length past the end of its message, or a group makes the record DATA_LOSS
// "<where>: record is not a TensorBoard Event (<n> bytes): <why>". A
// message field given twice is merged as protobuf merges it (a scalar or
// bytes field: the last; a repeated one: all). INVALID_ARGUMENT "<where>: tag '...': ..." for a wanted
// value whose histogram or tensor is inconsistent (bucket counts and limits
// of different sizes, more than kMaxHistogramBuckets, a [k, 3] tensor of
// another shape, and tensor_decode's errors). `where` is built only for an
// error.
absl::Status DecodeEventInto(absl::string_view payload, absl::FunctionRef<std::string()> where,
                             ValueWanted wanted, DecodedEvent& event);

// DecodeEventInto with every value wanted.
absl::StatusOr<DecodedEvent> DecodeEvent(absl::string_view payload,
                                         absl::FunctionRef<std::string()> where);

}  // namespace debugplane::rules_engine::tensorboard

#endif  // DEBUGPLANE_RULES_ENGINE_TENSORBOARD_EVENT_DECODE_H_
