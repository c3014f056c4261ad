#include "rules_engine/smdebug/tensor_decode.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/optional.h"
#include "base/message_text.h"

namespace debugplane::rules_engine {
namespace {

using smdebug::TensorProto;

// A tensor name read from a file, as errors show it: quoted, escaped, at
// most 40 characters (it is data, of any length and any bytes).
std::string ShownName(absl::string_view name) { return base::QuoteForMessage(name, 40); }

// Little-endian load of a T from unaligned bytes (the hosts we run on are
// little endian, as is the format).
template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// FLOAT, nearly every tensor smdebug saves: the Tensor::ValueFacts are found
// in one pass over the floats where they lie (a float is finite, or zero,
// exactly when its double is), so that the rules need no pass of their own.
// Four lanes per operation: GCC and Clang vector extensions (SSE2 / NEON
// without target-specific code), the accumulators kept in registers.
typedef float Float4 __attribute__((vector_size(16)));
typedef int32_t Int4 __attribute__((vector_size(16)));

Tensor::ValueFacts FloatFacts(absl::string_view content) {
  const size_t n = content.size() / sizeof(float);
  const char* src = content.data();
  // x - x is 0 for a finite x and NaN for NaN and +-inf; NaN sticks in a sum.
  Float4 not_finite_a = {0, 0, 0, 0}, not_finite_b = not_finite_a;
  // A comparison gives -1 (all bits set) per equal lane. At most 2^29 floats
  // fit a record (kTfRecordMaxPayload): no overflow.
  Int4 zeros_a = {0, 0, 0, 0}, zeros_b = zeros_a;
  const Float4 zero = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    Float4 a, b;
    std::memcpy(&a, src + i * sizeof(float), sizeof(a));
    std::memcpy(&b, src + (i + 4) * sizeof(float), sizeof(b));
    not_finite_a += a - a;
    not_finite_b += b - b;
    zeros_a -= a == zero;
    zeros_b -= b == zero;
  }
  float not_finite = 0;
  int64_t zero_count = 0;
  for (; i < n; ++i) {
    const float x = Load<float>(src + i * sizeof(float));
    not_finite += x - x;
    zero_count += x == 0.0f ? 1 : 0;
  }
  for (int k = 0; k < 4; ++k) {
    not_finite += not_finite_a[k] + not_finite_b[k];
    zero_count += zeros_a[k] + zeros_b[k];
  }
  Tensor::ValueFacts facts;
  facts.all_finite = not_finite == 0;
  facts.zeros = zero_count;
  return facts;
}

// Copies `vals` into `out`, padding to `n` with the last value as TensorFlow
// does; INVALID_ARGUMENT if there are more than `n`.
template <typename Repeated, typename Convert>
absl::Status FromRepeated(const Repeated& vals, int64_t n, absl::string_view name,
                          absl::string_view field, Convert convert, std::vector<double>* out) {
  const int64_t have = vals.size();
  if (have == 0) return absl::OkStatus();  // Saved without values.
  if (have > n) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", ShownName(name), ": ", have, " ",
                                                   field, " values for a shape of ", n,
                                                   " elements"));
  }
  if (n > kMaxBroadcastElements) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", ShownName(name), ": shape of ", n,
                                                   " elements exceeds the broadcast limit"));
  }
  out->resize(n);
  for (int64_t i = 0; i < have; ++i) (*out)[i] = convert(vals.Get(i));
  for (int64_t i = have; i < n; ++i) (*out)[i] = (*out)[have - 1];
  return absl::OkStatus();
}

