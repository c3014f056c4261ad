// Helpers for tests that drive a TrainingJobHandler directly.

#ifndef DEBUGPLANE_TESTS_CORE_TEST_UTIL_H_
#define DEBUGPLANE_TESTS_CORE_TEST_UTIL_H_

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "core/training_job_handler.h"
#include "gtest/gtest.h"
#include "tests/core/scoped_temp_dir.h"

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

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_CORE_TEST_UTIL_H_
