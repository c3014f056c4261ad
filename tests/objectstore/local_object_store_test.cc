// LocalObjectStore (objectstore/local_object_store.h) on real directories:
// listing, ranged reads, errors, and confinement to the root, both with
// openat2 and with the component-by-component walk.

#include "objectstore/local_object_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::objectstore {
namespace {

// Test objects are small; reads of them are bounded like every other.
constexpr ::debugplane::objectstore::ReadLimit kTestReadLimit{1 << 20, "a test object"};

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

void WriteFile(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

std::vector<std::string> Keys(const ListResult& result) {
  std::vector<std::string> keys;
  for (const ObjectEntry& entry : result.objects) keys.push_back(entry.key);
  return keys;
}

class LocalObjectStoreTest : public ::testing::TestWithParam<LocalObjectStore::Resolution> {
 protected:
  void SetUp() override {
    fs::create_directories(root());
    fs::create_directories(outside());
    WriteFile(outside() / "secret.json", "{\"aws_secret_access_key\": \"wJalrXUtnFEMI\"}\n");
    LocalObjectStore::Options options;
    options.resolution = GetParam();
    absl::StatusOr<std::shared_ptr<LocalObjectStore>> store =
        LocalObjectStore::Open(root().string(), options);
    if (GetParam() == LocalObjectStore::Resolution::kOpenat2 &&
        absl::IsUnimplemented(store.status())) {
      GTEST_SKIP() << "this kernel has no openat2: " << store.status();
    }
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  fs::path root() const { return dir_.path() / "root"; }
  fs::path outside() const { return dir_.path() / "outside"; }

  testing::ScopedTempDir dir_;
  std::shared_ptr<LocalObjectStore> store_;
};

TEST_P(LocalObjectStoreTest, UsesTheResolutionAskedFor) {
  EXPECT_EQ(store_->uses_openat2(), GetParam() != LocalObjectStore::Resolution::kWalk);
}

TEST_P(LocalObjectStoreTest, DelimitedListingGivesObjectsWithSizesAndCommonPrefixes) {
  WriteFile(root() / "job/index/000000000/000000000000_worker_0.json", "abc");
  WriteFile(root() / "job/index/000000000/000000000001_worker_0.json", "abcdef");
  WriteFile(root() / "job/index/000000001/000000001000_worker_0.json", "x");
  WriteFile(root() / "job/index/readme.txt", "hello");
  fs::create_directories(root() / "job/index/empty");

  absl::StatusOr<ListResult> top = store_->List({.prefix = "job/index/", .delimiter = "/"});
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_THAT(Keys(*top), ElementsAre("job/index/readme.txt"));
  EXPECT_EQ(top->objects[0].size, 5u);
  EXPECT_GT(top->objects[0].modified, absl::UnixEpoch());
  EXPECT_THAT(top->common_prefixes,
              ElementsAre("job/index/000000000/", "job/index/000000001/", "job/index/empty/"));
  EXPECT_FALSE(top->truncated);

  absl::StatusOr<ListResult> steps =
      store_->List({.prefix = "job/index/000000000/", .delimiter = "/"});
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_THAT(Keys(*steps), ElementsAre("job/index/000000000/000000000000_worker_0.json",
                                        "job/index/000000000/000000000001_worker_0.json"));
  EXPECT_EQ(steps->objects[0].size, 3u);
  EXPECT_EQ(steps->objects[1].size, 6u);
  EXPECT_TRUE(steps->common_prefixes.empty());
}

TEST_P(LocalObjectStoreTest, StartAfterAndMaxKeysPageThroughInKeyOrder) {
  for (int i = 9; i >= 0; --i) WriteFile(root() / "d" / absl::StrCat("k", i), "v");
  std::vector<std::string> seen;
  ListOptions options{.prefix = "d/", .delimiter = "/", .max_keys = 3};
  int pages = 0;
  while (true) {
    absl::StatusOr<ListResult> page = store_->List(options);
    ASSERT_TRUE(page.ok()) << page.status();
    ++pages;
    for (const std::string& key : Keys(*page)) seen.push_back(key);
    if (!page->truncated) break;
    EXPECT_EQ(page->next_start_after, page->objects.back().key);
    options.start_after = page->next_start_after;
  }
  EXPECT_EQ(pages, 4);
  EXPECT_THAT(seen, ElementsAre("d/k0", "d/k1", "d/k2", "d/k3", "d/k4", "d/k5", "d/k6", "d/k7",
                                "d/k8", "d/k9"));

  // start_after between keys (S3's StartAfter need not be a key).
  absl::StatusOr<ListResult> after = store_->List({.prefix = "d/", .start_after = "d/k6x"});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(Keys(*after), ElementsAre("d/k7", "d/k8", "d/k9"));

  absl::StatusOr<ListResult> all = store_->ListAll({.prefix = "d/", .max_keys = 4});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->objects.size(), 10u);
  EXPECT_FALSE(all->truncated);
}

TEST_P(LocalObjectStoreTest, RecursiveListingIsInBytewiseKeyOrder) {
  // '.' (0x2e) < '/' (0x2f) < 'b': "a.c" < "a/b" < "a/c/d" < "ab".
  WriteFile(root() / "t/ab", "1");
  WriteFile(root() / "t/a/c/d", "22");
  WriteFile(root() / "t/a.c", "333");
  WriteFile(root() / "t/a/b", "4444");
  absl::StatusOr<ListResult> all = store_->List({.prefix = "t/"});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT(Keys(*all), ElementsAre("t/a.c", "t/a/b", "t/a/c/d", "t/ab"));
  EXPECT_TRUE(all->common_prefixes.empty());

  absl::StatusOr<ListResult> after = store_->List({.prefix = "t/", .start_after = "t/a/b"});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(Keys(*after), ElementsAre("t/a/c/d", "t/ab"));

  absl::StatusOr<ListResult> page = store_->List({.prefix = "t/", .max_keys = 2});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(Keys(*page), ElementsAre("t/a.c", "t/a/b"));
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_start_after, "t/a/b");
}

TEST_P(LocalObjectStoreTest, PrefixMayEndInPartOfAName) {
  WriteFile(root() / "dir/001", "a");
  WriteFile(root() / "dir/002", "b");
  WriteFile(root() / "dir/100", "c");
  WriteFile(root() / "dir/00x/y", "d");
  absl::StatusOr<ListResult> listed = store_->List({.prefix = "dir/00", .delimiter = "/"});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(Keys(*listed), ElementsAre("dir/001", "dir/002"));
  EXPECT_THAT(listed->common_prefixes, ElementsAre("dir/00x/"));

  absl::StatusOr<ListResult> whole_store = store_->List({.prefix = "", .delimiter = "/"});
  ASSERT_TRUE(whole_store.ok()) << whole_store.status();
  EXPECT_THAT(whole_store->common_prefixes, ElementsAre("dir/"));
}

TEST_P(LocalObjectStoreTest, MissingDirectoryIsNotFoundAndAnEmptyOneListsNothing) {
  absl::StatusOr<ListResult> missing = store_->List({.prefix = "nothing/here/", .delimiter = "/"});
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr((root() / "nothing/here").string()));