// string_val into `out`, padded to `n` with the last string as the typed
// fields are; bounded by kMaxDecodedStringBytes (padding counted).
absl::Status DecodeStrings(const google::protobuf::RepeatedPtrField<std::string>& vals,
                           int64_t n, absl::string_view name, std::vector<std::string>* out) {
  const int64_t have = vals.size();
  if (have == 0) return absl::OkStatus();  // Saved without values.
  if (have > n) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", ShownName(name), ": ", have,
                                                   " string_val values for a shape of ", n,
                                                   " elements"));
  }
  int64_t bytes = 0;
  for (const std::string& v : vals) bytes += static_cast<int64_t>(v.size());
  const int64_t padding = n - have;
  const int64_t last = static_cast<int64_t>(vals.Get(have - 1).size());
  if (bytes > kMaxDecodedStringBytes || n > kMaxBroadcastElements ||
      (last > 0 && padding > (kMaxDecodedStringBytes - bytes) / last)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", ShownName(name), ": ", n, " strings of ", bytes,
                     " bytes (padded) exceed the limit of ", kMaxDecodedStringBytes, " bytes"));
  }
  // Each element is a std::string even when empty: padding to a large shape
  // with "" costs memory the byte count does not show.
  constexpr int64_t kMaxStrings = kMaxDecodedStringBytes / static_cast<int64_t>(sizeof(std::string));
  if (n > kMaxStrings) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", ShownName(name), ": ", n,
                                                   " strings exceed the limit of ", kMaxStrings,
                                                   " strings per tensor"));
  }
  out->assign(vals.begin(), vals.end());
  out->resize(n, vals.Get(have - 1));
  return absl::OkStatus();
}

// `content` kept alive for a view: an aliasing pointer into `buffer` when
// the content lies in it (the trial reader's case: no copy), else a copy of
// the content alone (one allocation per tensor, the raw bytes).
std::shared_ptr<const char> KeepContent(absl::string_view content, const SharedBytes* buffer) {
  if (buffer != nullptr && *buffer != nullptr) {
    const std::string& b = **buffer;
    if (content.data() >= b.data() && content.data() + content.size() <= b.data() + b.size()) {
      return std::shared_ptr<const char>(*buffer, content.data());
    }
  }
  auto copy = std::make_shared<const std::string>(content);
  const char* first = copy->data();
  return std::shared_ptr<const char>(std::move(copy), first);
}

// How the tensor_content of one dtype is read.
struct ContentCodec {
  int dtype;
  // Bytes per element; 0 for dtypes kept without values.
  int element_size;
  // The layout of the values; meaningless where element_size is 0.
  ElementType element_type;
};

constexpr ContentCodec kContentCodecs[] = {
    {smdebug::DT_FLOAT, 4, ElementType::kFloat},
    {smdebug::DT_DOUBLE, 8, ElementType::kDouble},
    {smdebug::DT_INT32, 4, ElementType::kInt32},
    {smdebug::DT_UINT8, 1, ElementType::kUint8},
    {smdebug::DT_INT16, 2, ElementType::kInt16},
    {smdebug::DT_INT8, 1, ElementType::kInt8},
    {smdebug::DT_INT64, 8, ElementType::kInt64},
    {smdebug::DT_BOOL, 1, ElementType::kBool},
    {smdebug::DT_BFLOAT16, 2, ElementType::kBfloat16},
    {smdebug::DT_UINT16, 2, ElementType::kUint16},
    {smdebug::DT_HALF, 2, ElementType::kHalf},
    {smdebug::DT_UINT32, 4, ElementType::kUint32},
    {smdebug::DT_UINT64, 8, ElementType::kUint64},
    {smdebug::DT_STRING, 0, ElementType::kDouble},
    {smdebug::DT_COMPLEX64, 0, ElementType::kDouble},
    {smdebug::DT_COMPLEX128, 0, ElementType::kDouble},
};

