#include "rules_engine/smdebug/tfrecord.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/smdebug/crc32c.h"

namespace debugplane::rules_engine {
namespace {

// Test objects are small; reads of them are bounded like every other.
constexpr ::debugplane::objectstore::ReadLimit kTestReadLimit{1 << 20, "a test object"};

using ::testing::HasSubstr;
using Kind = TfRecordParse::Kind;

TEST(TfRecordTest, RoundTrip) {
  const std::string rec = EncodeTfRecord("payload bytes");
  EXPECT_EQ(rec.size(), 13 + kTfRecordOverhead);
  TfRecordParse r = ParseTfRecord(rec);
  ASSERT_EQ(r.kind, Kind::kOk) << r.error;
  EXPECT_EQ(r.payload, "payload bytes");
  EXPECT_EQ(r.size, rec.size());
  EXPECT_FALSE(r.placeholder_footer);
}

TEST(TfRecordTest, AcceptsSmdebugPlaceholderFooter) {
  const std::string rec = EncodeTfRecord("abc", /*placeholder_footer=*/true);
  // The footer is masked_crc32c of the 10 ASCII bytes "0x12345678".
  const uint32_t footer = MaskedCrc32c("0x12345678");
  EXPECT_EQ(static_cast<unsigned char>(rec[rec.size() - 4]), footer & 0xff);
  TfRecordParse r = ParseTfRecord(rec);
  ASSERT_EQ(r.kind, Kind::kOk) << r.error;
  EXPECT_TRUE(r.placeholder_footer);
  EXPECT_EQ(r.payload, "abc");
}

TEST(TfRecordTest, EveryTruncationIsIncomplete) {
  const std::string rec = EncodeTfRecord(std::string(100, 'x'));
  for (size_t n = 0; n < rec.size(); ++n) {
    EXPECT_EQ(ParseTfRecord(rec.substr(0, n)).kind, Kind::kIncomplete) << n;
  }
}

TEST(TfRecordTest, EveryFlippedByteIsCorrupt) {
  const std::string rec = EncodeTfRecord(std::string(40, 'y'));
  for (size_t i = 0; i < rec.size(); ++i) {
    std::string bad = rec;
    bad[i] ^= 0x01;
    TfRecordParse r = ParseTfRecord(bad, 1000);
    // A flipped length byte either fails the length CRC (corrupt).
    EXPECT_EQ(r.kind, Kind::kCorrupt) << i;
    EXPECT_THAT(r.error, HasSubstr("offset 1000")) << i;
  }
}

TEST(TfRecordTest, AbsurdLengthWithValidCrcIsCorruptNotIncomplete) {
  std::string rec;
  const uint64_t huge = uint64_t{1} << 40;
  for (int i = 0; i < 8; ++i) rec.push_back(static_cast<char>((huge >> (8 * i)) & 0xff));
  const uint32_t crc = MaskedCrc32c(rec);
  for (int i = 0; i < 4; ++i) rec.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  TfRecordParse r = ParseTfRecord(rec);
  EXPECT_EQ(r.kind, Kind::kCorrupt);
  EXPECT_THAT(r.error, HasSubstr("absurd length"));
}

TEST(TfRecordTest, ParseRecordsStopsAtPartialTail) {
  const std::string a = EncodeTfRecord("first");
  const std::string b = EncodeTfRecord("second", true);
  const std::string c = EncodeTfRecord("third");
  const std::string buf = a + b + c.substr(0, 9);
  absl::StatusOr<TfRecords> r = ParseTfRecords(buf, "f.tfevents");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->records.size(), 2u);
  EXPECT_EQ(r->records[0].payload, "first");
  EXPECT_EQ(r->records[1].offset, a.size());
  EXPECT_EQ(r->records[1].payload, "second");
  EXPECT_EQ(r->consumed, a.size() + b.size());
  EXPECT_TRUE(r->incomplete);
}

TEST(TfRecordTest, ParseRecordsReportsFileAndOffsetOfCorruption) {
  const std::string a = EncodeTfRecord("first");
  std::string b = EncodeTfRecord("second");
  b[14] ^= 0x40;
  absl::StatusOr<TfRecords> r = ParseTfRecords(a + b, "dir/f.tfevents", 100);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("dir/f.tfevents"));
  EXPECT_THAT(r.status().message(), HasSubstr(absl::StrCat("offset ", 100 + a.size())));
}

TEST(TfRecordTest, ParseAtChecksIndexLength) {
  const std::string rec = EncodeTfRecord("hello");
  EXPECT_EQ(ParseTfRecordAt(rec, "f", 0, rec.size()).kind, Kind::kOk);
  EXPECT_EQ(ParseTfRecordAt(rec.substr(0, 15), "f", 0, rec.size()).kind, Kind::kIncomplete);
  TfRecordParse wrong = ParseTfRecordAt(rec + "zz", "f", 0, rec.size() + 2);
  EXPECT_EQ(wrong.kind, Kind::kCorrupt);
  EXPECT_THAT(wrong.error, HasSubstr("the index says"));
  EXPECT_EQ(ParseTfRecordAt(rec, "f", 0, 3).kind, Kind::kCorrupt);
}

TEST(TfRecordTest, ParsesRealSmdebugEventFile) {
  const std::string file =
      DP_TEST_DATA_DIR "/smdebug/healthy/events/000000000005/000000000005_worker_0.tfevents";
  absl::StatusOr<objectstore::StoreLocation> location = objectstore::OpenLocalPath(file);
  ASSERT_TRUE(location.ok()) << location.status();
  absl::StatusOr<std::string> data = location->store->ReadAtMost(location->prefix, kTestReadLimit);
  ASSERT_TRUE(data.ok()) << data.status();
  absl::StatusOr<TfRecords> r = ParseTfRecords(*data, file);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->incomplete);
  EXPECT_EQ(r->consumed, data->size());
  // EVAL step: 11 tensors (no gradients), one record each; offsets from the index.
  ASSERT_EQ(r->records.size(), 11u);
  EXPECT_EQ(r->records[1].offset, 2203u);
  EXPECT_EQ(r->records[10].offset, 24850u);
}

}  // namespace
}  // namespace debugplane::rules_engine
