#include "core/jobs/output_path.h"

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::core {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A temp directory with a data root inside it, and room outside the root.
class OutputPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::path(::testing::TempDir()) / "dp-outpath-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    base_ = fs::canonical(pattern);
    root_ = base_ / "data";
    outside_ = base_ / "outside";
    fs::create_directories(root_ / "existing" / "deeper");
    fs::create_directories(outside_);
    roots_ = {root_};
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(base_, ignored);
  }

  absl::StatusOr<OutputLocation> Resolve(const std::string& uri) {
    return ResolveOutputPath(uri, roots_);
  }
  // The message of a refusal, or a failure if it was accepted.
  std::string Refusal(const std::string& uri) {
    absl::StatusOr<OutputLocation> location = Resolve(uri);
    EXPECT_FALSE(location.ok()) << uri << " was accepted as " << location->location;
    if (location.ok()) return "";
    EXPECT_EQ(location.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(location.status().message());
  }
  std::string Local(const std::string& uri) {
    absl::StatusOr<OutputLocation> location = Resolve(uri);
    EXPECT_TRUE(location.ok()) << uri << ": " << location.status();
    if (!location.ok()) return "";
    EXPECT_EQ(location->kind, OutputLocation::Kind::kLocal);
    return location->location;
  }

  fs::path base_, root_, outside_;
  std::vector<fs::path> roots_;
};

TEST_F(OutputPathTest, ObjectStoreUrisAreKeptAsGiven) {
  for (const std::string uri :
       {"s3://bucket", "s3://bucket/", "s3://sagemaker-us-west-2-111122223333/job/debug-output",
        "https://minio.example.com/bucket/prefix", "https://host"}) {
    absl::StatusOr<OutputLocation> location = Resolve(uri);
    ASSERT_TRUE(location.ok()) << uri << ": " << location.status();
    EXPECT_EQ(location->kind, OutputLocation::Kind::kObjectStore);
    EXPECT_EQ(location->location, uri);
  }
  // Object stores need no data roots.
  EXPECT_TRUE(ResolveOutputPath("s3://bucket/x", {}).ok());
}

TEST_F(OutputPathTest, ObjectStoreUrisNeedABucketOrHost) {
  EXPECT_THAT(Refusal("s3://"), HasSubstr("no bucket"));
  EXPECT_THAT(Refusal("s3:///prefix"), HasSubstr("no bucket"));
  EXPECT_THAT(Refusal("https://"), HasSubstr("no host"));
  EXPECT_THAT(Refusal("https:///path"), HasSubstr("no host"));
}

TEST_F(OutputPathTest, UnknownSchemesAndRelativePathsAreRefused) {
  EXPECT_THAT(Refusal("gs://bucket/x"), HasSubstr("unsupported scheme 'gs'"));
  EXPECT_THAT(Refusal("S3://bucket/x"), HasSubstr("unsupported scheme"));
  EXPECT_THAT(Refusal("http://host/x"), HasSubstr("unsupported scheme 'http'"));
  EXPECT_THAT(Refusal("data/output"), HasSubstr("relative"));
  EXPECT_THAT(Refusal("./output"), HasSubstr("relative"));
  EXPECT_THAT(Refusal("bucket/prefix"), HasSubstr("s3://bucket[/prefix]"));
  EXPECT_THAT(Refusal(""), HasSubstr("empty"));
}

TEST_F(OutputPathTest, LocalPathsInsideADataRootAreAcceptedAndNormalized) {
  EXPECT_EQ(Local((root_ / "job" / "output").string()), (root_ / "job" / "output").string());
  EXPECT_EQ(Local(root_.string()), root_.string());
  EXPECT_EQ(Local(root_.string() + "/"), root_.string());
  EXPECT_EQ(Local(root_.string() + "//a/./b/"), (root_ / "a" / "b").string());
  EXPECT_EQ(Local((root_ / "existing" / "deeper" / "new").string()),
            (root_ / "existing" / "deeper" / "new").string());
}

TEST_F(OutputPathTest, FileUrisAreLocalPaths) {
  EXPECT_EQ(Local("file://" + (root_ / "job").string()), (root_ / "job").string());
  EXPECT_THAT(Refusal("file://" + (outside_ / "job").string()), HasSubstr("outside"));
  EXPECT_THAT(Refusal("file://host/data/job"), HasSubstr("file:///absolute/path"));
  EXPECT_THAT(Refusal("file://relative"), HasSubstr("file:///absolute/path"));
  EXPECT_THAT(Refusal("file://"), HasSubstr("file:///absolute/path"));
}

TEST_F(OutputPathTest, LocalPathsOutsideTheRootsAreRefusedNamingTheRoots) {
  const std::string message = Refusal((outside_ / "job").string());
  EXPECT_THAT(message, HasSubstr("outside the server's data roots"));
  EXPECT_THAT(message, HasSubstr(root_.string()));
  EXPECT_THAT(Refusal("/etc/passwd"), HasSubstr("outside"));
  EXPECT_THAT(Refusal("/"), HasSubstr("outside"));
  EXPECT_THAT(Refusal(base_.string()), HasSubstr("outside"));
}

TEST_F(OutputPathTest, RootsAreComparedByComponentNotByString) {
  fs::create_directories(base_ / "data2");
  EXPECT_THAT(Refusal((base_ / "data2" / "job").string()), HasSubstr("outside"));
  EXPECT_THAT(Refusal(root_.string() + "2"), HasSubstr("outside"));
  EXPECT_THAT(Refusal(root_.string() + "-x/job"), HasSubstr("outside"));
}