// The codec of `dtype`; null for unknown dtypes.
const ContentCodec* CodecFor(int dtype) {
  for (const ContentCodec& codec : kContentCodecs) {
    if (codec.dtype == dtype) return &codec;
  }
  return nullptr;
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

namespace {

// The common part of decoding a tensor: `out->shape` holds its dimensions;
// `repeated` (may be null: no typed values) supplies the fallback fields.
// `buffer` (may be null) is what `content` was read into, shared by the
// tensors decoded from it.
absl::Status DecodeTensorParts(int dtype, absl::string_view content, const TensorProto* repeated,
                               absl::string_view name, const SharedBytes* buffer, Tensor* out) {
  // smdebug's XGBoost hook saves string hyperparameters ("objective") as
  // string_val without a dtype: strings they are.
  if (dtype == smdebug::DT_INVALID && repeated != nullptr && repeated->string_val_size() > 0 &&
      content.empty()) {
    dtype = smdebug::DT_STRING;
  }
  const ContentCodec* codec = CodecFor(dtype);
  if (codec == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", ShownName(name), ": unknown dtype ", dtype));
  }
  out->dtype = dtype;
  out->values.clear();
  out->strings.clear();
  out->facts.reset();
  // Element count, rejecting what cannot be a real shape before anything
  // is allocated from it.
  int64_t n = 1;
  for (const int64_t size : out->shape) {
    if (size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", ShownName(name), ": negative dimension ", size));
    }
    if (size != 0 && n > std::numeric_limits<int64_t>::max() / size) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", ShownName(name), ": shape overflows"));
    }
    n *= size;
  }
  const int element_size = codec->element_size;
  if (dtype == smdebug::DT_STRING && repeated != nullptr) {
    return DecodeStrings(repeated->string_val(), n, name, &out->strings);
  }
  if (element_size == 0) return absl::OkStatus();  // COMPLEX: no values.

  if (!content.empty() || n == 0) {
    const uint64_t expected = static_cast<uint64_t>(n) * static_cast<uint64_t>(element_size);
    if (static_cast<uint64_t>(n) > std::numeric_limits<uint64_t>::max() / element_size ||
        content.size() != expected) {
      if (n == 0 && content.empty()) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", ShownName(name), ": tensor_content has ", content.size(), " bytes, shape [",
          absl::StrJoin(out->shape, ","), "] of dtype ", dtype, " needs ", n, " x ", element_size));
    }
    if (n > kMaxDecodedElements) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", ShownName(name), ": ", n,
                                                     " elements; at most ", kMaxDecodedElements,
                                                     " are decoded (8 bytes each)"));
    }
    if (codec->element_type == ElementType::kFloat) out->facts = FloatFacts(content);
    out->values = TensorValues::View(codec->element_type, KeepContent(content, buffer),
                                     static_cast<size_t>(n));
    return absl::OkStatus();
  }
  if (repeated == nullptr) return absl::OkStatus();  // Saved without values.
  std::vector<double> values;
  absl::Status s = DecodeRepeated(*repeated, n, name, &values);
  out->values = std::move(values);
  return s;
}

// smdebug's plugin metadata of one value.
void ApplyPlugin(absl::string_view plugin_name, absl::string_view content, DecodedValue* d) {
  if (plugin_name == "mode") {
    const absl::optional<int64_t> m = ParseInt(content);
    if (m && *m >= 1 && *m <= 4) d->mode = static_cast<Mode>(*m);
  } else if (plugin_name == "mode_step") {
    const absl::optional<int64_t> s = ParseInt(content);
    if (s) d->mode_step = *s;
  }
}

// --- Fast path -------------------------------------------------------------------
// Parsing the Event with the generated protobuf code copies every bytes field
// (tensor_content included) and allocates each message; that was a fifth of
// rule evaluation. The fast path reads the wire format in place for the
// fields smdebug writes, and gives up (the caller then uses protobuf, which
// stays the reference) on anything else: unknown or repeated singular fields,
// typed value lists, malformed input. So for every payload the outcome is
// the protobuf path's.

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

class WireReader {
 public:
  explicit WireReader(absl::string_view data) : p_(data.data()), end_(data.data() + data.size()) {}

  bool done() const { return p_ == end_; }

  // Canonical varints of at most 10 bytes (the 10th holding bit 63 only);
  // anything else is left to protobuf.
  bool Varint(uint64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      const uint8_t b = static_cast<uint8_t>(*p_++);
      if (shift == 63 && b > 1) return false;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *out = v;
        return true;
      }
    }
    return false;
  }
  // A field key: number >= 1 and wire type.
  bool Key(uint32_t* field, int* wire_type) {
    uint64_t key;
    if (!Varint(&key) || key > std::numeric_limits<uint32_t>::max()) return false;
    *field = static_cast<uint32_t>(key >> 3);
    *wire_type = static_cast<int>(key & 7);
    return *field != 0;
  }
  bool Bytes(absl::string_view* out) {
    uint64_t len;
    if (!Varint(&len) || len > static_cast<uint64_t>(end_ - p_)) return false;
    *out = absl::string_view(p_, len);
    p_ += len;
    return true;
  }
  bool Fixed(size_t size, const char** at) {
    if (static_cast<size_t>(end_ - p_) < size) return false;
    *at = p_;
    p_ += size;
    return true;
  }

 private:
  const char* p_;
  const char* end_;
};

