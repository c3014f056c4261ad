// The ListObjectsV2 and error reply parsers (objectstore/s3_xml.h) on
// replies as S3 sends them and on damaged ones.

#include "objectstore/s3_xml.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::objectstore {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A page as AWS documents it (ListObjectsV2, with a delimiter).
constexpr char kPage[] = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>dp-data</Name><Prefix>job/</Prefix><KeyCount>3</KeyCount><MaxKeys>3</MaxKeys>
  <Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
  <Contents><Key>job/a &amp; b.json</Key><LastModified>2026-11-24T10:00:00.000Z</LastModified>
    <ETag>"599bab3ed2c697f1d26842727561fd94"</ETag><Size>142863</Size>
    <StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>job/&#xE9;.json</Key><Size>0</Size></Contents>
  <CommonPrefixes><Prefix>job/index/</Prefix></CommonPrefixes>
</ListBucketResult>)";

TEST(ParseListObjectsV2Test, ReadsObjectsCommonPrefixesAndContinuation) {
  absl::StatusOr<ListObjectsV2Page> page = ParseListObjectsV2(kPage);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "job/a & b.json");
  EXPECT_EQ(page->objects[0].size, 142863u);
  EXPECT_EQ(page->objects[0].modified, absl::FromUnixSeconds(1795514400));
  EXPECT_EQ(page->objects[1].key, "job/\xC3\xA9.json");
  EXPECT_EQ(page->objects[1].modified, absl::InfinitePast());
  EXPECT_THAT(page->common_prefixes, ElementsAre("job/index/"));
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_continuation_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
}

TEST(ParseListObjectsV2Test, DecodesUrlEncodedNames) {
  absl::StatusOr<ListObjectsV2Page> page = ParseListObjectsV2(
      "<ListBucketResult><EncodingType>url</EncodingType>"
      "<Contents><Key>job/a+b%2Bc%01%C3%A9%2f</Key><Size>1</Size></Contents>"
      "<CommonPrefixes><Prefix>job/x%20y/</Prefix></CommonPrefixes></ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "job/a b+c\x01\xC3\xA9/");
  EXPECT_THAT(page->common_prefixes, ElementsAre("job/x y/"));

  // Without EncodingType the names are as sent.
  page = ParseListObjectsV2(
      "<ListBucketResult><Contents><Key>a+b%20</Key><Size>1</Size></Contents>"
      "</ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->objects[0].key, "a+b%20");

  for (const char* bad : {"<Contents><Key>a%2</Key><Size>1</Size></Contents>",
                          "<Contents><Key>a%zz</Key><Size>1</Size></Contents>",
                          "<CommonPrefixes><Prefix>%</Prefix></CommonPrefixes>"}) {
    page = ParseListObjectsV2(absl::StrCat("<ListBucketResult><EncodingType>url</EncodingType>",
                                           bad, "</ListBucketResult>"));
    EXPECT_EQ(page.status().code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_THAT(page.status().message(), HasSubstr("does not decode")) << bad;
  }
}

TEST(ParseListObjectsV2Test, EmptyListingIsEmpty) {
  absl::StatusOr<ListObjectsV2Page> page = ParseListObjectsV2(
      "<ListBucketResult><Name>b</Name><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated>"
      "</ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(page->objects.empty());
  EXPECT_FALSE(page->truncated);
}

TEST(ParseListObjectsV2Test, DamagedRepliesAreDataLossSayingWhy) {
  const struct {
    const char* xml;
    const char* why;
  } cases[] = {
      {"", "not well-formed"},
      {"<ListBucketResult><Contents>", "not well-formed"},
      {"<Error><Code>x</Code></Error>", "not ListBucketResult"},
      {"<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>", "no <Key>"},
      {"<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>",
       "not a number"},
      {"<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>", "not a number"},
      {"<ListBucketResult><Contents><Key>k</Key><Size>99999999999999999999999</Size></Contents>"
       "</ListBucketResult>",
       "not a number"},
      {"<ListBucketResult><Contents><Key>k</Key><Size>1</Size>"
       "<LastModified>yesterday</LastModified></Contents></ListBucketResult>",
       "ISO 8601"},
      {"<ListBucketResult><CommonPrefixes></CommonPrefixes></ListBucketResult>", "no <Prefix>"},
      {"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
       "no <NextContinuationToken>"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<ListObjectsV2Page> page = ParseListObjectsV2(c.xml);
    EXPECT_EQ(page.status().code(), absl::StatusCode::kDataLoss) << c.xml;
    EXPECT_THAT(page.status().message(), HasSubstr(c.why)) << c.xml;
  }
}

TEST(ParseS3ErrorTest, ReadsCodeAndMessageOrNothing) {
  S3ErrorReply reply = ParseS3Error(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NoSuchBucket</Code>"
      "<Message>The specified bucket does not exist</Message><BucketName>x</BucketName></Error>");
  EXPECT_EQ(reply.code, "NoSuchBucket");
  EXPECT_EQ(reply.message, "The specified bucket does not exist");
  for (const char* other : {"", "<html><body>502 Bad Gateway</body></html>", "<Error>", "\x00"}) {
    reply = ParseS3Error(other);
    EXPECT_EQ(reply.code, "") << other;
    EXPECT_EQ(reply.message, "") << other;
  }
}

}  // namespace
}  // namespace debugplane::objectstore
