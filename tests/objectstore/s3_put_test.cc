// S3ObjectStore::Put (objectstore/s3_object_store.h) against moto's server
// with every SigV4 signature checked (s3_test_server.h): single PUTs and
// multipart uploads, and an upload to a store that is down.

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/s3_object_store.h"
#include "tests/objectstore/s3_test_server.h"

namespace debugplane::objectstore {
namespace {

// Test objects are small; reads of them are bounded like every other.
constexpr ::debugplane::objectstore::ReadLimit kTestReadLimit{64 << 20, "a test object"};

using ::debugplane::testing::S3TestServer;
using ::testing::HasSubstr;

constexpr char kBucket[] = "dp-upload";
constexpr uint64_t kPartBytes = 5 << 20;  // S3's smallest part.

std::shared_ptr<S3ObjectStore> MakeStore(S3Config config, std::string bucket = kBucket) {
  S3ObjectStore::Options options;
  options.config = std::move(config);
  options.bucket = std::move(bucket);
  options.multipart_part_bytes = kPartBytes;
  absl::StatusOr<std::shared_ptr<S3ObjectStore>> store = S3ObjectStore::Create(std::move(options));
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *store : nullptr;
}

// Bytes that differ at every offset within a part, so that a part stored
// at the wrong place or twice does not compare equal.
std::string Pattern(size_t size) {
  std::string data(size, '\0');
  uint32_t state = 2463534242u;
  for (char& c : data) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    c = static_cast<char>(state);
  }
  return data;
}

class S3PutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static S3TestServer* server =
        S3TestServer::StartForSuite({.buckets = {kBucket}, .check_signatures = true});
    ASSERT_NE(server, nullptr) << "the S3 test server did not start (see above)";
    server_ = server;
    store_ = MakeStore(server_->Config());
    ASSERT_NE(store_, nullptr);
  }
  S3TestServer* server_ = nullptr;
  std::shared_ptr<S3ObjectStore> store_;
};

TEST_F(S3PutTest, SignedPutIsAcceptedAndReadsBack) {
  // Bytes a form decoder would alter ('+', '&', '=', '%') and a NUL.
  const std::string data = std::string("a+b&c=d%20e\n", 12) + std::string(1, '\0') + "end";
  ASSERT_TRUE(store_->Put("trial/events/0001.tfevents", data).ok());
  EXPECT_EQ(store_->ReadAtMost("trial/events/0001.tfevents", kTestReadLimit).value_or("error"),
            data);
  // Replaced whole.
  ASSERT_TRUE(store_->Put("trial/events/0001.tfevents", "shorter").ok());
  EXPECT_EQ(store_->ReadAtMost("trial/events/0001.tfevents", kTestReadLimit).value_or("error"),
            "shorter");
}

TEST_F(S3PutTest, EmptyObjectIsStored) {
  ASSERT_TRUE(store_->Put("trial/empty", "").ok());
  absl::StatusOr<ObjectEntry> entry = store_->Stat("trial/empty");
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ(entry->size, 0u);
}

TEST_F(S3PutTest, LargeObjectGoesUpInPartsAndReadsBackWhole) {
  // Two full parts and a short last one.
  const std::string data = Pattern(2 * kPartBytes + 12345);
  absl::Status put = store_->Put("trial/big.bin", data);
  ASSERT_TRUE(put.ok()) << put;
  absl::StatusOr<std::string> read = store_->ReadAtMost("trial/big.bin", kTestReadLimit);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->size(), data.size());
  EXPECT_TRUE(*read == data) << "the stored object differs from what was uploaded";
  // The part boundary holds the right bytes.
  EXPECT_EQ(store_->ReadRange("trial/big.bin", kPartBytes, 8).value_or("error"),
            data.substr(kPartBytes, 8));
}

TEST_F(S3PutTest, PutToMissingBucketIsRefusedNamingIt) {
  std::shared_ptr<S3ObjectStore> store = MakeStore(server_->Config(), "no-such-bucket");
  absl::Status status = store->Put("k", "v");
  // Refused, naming the bucket (its code is the one reads give it).
  EXPECT_EQ(status.code(), store->ReadAtMost("k", kTestReadLimit).status().code()) << status;
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("bucket 'no-such-bucket' does not exist"));
}

TEST_F(S3PutTest, WrongSecretIsPermissionDenied) {
  S3Config config = server_->Config();
  config.secret_access_key = "wrong-secret-0123456789";
  absl::Status status = MakeStore(config)->Put("k", "v");
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_THAT(status.message(), HasSubstr(server_->access_key_id()));
}

TEST(S3PutCreateTest, RefusesPartsBelowS3sMinimum) {
  S3ObjectStore::Options options;
  options.config.endpoint = "http://127.0.0.1:9";
  options.config.access_key_id = "AKIATEST";
  options.config.secret_access_key = "secret";
  options.bucket = kBucket;
  options.multipart_part_bytes = 1 << 20;
  absl::Status status = S3ObjectStore::Create(std::move(options)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("part size"));
}

}  // namespace
}  // namespace debugplane::objectstore