struct WirePlugin {
  absl::string_view name, content;
};

struct WireValue {
  absl::string_view tag;
  float simple_value = 0;
  bool has_tensor = false;
  int dtype = 0;
  // Grows without allocating for the shapes tensors have.
  absl::InlinedVector<int64_t, 8> shape;
  absl::string_view content;
  absl::InlinedVector<WirePlugin, 4> plugins;  // smdebug writes two.
};

// Reads message `data` field by field: `on_field(field, wire_type, reader)`
// consumes the field's value and returns false to give up. A singular field
// seen twice is given up on (protobuf would merge or overwrite).
template <typename OnField>
bool ReadMessage(absl::string_view data, OnField on_field) {
  WireReader r(data);
  uint64_t seen = 0;  // Bits of the singular fields (numbers < 64) read.
  while (!r.done()) {
    uint32_t field;
    int wire_type;
    if (!r.Key(&field, &wire_type)) return false;
    if (!on_field(field, wire_type, r, seen)) return false;
  }
  return true;
}

// Marks singular field `field` read; false if it was already.
bool FirstTime(uint32_t field, uint64_t& seen) {
  if (field >= 64) return false;  // Not a field of ours.
  const uint64_t bit = uint64_t{1} << field;
  if (seen & bit) return false;
  seen |= bit;
  return true;
}

bool ReadDim(absl::string_view data, int64_t* size) {
  *size = 0;
  return ReadMessage(data, [size](uint32_t field, int wt, WireReader& r, uint64_t& seen) {
    if (!FirstTime(field, seen)) return false;
    absl::string_view ignored;
    uint64_t v;
    if (field == 1 && wt == kVarint && r.Varint(&v)) {
      *size = static_cast<int64_t>(v);
      return true;
    }
    return field == 2 && wt == kLengthDelimited && r.Bytes(&ignored);
  });
}

bool ReadShape(absl::string_view data, absl::InlinedVector<int64_t, 8>* shape) {
  return ReadMessage(data, [shape](uint32_t field, int wt, WireReader& r, uint64_t& seen) {
    absl::string_view bytes;
    uint64_t v;
    if (field == 2 && wt == kLengthDelimited) {
      int64_t size;
      if (!r.Bytes(&bytes) || !ReadDim(bytes, &size)) return false;
      shape->push_back(size);
      return true;
    }
    return field == 3 && wt == kVarint && FirstTime(field, seen) && r.Varint(&v);
  });
}

bool ReadTensor(absl::string_view data, WireValue* value) {
  return ReadMessage(data, [value](uint32_t field, int wt, WireReader& r, uint64_t& seen) {
    if (!FirstTime(field, seen)) return false;
    absl::string_view bytes;
    uint64_t v;
    switch (field) {
      case 1:  // dtype: an int32 enum, as protobuf truncates it.
        if (wt != kVarint || !r.Varint(&v)) return false;
        value->dtype = static_cast<int32_t>(static_cast<uint32_t>(v));
        return true;
      case 2:
        return wt == kLengthDelimited && r.Bytes(&bytes) && ReadShape(bytes, &value->shape);
      case 4:
        return wt == kLengthDelimited && r.Bytes(&value->content);
      default:  // Typed value lists and the rest: protobuf's job.
        return false;
    }
  });
}

bool ReadPlugin(absl::string_view data, WirePlugin* plugin) {
  return ReadMessage(data, [plugin](uint32_t field, int wt, WireReader& r, uint64_t& seen) {
    if (!FirstTime(field, seen) || wt != kLengthDelimited) return false;
    if (field == 1) return r.Bytes(&plugin->name);
    if (field == 2) return r.Bytes(&plugin->content);
    return false;
  });
}

