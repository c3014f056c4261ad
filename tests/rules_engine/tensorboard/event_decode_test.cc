// The hand-written decoder of TensorBoard event records (event_decode.h,
// wire_reader.h): what it reads, what it skips, and every way a record can
// be malformed on the wire. Payloads come from the independent test writer
// (tb_event_writer.h) or are built byte by byte here.

#include "rules_engine/tensorboard/event_decode.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/rules_engine/tb_event_writer.h"

namespace debugplane::rules_engine::tensorboard {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Where() { return "f.tfevents record at offset 7"; }

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Key(int field, int wire_type) { return Varint((field << 3) | wire_type); }
std::string Bytes(int field, const std::string& bytes) {
  return Key(field, 2) + Varint(bytes.size()) + bytes;
}
std::string Double(int field, double d) {
  std::string out = Key(field, 1);
  char raw[8];
  std::memcpy(raw, &d, 8);
  return out + std::string(raw, 8);
}
// An Event whose summary holds one value of `value_fields`.
std::string EventOfValue(const std::string& value_fields, int64_t step = 3) {
  return Double(1, 1.7e9) + Key(2, 0) + Varint(step) + Bytes(5, Bytes(1, value_fields));
}

absl::Status DecodeStatus(const std::string& payload) {
  return DecodeEvent(payload, Where).status();
}

TEST(EventDecodeTest, ReadsEveryKindOfValue) {
  HistogramStats h;
  h.min = -1;
  h.max = 2;
  h.num = 3;
  h.sum = 1;
  h.sum_squares = 6;
  h.bucket_limit = {0, 2};
  h.bucket = {1, 2};
  for (const std::string& payload :
       {testing::TbScalarEvent(4, "train/loss", 0.5f, 1.7e9),
        testing::TbTensorScalarEvent(4, "train/loss", 0.5f, 1.7e9)}) {
    absl::StatusOr<DecodedEvent> e = DecodeEvent(payload, Where);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->step, 4);
    EXPECT_DOUBLE_EQ(e->wall_time, 1.7e9);
    ASSERT_EQ(e->values.size(), 1u);
    EXPECT_EQ(e->values[0].name, "train/loss");
    EXPECT_THAT(e->values[0].values, ElementsAre(0.5));
  }
  absl::StatusOr<DecodedEvent> e = DecodeEvent(testing::TbHistogramEvent(5, "w", h, 1.7e9), Where);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->values.size(), 1u);
  ASSERT_TRUE(e->values[0].histogram.has_value());
  EXPECT_EQ(e->histograms, 1);
  EXPECT_DOUBLE_EQ(e->values[0].histogram->sum_squares, 6);
  EXPECT_THAT(e->values[0].histogram->bucket_limit, ElementsAre(0, 2));
  EXPECT_THAT(e->values[0].histogram->bucket, ElementsAre(1, 2));
  e = DecodeEvent(testing::TbTf2HistogramEvent(5, "w", {{0, 1, 2}, {1, 3, 1}}, 1.7e9), Where);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE(e->values.at(0).histogram.has_value());
  EXPECT_FALSE(e->values[0].histogram->exact_moments);
  EXPECT_DOUBLE_EQ(e->values[0].histogram->num, 3);
  e = DecodeEvent(testing::TbTextEvent(5, "notes", "hello", 1.7e9), Where);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->values.empty());
  EXPECT_EQ(e->skipped, 1);
  EXPECT_EQ(e->numeric, 0);
  e = DecodeEvent(testing::TbFileVersionEvent(1.7e9), Where);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->has_summary);
}

TEST(EventDecodeTest, UnknownFieldsOfEveryWireTypeAreSkipped) {
  const std::string unknown = Key(15, 0) + Varint(300) + Key(16, 1) + std::string(8, 'x') +
                              Bytes(17, "abc") + Key(18, 5) + std::string(4, 'y');
  const std::string value = unknown + Bytes(1, "loss") + Key(2, 5) + std::string("\0\0\x80\x3f", 4);
  absl::StatusOr<DecodedEvent> e = DecodeEvent(unknown + EventOfValue(value + unknown), Where);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->values.size(), 1u);
  EXPECT_THAT(e->values[0].values, ElementsAre(1.0));
}

TEST(EventDecodeTest, UnpackedBucketsAreReadAsPackedOnes) {
  const std::string histo = Double(3, 2) + Double(6, 1) + Double(6, 5) + Double(7, 1) +
                            Double(7, 1);
  absl::StatusOr<DecodedEvent> e = DecodeEvent(EventOfValue(Bytes(1, "g") + Bytes(5, histo)), Where);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE(e->values.at(0).histogram.has_value());
  EXPECT_THAT(e->values[0].histogram->bucket_limit, ElementsAre(1, 5));
  EXPECT_THAT(e->values[0].histogram->bucket, ElementsAre(1, 1));
}

TEST(EventDecodeTest, AMessageFieldGivenTwiceIsMergedAsProtobufMergesIt) {
  // Two histo fields: scalars from the last, buckets of both.
  const std::string first = Double(3, 1) + Double(6, 1) + Double(7, 4);
  const std::string second = Double(3, 2) + Double(6, 2) + Double(7, 5);
  absl::StatusOr<DecodedEvent> e =
      DecodeEvent(EventOfValue(Bytes(1, "g") + Bytes(5, first) + Bytes(5, second)), Where);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE(e->values.at(0).histogram.has_value());
  EXPECT_DOUBLE_EQ(e->values[0].histogram->num, 2);
  EXPECT_THAT(e->values[0].histogram->bucket_limit, ElementsAre(1, 2));
  EXPECT_THAT(e->values[0].histogram->bucket, ElementsAre(4, 5));
}

