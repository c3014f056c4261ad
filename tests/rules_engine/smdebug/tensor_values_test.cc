// TensorValues: tensor elements read where they lie (views of the buffer a
// record was read into) must read as the doubles the old widening gave, for
// every layout and alignment, keep their buffer alive, and be shared, not
// copied, by the trial reader's decoding.

#include "rules_engine/smdebug/tensor_values.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rules_engine/smdebug/smdebug_event.pb.h"
#include "rules_engine/smdebug/tensor_decode.h"
#include "rules_engine/tensor_rules/rule_internal.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::ElementsAre;

// `values` as little-endian T, after `offset` bytes of padding (to read them
// unaligned), in a shared buffer; the view starts after the padding.
template <typename T>
TensorValues ViewOf(ElementType type, const std::vector<T>& values, size_t offset = 0) {
  auto buffer = std::make_shared<std::string>(offset + values.size() * sizeof(T), '\x55');
  if (!values.empty()) std::memcpy(buffer->data() + offset, values.data(), values.size() * sizeof(T));
  const char* first = buffer->data() + offset;
  return TensorValues::View(type, std::shared_ptr<const char>(std::move(buffer), first),
                            values.size());
}

// Every way of reading the elements agrees with `want`.
void ExpectReads(const TensorValues& v, const std::vector<double>& want) {
  ASSERT_EQ(v.size(), want.size());
  std::vector<double> by_index, by_iterator(v.begin(), v.end()), by_visit;
  for (size_t i = 0; i < v.size(); ++i) by_index.push_back(v[i]);
  v.Visit([&](const auto& r) {
    for (size_t i = 0; i < r.size(); ++i) by_visit.push_back(r[i]);
  });
  EXPECT_EQ(by_index, want);
  EXPECT_EQ(by_iterator, want);
  EXPECT_EQ(by_visit, want);
  EXPECT_EQ(v.ToVector(), want);
  EXPECT_EQ(v, want);
}

TEST(TensorValuesTest, EveryLayoutReadsAsTheWidenedDoublesAtAnyAlignment) {
  for (size_t offset : {0, 1, 3}) {
    SCOPED_TRACE(offset);
    ExpectReads(ViewOf<float>(ElementType::kFloat, {1.5f, -0.0f, 3e38f, 1e-45f}, offset),
                {1.5, -0.0, static_cast<double>(3e38f), static_cast<double>(1e-45f)});
    ExpectReads(ViewOf<double>(ElementType::kDouble, {1e300, -0.25}, offset), {1e300, -0.25});
    ExpectReads(ViewOf<int32_t>(ElementType::kInt32, {-7, 9}, offset), {-7, 9});
    ExpectReads(ViewOf<uint8_t>(ElementType::kUint8, {255, 1}, offset), {255, 1});
    ExpectReads(ViewOf<int16_t>(ElementType::kInt16, {-300, 2}, offset), {-300, 2});
    ExpectReads(ViewOf<int8_t>(ElementType::kInt8, {-128, 127}, offset), {-128, 127});
    ExpectReads(ViewOf<int64_t>(ElementType::kInt64, {-(int64_t{1} << 40)}, offset),
                {-1099511627776.0});
    ExpectReads(ViewOf<uint8_t>(ElementType::kBool, {2, 0, 1}, offset), {1, 0, 1});
    // bfloat16 1.0 = 0x3f80; half 1.0 = 0x3c00, -2.0 = 0xc000.
    ExpectReads(ViewOf<uint16_t>(ElementType::kBfloat16, {0x3f80}, offset), {1.0});
    ExpectReads(ViewOf<uint16_t>(ElementType::kHalf, {0x3c00, 0xc000}, offset), {1.0, -2.0});
    ExpectReads(ViewOf<uint16_t>(ElementType::kUint16, {65535}, offset), {65535});
    ExpectReads(ViewOf<uint32_t>(ElementType::kUint32, {4000000000u}, offset), {4e9});
    ExpectReads(ViewOf<uint64_t>(ElementType::kUint64, {uint64_t{1} << 63}, offset),
                {9223372036854775808.0});
  }
}

TEST(TensorValuesTest, OwnedValuesEmptyOneAndMany) {
  TensorValues none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.begin(), none.end());
  ExpectReads(TensorValues{2.5}, {2.5});
  ExpectReads(TensorValues(std::vector<double>{1, 2, 3}), {1, 2, 3});
  TensorValues v;
  v.assign(1, -4);
  ExpectReads(v, {-4});
  v.assign(3, 7);
  ExpectReads(v, {7, 7, 7});
  // A copy of a one-value TensorValues reads its own copy of the value.
  TensorValues a{9.0};
  TensorValues b = a;
  a = {1.0};
  EXPECT_EQ(b, std::vector<double>{9.0});
  EXPECT_EQ(b.at(0), 9.0);
  EXPECT_THROW(b.at(1), std::out_of_range);
  v.clear();
  EXPECT_TRUE(v.empty());
}