  fs::create_directories(root() / "empty");
  absl::StatusOr<ListResult> empty = store_->List({.prefix = "empty/", .delimiter = "/"});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->objects.empty());
  EXPECT_TRUE(empty->common_prefixes.empty());
}

TEST_P(LocalObjectStoreTest, RangedReadsClampToTheObject) {
  WriteFile(root() / "job/events/x.tfevents", "0123456789");
  EXPECT_EQ(*store_->ReadRange("job/events/x.tfevents", 2, 3), "234");
  EXPECT_EQ(*store_->ReadRange("job/events/x.tfevents", 8, 100), "89");
  EXPECT_EQ(*store_->ReadRange("job/events/x.tfevents", 4, kMaxReadBytes), "456789");
  EXPECT_EQ(*store_->ReadRange("job/events/x.tfevents", 10, 1), "");
  EXPECT_EQ(*store_->ReadRange("job/events/x.tfevents", 1000, 1), "");
  EXPECT_EQ(*store_->ReadAtMost("job/events/x.tfevents", kTestReadLimit), "0123456789");

  // The buffer's content is replaced, its capacity reused.
  std::string buffer = "previous content that is longer";
  ASSERT_TRUE(store_->ReadRangeInto("job/events/x.tfevents", 0, 2, &buffer).ok());
  EXPECT_EQ(buffer, "01");
}

TEST_P(LocalObjectStoreTest, ReadAtMostRefusesASparseHugeFileWithoutAllocatingIt) {
  // 100 GB that cost no disk: read whole, it was a bad_alloc.
  WriteFile(root() / "job/index/0.json", "");
  ASSERT_EQ(::truncate((root() / "job/index/0.json").c_str(), int64_t{100} << 30), 0);
  absl::Status status =
      store_->ReadAtMost("job/index/0.json", ReadLimit{16 << 20, "a tensor index file"}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(
      status.message(),
      AllOf(HasSubstr((root() / "job/index/0.json").string()), HasSubstr("is 107374182400 bytes"),
            HasSubstr("a tensor index file may have at most 16 MiB (16777216 bytes)")));
  // One byte under, at and over the limit.
  WriteFile(root() / "job/small.json", "12345");
  EXPECT_EQ(store_->ReadAtMost("job/small.json", ReadLimit{5, "x"}).value_or("error"), "12345");
  EXPECT_TRUE(
      absl::IsResourceExhausted(store_->ReadAtMost("job/small.json", ReadLimit{4, "x"}).status()));
}

TEST_P(LocalObjectStoreTest, ReadsLongerThanTheLimitOfOneReadAreRefused) {
  WriteFile(root() / "job/x.json", "0123456789");
  absl::Status status = store_->ReadRange("job/x.json", 0, kMaxReadBytes + 1).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr((root() / "job/x.json").string()));
}

