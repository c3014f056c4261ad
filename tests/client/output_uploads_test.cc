// client/agent/output_uploads.h: s3:// locations, and the errors that keep an
// agent from starting a job whose output it could never upload.

#include "client/agent/output_uploads.h"

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::client {
namespace {

using ::debugplane::testing::ScopedTempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ParseS3LocationTest, SplitsBucketAndPrefixWithoutTrailingSlashes) {
  absl::StatusOr<std::optional<S3Location>> location =
      ParseS3Location("F", "s3://my-bucket/jobs/run-1/tensors/");
  ASSERT_TRUE(location.ok()) << location.status();
  ASSERT_TRUE(location->has_value());
  EXPECT_EQ((*location)->bucket, "my-bucket");
  EXPECT_EQ((*location)->prefix, "jobs/run-1/tensors");

  location = ParseS3Location("F", "s3://my-bucket");
  ASSERT_TRUE(location.ok() && location->has_value());
  EXPECT_EQ((*location)->bucket, "my-bucket");
  EXPECT_EQ((*location)->prefix, "");
}

TEST(ParseS3LocationTest, LocalPathsAreNotS3AndABucketIsRequired) {
  absl::StatusOr<std::optional<S3Location>> local = ParseS3Location("F", "/data/out");
  ASSERT_TRUE(local.ok());
  EXPECT_FALSE(local->has_value());
  absl::Status status = ParseS3Location("DebugHookConfig.S3OutputPath", "s3:///x").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("DebugHookConfig.S3OutputPath"), HasSubstr("names no bucket")));
}

TEST(StartOutputUploadsTest, AHostWithoutAnyCredentialsUploadsNothingSayingWhy) {
  ScopedTempDir dir;
  // No keys anywhere: no variables, no shared files.
  const objectstore::EnvironmentLookup environment = objectstore::MapEnvironment({
      {"HOME", dir.path().string()},
      {"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9"},
      {"AWS_SHARED_CREDENTIALS_FILE", (dir.path() / "none").string()},
      {"AWS_CONFIG_FILE", (dir.path() / "none").string()},
  });
  std::string logged;
  absl::StatusOr<std::unique_ptr<objectstore::DirectoryUploader>> uploader = StartOutputUploads(
      {{"ProfilerConfig.S3OutputPath", "s3://bucket/p", dir.path().string(), {}}}, environment,
      [&](const std::string& line) { logged += line; });
  ASSERT_TRUE(uploader.ok()) << uploader.status();
  EXPECT_EQ(*uploader, nullptr);
  EXPECT_THAT(logged, AllOf(HasSubstr("not uploading"),
                            HasSubstr("ProfilerConfig.S3OutputPath s3://bucket/p"),
                            HasSubstr("AWS_ACCESS_KEY_ID")));
}

TEST(StartOutputUploadsTest, HalfAKeyPairIsRefusedNamingTheFieldAndUri) {
  ScopedTempDir dir;
  const objectstore::EnvironmentLookup environment = objectstore::MapEnvironment({
      {"HOME", dir.path().string()},
      {"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9"},
      {"AWS_ACCESS_KEY_ID", "AKIATEST"},
      {"AWS_SHARED_CREDENTIALS_FILE", (dir.path() / "none").string()},
      {"AWS_CONFIG_FILE", (dir.path() / "none").string()},
  });
  absl::Status status =
      StartOutputUploads(
          {{"ProfilerConfig.S3OutputPath", "s3://bucket/p", dir.path().string(), {}}}, environment,
          nullptr)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("cannot upload ProfilerConfig.S3OutputPath s3://bucket/p"));
}

TEST(StartOutputUploadsTest, AStoreThatIsDownIsNoErrorButIsLogged) {
  ScopedTempDir dir;
  const objectstore::EnvironmentLookup environment = objectstore::MapEnvironment({
      {"HOME", dir.path().string()},
      {"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9"},  // discard: nothing listens
      {"AWS_ACCESS_KEY_ID", "AKIATEST"},
      {"AWS_SECRET_ACCESS_KEY", "secret"},
      {"AWS_SHARED_CREDENTIALS_FILE", (dir.path() / "none").string()},
      {"AWS_CONFIG_FILE", (dir.path() / "none").string()},
  });
  std::string logged;
  absl::StatusOr<std::unique_ptr<objectstore::DirectoryUploader>> uploader = StartOutputUploads(
      {{"DebugHookConfig.S3OutputPath", "s3://bucket/t", dir.path().string(), {}}}, environment,
      [&](const std::string& line) { logged += line; });
  ASSERT_TRUE(uploader.ok()) << uploader.status();
  EXPECT_THAT(logged, AllOf(HasSubstr("DebugHookConfig.S3OutputPath s3://bucket/t"),
                            HasSubstr("files wait on disk")));
}

}  // namespace
}  // namespace debugplane::client