TEST(TensorValuesTest, AViewKeepsItsBufferAlive) {
  TensorValues copy;
  {
    TensorValues view = ViewOf<float>(ElementType::kFloat, {1, 2, 3}, 1);
    copy = view;
  }  // The original view and the test's pointer to the buffer are gone.
  EXPECT_THAT(copy, ElementsAre(1, 2, 3));
}

TEST(TensorValuesTest, CopyToReusesTheVectorAndAppendToAppends) {
  const TensorValues v = ViewOf<float>(ElementType::kFloat, {1, -1}, 2);
  std::vector<double> out = {5, 6, 7};
  v.CopyTo(&out);
  EXPECT_THAT(out, ElementsAre(1, -1));
  v.AppendTo(&out);
  EXPECT_THAT(out, ElementsAre(1, -1, 1, -1));
}

smdebug::Event FloatEvent(const std::vector<float>& values) {
  smdebug::Event e;
  auto* value = e.mutable_summary()->add_value();
  value->set_tag("w");
  value->mutable_tensor()->set_dtype(smdebug::DT_FLOAT);
  value->mutable_tensor()->mutable_tensor_shape()->add_dim()->set_size(
      static_cast<int64_t>(values.size()));
  std::string raw(values.size() * sizeof(float), '\0');
  std::memcpy(raw.data(), values.data(), raw.size());
  value->mutable_tensor()->set_tensor_content(raw);
  return e;
}

TEST(TensorValuesTest, DecodingFromASharedBufferPointsIntoIt) {
  // Two records in one buffer, as the reader reads an event file whole.
  const std::string first = FloatEvent({1, 0, -2}).SerializeAsString();
  const std::string second = FloatEvent({4, 5}).SerializeAsString();
  auto buffer = std::make_shared<const std::string>(first + second);
  const auto where = [] { return std::string("f"); };
  Tensor a, b;
  ValueMetadata metadata;
  ASSERT_TRUE(DecodeEventTensor(absl::string_view(*buffer).substr(0, first.size()), buffer, "w",
                                where, &a, &metadata)
                  .ok());
  ASSERT_TRUE(DecodeEventTensor(absl::string_view(*buffer).substr(first.size()), buffer, "w",
                                where, &b, &metadata)
                  .ok());
  EXPECT_THAT(a.values, ElementsAre(1, 0, -2));
  EXPECT_THAT(b.values, ElementsAre(4, 5));
  EXPECT_EQ(a.values.element_type(), ElementType::kFloat);
  // Both share the buffer: no copy of their content was made.
  EXPECT_EQ(buffer.use_count(), 3);
  ASSERT_TRUE(a.facts.has_value());
  EXPECT_EQ(a.facts->zeros, 1);
  EXPECT_TRUE(a.facts->all_finite);
  // Without a buffer (or with a payload outside it) the content is copied.
  Tensor c;
  ASSERT_TRUE(DecodeEventTensor(first, buffer, "w", where, &c, &metadata).ok());
  EXPECT_EQ(buffer.use_count(), 3);
  EXPECT_THAT(c.values, ElementsAre(1, 0, -2));
  a = Tensor();
  b = Tensor();
  EXPECT_EQ(buffer.use_count(), 1);
}

// The statistics rules compute over a view are the very doubles they gave
// over a vector<double> of the widened values (same order of sums).
TEST(TensorValuesTest, StatisticsOverAViewEqualThoseOverTheWidenedVector) {
  std::vector<float> floats;
  for (int i = 0; i < 1003; ++i) floats.push_back(std::sin(i * 0.37f) * (i % 7 == 0 ? 0 : 3.1f));
  const TensorValues view = ViewOf<float>(ElementType::kFloat, floats, 1);
  const TensorValues widened(std::vector<double>(floats.begin(), floats.end()));
  EXPECT_EQ(internal::MeanAbs(view), internal::MeanAbs(widened));
  EXPECT_EQ(internal::Mean(view), internal::Mean(widened));
  EXPECT_EQ(internal::Variance(view), internal::Variance(widened));
  EXPECT_EQ(internal::CountZeros(view), internal::CountZeros(widened.ToVector()));
  EXPECT_TRUE(internal::AllFinite(view));
  floats[500] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(internal::AllFinite(ViewOf<float>(ElementType::kFloat, floats, 3)));
  EXPECT_FALSE(internal::AllFinite(TensorValues(std::vector<double>(floats.begin(), floats.end()))));
}

}  // namespace
}  // namespace debugplane::rules_engine
