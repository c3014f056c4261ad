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
  std::vector<Tensor> values;  // Tagged tensors (name = tag), in record order.
  int64_t skipped = 0;         // Text, image, audio and non-numeric values.
};

// Parses `payload`. DATA_LOSS "<where>: ..." if it is not an Event;
// INVALID_ARGUMENT "<where>: tag '...': ..." for a value whose histogram or
// tensor is inconsistent (bucket counts and limits of different sizes,
// more than kMaxHistogramBuckets, a [k, 3] tensor of another shape, and
// tensor_decode's errors). `where` is built only for an error.
absl::StatusOr<DecodedEvent> DecodeEvent(absl::string_view payload,
                                         absl::FunctionRef<std::string()> where);

}  // namespace debugplane::rules_engine::tensorboard

#endif  // DEBUGPLANE_RULES_ENGINE_TENSORBOARD_EVENT_DECODE_H_
