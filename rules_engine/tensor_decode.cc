#include "rules_engine/tensor_decode.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/optional.h"

namespace debugplane::rules_engine {
namespace {

using smdebug::TensorProto;

// Little-endian load of a T from unaligned bytes (the hosts we run on are
// little endian, as is the format).
template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void FromContent(absl::string_view content, std::vector<double>* out) {
  const size_t n = content.size() / sizeof(T);
  // reserve + push_back: no zero-fill of a buffer that is overwritten anyway.
  out->clear();
  out->reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out->push_back(static_cast<double>(Load<T>(content.data() + i * sizeof(T))));
  }
}

// Copies `vals` into `out`, padding to `n` with the last value as TensorFlow
// does; INVALID_ARGUMENT if there are more than `n`.
template <typename Repeated, typename Convert>
absl::Status FromRepeated(const Repeated& vals, int64_t n, absl::string_view name,
                          absl::string_view field, Convert convert, std::vector<double>* out) {
  const int64_t have = vals.size();
  if (have == 0) return absl::OkStatus();  // Saved without values.
  if (have > n) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": ", have, " ", field,
                                                   " values for a shape of ", n, " elements"));
  }
  if (n > kMaxBroadcastElements) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, ": shape of ", n, " elements exceeds the broadcast limit"));
  }
  out->resize(n);
  for (int64_t i = 0; i < have; ++i) (*out)[i] = convert(vals.Get(i));
  for (int64_t i = have; i < n; ++i) (*out)[i] = (*out)[have - 1];
  return absl::OkStatus();
}

// Bytes per element of the dtypes whose tensor_content we decode; 0 for
// dtypes kept without values; -1 for unknown ones.
int ElementSize(int dtype) {
  switch (dtype) {
    case smdebug::DT_FLOAT:
      return 4;
    case smdebug::DT_DOUBLE:
      return 8;
    case smdebug::DT_INT32:
      return 4;
    case smdebug::DT_UINT8:
      return 1;
    case smdebug::DT_INT16:
      return 2;
    case smdebug::DT_INT8:
      return 1;
    case smdebug::DT_INT64:
      return 8;
    case smdebug::DT_BOOL:
      return 1;
    case smdebug::DT_BFLOAT16:
      return 2;
    case smdebug::DT_UINT16:
      return 2;
    case smdebug::DT_HALF:
      return 2;
    case smdebug::DT_UINT32:
      return 4;
    case smdebug::DT_UINT64:
      return 8;
    case smdebug::DT_STRING:
    case smdebug::DT_COMPLEX64:
    case smdebug::DT_COMPLEX128:
      return 0;
    default:
      return -1;
  }
}

void DecodeContent(int dtype, absl::string_view c, std::vector<double>* out) {
  switch (dtype) {
    case smdebug::DT_FLOAT:
      return FromContent<float>(c, out);
    case smdebug::DT_DOUBLE:
      return FromContent<double>(c, out);
    case smdebug::DT_INT32:
      return FromContent<int32_t>(c, out);
    case smdebug::DT_UINT8:
      return FromContent<uint8_t>(c, out);
    case smdebug::DT_INT16:
      return FromContent<int16_t>(c, out);
    case smdebug::DT_INT8:
      return FromContent<int8_t>(c, out);
    case smdebug::DT_INT64:
      return FromContent<int64_t>(c, out);
    case smdebug::DT_UINT16:
      return FromContent<uint16_t>(c, out);
    case smdebug::DT_UINT32:
      return FromContent<uint32_t>(c, out);
    case smdebug::DT_UINT64:
      return FromContent<uint64_t>(c, out);
    case smdebug::DT_BOOL:
      out->resize(c.size());
      for (size_t i = 0; i < c.size(); ++i) (*out)[i] = c[i] != 0 ? 1.0 : 0.0;
      return;
    case smdebug::DT_HALF:
    case smdebug::DT_BFLOAT16: {
      const size_t n = c.size() / 2;
      out->resize(n);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t bits = Load<uint16_t>(c.data() + 2 * i);
        (*out)[i] = dtype == smdebug::DT_HALF ? HalfToFloat(bits) : Bfloat16ToFloat(bits);
      }
      return;
    }
    default:
      return;
  }
}

