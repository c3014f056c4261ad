// Helpers for tests that drive a TrainingJobHandler directly.

#ifndef DEBUGPLANE_TESTS_CORE_TEST_UTIL_H_
#define DEBUGPLANE_TESTS_CORE_TEST_UTIL_H_

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "core/training_job_handler.h"
#include "gtest/gtest.h"

namespace debugplane::testing {

// Calls an asynchronous handler method and waits for its completion.
template <typename Response, typename Request, typename Method>
absl::StatusOr<Response> CallSync(core::TrainingJobHandler& handler, Method method,
                                  const Request& request) {
  Response response;
  absl::Notification done;
  absl::Status result;
  (handler.*method)(request, &response, [&](absl::Status status) {
    result = status;
    done.Notify();
  });
  done.WaitForNotification();
  if (!result.ok()) return result;
  return response;
}

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

#endif  // DEBUGPLANE_TESTS_CORE_TEST_UTIL_H_
