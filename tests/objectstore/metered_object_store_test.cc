// MeteredObjectStore counts the requests it forwards to a real local store
// by operation, and the failed ones by code (NOT_FOUND is no failure).

#include "objectstore/metered_object_store.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/registry.h"
#include "objectstore/local_object_store.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::objectstore {
namespace {

// Test objects are small; reads of them are bounded like every other.
constexpr ::debugplane::objectstore::ReadLimit kTestReadLimit{1 << 20, "a test object"};

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(MeteredObjectStoreTest, CountsRequestsByOperationAndFailuresByCode) {
  testing::ScopedTempDir dir;
  fs::create_directories(dir.path() / "root/job");
  fs::create_directories(dir.path() / "root/other");
  std::ofstream(dir.path() / "root/job/a.json") << "{}";
  std::ofstream(dir.path() / "outside.json") << "secret";
  fs::create_symlink(dir.path() / "outside.json", dir.path() / "root/other/link.json");
  auto local = LocalObjectStore::Open((dir.path() / "root").string());
  ASSERT_TRUE(local.ok()) << local.status();
  metrics::MetricsRegistry registry;
  metrics::ObjectStoreMetrics counts(registry.registry());
  std::shared_ptr<const ObjectStore> store = Metered(*local, "local", &counts);

  absl::StatusOr<ListResult> listed = store->List({.prefix = "job/"});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->objects.size(), 1u);
  EXPECT_EQ(store->ReadAtMost("job/a.json", kTestReadLimit).value_or(""), "{}");
  EXPECT_TRUE(absl::IsNotFound(store->ReadAtMost("job/missing.json", kTestReadLimit).status()));
  EXPECT_TRUE(
      absl::IsPermissionDenied(store->ReadAtMost("other/link.json", kTestReadLimit).status()));
  EXPECT_TRUE(store->Stat("job/a.json").ok());
  EXPECT_EQ(store->Describe("job/a.json"), (*local)->Describe("job/a.json"));

  const std::string text = registry.Scrape();
  EXPECT_THAT(text, HasSubstr("debugplane_object_store_requests_total{operation=\"list\","
                              "store=\"local\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_object_store_requests_total{operation=\"read\","
                              "store=\"local\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_object_store_requests_total{operation=\"stat\","
                              "store=\"local\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_object_store_errors_total{code=\"PERMISSION_DENIED\","
                              "operation=\"read\",store=\"local\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("code=\"NOT_FOUND\"")));
  // Labels name the store's kind, never a path or key.
  EXPECT_THAT(text, Not(HasSubstr("job/")));
  EXPECT_THAT(text, Not(HasSubstr("link.json")));
}

TEST(MeteredObjectStoreTest, WithoutMetricsTheStoreIsItself) {
  testing::ScopedTempDir dir;
  auto local = LocalObjectStore::Open(dir.path().string());
  ASSERT_TRUE(local.ok());
  std::shared_ptr<const ObjectStore> plain = *local;
  EXPECT_EQ(Metered(plain, "local", nullptr), plain);
}

}  // namespace
}  // namespace debugplane::objectstore
