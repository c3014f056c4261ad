// Opening a local directory as the rules engine reads it: through a store.

#ifndef DEBUGPLANE_TESTS_RULES_ENGINE_LOCAL_STORE_H_
#define DEBUGPLANE_TESTS_RULES_ENGINE_LOCAL_STORE_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"

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

}  // namespace debugplane::rules_engine::testing

#endif  // DEBUGPLANE_TESTS_RULES_ENGINE_LOCAL_STORE_H_