TEST_P(LocalObjectStoreTest, StatGivesTheSizeAndNotFoundForNoObject) {
  WriteFile(root() / "a/b.json", "12345");
  absl::StatusOr<ObjectEntry> stat = store_->Stat("a/b.json");
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->key, "a/b.json");
  EXPECT_EQ(stat->size, 5u);

  absl::StatusOr<ObjectEntry> missing = store_->Stat("a/c.json");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr((root() / "a/c.json").string()));
  // A directory is not an object; nor is anything below a file.
  EXPECT_TRUE(absl::IsNotFound(store_->Stat("a").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->ReadAtMost("a", kTestReadLimit).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->ReadAtMost("a/b.json/c", kTestReadLimit).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->ReadAtMost("missing/dir/x", kTestReadLimit).status()));
}

TEST_P(LocalObjectStoreTest, OtherErrorsAreNotNotFound) {
  // A FIFO is refused without blocking, not taken for a missing object.
  fs::create_directories(root() / "p");
  ASSERT_EQ(::mkfifo((root() / "p/fifo.json").c_str(), 0600), 0);
  absl::Status fifo = store_->ReadAtMost("p/fifo.json", kTestReadLimit).status();
  EXPECT_TRUE(absl::IsPermissionDenied(fifo)) << fifo;
  EXPECT_THAT(fifo.message(), HasSubstr("not a regular file"));
  // Listings leave it out.
  absl::StatusOr<ListResult> listed = store_->List({.prefix = "p/", .delimiter = "/"});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->objects.empty());

  absl::Status bad_delimiter = store_->List({.prefix = "p/", .delimiter = ","}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(bad_delimiter)) << bad_delimiter;
}