absl::Status DecodeRepeated(const TensorProto& p, int64_t n, absl::string_view name,
                            std::vector<double>* out) {
  const auto id = [](auto v) { return static_cast<double>(v); };
  switch (p.dtype()) {
    case smdebug::DT_FLOAT:
      return FromRepeated(p.float_val(), n, name, "float_val", id, out);
    case smdebug::DT_DOUBLE:
      return FromRepeated(p.double_val(), n, name, "double_val", id, out);
    case smdebug::DT_INT32:
    case smdebug::DT_INT16:
    case smdebug::DT_INT8:
      return FromRepeated(p.int_val(), n, name, "int_val", id, out);
    // TensorFlow stores unsigned small types in int_val too; keep their bits.
    case smdebug::DT_UINT8:
      return FromRepeated(
          p.int_val(), n, name, "int_val",
          [](int32_t v) { return static_cast<double>(static_cast<uint8_t>(v)); }, out);
    case smdebug::DT_UINT16:
      return FromRepeated(
          p.int_val(), n, name, "int_val",
          [](int32_t v) { return static_cast<double>(static_cast<uint16_t>(v)); }, out);
    case smdebug::DT_INT64:
      return FromRepeated(p.int64_val(), n, name, "int64_val", id, out);
    case smdebug::DT_BOOL:
      return FromRepeated(
          p.bool_val(), n, name, "bool_val", [](bool v) { return v ? 1.0 : 0.0; }, out);
    case smdebug::DT_HALF:
      return FromRepeated(
          p.half_val(), n, name, "half_val",
          [](int32_t v) { return static_cast<double>(HalfToFloat(static_cast<uint16_t>(v))); },
          out);
    case smdebug::DT_BFLOAT16:
      return FromRepeated(
          p.half_val(), n, name, "half_val",
          [](int32_t v) { return static_cast<double>(Bfloat16ToFloat(static_cast<uint16_t>(v))); },
          out);
    case smdebug::DT_UINT32:
      return FromRepeated(p.uint32_val(), n, name, "uint32_val", id, out);
    case smdebug::DT_UINT64:
      return FromRepeated(p.uint64_val(), n, name, "uint64_val", id, out);
    default:
      return absl::OkStatus();
  }
}

absl::optional<int64_t> ParseInt(absl::string_view s) {
  int64_t v;
  if (!absl::SimpleAtoi(s, &v)) return absl::nullopt;
  return v;
}

}  // namespace

float HalfToFloat(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);  // Zero or subnormal.
  } else if (exp == 31) {
    v = mant == 0 ? std::numeric_limits<float>::infinity()
                  : std::numeric_limits<float>::quiet_NaN();
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

float Bfloat16ToFloat(uint16_t bits) {
  const uint32_t f = static_cast<uint32_t>(bits) << 16;
  float v;
  std::memcpy(&v, &f, sizeof(v));
  return v;
}

absl::Status DecodeTensorProto(const TensorProto& proto, absl::string_view name, Tensor* out) {
  const int dtype = proto.dtype();
  const int element_size = ElementSize(dtype);
  if (element_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": unknown dtype ", dtype));
  }
  out->dtype = dtype;
  out->shape.clear();
  out->values.clear();
  // Element count, rejecting what cannot be a real shape before anything
  // is allocated from it.
  int64_t n = 1;
  for (const auto& dim : proto.tensor_shape().dim()) {
    const int64_t size = dim.size();
    if (size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, ": negative dimension ", size));
    }
    if (size != 0 && n > std::numeric_limits<int64_t>::max() / size) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": shape overflows"));
    }
    n *= size;
    out->shape.push_back(size);
  }
  if (element_size == 0) return absl::OkStatus();  // STRING/COMPLEX: no values.

  const std::string& content = proto.tensor_content();
  if (!content.empty() || n == 0) {
    const uint64_t expected = static_cast<uint64_t>(n) * static_cast<uint64_t>(element_size);
    if (static_cast<uint64_t>(n) > std::numeric_limits<uint64_t>::max() / element_size ||
        content.size() != expected) {
      if (n == 0 && content.empty()) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", name, ": tensor_content has ", content.size(), " bytes, shape [",
          absl::StrJoin(out->shape, ","), "] of dtype ", dtype, " needs ", n, " x ", element_size));
    }
    DecodeContent(dtype, content, &out->values);
    return absl::OkStatus();
  }
  return DecodeRepeated(proto, n, name, &out->values);
}

absl::StatusOr<std::vector<DecodedValue>> DecodeEvent(absl::string_view payload,
                                                      absl::string_view where) {
  smdebug::Event event;
  if (!event.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError(absl::StrCat(where, ": record is not a valid Event"));
  }
  std::vector<DecodedValue> out;
  if (!event.has_summary()) return out;
  for (const auto& value : event.summary().value()) {
    DecodedValue d;
    d.tag = value.tag();
    d.tensor.name = value.tag();
    for (const auto& plugin : value.metadata().plugin_data()) {
      if (plugin.plugin_name() == "mode") {
        const absl::optional<int64_t> m = ParseInt(plugin.content());
        if (m && *m >= 1 && *m <= 4) d.mode = static_cast<Mode>(*m);
      } else if (plugin.plugin_name() == "mode_step") {
        const absl::optional<int64_t> s = ParseInt(plugin.content());
        if (s) d.mode_step = *s;
      }
    }
    if (value.has_tensor()) {
      absl::Status s = DecodeTensorProto(value.tensor(), value.tag(), &d.tensor);
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
    } else {
      d.tensor.dtype = smdebug::DT_FLOAT;
      d.tensor.values = {static_cast<double>(value.simple_value())};
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace debugplane::rules_engine
