// DataRootStores (core/jobs/output_path.h): the one resolver from a job's output
// path to the store of its data root and the key prefix below it.

#include <filesystem>
#include <fstream>
#include <string>

#include "core/jobs/output_path.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::core {
namespace {

// Test objects are small; reads of them are bounded like every other.
constexpr ::debugplane::objectstore::ReadLimit kTestReadLimit{1 << 20, "a test object"};

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;
using ::testing::HasSubstr;

class DataRootStoresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_.path() / "data" / "nested");
    fs::create_directories(dir_.path() / "other");
  }
  fs::path Root(const std::string& name) const { return dir_.path() / name; }

  ScopedTempDir dir_;
};

TEST_F(DataRootStoresTest, LocalPathsResolveToTheirRootAndAKeyPrefix) {
  DataRootStores stores({Root("data"), Root("other")});
  for (const std::string& uri :
       {Root("data").string() + "/job/tensors", "file://" + Root("data").string() + "/job/tensors",
        Root("data").string() + "/job/./tensors/"}) {
    absl::StatusOr<objectstore::StoreLocation> location = stores.Resolve(uri);
    ASSERT_TRUE(location.ok()) << uri << ": " << location.status();
    EXPECT_EQ(location->prefix, "job/tensors") << uri;
    EXPECT_EQ(location->Describe(), (Root("data") / "job/tensors").string());
  }
  // The root itself is the empty prefix; another root has its own store.
  absl::StatusOr<objectstore::StoreLocation> root = stores.Resolve(Root("data").string());
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->prefix, "");
  absl::StatusOr<objectstore::StoreLocation> other = stores.Resolve(Root("other").string() + "/x");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->store, root->store);
  EXPECT_EQ(other->prefix, "x");
  // Reads go through the store, from the path.
  std::ofstream(Root("other") / "x") << "content";
  EXPECT_EQ(*other->store->ReadAtMost(other->prefix, kTestReadLimit), "content");
}

TEST_F(DataRootStoresTest, NestedRootsResolveToTheInnermost) {
  DataRootStores stores({Root("data"), Root("data") / "nested"});
  absl::StatusOr<objectstore::StoreLocation> location =
      stores.Resolve((Root("data") / "nested" / "job").string());
  ASSERT_TRUE(location.ok()) << location.status();
  EXPECT_EQ(location->prefix, "job");
  EXPECT_EQ(location->store->Describe(""), (Root("data") / "nested").string());
}

TEST_F(DataRootStoresTest, RefusalsSayWhy) {
  DataRootStores stores({Root("data")});
  const auto refusal = [&stores](const std::string& uri) {
    absl::StatusOr<objectstore::StoreLocation> location = stores.Resolve(uri);
    EXPECT_FALSE(location.ok()) << uri;
    return location.status();
  };
  absl::Status s3 = refusal("s3://bucket/job/debug-output");
  EXPECT_TRUE(absl::IsUnimplemented(s3)) << s3;
  EXPECT_THAT(s3.message(),
              HasSubstr("is in object storage, which this server is not configured to read"));
  absl::Status outside = refusal(Root("other").string() + "/job");
  EXPECT_TRUE(absl::IsInvalidArgument(outside)) << outside;
  EXPECT_THAT(outside.message(), HasSubstr("outside the server's data roots"));
  EXPECT_THAT(refusal(Root("data").string() + "/../other").message(), HasSubstr("'..'"));
  EXPECT_THAT(refusal("relative/path").message(), HasSubstr("relative"));
  EXPECT_THAT(refusal("gs://bucket/x").message(), HasSubstr("unsupported scheme"));
  EXPECT_TRUE(absl::IsInvalidArgument(refusal(std::string("/data\0x", 7))));
}

