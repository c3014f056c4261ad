// ChangeNotifier (objectstore/change_notifier.h): inotify on confined
// directories of a LocalObjectStore, and polling for stores without
// notification and where inotify is off.

#include "objectstore/change_notifier.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::objectstore {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

void WriteFile(const fs::path& path, const std::string& content,
               std::ios::openmode mode = std::ios::trunc) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | mode);
  out << content;
}

// Collects the ids the listener is called with.
class Calls {
 public:
  ChangeNotifier::Listener listener() {
    return [this](ChangeNotifier::WatchId id) {
      absl::MutexLock lock(&mu_);
      ids_.insert(id);
    };
  }
  // Waits (for a real inotify event, at most `timeout`) until `id` was
  // reported; true if it was.
  bool WaitUntilReported(ChangeNotifier::WatchId id, absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    const auto seen = [this, id]()
                          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ids_.count(id) > 0; };
    const absl::Time deadline = absl::Now() + timeout;
    while (!seen() && absl::Now() < deadline) {
      mu_.AwaitWithDeadline(absl::Condition(&seen), deadline);
    }
    return seen();
  }
  std::set<ChangeNotifier::WatchId> Take() {
    absl::MutexLock lock(&mu_);
    return std::exchange(ids_, {});
  }

 private:
  absl::Mutex mu_;
  std::set<ChangeNotifier::WatchId> ids_ ABSL_GUARDED_BY(mu_);
};

// A real store without change notification (as object storage is): the
// local store's reads, and the interface's default OpenDirectoryForWatch.
class StoreWithoutNotification : public ObjectStore {
 public:
  explicit StoreWithoutNotification(std::shared_ptr<LocalObjectStore> local)
      : local_(std::move(local)) {}
  absl::StatusOr<ListResult> List(const ListOptions& options) const override {
    return local_->List(options);
  }
  absl::Status ReadRangeInto(absl::string_view key, uint64_t offset, uint64_t length,
                             std::string* out) const override {
    return local_->ReadRangeInto(key, offset, length, out);
  }
  absl::StatusOr<ObjectEntry> Stat(absl::string_view key) const override {
    return local_->Stat(key);
  }
  std::string Describe(absl::string_view key) const override { return local_->Describe(key); }

 private:
  std::shared_ptr<LocalObjectStore> local_;
};

class ChangeNotifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(root() / "job/index");
    fs::create_directories(dir_.path() / "outside");
    absl::StatusOr<std::shared_ptr<LocalObjectStore>> store =
        LocalObjectStore::Open(root().string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  fs::path root() const { return dir_.path() / "root"; }
  StoreLocation At(const std::string& prefix) const { return StoreLocation{store_, prefix}; }

  testing::ScopedTempDir dir_;
  std::shared_ptr<LocalObjectStore> store_;
  Calls calls_;
};

TEST_F(ChangeNotifierTest, InotifyReportsNewObjectsAndAppends) {
  ChangeNotifier notifier(calls_.listener(), {.poll_interval = absl::InfiniteDuration()});
  ASSERT_TRUE(notifier.inotify_active());
  absl::StatusOr<ChangeNotifier::WatchId> index = notifier.Watch(At("job/index"), kEntryChanged);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_GE(*index, 0);
  WriteFile(root() / "job/index/000000000005_worker_0.json", "{}");
  EXPECT_TRUE(calls_.WaitUntilReported(*index));

  // The same directory again: the same watch, its events merged.
  absl::StatusOr<ChangeNotifier::WatchId> again = notifier.Watch(At("job/index"), kObjectAppended);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *index);
  calls_.Take();
  {
    // Appended to while still open: IN_MODIFY, before any close.
    std::ofstream out(root() / "job/index/000000000005_worker_0.json",
                      std::ios::binary | std::ios::app);
    out << "more" << std::flush;
    EXPECT_TRUE(calls_.WaitUntilReported(*index));
  }

  // The store's root ("") can be watched too.
  absl::StatusOr<ChangeNotifier::WatchId> top = notifier.Watch(At(""), kEntryChanged);
  ASSERT_TRUE(top.ok()) << top.status();
  fs::create_directories(root() / "another-job");
  EXPECT_TRUE(calls_.WaitUntilReported(*top));
}

TEST_F(ChangeNotifierTest, MissingAndSymlinkedDirectoriesAreNotWatched) {
  ChangeNotifier notifier(calls_.listener(), {.poll_interval = absl::InfiniteDuration()});
  absl::Status missing = notifier.Watch(At("job/events"), kEntryChanged).status();
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;

  fs::create_directory_symlink(dir_.path() / "outside", root() / "job/profiler");
  absl::Status link = notifier.Watch(At("job/profiler"), kEntryChanged).status();
  EXPECT_TRUE(absl::IsPermissionDenied(link)) << link;
  EXPECT_THAT(link.message(), HasSubstr("job/profiler is a symbolic link"));
}

TEST_F(ChangeNotifierTest, PollingReportsChangedListingsOnly) {
  ChangeNotifier notifier(calls_.listener(),
                          {.poll_interval = absl::InfiniteDuration(), .use_inotify = false});
  EXPECT_FALSE(notifier.inotify_active());
  absl::StatusOr<ChangeNotifier::WatchId> index = notifier.Watch(At("job/index"), kEntryChanged);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_LT(*index, 0);
  notifier.PollNow();
  EXPECT_THAT(calls_.Take(), IsEmpty());  // Nothing changed since Watch.

  WriteFile(root() / "job/index/000000000000_worker_0.json", "{}");
  notifier.PollNow();
  EXPECT_THAT(calls_.Take(), ElementsAre(*index));
  notifier.PollNow();
  EXPECT_THAT(calls_.Take(), IsEmpty());

  // A file that grows is a change too.
  WriteFile(root() / "job/index/000000000000_worker_0.json", "{} ", std::ios::app);
  notifier.PollNow();
  EXPECT_THAT(calls_.Take(), ElementsAre(*index));

  // Same directory, same id; after Unwatch, nothing.
  EXPECT_EQ(*notifier.Watch(At("job/index"), kObjectAppended), *index);
  notifier.Unwatch(*index);
  WriteFile(root() / "job/index/000000000001_worker_0.json", "{}");
  notifier.PollNow();
  EXPECT_THAT(calls_.Take(), IsEmpty());
}

TEST_F(ChangeNotifierTest, StoresWithoutNotificationArePolled) {
  auto store = std::make_shared<StoreWithoutNotification>(store_);
  ChangeNotifier notifier(calls_.listener(), {.poll_interval = absl::InfiniteDuration()});
  absl::StatusOr<ChangeNotifier::WatchId> id =
      notifier.Watch(StoreLocation{store, "job/index"}, kEntryChanged);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_LT(*id, 0);
  fs::create_directories(root() / "job/index/000000000");
  notifier.PollNow();
  EXPECT_THAT(calls_.Take(), ElementsAre(*id));
}

TEST_F(ChangeNotifierTest, PollingThreadRunsEveryInterval) {
  ChangeNotifier notifier(calls_.listener(),
                          {.poll_interval = absl::Milliseconds(10), .use_inotify = false});
  absl::StatusOr<ChangeNotifier::WatchId> id = notifier.Watch(At("job/index"), kEntryChanged);
  ASSERT_TRUE(id.ok()) << id.status();
  WriteFile(root() / "job/index/x.json", "{}");
  EXPECT_TRUE(calls_.WaitUntilReported(*id));
}

}  // namespace
}  // namespace debugplane::objectstore
