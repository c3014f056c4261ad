// A temporary directory whose own path has no capitals, for tests of paths
// that must survive smdebug's lower-casing of profilerconfig.json (the
// agent's alias root, its TMPDIR, must not have any).

#ifndef DEBUGPLANE_TESTS_CLIENT_LOWER_CASE_TEMP_DIR_H_
#define DEBUGPLANE_TESTS_CLIENT_LOWER_CASE_TEMP_DIR_H_

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace debugplane::testing {

// A fresh directory under the test's temporary directory (or /tmp when that
// one's path has capitals: mkdtemp's random letters may be capitals),
// removed with everything in it when this object is destroyed.
class LowerCaseTempDir {
 public:
  LowerCaseTempDir() {
    std::string base = ::testing::TempDir();
    if (std::any_of(base.begin(), base.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
      base = "/tmp";
    }
    static std::atomic<int> count{0};
    path_ = std::filesystem::path(base) / absl::StrCat("dp-lower-case-", getpid(), "-", count++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~LowerCaseTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  LowerCaseTempDir(const LowerCaseTempDir&) = delete;
  LowerCaseTempDir& operator=(const LowerCaseTempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_CLIENT_LOWER_CASE_TEMP_DIR_H_