TEST_P(LocalObjectStoreTest, DotDotAndAbsoluteKeysAreRefused) {
  WriteFile(root() / "job/x", "inside");
  for (const std::string key : {"../outside/secret.json", "job/../../outside/secret.json",
                                "/etc/passwd", "job/./x", "job//x", "", "job/x/"}) {
    absl::Status read = store_->ReadAtMost(key, kTestReadLimit).status();
    EXPECT_TRUE(absl::IsInvalidArgument(read)) << key << ": " << read;
    EXPECT_TRUE(absl::IsInvalidArgument(store_->Stat(key).status())) << key;
  }
  EXPECT_TRUE(absl::IsInvalidArgument(store_->List({.prefix = "../outside/"}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->List({.prefix = "/etc/"}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      store_->ReadAtMost(std::string("job/x\0y", 7), kTestReadLimit).status()));
}

TEST_P(LocalObjectStoreTest, SymlinkedFileIsRefusedNamingTheLink) {
  fs::create_directories(root() / "job/profiler");
  fs::create_symlink(outside() / "secret.json", root() / "job/profiler/metrics.json");
  for (const absl::Status& status :
       {store_->ReadAtMost("job/profiler/metrics.json", kTestReadLimit).status(),
        store_->ReadRange("job/profiler/metrics.json", 0, 10).status(),
        store_->Stat("job/profiler/metrics.json").status()}) {
    EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
    EXPECT_THAT(status.message(),
                HasSubstr(absl::StrCat((root() / "job/profiler/metrics.json").string(),
                                       " is a symbolic link; debugplane does not follow links "
                                       "inside a data root")));
    EXPECT_THAT(status.message(), Not(HasSubstr("wJalrXUtnFEMI")));
  }
  // A listing that would show it fails, naming it.
  absl::Status listed = store_->List({.prefix = "job/profiler/", .delimiter = "/"}).status();
  EXPECT_TRUE(absl::IsPermissionDenied(listed)) << listed;
  EXPECT_THAT(listed.message(), HasSubstr("metrics.json is a symbolic link"));
  // A link to a file inside the root is not followed either.
  WriteFile(root() / "job/real.json", "{}");
  fs::create_symlink("../real.json", root() / "job/profiler/relative.json");
  EXPECT_TRUE(absl::IsPermissionDenied(
      store_->ReadAtMost("job/profiler/relative.json", kTestReadLimit).status()));
}

TEST_P(LocalObjectStoreTest, SymlinkedDirectoryIsRefusedNamingTheLink) {
  fs::create_directories(outside() / "index");
  WriteFile(outside() / "index/0.json", "outside");
  fs::create_directory_symlink(outside(), root() / "job");
  const std::string message =
      absl::StrCat((root() / "job").string(),
                   " is a symbolic link; debugplane does not follow links inside a data root");
  for (const absl::Status& status :
       {store_->ReadAtMost("job/index/0.json", kTestReadLimit).status(),
        store_->Stat("job/secret.json").status(),
        store_->List({.prefix = "job/", .delimiter = "/"}).status(),
        store_->List({.prefix = "job/index/"}).status(),
        store_->OpenDirectoryForWatch("job").status()}) {
    EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr(message));
  }
  // Listing the root, which holds the link, fails too; a recursive listing
  // does not descend through it.
  EXPECT_TRUE(absl::IsPermissionDenied(store_->List({.prefix = ""}).status()));
}

TEST_P(LocalObjectStoreTest, DirectorySwappedForASymlinkAfterOpenIsRefused) {
  WriteFile(root() / "job/tensors/index/0.json", "inside");
  ASSERT_EQ(*store_->ReadAtMost("job/tensors/index/0.json", kTestReadLimit), "inside");
  // The job's directory is replaced by a link to one outside the root.
  fs::create_directories(outside() / "tensors/index");
  WriteFile(outside() / "tensors/index/0.json", "outside");
  fs::rename(root() / "job/tensors", dir_.path() / "moved");
  fs::create_directory_symlink(outside() / "tensors", root() / "job/tensors");

  absl::Status read = store_->ReadAtMost("job/tensors/index/0.json", kTestReadLimit).status();
  EXPECT_TRUE(absl::IsPermissionDenied(read)) << read;
  EXPECT_THAT(read.message(),
              HasSubstr(absl::StrCat((root() / "job/tensors").string(), " is a symbolic link")));
  EXPECT_TRUE(absl::IsPermissionDenied(
      store_->List({.prefix = "job/tensors/index/", .delimiter = "/"}).status()));
}

TEST_P(LocalObjectStoreTest, DescribeEscapesWhatIsNotPrintable) {
  EXPECT_EQ(store_->Describe(""), root().string());
  EXPECT_EQ(store_->Describe("a/b.json"), (root() / "a/b.json").string());
  EXPECT_EQ(store_->Describe("a/\n\x01\xff"), (root() / "a/\\n\\x01\\xff").string());
}

INSTANTIATE_TEST_SUITE_P(Resolutions, LocalObjectStoreTest,
                         ::testing::Values(LocalObjectStore::Resolution::kOpenat2,
                                           LocalObjectStore::Resolution::kWalk),
                         [](const ::testing::TestParamInfo<LocalObjectStore::Resolution>& info) {
                           return info.param == LocalObjectStore::Resolution::kWalk
                                      ? std::string("Walk")
                                      : std::string("Openat2");
                         });

TEST(LocalObjectStoreOpenTest, RootMustBeAnExistingDirectory) {
  testing::ScopedTempDir dir;
  WriteFile(dir.path() / "file", "x");
  EXPECT_TRUE(absl::IsNotFound(LocalObjectStore::Open((dir.path() / "none").string()).status()));
  EXPECT_TRUE(
      absl::IsFailedPrecondition(LocalObjectStore::Open((dir.path() / "file").string()).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(LocalObjectStore::Open("relative/root").status()));
  absl::StatusOr<std::shared_ptr<LocalObjectStore>> store =
      LocalObjectStore::Open(dir.path().string() + "/");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->root(), dir.path().string());
}

TEST(OpenLocalPathTest, RootsAtTheLongestExistingAncestor) {
  testing::ScopedTempDir dir;
  fs::create_directories(dir.path() / "a");
  absl::StatusOr<StoreLocation> location = OpenLocalPath((dir.path() / "a/b/c").string());
  ASSERT_TRUE(location.ok()) << location.status();
  EXPECT_EQ(location->prefix, "b/c");
  EXPECT_EQ(location->Describe(), (dir.path() / "a/b/c").string());
  // Written later, it is read through the location.
  WriteFile(dir.path() / "a/b/c/x.json", "later");
  EXPECT_EQ(*location->store->ReadAtMost(location->Key("x.json"), kTestReadLimit), "later");

  absl::StatusOr<StoreLocation> existing = OpenLocalPath((dir.path() / "a").string());
  ASSERT_TRUE(existing.ok()) << existing.status();
  EXPECT_EQ(existing->prefix, "");
  EXPECT_EQ(existing->Key("b/c/x.json"), "b/c/x.json");
  EXPECT_EQ(existing->DirectoryPrefix(), "");
  EXPECT_EQ(existing->DirectoryPrefix("b"), "b/");

  EXPECT_TRUE(absl::IsInvalidArgument(OpenLocalPath("relative").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(OpenLocalPath((dir.path() / "a/../a").string()).status()));
}

}  // namespace
}  // namespace debugplane::objectstore
