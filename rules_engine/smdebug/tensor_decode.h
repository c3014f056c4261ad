// Decoding of smdebug Event payloads and their TensorProtos into Tensors.

#ifndef DEBUGPLANE_RULES_ENGINE_SMDEBUG_TENSOR_DECODE_H_
#define DEBUGPLANE_RULES_ENGINE_SMDEBUG_TENSOR_DECODE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rules_engine/smdebug/smdebug_event.pb.h"
#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine {

// Broadcasting a short fallback list (e.g. one float_val for a [N] shape)
// allocates N values: refuse shapes beyond this (they never come from a
// real hook, only from corrupt or hostile data).
inline constexpr int64_t kMaxBroadcastElements = int64_t{1} << 24;

// A tensor_content of more elements than this is refused (callers that
// need doubles may widen one: a 128 MiB record of uint8 would become 1 GiB).
// 32M: a 128 MiB record of floats, the largest the trial reader reads
// (kEventRecordLimit).
inline constexpr int64_t kMaxDecodedElements = int64_t{1} << 25;

// STRING tensors (string_val) are kept as strings: at most this many bytes
// in all, padding included (hyperparameters and labels are a few bytes; a
// record that would expand past this is corrupt or hostile).
inline constexpr int64_t kMaxDecodedStringBytes = int64_t{1} << 24;

// The buffer a record was read into, shared by the tensors decoded from it
// (their TensorValues point into it).
using SharedBytes = std::shared_ptr<const std::string>;

// Decodes `proto` into `out` (dtype, shape, values; name and worker are
// left alone). `name` is used in error messages only.
//  - tensor_content: the raw little-endian C-order array, for FLOAT, DOUBLE,
//    INT32, UINT8, INT16, INT8, INT64, BOOL, BFLOAT16, UINT16, HALF, UINT32,
//    UINT64; its size must be exactly elements * element size. The values
//    are a view of those bytes (TensorValues): of `buffer` where the
//    overloads below take one and the content lies in it, else of a copy of
//    the content. FLOAT also sets `facts`.
//  - else the typed repeated field (float_val, double_val, int_val for the
//    small integer types, int64_val, bool_val, half_val for HALF/BFLOAT16,
//    uint32_val, uint64_val). As in TensorFlow, fewer values than elements
//    are padded with the last one (a single value broadcasts); more is an
//    error. Neither content nor values: a tensor saved without values
//    (values empty).
//  - STRING: string_val into `strings` (values stays empty), padded with
//    the last one like the typed fields; more strings than elements, or more
//    than kMaxDecodedStringBytes in all, is an error. A tensor without a
//    dtype (DT_INVALID) that has string_val and no tensor_content is a
//    STRING: smdebug's XGBoost hook saves its string hyperparameters so.
//  - COMPLEX64, COMPLEX128: kept with dtype and shape, no values (no rule
//    computes on them).
// INVALID_ARGUMENT naming the tensor for an unknown dtype (and its number),
// a negative or overflowing dimension, a size that does not match, or more
// than kMaxDecodedElements elements of tensor_content.
absl::Status DecodeTensorProto(const smdebug::TensorProto& proto, absl::string_view name,
                               Tensor* out);

// One Summary.Value of an event: a tensor with smdebug's metadata.
struct DecodedValue {
  std::string tag;                   // The tensor name.
  std::optional<Mode> mode;          // Plugin "mode" ("1".."4"), if present and valid.
  std::optional<int64_t> mode_step;  // Plugin "mode_step", if present and valid.
  Tensor tensor;                     // name = tag; worker left empty.
};

// Parses an Event payload and decodes the tensors of its summary values
// (values without a tensor, such as simple_value scalars, are returned as a
// FLOAT scalar). An event without a summary (e.g. file_version) gives an
// empty vector. DATA_LOSS if the payload does not parse; decode errors as
// above. `where` (e.g. "events/.../x.tfevents offset 2203") prefixes errors.
absl::StatusOr<std::vector<DecodedValue>> DecodeEvent(absl::string_view payload,
                                                      absl::string_view where);
// The same, with `where` built only when there is an error (the reader
// decodes thousands of records per second and names each in errors).
absl::StatusOr<std::vector<DecodedValue>> DecodeEvent(absl::string_view payload,
                                                      absl::FunctionRef<std::string()> where);

// smdebug's plugin metadata of the value DecodeEventTensor decoded.
struct ValueMetadata {
  std::optional<Mode> mode;          // Plugin "mode" ("1".."4"), if present and valid.
  std::optional<int64_t> mode_step;  // Plugin "mode_step", if present and valid.
};

// What DecodeEvent followed by picking one value gives, without building the
// DecodedValues (the trial reader decodes every wanted tensor of every step
// this way): the value tagged `tag`, else the first value, is decoded into
// `out` (dtype, shape, values, facts; name and worker left alone) and its
// metadata into `metadata`. Errors: DecodeEvent's, and DATA_LOSS
// "<where>: record holds no tensor" for an event without a value. On error
// `out` and `metadata` are unspecified.
absl::Status DecodeEventTensor(absl::string_view payload, absl::string_view tag,
                               absl::FunctionRef<std::string()> where, Tensor* out,
                               ValueMetadata* metadata);
// The same for a `payload` that lies in `buffer`: the values are views of
// `buffer` (no copy, no allocation per tensor), which they keep alive.
absl::Status DecodeEventTensor(absl::string_view payload, const SharedBytes& buffer,
                               absl::string_view tag, absl::FunctionRef<std::string()> where,
                               Tensor* out, ValueMetadata* metadata);

// DecodeEvent reads the fields smdebug writes straight from the wire and
// falls back to the generated protobuf parser for anything else; this is
// that reference path alone, exposed so tests can check both agree.
absl::StatusOr<std::vector<DecodedValue>> DecodeEventWithProtobuf(
    absl::string_view payload, absl::FunctionRef<std::string()> where);

// Widening conversions, exposed for tests.
float HalfToFloat(uint16_t bits);
float Bfloat16ToFloat(uint16_t bits);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SMDEBUG_TENSOR_DECODE_H_