bool ReadMetadata(absl::string_view data, WireValue* value) {
  return ReadMessage(data, [value](uint32_t field, int wt, WireReader& r, uint64_t&) {
    absl::string_view bytes;
    WirePlugin plugin;
    if (field != 1 || wt != kLengthDelimited || !r.Bytes(&bytes) || !ReadPlugin(bytes, &plugin)) {
      return false;
    }
    value->plugins.push_back(plugin);
    return true;
  });
}

bool ReadValue(absl::string_view data, WireValue* value) {
  return ReadMessage(data, [value](uint32_t field, int wt, WireReader& r, uint64_t& seen) {
    if (!FirstTime(field, seen)) return false;
    absl::string_view bytes;
    const char* at;
    switch (field) {
      case 1:
        return wt == kLengthDelimited && r.Bytes(&value->tag);
      case 2:
        if (wt != kFixed32 || !r.Fixed(4, &at)) return false;
        value->simple_value = Load<float>(at);
        return true;
      case 8:
        value->has_tensor = true;
        return wt == kLengthDelimited && r.Bytes(&bytes) && ReadTensor(bytes, value);
      case 9:
        return wt == kLengthDelimited && r.Bytes(&bytes) && ReadMetadata(bytes, value);
      default:
        return false;
    }
  });
}

// The summary values of an Event payload, or false to use protobuf.
// *has_summary tells an event without a summary (file_version) apart.
// `Values`: a vector-like container of WireValue.
template <typename Values>
bool ReadEvent(absl::string_view payload, bool* has_summary, Values* values) {
  *has_summary = false;
  bool has_file_version = false;
  return ReadMessage(payload, [&](uint32_t field, int wt, WireReader& r, uint64_t& seen) {
    if (!FirstTime(field, seen)) return false;
    absl::string_view bytes;
    const char* at;
    uint64_t v;
    switch (field) {
      case 1:  // wall_time
        return wt == kFixed64 && r.Fixed(8, &at);
      case 2:  // step
        return wt == kVarint && r.Varint(&v);
      case 3:  // file_version: the other member of the oneof.
        if (*has_summary || wt != kLengthDelimited) return false;
        has_file_version = true;
        return r.Bytes(&bytes);
      case 5: {
        if (has_file_version || wt != kLengthDelimited || !r.Bytes(&bytes)) return false;
        *has_summary = true;
        return ReadMessage(bytes, [values](uint32_t f, int w, WireReader& sr, uint64_t&) {
          absl::string_view value_bytes;
          if (f != 1 || w != kLengthDelimited || !sr.Bytes(&value_bytes)) return false;
          values->emplace_back();
          return ReadValue(value_bytes, &values->back());
        });
      }
      default:
        return false;
    }
  });
}

}  // namespace

absl::Status DecodeTensorProto(const TensorProto& proto, absl::string_view name, Tensor* out) {
  out->shape.clear();
  for (const auto& dim : proto.tensor_shape().dim()) out->shape.push_back(dim.size());
  return DecodeTensorParts(proto.dtype(), proto.tensor_content(), &proto, name,
                           /*buffer=*/nullptr, out);
}

absl::StatusOr<std::vector<DecodedValue>> DecodeEventWithProtobuf(
    absl::string_view payload, absl::FunctionRef<std::string()> where) {
  smdebug::Event event;
  if (!event.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError(absl::StrCat(where(), ": record is not a valid Event"));
  }
  std::vector<DecodedValue> out;
  if (!event.has_summary()) return out;
  for (const auto& value : event.summary().value()) {
    DecodedValue d;
    d.tag = value.tag();
    d.tensor.name = value.tag();
    for (const auto& plugin : value.metadata().plugin_data()) {
      ApplyPlugin(plugin.plugin_name(), plugin.content(), &d);
    }
    if (value.has_tensor()) {
      absl::Status s = DecodeTensorProto(value.tensor(), value.tag(), &d.tensor);
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat(where(), ": ", s.message()));
    } else {
      d.tensor.dtype = smdebug::DT_FLOAT;
      d.tensor.values = {static_cast<double>(value.simple_value())};
    }
    out.push_back(std::move(d));
  }
  return out;
}

