// ScopedTempDir: a fresh empty directory for one test, removed afterwards.
// Header-only and free of project dependencies, so every test area can use it.

#ifndef DEBUGPLANE_TESTS_SUPPORT_SCOPED_TEMP_DIR_H_
#define DEBUGPLANE_TESTS_SUPPORT_SCOPED_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace debugplane::testing {

// A fresh empty directory under the test temp dir, removed by the destructor.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string pattern = (std::filesystem::path(::testing::TempDir()) / "dpXXXXXX").string();
    path_ = mkdtemp(pattern.data());
    path_ = std::filesystem::canonical(path_);
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SUPPORT_SCOPED_TEMP_DIR_H_
