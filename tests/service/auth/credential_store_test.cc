// CredentialStore: reloads take effect, failed reloads keep the old keys,
// and readers are never blocked or torn by a reload.

#include "service/auth/credential_store.h"

#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::service::auth {
namespace {

using ::debugplane::testing::ScopedTempDir;

class CredentialStoreTest : public ::testing::Test {
 protected:
  void Write(const std::string& text, mode_t mode = 0600) {
    std::ofstream(path()) << text;
    chmod(path().c_str(), mode);
  }
  std::string path() const { return (dir_.path() / "credentials").string(); }
  ScopedTempDir dir_;
};

TEST_F(CredentialStoreTest, AReloadReplacesTheKeysAndAFailedOneKeepsThem) {
  Write("admin OLD old-secret\n");
  auto store = CredentialStore::Open(path());
  ASSERT_TRUE(store.ok()) << store.status();
  std::shared_ptr<const CredentialSet> before = (*store)->Snapshot();
  EXPECT_EQ(before->keys.count("OLD"), 1u);

  Write("admin NEW new-secret\n");
  ASSERT_TRUE((*store)->Reload().ok());
  EXPECT_EQ((*store)->Snapshot()->keys.count("OLD"), 0u);
  EXPECT_EQ((*store)->Snapshot()->keys.count("NEW"), 1u);
  // A call that took the old snapshot keeps it, whole.
  EXPECT_EQ(before->keys.count("OLD"), 1u);

  Write("admin NEWER secret\nboss X y\n");
  absl::Status bad = (*store)->Reload();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Snapshot()->keys.count("NEW"), 1u);
  Write("admin NEWER secret\n", 0644);
  EXPECT_EQ((*store)->Reload().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*store)->Snapshot()->keys.count("NEW"), 1u);
}

TEST_F(CredentialStoreTest, ReadersSeeAWholeSetWhileReloadsRun) {
  Write("admin A a\nreader B b\n");
  auto store = CredentialStore::Open(path());
  ASSERT_TRUE(store.ok());
  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&] {
      while (!done) {
        std::shared_ptr<const CredentialSet> set = (*store)->Snapshot();
        // Every version of the file has exactly two keys.
        if (set->keys.size() != 2) ++torn;
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    (*store)->Replace(
        *ParseCredentials(i % 2 ? "admin A a\nreader B b\n" : "admin C c\nagent D d\n", "x"));
  }
  done = true;
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(torn, 0);
}

TEST(CredentialStoreWithoutFileTest, ReloadFails) {
  CredentialStore store{CredentialSet{}};
  EXPECT_EQ(store.Reload().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace debugplane::service::auth
