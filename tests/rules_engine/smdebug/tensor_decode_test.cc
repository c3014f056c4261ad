#include "rules_engine/smdebug/tensor_decode.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rules_engine/smdebug/smdebug_event.pb.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
std::string Raw(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) {
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    out.append(buf, sizeof(T));
  }
  return out;
}

smdebug::TensorProto Proto(smdebug::DataType dtype, std::vector<int64_t> shape,
                           std::string content = "") {
  smdebug::TensorProto p;
  p.set_dtype(dtype);
  for (int64_t d : shape) p.mutable_tensor_shape()->add_dim()->set_size(d);
  p.set_tensor_content(content);
  return p;
}

std::vector<double> Decode(const smdebug::TensorProto& p) {
  Tensor t;
  absl::Status s = DecodeTensorProto(p, "t", &t);
  EXPECT_TRUE(s.ok()) << s;
  return t.values.ToVector();
}

TEST(TensorDecodeTest, ContentOfEveryNumericDtype) {
  using smdebug::DataType;
  EXPECT_THAT(Decode(Proto(smdebug::DT_FLOAT, {2}, Raw<float>({1.5f, -2}))), ElementsAre(1.5, -2));
  EXPECT_THAT(Decode(Proto(smdebug::DT_DOUBLE, {2}, Raw<double>({1e300, -0.25}))),
              ElementsAre(1e300, -0.25));
  EXPECT_THAT(Decode(Proto(smdebug::DT_INT32, {2}, Raw<int32_t>({-7, 9}))), ElementsAre(-7, 9));
  EXPECT_THAT(Decode(Proto(smdebug::DT_UINT8, {2}, Raw<uint8_t>({255, 1}))), ElementsAre(255, 1));
  EXPECT_THAT(Decode(Proto(smdebug::DT_INT16, {2}, Raw<int16_t>({-300, 2}))), ElementsAre(-300, 2));
  EXPECT_THAT(Decode(Proto(smdebug::DT_INT8, {2}, Raw<int8_t>({-128, 127}))),
              ElementsAre(-128, 127));
  EXPECT_THAT(Decode(Proto(smdebug::DT_INT64, {1}, Raw<int64_t>({-(int64_t{1} << 40)}))),
              ElementsAre(-1099511627776.0));
  EXPECT_THAT(Decode(Proto(smdebug::DT_BOOL, {3}, Raw<uint8_t>({1, 0, 1}))), ElementsAre(1, 0, 1));
  // bfloat16 1.0 = 0x3f80; half 1.0 = 0x3c00, -2.0 = 0xc000.
  EXPECT_THAT(Decode(Proto(smdebug::DT_BFLOAT16, {1}, Raw<uint16_t>({0x3f80}))), ElementsAre(1.0));
  EXPECT_THAT(Decode(Proto(smdebug::DT_UINT16, {1}, Raw<uint16_t>({65535}))), ElementsAre(65535));
  EXPECT_THAT(Decode(Proto(smdebug::DT_HALF, {2}, Raw<uint16_t>({0x3c00, 0xc000}))),
              ElementsAre(1.0, -2.0));
  EXPECT_THAT(Decode(Proto(smdebug::DT_UINT32, {1}, Raw<uint32_t>({4000000000u}))),
              ElementsAre(4e9));
  EXPECT_THAT(Decode(Proto(smdebug::DT_UINT64, {1}, Raw<uint64_t>({1u << 20}))),
              ElementsAre(1048576));
}

TEST(TensorDecodeTest, HalfSpecialValues) {
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7c00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // Smallest subnormal.
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x8000), -0.0f);
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(0x7fc0)));
}

TEST(TensorDecodeTest, ShapeAndScalar) {
  Tensor t;
  ASSERT_TRUE(
      DecodeTensorProto(Proto(smdebug::DT_FLOAT, {2, 3}, Raw<float>({1, 2, 3, 4, 5, 6})), "m", &t)
          .ok());
  EXPECT_THAT(t.shape, ElementsAre(2, 3));
  EXPECT_EQ(t.dtype, 1);
  EXPECT_EQ(t.values.size(), 6u);
  ASSERT_TRUE(DecodeTensorProto(Proto(smdebug::DT_FLOAT, {}, Raw<float>({4})), "s", &t).ok());
  EXPECT_TRUE(t.shape.empty());
  EXPECT_THAT(t.values, ElementsAre(4));
  ASSERT_TRUE(DecodeTensorProto(Proto(smdebug::DT_FLOAT, {0, 5}), "e", &t).ok());
  EXPECT_TRUE(t.values.empty());
}

