// Opening a local directory as the rules engine reads it: through a store,
// plainly (Local) or through a test's own store that counts or changes what
// the local one answers (LocalStoreWrapper).

#ifndef DEBUGPLANE_TESTS_RULES_ENGINE_LOCAL_STORE_H_
#define DEBUGPLANE_TESTS_RULES_ENGINE_LOCAL_STORE_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "objectstore/object_store.h"

namespace debugplane::rules_engine::testing {

// The local `path` (a trial, a profiler directory, a file) read through a
// store rooted at its longest existing ancestor. A failure to open fails the
// test. The trial cache knows a trial by its store and prefix: keep one
// location per trial.
inline objectstore::StoreLocation Local(const std::string& path) {
  absl::StatusOr<objectstore::StoreLocation> location = objectstore::OpenLocalPath(path);
  EXPECT_TRUE(location.ok()) << location.status();
  return *std::move(location);
}

// A store answering what the store it wraps (a local directory's, in the
// tests) answers: List, ReadRangeInto, Stat and Describe go to it, and a
// test's subclass overrides the ones it counts or changes. What a store may
// leave out (watching a directory, StatIsARoundTrip) keeps ObjectStore's
// defaults, so a wrapped directory is polled for, as a remote store would be.
class LocalStoreWrapper : public objectstore::ObjectStore {
 public:
  explicit LocalStoreWrapper(std::shared_ptr<objectstore::ObjectStore> local)
      : local_(std::move(local)) {}

  absl::StatusOr<objectstore::ListResult> List(
      const objectstore::ListOptions& options) const override {
    return local_->List(options);
  }
  absl::Status ReadRangeInto(absl::string_view key, uint64_t offset, uint64_t length,
                             std::string* out) const override {
    return local_->ReadRangeInto(key, offset, length, out);
  }
  absl::StatusOr<objectstore::ObjectEntry> Stat(absl::string_view key) const override {
    return local_->Stat(key);
  }
  std::string Describe(absl::string_view key) const override { return local_->Describe(key); }

 private:
  std::shared_ptr<objectstore::ObjectStore> local_;
};

// A `Store` (a LocalStoreWrapper) over the local directory `dir`. A failure
// to open fails the test.
template <typename Store>
std::shared_ptr<Store> WrapLocal(const std::string& dir) {
  absl::StatusOr<std::shared_ptr<objectstore::LocalObjectStore>> local =
      objectstore::LocalObjectStore::Open(dir);
  EXPECT_TRUE(local.ok()) << local.status();
  return std::make_shared<Store>(*std::move(local));
}

}  // namespace debugplane::rules_engine::testing

#endif  // DEBUGPLANE_TESTS_RULES_ENGINE_LOCAL_STORE_H_