TEST(EventDecodeTest, StepWrittenAfterTheSummaryIsKnownBeforeValuesAreOffered) {
  const std::string payload = testing::TbScalarEvent(5, "loss", 1, 1.7e9) + Key(2, 0) + Varint(9);
  std::vector<int64_t> offered_at;
  DecodedEvent e;
  ASSERT_TRUE(DecodeEventInto(payload, Where,
                              [&](absl::string_view, int64_t step) {
                                offered_at.push_back(step);
                                return true;
                              },
                              e)
                  .ok());
  EXPECT_THAT(offered_at, ElementsAre(9));
  EXPECT_EQ(e.step, 9);
}

TEST(EventDecodeTest, UnwantedValuesAreCountedNotDecoded) {
  HistogramStats bad;  // Inconsistent: refused when decoded.
  bad.bucket_limit = {1, 2};
  bad.bucket = {1};
  const std::string payload = testing::TbHistogramEvent(2, "gradients/x", bad, 1.7e9);
  DecodedEvent e;
  ASSERT_TRUE(
      DecodeEventInto(payload, Where, [](absl::string_view, int64_t) { return false; }, e).ok());
  EXPECT_TRUE(e.values.empty());
  EXPECT_EQ(e.numeric, 1);
  EXPECT_EQ(e.histograms, 1);
  absl::Status wanted = DecodeStatus(payload);
  EXPECT_EQ(wanted.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wanted.message(), HasSubstr("1 bucket counts and 2 bucket limits"));
  EXPECT_THAT(wanted.message(), HasSubstr("record at offset 7"));
}

TEST(EventDecodeTest, TruncatedVarintIsDataLoss) {
  absl::Status s = DecodeStatus(Key(2, 0) + "\xff\xff");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("varint cut short"));
  EXPECT_THAT(s.message(), HasSubstr("record at offset 7"));
  // Eleven bytes: longer than any varint.
  s = DecodeStatus(Key(2, 0) + std::string(10, '\xff') + "\x01");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("varint cut short"));
  s = DecodeStatus(std::string("\xff\xff\xff", 3));  // A key cut short.
  EXPECT_THAT(s.message(), HasSubstr("not a TensorBoard Event"));
}

TEST(EventDecodeTest, LengthPastTheEndIsDataLoss) {
  absl::Status s = DecodeStatus(Key(5, 2) + Varint(50) + "short");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("past the end"));
  s = DecodeStatus(Key(1, 1) + "1234");  // A double of 4 bytes.
  EXPECT_THAT(s.message(), HasSubstr("past the end"));
  // Inside a value: a tag longer than the value.
  s = DecodeStatus(EventOfValue(Key(1, 2) + Varint(9) + "ab"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("malformed Summary.Value"));
  // A histogram's packed buckets that are not whole doubles.
  s = DecodeStatus(EventOfValue(Bytes(1, "g") + Bytes(5, Bytes(6, "1234567"))));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("malformed histogram"));
}

TEST(EventDecodeTest, WrongWireTypeIsDataLoss) {
  absl::Status s = DecodeStatus(Key(1, 0) + Varint(5));  // wall_time as a varint.
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("wrong wire type"));
  s = DecodeStatus(Key(5, 5) + "abcd");  // summary as a fixed32.
  EXPECT_THAT(s.message(), HasSubstr("wrong wire type"));
  s = DecodeStatus(Key(3, 3));  // A group: never written by TensorBoard.
  EXPECT_THAT(s.message(), HasSubstr("wrong wire type"));
  s = DecodeStatus(Key(9, 7));  // An undefined wire type.
  EXPECT_THAT(s.message(), HasSubstr("wrong wire type"));
  // A key wider than 32 bits whose low bits would read as wall_time.
  s = DecodeStatus(Varint((uint64_t{1} << 35) | (1 << 3) | 1) + std::string(8, '\0'));
  EXPECT_THAT(s.message(), HasSubstr("wrong wire type"));
  s = DecodeStatus(EventOfValue(Bytes(1, "loss") + Key(2, 0) + Varint(1)));  // simple_value.
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("malformed Summary.Value"));
  s = DecodeStatus(EventOfValue(Bytes(1, "g") + Bytes(5, Key(1, 0) + Varint(1))));  // histo.min.
  EXPECT_THAT(s.message(), HasSubstr("malformed histogram"));
}

TEST(EventDecodeTest, EveryTruncationOfAValidRecordIsAnErrorOrAShorterEvent) {
  HistogramStats h;
  h.bucket_limit = {0, 1, 2};
  h.bucket = {3, 4, 5};
  const std::string payload = testing::TbHistogramEvent(5, "w", h, 1.7e9);
  for (size_t n = 0; n < payload.size(); ++n) {
    absl::StatusOr<DecodedEvent> e = DecodeEvent(payload.substr(0, n), Where);
    if (e.ok()) {
      EXPECT_TRUE(e->values.empty()) << n;  // Cut before the summary.
    } else {
      EXPECT_EQ(e.status().code(), absl::StatusCode::kDataLoss) << n;
    }
  }
}

}  // namespace
}  // namespace debugplane::rules_engine::tensorboard