absl::StatusOr<std::vector<DecodedValue>> DecodeEvent(absl::string_view payload,
                                                      absl::FunctionRef<std::string()> where) {
  bool has_summary = false;
  std::vector<WireValue> values;
  if (!ReadEvent(payload, &has_summary, &values)) return DecodeEventWithProtobuf(payload, where);
  std::vector<DecodedValue> out;
  if (!has_summary) return out;
  out.reserve(values.size());
  for (WireValue& value : values) {
    DecodedValue& d = out.emplace_back();
    d.tag = std::string(value.tag);
    d.tensor.name = d.tag;
    for (const WirePlugin& plugin : value.plugins) ApplyPlugin(plugin.name, plugin.content, &d);
    if (value.has_tensor) {
      d.tensor.shape.assign(value.shape.begin(), value.shape.end());
      absl::Status s = DecodeTensorParts(value.dtype, value.content, /*repeated=*/nullptr, d.tag,
                                         /*buffer=*/nullptr, &d.tensor);
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat(where(), ": ", s.message()));
    } else {
      d.tensor.dtype = smdebug::DT_FLOAT;
      d.tensor.values = {static_cast<double>(value.simple_value)};
    }
  }
  return out;
}

absl::Status DecodeEventTensor(absl::string_view payload, absl::string_view tag,
                               absl::FunctionRef<std::string()> where, Tensor* out,
                               ValueMetadata* metadata) {
  return DecodeEventTensor(payload, /*buffer=*/nullptr, tag, where, out, metadata);
}

absl::Status DecodeEventTensor(absl::string_view payload, const SharedBytes& buffer,
                               absl::string_view tag, absl::FunctionRef<std::string()> where,
                               Tensor* out, ValueMetadata* metadata) {
  bool has_summary = false;
  // smdebug writes one value per event: that one is decoded in place. Any
  // other shape goes through DecodeEvent, whose outcome this is by contract.
  absl::InlinedVector<WireValue, 1> values;
  if (!ReadEvent(payload, &has_summary, &values) || values.size() > 1) {
    absl::StatusOr<std::vector<DecodedValue>> decoded = DecodeEvent(payload, where);
    if (!decoded.ok()) return decoded.status();
    DecodedValue* chosen = nullptr;
    for (DecodedValue& v : *decoded) {
      if (v.tag == tag) {
        chosen = &v;
        break;
      }
    }
    if (chosen == nullptr && !decoded->empty()) chosen = &decoded->front();
    if (chosen == nullptr)
      return absl::DataLossError(absl::StrCat(where(), ": record holds no tensor"));
    metadata->mode = chosen->mode;
    metadata->mode_step = chosen->mode_step;
    out->dtype = chosen->tensor.dtype;
    out->shape = std::move(chosen->tensor.shape);
    out->values = std::move(chosen->tensor.values);
    out->strings = std::move(chosen->tensor.strings);
    out->facts = chosen->tensor.facts;
    return absl::OkStatus();
  }
  if (values.empty()) {
    return absl::DataLossError(absl::StrCat(where(), ": record holds no tensor"));
  }
  WireValue& value = values.front();
  DecodedValue plugins;  // Only its mode and mode_step are used.
  for (const WirePlugin& plugin : value.plugins) ApplyPlugin(plugin.name, plugin.content, &plugins);
  metadata->mode = plugins.mode;
  metadata->mode_step = plugins.mode_step;
  if (!value.has_tensor) {
    out->dtype = smdebug::DT_FLOAT;
    out->shape.clear();
    out->values.assign(1, static_cast<double>(value.simple_value));
    out->strings.clear();
    out->facts.reset();
    return absl::OkStatus();
  }
  out->shape.assign(value.shape.begin(), value.shape.end());
  absl::Status s =
      DecodeTensorParts(value.dtype, value.content, /*repeated=*/nullptr, value.tag, &buffer, out);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(where(), ": ", s.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<DecodedValue>> DecodeEvent(absl::string_view payload,
                                                      absl::string_view where) {
  return DecodeEvent(payload, [where] { return std::string(where); });
}

}  // namespace debugplane::rules_engine
