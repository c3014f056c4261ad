#include "rules_engine/tensorboard/event_decode.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/message_text.h"
#include "rules_engine/smdebug/tensor_decode.h"
#include "rules_engine/tensorboard/wire_reader.h"

namespace debugplane::rules_engine::tensorboard {
namespace {

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

static_assert(std::endian::native == std::endian::little,
              "packed doubles are copied as they are on the wire");

// Appends the doubles of a repeated double field, packed or not.
bool ReadDoubles(WireReader& in, uint32_t wire_type, std::vector<double>& out) {
  double v;
  if (wire_type == kFixed64) {
    if (!in.ReadDouble(v)) return false;
    if (out.size() <= static_cast<size_t>(kMaxHistogramBuckets)) out.push_back(v);
    return true;
  }
  absl::string_view packed;
  if (wire_type != kLengthDelimited) return in.WrongWireType();
  if (!in.ReadBytes(packed)) return false;
  if (packed.size() % 8 != 0) return in.WrongWireType();
  // Beyond the limit only the count matters (the caller refuses it).
  const size_t cap = static_cast<size_t>(kMaxHistogramBuckets) + 1;
  const size_t room = out.size() < cap ? cap - out.size() : 0;
  const size_t n = std::min(packed.size() / 8, room);
  // Little-endian IEEE doubles, as the wire has them (static_assert below).
  const size_t at = out.size();
  out.resize(at + n);
  if (n > 0) std::memcpy(out.data() + at, packed.data(), n * 8);
  return true;
}

// A HistogramProto's fields into `stats` (a wire error: false).
bool ReadHistogramProto(absl::string_view bytes, HistogramStats& stats) {
  WireReader in(bytes);
  uint32_t field, wire_type;
  while (!in.done()) {
    if (!in.ReadTag(field, wire_type)) return false;
    double* scalar = nullptr;
    switch (field) {
      case 1: scalar = &stats.min; break;
      case 2: scalar = &stats.max; break;
      case 3: scalar = &stats.num; break;
      case 4: scalar = &stats.sum; break;
      case 5: scalar = &stats.sum_squares; break;
      case 6:
        if (!ReadDoubles(in, wire_type, stats.bucket_limit)) return false;
        continue;
      case 7:
        if (!ReadDoubles(in, wire_type, stats.bucket)) return false;
        continue;
      default:
        if (!in.Skip(wire_type)) return false;
        continue;
    }
    if (wire_type != kFixed64) return in.WrongWireType();
    if (!in.ReadDouble(*scalar)) return false;
  }
  return true;
}

absl::Status CheckHistogram(const HistogramStats& h, absl::FunctionRef<std::string()> where,
                            absl::string_view tag) {
  if (h.bucket_limit.size() > static_cast<size_t>(kMaxHistogramBuckets) ||
      h.bucket.size() > static_cast<size_t>(kMaxHistogramBuckets)) {
    return ValueError(where, tag,
                      absl::StrCat("histogram has more than ", kMaxHistogramBuckets, " buckets"));
  }
  if (h.bucket_limit.size() != h.bucket.size()) {
    return ValueError(where, tag,
                      absl::StrCat("histogram has ", h.bucket.size(), " bucket counts and ",
                                   h.bucket_limit.size(), " bucket limits"));
  }
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

// The fields of one Summary.Value, as views into the record. A message
// field given more than once is kept whole (each occurrence), as protobuf
// merges them; for a bytes or scalar field the last one counts.
struct ValueFields {
  absl::string_view tag, plugin;
  absl::InlinedVector<absl::string_view, 1> histos, tensors;
  bool has_simple_value = false, has_image = false, has_audio = false;
  float simple_value = 0;
};

// SummaryMetadata.plugin_data.plugin_name, or false on a wire error.
bool ReadPluginName(absl::string_view metadata, absl::string_view& plugin) {
  WireReader in(metadata);
  uint32_t field, wire_type;
  while (!in.done()) {
    if (!in.ReadTag(field, wire_type)) return false;
    if (field != 1) {
      if (!in.Skip(wire_type)) return false;
      continue;
    }
    absl::string_view plugin_data;
    if (wire_type != kLengthDelimited) return in.WrongWireType();
    if (!in.ReadBytes(plugin_data)) return false;
    WireReader data(plugin_data);
    while (!data.done()) {
      if (!data.ReadTag(field, wire_type)) return false;
      if (field != 1) {
        if (!data.Skip(wire_type)) return false;
      } else if (wire_type != kLengthDelimited || !data.ReadBytes(plugin)) {
        return false;
      }
    }
  }
  return true;
}

bool ReadValueFields(absl::string_view bytes, ValueFields& v) {
  WireReader in(bytes);
  uint32_t field, wire_type;
  absl::string_view view;
  while (!in.done()) {
    if (!in.ReadTag(field, wire_type)) return false;
    if (field == 2) {
      if (wire_type != kFixed32 || !in.ReadFloat(v.simple_value)) return false;
      v.has_simple_value = true;
      continue;
    }
    const bool known = field == 1 || field == 4 || field == 5 || field == 6 || field == 8 ||
                       field == 9;
    if (!known) {
      if (!in.Skip(wire_type)) return false;
      continue;
    }
    if (wire_type != kLengthDelimited || !in.ReadBytes(view)) return false;
    switch (field) {
      case 1: v.tag = view; break;
      case 4: v.has_image = !view.empty(); break;
      case 6: v.has_audio = !view.empty(); break;
      case 5: v.histos.push_back(view); break;
      case 8: v.tensors.push_back(view); break;
      case 9: if (!ReadPluginName(view, v.plugin)) return false; break;
    }
  }
  return true;
}

// TensorProto.dtype (field 1) without decoding the rest, or false; `dtype`
// is left as it is when the field is absent.
bool PeekTensorDtype(absl::string_view tensor, int& dtype) {
  WireReader in(tensor);
  uint32_t field, wire_type;
  while (!in.done()) {
    if (!in.ReadTag(field, wire_type)) return false;
    if (field == 1 && wire_type == kVarint) {
      uint64_t v;
      if (!in.ReadVarint(v)) return false;
      dtype = static_cast<int>(v);
    } else if (!in.Skip(wire_type)) {
      return false;
    }
  }
  return true;
}

enum class ValueKind { kSkipped, kScalar, kHistogramProto, kHistogramTensor, kTensor };

ValueKind KindOf(const ValueFields& v, int tensor_dtype) {
  const bool has_tensor = !v.tensors.empty();
  if (v.has_image || v.has_audio || IsNonNumericPlugin(v.plugin) ||
      (has_tensor && tensor_dtype == smdebug::DT_STRING)) {
    return ValueKind::kSkipped;
  }
  if (!v.histos.empty()) return ValueKind::kHistogramProto;
  if (has_tensor) return v.plugin == "histograms" ? ValueKind::kHistogramTensor : ValueKind::kTensor;
  if (v.has_simple_value) return ValueKind::kScalar;
  return ValueKind::kSkipped;  // A value of a kind not read (e.g. TF1's old-style histogram).
}

// Decodes a wanted value into `t` (its name already set). DATA_LOSS-worthy
// wire errors give `wire_error`.
absl::Status DecodeWanted(const ValueFields& v, ValueKind kind,
                          absl::FunctionRef<std::string()> where, Tensor& t, bool& wire_error) {
  switch (kind) {
    case ValueKind::kScalar:
      t.dtype = smdebug::DT_FLOAT;
      t.values.assign(1, static_cast<double>(v.simple_value));
      return absl::OkStatus();
    case ValueKind::kHistogramProto: {
      HistogramStats& stats = t.histogram.emplace();
      t.dtype = smdebug::DT_DOUBLE;
      for (absl::string_view histo : v.histos) {
        if (!ReadHistogramProto(histo, stats)) {
          wire_error = true;
          return absl::OkStatus();
        }
      }
      return CheckHistogram(stats, where, t.name);
    }
    default: break;
  }
  smdebug::TensorProto proto;
  const std::string joined = v.tensors.size() == 1 ? std::string() : absl::StrJoin(v.tensors, "");
  const absl::string_view tensor = v.tensors.size() == 1 ? v.tensors[0] : joined;
  if (!proto.ParseFromArray(tensor.data(), static_cast<int>(tensor.size()))) {
    wire_error = true;
    return absl::OkStatus();
  }
  Tensor decoded;
  if (absl::Status s = DecodeTensorProto(proto, t.name, &decoded); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ": ", s.message()));
  }
  if (kind == ValueKind::kHistogramTensor) return FromHistogramTensor(decoded, where, t.name, t);
  t.dtype = decoded.dtype;
  t.shape = std::move(decoded.shape);
  t.values = std::move(decoded.values);
  t.facts = decoded.facts;
  return absl::OkStatus();
}

const char* WireErrorText(WireError e) {
  switch (e) {
    case WireError::kTruncatedVarint: return "a varint cut short";
    case WireError::kPastEnd: return "a field past the end of its message";
    case WireError::kBadWireType: return "a field of the wrong wire type";
    default: return "a malformed field";
  }
}

absl::Status NotAnEvent(absl::FunctionRef<std::string()> where, size_t size, const char* why) {
  return absl::DataLossError(absl::StrCat(where(), ": record is not a TensorBoard Event (", size,
                                          " bytes): ", why));
}

// One Summary.Value into `event`.
absl::Status DecodeValue(absl::string_view bytes, absl::FunctionRef<std::string()> where,
                         ValueWanted wanted, size_t payload_size, DecodedEvent& event) {
  ValueFields v;
  int dtype = 0;
  bool ok = ReadValueFields(bytes, v);
  for (size_t i = 0; ok && i < v.tensors.size(); ++i) ok = PeekTensorDtype(v.tensors[i], dtype);
  if (!ok) return NotAnEvent(where, payload_size, "a malformed Summary.Value");
  const ValueKind kind = KindOf(v, dtype);
  if (kind == ValueKind::kSkipped) {
    ++event.skipped;
    return absl::OkStatus();
  }
  ++event.numeric;
  if (kind == ValueKind::kHistogramProto || kind == ValueKind::kHistogramTensor) ++event.histograms;
  if (!wanted(v.tag, event.step)) return absl::OkStatus();
  Tensor& t = event.values.emplace_back();
  t.name.assign(v.tag.data(), v.tag.size());
  bool wire_error = false;
  absl::Status s = DecodeWanted(v, kind, where, t, wire_error);
  if (wire_error) return NotAnEvent(where, payload_size, "a malformed histogram or tensor");
  return s;
}

}  // namespace