TEST(TensorDecodeTest, FallbackFieldsAndBroadcast) {
  smdebug::TensorProto p = Proto(smdebug::DT_FLOAT, {3});
  p.add_float_val(2.5f);
  EXPECT_THAT(Decode(p), ElementsAre(2.5, 2.5, 2.5));  // One value broadcasts.
  p.add_float_val(1.0f);
  EXPECT_THAT(Decode(p), ElementsAre(2.5, 1.0, 1.0));  // TensorFlow pads with the last.
  p = Proto(smdebug::DT_DOUBLE, {2});
  p.add_double_val(1);
  p.add_double_val(2);
  EXPECT_THAT(Decode(p), ElementsAre(1, 2));
  p = Proto(smdebug::DT_INT32, {});
  p.add_int_val(-3);
  EXPECT_THAT(Decode(p), ElementsAre(-3));
  p = Proto(smdebug::DT_UINT8, {1});
  p.add_int_val(200);
  EXPECT_THAT(Decode(p), ElementsAre(200));
  p = Proto(smdebug::DT_INT64, {2});
  p.add_int64_val(int64_t{1} << 50);
  EXPECT_THAT(Decode(p), ElementsAre(std::ldexp(1.0, 50), std::ldexp(1.0, 50)));
  p = Proto(smdebug::DT_BOOL, {2});
  p.add_bool_val(true);
  p.add_bool_val(false);
  EXPECT_THAT(Decode(p), ElementsAre(1, 0));
  p = Proto(smdebug::DT_HALF, {1});
  p.add_half_val(0x3c00);
  EXPECT_THAT(Decode(p), ElementsAre(1.0));
  p = Proto(smdebug::DT_FLOAT, {2});  // Neither content nor values.
  EXPECT_TRUE(Decode(p).empty());
}

TEST(TensorDecodeTest, TooManyFallbackValuesIsInvalid) {
  smdebug::TensorProto p = Proto(smdebug::DT_FLOAT, {1});
  p.add_float_val(1);
  p.add_float_val(2);
  Tensor t;
  absl::Status s = DecodeTensorProto(p, "gradient/x", &t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("gradient/x"));
}