// A bucket factory that serves each bucket from a local directory: a real
// store, so that the resolver's part (which bucket, which prefix, made once)
// is what is tested.
class BucketStoresTest : public DataRootStoresTest {
 protected:
  DataRootStores::BucketStoreFactory Factory() {
    return [this](absl::string_view bucket)
               -> absl::StatusOr<std::shared_ptr<const objectstore::ObjectStore>> {
      ++made_;
      if (bucket == "broken") return absl::FailedPreconditionError("no credentials for 'broken'");
      fs::create_directories(Root("buckets") / std::string(bucket));
      absl::StatusOr<std::shared_ptr<objectstore::LocalObjectStore>> store =
          objectstore::LocalObjectStore::Open((Root("buckets") / std::string(bucket)).string());
      if (!store.ok()) return store.status();
      return std::shared_ptr<const objectstore::ObjectStore>(*std::move(store));
    };
  }
  int made_ = 0;
};

TEST_F(BucketStoresTest, S3PathsResolveToTheirBucketsStoreAndPrefix) {
  DataRootStores stores({Root("data")}, {}, Factory());
  absl::StatusOr<objectstore::StoreLocation> job = stores.Resolve("s3://bucket/job/debug-output/");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->prefix, "job/debug-output");
  EXPECT_EQ(job->Describe(), (Root("buckets") / "bucket" / "job/debug-output").string());
  absl::StatusOr<objectstore::StoreLocation> whole = stores.Resolve("s3://bucket");
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->prefix, "");
  EXPECT_EQ(whole->store, job->store) << "one store per bucket";
  absl::StatusOr<objectstore::StoreLocation> other = stores.Resolve("s3://other/x");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->store, job->store);
  EXPECT_EQ(made_, 2);
  // Local paths are unaffected.
  absl::StatusOr<objectstore::StoreLocation> local = stores.Resolve(Root("data").string() + "/j");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->prefix, "j");
}

TEST_F(BucketStoresTest, AFactoryFailureIsReturnedAndTriedAgainNextTime) {
  DataRootStores stores({Root("data")}, {}, Factory());
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::Status status = stores.Resolve("s3://broken/job").status();
    EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr("no credentials for 'broken'"));
  }
  EXPECT_EQ(made_, 2);
}

TEST_F(BucketStoresTest, BadObjectStorePathsAreRefused) {
  DataRootStores stores({Root("data")}, {}, Factory());
  absl::Status dots = stores.Resolve("s3://bucket/job/../x").status();
  EXPECT_TRUE(absl::IsInvalidArgument(dots)) << dots;
  EXPECT_THAT(dots.message(), HasSubstr("not a valid key"));
  absl::Status https = stores.Resolve("https://host/bucket/x").status();
  EXPECT_TRUE(absl::IsUnimplemented(https)) << https;
  EXPECT_THAT(https.message(), HasSubstr("s3://bucket/prefix"));
  EXPECT_EQ(made_, 0);
}

TEST_F(DataRootStoresTest, ARootThatCannotBeOpenedIsNamed) {
  DataRootStores stores({Root("missing")});
  absl::Status status = stores.Resolve(Root("missing").string() + "/job").status();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("the data root " + Root("missing").string() + " cannot be read"));
}

TEST_F(DataRootStoresTest, OnlyTheTextIsExamined) {
  // A link below the root resolves (reads through it are refused by the
  // store, whenever it appears).
  fs::create_directory_symlink(Root("other"), Root("data") / "link");
  DataRootStores stores({Root("data")});
  absl::StatusOr<objectstore::StoreLocation> location =
      stores.Resolve((Root("data") / "link" / "job").string());
  ASSERT_TRUE(location.ok()) << location.status();
  absl::Status listed = location->store->List({.prefix = location->prefix + "/"}).status();
  EXPECT_TRUE(absl::IsPermissionDenied(listed)) << listed;
  EXPECT_THAT(listed.message(),
              HasSubstr((Root("data") / "link").string() + " is a symbolic link"));
}

}  // namespace
}  // namespace debugplane::core
