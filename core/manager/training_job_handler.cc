#include "core/manager/training_job_handler.h"

#include "absl/synchronization/notification.h"

namespace debugplane::core {

absl::StatusOr<std::shared_ptr<const std::string>> TrainingJobHandler::DescribeTrainingJobEncoded(
    const v1::DescribeTrainingJobRequest& request) {
  v1::DescribeTrainingJobResponse response;
  absl::Status result;
  absl::Notification done;
  DescribeTrainingJob(request, &response, [&](absl::Status status) {
    result = std::move(status);
    done.Notify();
  });
  done.WaitForNotification();
  if (!result.ok()) return result;
  return std::make_shared<const std::string>(response.SerializeAsString());
}

}  // namespace debugplane::core