TEST(TensorDecodeTest, HugeBroadcastRefused) {
  smdebug::TensorProto p = Proto(smdebug::DT_FLOAT, {int64_t{1} << 40});
  p.add_float_val(1);
  Tensor t;
  EXPECT_EQ(DecodeTensorProto(p, "t", &t).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorDecodeTest, ContentSizeMustMatchShape) {
  Tensor t;
  absl::Status s =
      DecodeTensorProto(Proto(smdebug::DT_FLOAT, {3}, Raw<float>({1, 2})), "relu1_output_0", &t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("relu1_output_0"));
  EXPECT_THAT(s.message(), HasSubstr("8 bytes"));
  s = DecodeTensorProto(Proto(smdebug::DT_FLOAT, {3}, "abc"), "odd", &t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorDecodeTest, BadShapes) {
  Tensor t;
  EXPECT_EQ(DecodeTensorProto(Proto(smdebug::DT_FLOAT, {-1}, "abcd"), "t", &t).code(),
            absl::StatusCode::kInvalidArgument);
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ(DecodeTensorProto(Proto(smdebug::DT_FLOAT, {big, big, big}, "abcd"), "t", &t).code(),
            absl::StatusCode::kInvalidArgument);
  // Overflow of bytes (elements * 8) but not of elements.
  EXPECT_EQ(
      DecodeTensorProto(Proto(smdebug::DT_DOUBLE, {int64_t{1} << 61}, "abcdefgh"), "t", &t).code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(TensorDecodeTest, UnknownDtypeNamesDtypeAndTensor) {
  smdebug::TensorProto p = Proto(smdebug::DT_FLOAT, {1}, Raw<float>({1}));
  p.set_dtype(static_cast<smdebug::DataType>(99));
  Tensor t;
  absl::Status s = DecodeTensorProto(p, "Sequential_fc1.weight", &t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Sequential_fc1.weight"));
  EXPECT_THAT(s.message(), HasSubstr("dtype 99"));
  p.set_dtype(smdebug::DT_INVALID);
  EXPECT_EQ(DecodeTensorProto(p, "t", &t).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorDecodeTest, StringValuesAreKeptAsStrings) {
  smdebug::TensorProto p = Proto(smdebug::DT_STRING, {2});
  p.add_string_val("logloss");
  p.add_string_val("auc");
  Tensor t;
  ASSERT_TRUE(DecodeTensorProto(p, "hyperparameters/eval_metric", &t).ok());
  EXPECT_THAT(t.strings, ElementsAre("logloss", "auc"));
  EXPECT_TRUE(t.values.empty());
  EXPECT_EQ(t.dtype, smdebug::DT_STRING);
}

// As smdebug's XGBoost hook writes "hyperparameters/objective": no dtype.
TEST(TensorDecodeTest, StringValWithoutDtypeIsAString) {
  smdebug::TensorProto p;
  p.mutable_tensor_shape()->add_dim()->set_size(1);
  p.add_string_val("binary:logistic");
  Tensor t;
  ASSERT_TRUE(DecodeTensorProto(p, "hyperparameters/objective", &t).ok());
  EXPECT_EQ(t.dtype, smdebug::DT_STRING);
  EXPECT_THAT(t.strings, ElementsAre("binary:logistic"));
  // Without string_val, no dtype is still an error.
  smdebug::TensorProto empty;
  EXPECT_EQ(DecodeTensorProto(empty, "t", &t).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorDecodeTest, OneStringBroadcastsLikeTypedValues) {
  smdebug::TensorProto p = Proto(smdebug::DT_STRING, {3});
  p.add_string_val("x");
  Tensor t;
  ASSERT_TRUE(DecodeTensorProto(p, "t", &t).ok());
  EXPECT_THAT(t.strings, ElementsAre("x", "x", "x"));
}

TEST(TensorDecodeTest, MoreStringsThanElementsIsAnError) {
  smdebug::TensorProto p = Proto(smdebug::DT_STRING, {1});
  p.add_string_val("a");
  p.add_string_val("b");
  Tensor t;
  const absl::Status s = DecodeTensorProto(p, "hyperparameters/objective", &t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("2 string_val values for a shape of 1"));
  EXPECT_THAT(s.message(), HasSubstr("hyperparameters/objective"));
}

TEST(TensorDecodeTest, StringsBeyondTheByteLimitAreRefused) {
  // 1 KiB broadcast to 2^20 elements would be 1 GiB of strings.
  smdebug::TensorProto p = Proto(smdebug::DT_STRING, {int64_t{1} << 20});
  p.add_string_val(std::string(1024, 'a'));
  Tensor t;
  const absl::Status s = DecodeTensorProto(p, "t", &t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("exceed the limit"));
  EXPECT_TRUE(t.strings.empty());
}

TEST(TensorDecodeTest, ManyEmptyStringsAreRefusedByTheirCount) {
  // "" broadcast to 2^24 elements is no bytes but 512 MiB of std::string.
  smdebug::TensorProto p = Proto(smdebug::DT_STRING, {int64_t{1} << 24});
  p.add_string_val("");
  Tensor t;
  const absl::Status s = DecodeTensorProto(p, "t", &t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("strings per tensor"));
  EXPECT_TRUE(t.strings.empty());
}

TEST(TensorDecodeTest, StringTensorEventDecodesThroughTheEventPath) {
  smdebug::Event e;
  auto* v = e.mutable_summary()->add_value();
  v->set_tag("hyperparameters/objective");
  *v->mutable_tensor() = Proto(smdebug::DT_STRING, {1});
  v->mutable_tensor()->add_string_val("multi:softprob");
  Tensor t;
  ValueMetadata metadata;
  ASSERT_TRUE(DecodeEventTensor(e.SerializeAsString(), "hyperparameters/objective",
                                [] { return std::string("x"); }, &t, &metadata)
                  .ok());
  EXPECT_THAT(t.strings, ElementsAre("multi:softprob"));
}

TEST(TensorDecodeTest, StringWithoutValuesAndComplexHaveNoValues) {
  for (auto dtype : {smdebug::DT_STRING, smdebug::DT_COMPLEX64, smdebug::DT_COMPLEX128}) {
    smdebug::TensorProto p = Proto(dtype, {2}, "whatever");
    Tensor t;
    ASSERT_TRUE(DecodeTensorProto(p, "t", &t).ok());
    EXPECT_TRUE(t.values.empty());
    EXPECT_THAT(t.shape, ElementsAre(2));
  }
}

smdebug::Event TensorEvent(const std::string& mode, const std::string& mode_step) {
  smdebug::Event e;
  e.set_step(7);
  auto* v = e.mutable_summary()->add_value();
  v->set_tag("CrossEntropyLoss_output_0");
  *v->mutable_tensor() = Proto(smdebug::DT_FLOAT, {}, Raw<float>({0.5f}));
  auto* m = v->mutable_metadata()->add_plugin_data();
  m->set_plugin_name("mode");
  m->set_content(mode);
  auto* s = v->mutable_metadata()->add_plugin_data();
  s->set_plugin_name("mode_step");
  s->set_content(mode_step);
  return e;
}

TEST(TensorDecodeTest, EventWithModeMetadata) {
  absl::StatusOr<std::vector<DecodedValue>> values =
      DecodeEvent(TensorEvent("2", "3").SerializeAsString(), "f offset 0");
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), 1u);
  const DecodedValue& v = (*values)[0];
  EXPECT_EQ(v.tag, "CrossEntropyLoss_output_0");
  EXPECT_EQ(v.mode, Mode::kEval);
  EXPECT_EQ(v.mode_step, 3);
  EXPECT_THAT(v.tensor.values, ElementsAre(0.5));
  EXPECT_EQ(v.tensor.name, "CrossEntropyLoss_output_0");

  values = DecodeEvent(TensorEvent("9", "x").SerializeAsString(), "f");
  ASSERT_TRUE(values.ok());
  EXPECT_FALSE((*values)[0].mode.has_value());
  EXPECT_FALSE((*values)[0].mode_step.has_value());
}

TEST(TensorDecodeTest, EventWithoutSummaryAndSimpleValue) {
  smdebug::Event e;
  e.set_file_version("brain.Event:2");
  absl::StatusOr<std::vector<DecodedValue>> values = DecodeEvent(e.SerializeAsString(), "f");
  ASSERT_TRUE(values.ok());
  EXPECT_TRUE(values->empty());
  smdebug::Event s;
  auto* v = s.mutable_summary()->add_value();
  v->set_tag("scalar");
  v->set_simple_value(3.0f);
  values = DecodeEvent(s.SerializeAsString(), "f");
  ASSERT_TRUE(values.ok());
  EXPECT_THAT((*values)[0].tensor.values, ElementsAre(3.0));
}

TEST(TensorDecodeTest, GarbagePayloadIsDataLoss) {
  absl::StatusOr<std::vector<DecodedValue>> values =
      DecodeEvent(std::string("\xff\xff\xff\xff", 4), "events/x.tfevents offset 12");
  ASSERT_FALSE(values.ok());
  EXPECT_EQ(values.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(values.status().message(), HasSubstr("events/x.tfevents offset 12"));
}

TEST(TensorDecodeTest, DecodeErrorsCarryLocation) {
  smdebug::Event e = TensorEvent("1", "0");
  e.mutable_summary()->mutable_value(0)->mutable_tensor()->set_dtype(
      static_cast<smdebug::DataType>(42));
  absl::StatusOr<std::vector<DecodedValue>> values =
      DecodeEvent(e.SerializeAsString(), "file.tfevents offset 99");
  ASSERT_FALSE(values.ok());
  EXPECT_EQ(values.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(values.status().message(), HasSubstr("file.tfevents offset 99"));
  EXPECT_THAT(values.status().message(), HasSubstr("CrossEntropyLoss_output_0"));
  EXPECT_THAT(values.status().message(), HasSubstr("dtype 42"));
}

// DecodeEvent reads smdebug's fields from the wire and leaves the rest to
// protobuf: for every payload both paths must agree.
void ExpectSameDecode(const std::string& payload) {
  const auto where = [] { return std::string("f offset 1"); };
  absl::StatusOr<std::vector<DecodedValue>> fast = DecodeEvent(payload, where);
  absl::StatusOr<std::vector<DecodedValue>> ref = DecodeEventWithProtobuf(payload, where);
  ASSERT_EQ(fast.status(), ref.status());
  if (!fast.ok()) return;
  ASSERT_EQ(fast->size(), ref->size());
  for (size_t i = 0; i < fast->size(); ++i) {
    const DecodedValue& a = (*fast)[i];
    const DecodedValue& b = (*ref)[i];
    EXPECT_EQ(a.tag, b.tag);
    EXPECT_EQ(a.mode, b.mode);
    EXPECT_EQ(a.mode_step, b.mode_step);
    EXPECT_EQ(a.tensor.name, b.tensor.name);
    EXPECT_EQ(a.tensor.dtype, b.tensor.dtype);
    EXPECT_EQ(a.tensor.shape, b.tensor.shape);
    ASSERT_EQ(a.tensor.values.size(), b.tensor.values.size());
    for (size_t k = 0; k < a.tensor.values.size(); ++k) {
      const double x = a.tensor.values[k], y = b.tensor.values[k];
      EXPECT_TRUE(x == y || (std::isnan(x) && std::isnan(y))) << k;
    }
  }
}

TEST(TensorDecodeTest, WireReaderAgreesWithProtobuf) {
  std::vector<std::string> payloads;
  payloads.push_back(TensorEvent("1", "5").SerializeAsString());
  smdebug::Event two = TensorEvent("2", "7");
  two.set_wall_time(1.5);
  auto* v = two.mutable_summary()->add_value();
  v->set_tag("gradient/fc1.weight");
  *v->mutable_tensor() = Proto(smdebug::DT_HALF, {2, 2}, Raw<uint16_t>({0x3c00, 0xc000, 0, 1}));
  v->mutable_tensor()->mutable_tensor_shape()->mutable_dim(0)->set_name("batch");
  payloads.push_back(two.SerializeAsString());
  smdebug::Event typed;  // float_val: left to protobuf.
  auto* tv = typed.mutable_summary()->add_value();
  tv->set_tag("t");
  *tv->mutable_tensor() = Proto(smdebug::DT_FLOAT, {3});
  tv->mutable_tensor()->add_float_val(2);
  payloads.push_back(typed.SerializeAsString());
  smdebug::Event simple;
  simple.mutable_summary()->add_value()->set_simple_value(4);
  payloads.push_back(simple.SerializeAsString());
  smdebug::Event version;
  version.set_file_version("brain.Event:2");
  payloads.push_back(version.SerializeAsString());
  // A repeated singular field (protobuf merges) and a oneof switch.
  payloads.push_back(TensorEvent("1", "1").SerializeAsString() +
                     TensorEvent("3", "2").SerializeAsString());
  payloads.push_back(TensorEvent("1", "1").SerializeAsString() + version.SerializeAsString());
  payloads.push_back(version.SerializeAsString() + TensorEvent("1", "1").SerializeAsString());
  for (const std::string& payload : payloads) {
    ExpectSameDecode(payload);
    for (size_t n = 0; n < payload.size(); ++n) ExpectSameDecode(payload.substr(0, n));
    for (size_t i = 0; i < payload.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        std::string changed = payload;
        changed[i] = static_cast<char>(changed[i] ^ (1 << bit));
        ExpectSameDecode(changed);
      }
      for (char c : {'\x00', '\x7f', '\x80', '\xff'}) {
        std::string changed = payload;
        changed[i] = c;
        ExpectSameDecode(changed);
      }
    }
  }
}

}  // namespace
}  // namespace debugplane::rules_engine
