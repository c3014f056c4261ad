// DecodeEventTensor (the reader's decoding of one value straight into its
// Tensor) and the value facts the decoder finds while converting: both must
// give exactly what DecodeEvent and a scan of the values give.

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rules_engine/smdebug/smdebug_event.pb.h"
#include "rules_engine/smdebug/tensor_decode.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string RawFloats(const std::vector<float>& values) {
  std::string out(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

smdebug::Event FloatEvent(const std::string& tag, const std::vector<float>& values,
                          const std::string& mode = "1", const std::string& mode_step = "4") {
  smdebug::Event e;
  e.set_step(3);
  auto* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->mutable_tensor()->set_dtype(smdebug::DT_FLOAT);
  v->mutable_tensor()->mutable_tensor_shape()->add_dim()->set_size(
      static_cast<int64_t>(values.size()));
  v->mutable_tensor()->set_tensor_content(RawFloats(values));
  auto* m = v->mutable_metadata()->add_plugin_data();
  m->set_plugin_name("mode");
  m->set_content(mode);
  auto* s = v->mutable_metadata()->add_plugin_data();
  s->set_plugin_name("mode_step");
  s->set_content(mode_step);
  return e;
}

bool SameDouble(double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); }

// The reader's old way: DecodeEvent, then the value tagged `tag`, else the
// first, else the error the reader gave.
void ExpectSameAsDecodeEvent(const std::string& payload, const std::string& tag) {
  const auto where = [] { return std::string("events/x.tfevents offset 7"); };
  Tensor in_place;
  ValueMetadata metadata;
  const absl::Status status = DecodeEventTensor(payload, tag, where, &in_place, &metadata);
  absl::StatusOr<std::vector<DecodedValue>> ref = DecodeEvent(payload, where);
  if (!ref.ok()) {
    EXPECT_EQ(status, ref.status());
    return;
  }
  const DecodedValue* chosen = nullptr;
  for (const DecodedValue& v : *ref) {
    if (v.tag == tag) {
      chosen = &v;
      break;
    }
  }
  if (chosen == nullptr && !ref->empty()) chosen = &ref->front();
  if (chosen == nullptr) {
    EXPECT_EQ(status, absl::DataLossError("events/x.tfevents offset 7: record holds no tensor"));
    return;
  }
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(metadata.mode, chosen->mode);
  EXPECT_EQ(metadata.mode_step, chosen->mode_step);
  EXPECT_EQ(in_place.dtype, chosen->tensor.dtype);
  EXPECT_EQ(in_place.shape, chosen->tensor.shape);
  ASSERT_EQ(in_place.values.size(), chosen->tensor.values.size());
  for (size_t i = 0; i < in_place.values.size(); ++i) {
    EXPECT_TRUE(SameDouble(in_place.values[i], chosen->tensor.values[i])) << i;
  }
  EXPECT_EQ(in_place.facts.has_value(), chosen->tensor.facts.has_value());
}

TEST(DecodeInPlaceTest, OneValueEventDecodesIntoTheTensor) {
  Tensor t;
  t.name = "kept";
  t.worker = "worker_3";
  ValueMetadata metadata;
  ASSERT_TRUE(DecodeEventTensor(
                  FloatEvent("w", {1.5f, 0.0f, -2.0f}, "2", "11").SerializeAsString(), "w",
                  [] { return std::string("f"); }, &t, &metadata)
                  .ok());
  EXPECT_EQ(t.name, "kept");  // Name and worker are the caller's.
  EXPECT_EQ(t.worker, "worker_3");
  EXPECT_EQ(t.dtype, smdebug::DT_FLOAT);
  EXPECT_THAT(t.shape, ElementsAre(3));
  EXPECT_THAT(t.values, ElementsAre(1.5, 0.0, -2.0));
  EXPECT_EQ(metadata.mode, Mode::kEval);
  EXPECT_EQ(metadata.mode_step, 11);
  ASSERT_TRUE(t.facts.has_value());
  EXPECT_TRUE(t.facts->all_finite);
  EXPECT_EQ(t.facts->zeros, 1);
}