absl::Status DecodeEventInto(absl::string_view payload, absl::FunctionRef<std::string()> where,
                             ValueWanted wanted, DecodedEvent& event) {
  event.wall_time = 0;
  event.step = 0;
  event.has_summary = false;
  event.values.clear();
  event.numeric = event.histograms = event.skipped = 0;
  // The Event's own fields first: the step is known before any value is
  // offered to `wanted`, wherever the writer put it.
  absl::InlinedVector<absl::string_view, 1> summaries;
  WireReader in(payload);
  uint32_t field, wire_type;
  while (!in.done()) {
    bool ok = in.ReadTag(field, wire_type);
    if (ok && field == 1) {
      ok = wire_type == kFixed64 ? in.ReadDouble(event.wall_time) : in.WrongWireType();
    } else if (ok && field == 2) {
      uint64_t step = 0;
      ok = wire_type == kVarint ? in.ReadVarint(step) : in.WrongWireType();
      event.step = static_cast<int64_t>(step);
    } else if (ok && field == 5) {
      ok = wire_type == kLengthDelimited ? in.ReadBytes(summaries.emplace_back())
                                         : in.WrongWireType();
    } else if (ok) {
      ok = in.Skip(wire_type);
    }
    if (!ok) return NotAnEvent(where, payload.size(), WireErrorText(in.error()));
  }
  event.has_summary = !summaries.empty();
  for (absl::string_view summary : summaries) {
    WireReader values(summary);
    while (!values.done()) {
      absl::string_view value;
      bool ok = values.ReadTag(field, wire_type);
      if (ok && field == 1) {
        ok = wire_type == kLengthDelimited ? values.ReadBytes(value) : values.WrongWireType();
        if (ok) {
          if (absl::Status s = DecodeValue(value, where, wanted, payload.size(), event); !s.ok()) {
            return s;
          }
          continue;
        }
      } else if (ok) {
        ok = values.Skip(wire_type);
      }
      if (!ok) return NotAnEvent(where, payload.size(), WireErrorText(values.error()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DecodedEvent> DecodeEvent(absl::string_view payload,
                                         absl::FunctionRef<std::string()> where) {
  DecodedEvent event;
  absl::Status s = DecodeEventInto(payload, where, [](absl::string_view, int64_t) { return true; },
                                   event);
  if (!s.ok()) return s;
  return event;
}

}  // namespace debugplane::rules_engine::tensorboard