TEST_F(OutputPathTest, DotDotComponentsAreRefusedEvenWhenTheyStayInside) {
  EXPECT_THAT(Refusal((root_ / "a" / ".." / "b").string()), HasSubstr("'..'"));
  EXPECT_THAT(Refusal(root_.string() + "/../outside"), HasSubstr("'..'"));
  EXPECT_THAT(Refusal(root_.string() + "/.."), HasSubstr("'..'"));
  EXPECT_THAT(Refusal("file://" + root_.string() + "/x/../../etc"), HasSubstr("'..'"));
  // ".." inside a name is just a name.
  EXPECT_EQ(Local(root_.string() + "/a..b"), root_.string() + "/a..b");
}

TEST_F(OutputPathTest, SymlinkLeadingOutsideIsRefused) {
  fs::create_directory_symlink(outside_, root_ / "escape");
  const std::string message = Refusal((root_ / "escape" / "job").string());
  EXPECT_THAT(message, HasSubstr("symlink"));
  EXPECT_THAT(message, HasSubstr(outside_.string()));
  EXPECT_THAT(Refusal((root_ / "escape").string()), HasSubstr("symlink"));
  // Deeper in the tree too, and with a relative link target.
  fs::create_directory_symlink("../../../outside", root_ / "existing" / "deeper" / "up");
  EXPECT_THAT(Refusal((root_ / "existing" / "deeper" / "up" / "x").string()), HasSubstr("symlink"));
}

TEST_F(OutputPathTest, SymlinkStayingInsideIsAccepted) {
  fs::create_directory_symlink(root_ / "existing", root_ / "alias");
  // The location is the path as given (normalized), not the link target.
  EXPECT_EQ(Local((root_ / "alias" / "job").string()), (root_ / "alias" / "job").string());
}

TEST_F(OutputPathTest, DanglingAndLoopingSymlinksAreRefused) {
  // Writing through a dangling link would create its target, wherever it is.
  fs::create_symlink(outside_ / "not-yet", root_ / "dangling");
  EXPECT_THAT(Refusal((root_ / "dangling").string()), HasSubstr("symlink"));
  EXPECT_THAT(Refusal((root_ / "dangling" / "job").string()), HasSubstr("symlink"));
  fs::create_symlink(root_ / "loop", root_ / "loop");
  EXPECT_THAT(Refusal((root_ / "loop" / "job").string()), HasSubstr("symlink"));
}

TEST_F(OutputPathTest, SymlinkedAliasOfARootIsRefused) {
  // The path as named must be inside a root, not only its target.
  fs::create_directory_symlink(root_, outside_ / "to-data");
  EXPECT_THAT(Refusal((outside_ / "to-data" / "job").string()), HasSubstr("outside"));
}

TEST_F(OutputPathTest, NulAndControlCharactersAreRefused) {
  const std::string with_nul = root_.string() + std::string("/a\0b", 4);
  EXPECT_THAT(Refusal(with_nul), HasSubstr("control character (byte 0x00)"));
  EXPECT_THAT(Refusal("s3://bucket/a\nb"), HasSubstr("control character"));
  EXPECT_THAT(Refusal(root_.string() + "/a\x7f"), HasSubstr("control character"));
}

TEST_F(OutputPathTest, LengthIsLimitedTo1024Characters) {
  const std::string prefix = "s3://bucket/";
  EXPECT_TRUE(Resolve(prefix + std::string(1024 - prefix.size(), 'k')).ok());
  EXPECT_THAT(Refusal(prefix + std::string(1025 - prefix.size(), 'k')),
              HasSubstr("1025 characters long; at most 1024"));
  // Characters, not bytes: 1000 two-byte characters are fine.
  std::string wide = prefix;
  for (int i = 0; i < 1000; ++i) wide += "\xc3\xa9";  // é
  EXPECT_TRUE(Resolve(wide).ok());
  EXPECT_FALSE(Resolve(std::string(1 << 20, '/')).ok());
}

TEST_F(OutputPathTest, WithoutDataRootsLocalPathsAreRefused) {
  absl::StatusOr<OutputLocation> location = ResolveOutputPath(root_.string(), {});
  ASSERT_FALSE(location.ok());
  EXPECT_THAT(location.status().message(), HasSubstr("--data-root"));
}

TEST_F(OutputPathTest, AnyOfSeveralRootsWorks) {
  fs::create_directories(base_ / "second");
  roots_ = {root_, base_ / "second"};
  EXPECT_EQ(Local((base_ / "second" / "job").string()), (base_ / "second" / "job").string());
  EXPECT_EQ(Local((root_ / "job").string()), (root_ / "job").string());
  const std::string message = Refusal((outside_ / "job").string());
  EXPECT_THAT(message, HasSubstr(root_.string()));
  EXPECT_THAT(message, HasSubstr((base_ / "second").string()));
}

TEST_F(OutputPathTest, RootGivenWithTrailingSlashStillMatches) {
  roots_ = {fs::path(root_.string() + "/")};
  EXPECT_EQ(Local((root_ / "job").string()), (root_ / "job").string());
  EXPECT_THAT(Refusal(root_.string() + "2/job"), HasSubstr("outside"));
}

}  // namespace
}  // namespace debugplane::core