TEST(DecodeInPlaceTest, AgreesWithDecodeEventOnEveryShapeOfEvent) {
  std::vector<std::pair<std::string, std::string>> cases;  // payload, tag.
  const std::string one = FloatEvent("a", {1, 2, 3}).SerializeAsString();
  cases.push_back({one, "a"});
  cases.push_back({one, "not the tag"});  // The first value, as the reader did.
  smdebug::Event two = FloatEvent("a", {1});
  *two.mutable_summary()->add_value() = FloatEvent("b", {5, 6}, "3", "1").summary().value(0);
  cases.push_back({two.SerializeAsString(), "b"});  // Several values: the tagged one.
  cases.push_back({two.SerializeAsString(), "c"});
  smdebug::Event version;
  version.set_file_version("brain.Event:2");
  cases.push_back({version.SerializeAsString(), "a"});  // No value at all.
  smdebug::Event empty_summary;
  empty_summary.mutable_summary();
  cases.push_back({empty_summary.SerializeAsString(), "a"});
  smdebug::Event simple;
  simple.mutable_summary()->add_value()->set_simple_value(4);
  cases.push_back({simple.SerializeAsString(), ""});
  smdebug::Event typed;  // float_val: the protobuf path.
  auto* tv = typed.mutable_summary()->add_value();
  tv->set_tag("t");
  tv->mutable_tensor()->set_dtype(smdebug::DT_FLOAT);
  tv->mutable_tensor()->mutable_tensor_shape()->add_dim()->set_size(3);
  tv->mutable_tensor()->add_float_val(2);
  cases.push_back({typed.SerializeAsString(), "t"});
  smdebug::Event bad_dtype = FloatEvent("a", {1});
  bad_dtype.mutable_summary()->mutable_value(0)->mutable_tensor()->set_dtype(
      static_cast<smdebug::DataType>(42));
  cases.push_back({bad_dtype.SerializeAsString(), "a"});
  for (const auto& [payload, tag] : cases) {
    SCOPED_TRACE(tag);
    ExpectSameAsDecodeEvent(payload, tag);
    // Every truncation and bit flip: the same outcome as DecodeEvent's.
    for (size_t n = 0; n < payload.size(); ++n) ExpectSameAsDecodeEvent(payload.substr(0, n), tag);
    for (size_t i = 0; i < payload.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        std::string changed = payload;
        changed[i] = static_cast<char>(changed[i] ^ (1 << bit));
        ExpectSameAsDecodeEvent(changed, tag);
      }
    }
  }
}

TEST(DecodeInPlaceTest, NoValueIsDataLossNamingTheRecord) {
  smdebug::Event version;
  version.set_file_version("brain.Event:2");
  Tensor t;
  ValueMetadata metadata;
  const absl::Status s = DecodeEventTensor(
      version.SerializeAsString(), "a", [] { return std::string("events/e offset 9"); }, &t,
      &metadata);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("events/e offset 9: record holds no tensor"));
}

// The facts found while converting FLOAT content equal a scan of the values,
// at every length around the converter's block size and with the special
// value at every position.
TEST(DecodeInPlaceTest, FloatFactsEqualAScanOfTheValues) {
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::denorm_min()};
  for (size_t n = 0; n <= 35; ++n) {
    for (size_t at = 0; at <= n; ++at) {  // at == n: no special value.
      for (float special : specials) {
        std::vector<float> values(n);
        for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 3) - 0.5f;
        if (at < n) values[at] = special;
        Tensor t;
        ValueMetadata metadata;
        ASSERT_TRUE(DecodeEventTensor(
                        FloatEvent("x", values).SerializeAsString(), "x",
                        [] { return std::string("f"); }, &t, &metadata)
                        .ok());
        ASSERT_TRUE(t.facts.has_value());
        bool all_finite = true;
        int64_t zeros = 0;
        for (double v : t.values) {
          all_finite = all_finite && std::isfinite(v);
          zeros += v == 0 ? 1 : 0;
        }
        EXPECT_EQ(t.facts->all_finite, all_finite) << n << " " << at << " " << special;
        EXPECT_EQ(t.facts->zeros, zeros) << n << " " << at << " " << special;
      }
    }
  }
}

// Decoding into a Tensor that held another tensor's facts replaces them:
// a dtype whose conversion finds none leaves them unset.
TEST(DecodeInPlaceTest, FactsAreResetForOtherDtypes) {
  Tensor t;
  ValueMetadata metadata;
  ASSERT_TRUE(DecodeEventTensor(
                  FloatEvent("x", {0, 0}).SerializeAsString(), "x", [] { return std::string("f"); },
                  &t, &metadata)
                  .ok());
  ASSERT_TRUE(t.facts.has_value());
  smdebug::Event doubles = FloatEvent("d", {});
  auto* tensor = doubles.mutable_summary()->mutable_value(0)->mutable_tensor();
  tensor->set_dtype(smdebug::DT_DOUBLE);
  tensor->mutable_tensor_shape()->mutable_dim(0)->set_size(1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  tensor->set_tensor_content(std::string(reinterpret_cast<const char*>(&nan), sizeof(nan)));
  ASSERT_TRUE(DecodeEventTensor(
                  doubles.SerializeAsString(), "d", [] { return std::string("f"); }, &t, &metadata)
                  .ok());
  ASSERT_EQ(t.values.size(), 1u);
  EXPECT_TRUE(std::isnan(t.values[0]));
  EXPECT_FALSE(t.facts.has_value());
}

}  // namespace
}  // namespace debugplane::rules_engine
