#include "rules_engine/tensorboard/event_decode.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/message_text.h"
#include "rules_engine/smdebug/tensor_decode.h"
#include "rules_engine/tensorboard/tb_event.pb.h"

namespace debugplane::rules_engine::tensorboard {
namespace {

using ::debugplane::tensorboard_proto::Event;
using ::debugplane::tensorboard_proto::HistogramProto;
using ::debugplane::tensorboard_proto::Summary;

// Plugins whose tensors are not numbers a rule could read.
bool IsNonNumericPlugin(absl::string_view plugin) {
  return plugin == "text" || plugin == "images" || plugin == "audio" || plugin == "hparams" ||
         plugin == "graph" || plugin == "graphs" || plugin == "mesh" || plugin == "pr_curves" ||
         plugin == "custom_scalars" || plugin == "projector";
}

std::string ShownTag(absl::string_view tag) { return base::QuoteForMessage(tag, 40); }

absl::Status ValueError(absl::FunctionRef<std::string()> where, absl::string_view tag,
                        absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where(), ": tag ", ShownTag(tag), ": ", what));
}

absl::Status FromHistogramProto(const HistogramProto& h, absl::FunctionRef<std::string()> where,
                                absl::string_view tag, Tensor& out) {
  if (h.bucket_limit_size() != h.bucket_size()) {
    return ValueError(where, tag,
                      absl::StrCat("histogram has ", h.bucket_size(), " bucket counts and ",
                                   h.bucket_limit_size(), " bucket limits"));
  }
  if (h.bucket_size() > kMaxHistogramBuckets) {
    return ValueError(where, tag,
                      absl::StrCat("histogram has ", h.bucket_size(), " buckets, more than ",
                                   kMaxHistogramBuckets));
  }
  HistogramStats& stats = out.histogram.emplace();
  stats.min = h.min();
  stats.max = h.max();
  stats.num = h.num();
  stats.sum = h.sum();
  stats.sum_squares = h.sum_squares();
  stats.bucket_limit.assign(h.bucket_limit().begin(), h.bucket_limit().end());
  stats.bucket.assign(h.bucket().begin(), h.bucket().end());
  out.dtype = smdebug::DT_DOUBLE;
  return absl::OkStatus();
}

// TF2's histogram: a [k, 3] tensor of (left edge, right edge, count) rows.
absl::Status FromHistogramTensor(const Tensor& rows, absl::FunctionRef<std::string()> where,
                                 absl::string_view tag, Tensor& out) {
  const bool empty = rows.values.empty() && !rows.shape.empty() && rows.shape[0] == 0;
  if (!empty && (rows.shape.size() != 2 || rows.shape[1] != 3)) {
    std::string shape;
    for (int64_t d : rows.shape) absl::StrAppend(&shape, shape.empty() ? "" : ", ", d);
    return ValueError(where, tag,
                      absl::StrCat("histogram tensor has shape [", shape, "], not [k, 3]"));
  }
  const int64_t k = empty ? 0 : rows.shape[0];
  if (k > kMaxHistogramBuckets) {
    return ValueError(
        where, tag,
        absl::StrCat("histogram has ", k, " buckets, more than ", kMaxHistogramBuckets));
  }
  HistogramStats& stats = out.histogram.emplace();
  stats.exact_moments = false;
  bool any = false;
  for (int64_t i = 0; i < k; ++i) {
    const double left = rows.values[3 * i], right = rows.values[3 * i + 1];
    const double count = rows.values[3 * i + 2];
    stats.bucket_limit.push_back(right);
    stats.bucket.push_back(count);
    if (!(count > 0)) continue;
    const double centre = (left + right) / 2;
    if (!any) stats.min = left;
    stats.max = right;
    any = true;
    stats.num += count;
    stats.sum += count * centre;
    stats.sum_squares += count * centre * centre;
  }
  out.dtype = smdebug::DT_DOUBLE;
  return absl::OkStatus();
}

// Decodes one value into `event` (appended, or counted as skipped).
absl::Status DecodeValue(const Summary::Value& value, absl::FunctionRef<std::string()> where,
                         DecodedEvent& event) {
  const absl::string_view plugin = value.metadata().plugin_data().plugin_name();
  if (!value.image().empty() || !value.audio().empty() || IsNonNumericPlugin(plugin) ||
      (value.has_tensor() && value.tensor().dtype() == smdebug::DT_STRING)) {
    ++event.skipped;
    return absl::OkStatus();
  }
  Tensor t;
  t.name = value.tag();
  if (value.has_histo()) {
    if (absl::Status s = FromHistogramProto(value.histo(), where, t.name, t); !s.ok()) return s;
  } else if (value.has_tensor()) {
    Tensor decoded;
    if (absl::Status s = DecodeTensorProto(value.tensor(), t.name, &decoded); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": ", s.message()));
    }
    if (plugin == "histograms") {
      if (absl::Status s = FromHistogramTensor(decoded, where, t.name, t); !s.ok()) return s;
    } else {
      t.dtype = decoded.dtype;
      t.shape = std::move(decoded.shape);
      t.values = std::move(decoded.values);
      t.facts = decoded.facts;
    }
  } else if (value.has_simple_value()) {
    t.dtype = smdebug::DT_FLOAT;
    t.values.assign(1, static_cast<double>(value.simple_value()));
  } else {
    ++event.skipped;  // A value of a kind not read (e.g. TF1's old-style histogram).
    return absl::OkStatus();
  }
  event.values.push_back(std::move(t));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DecodedEvent> DecodeEvent(absl::string_view payload,
                                         absl::FunctionRef<std::string()> where) {
  Event proto;
  if (!proto.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError(
        absl::StrCat(where(), ": record is not a TensorBoard Event (", payload.size(), " bytes)"));
  }
  DecodedEvent event;
  event.wall_time = proto.wall_time();
  event.step = proto.step();
  event.has_summary = proto.has_summary();
  event.values.reserve(proto.summary().value_size());
  for (const Summary::Value& value : proto.summary().value()) {
    if (absl::Status s = DecodeValue(value, where, event); !s.ok()) return s;
  }
  return event;
}

}  // namespace debugplane::rules_engine::tensorboard
