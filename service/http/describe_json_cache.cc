#include "service/http/describe_json_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.pb.h"
#include "service/http/sagemaker_json.h"

namespace debugplane::service::http {

absl::StatusOr<std::shared_ptr<const std::string>> DescribeJsonCache::Json(
    absl::string_view job_name, std::shared_ptr<const std::string> encoded) {
  {
    absl::MutexLock lock(&mu_);
    auto found = entries_.find(job_name);
    if (found != entries_.end() && found->second.encoded == encoded) return found->second.json;
  }
  // Printed outside the lock: two callers may print the same version at
  // once; both results are the same bytes.
  v1::DescribeTrainingJobResponse record;
  if (!record.ParseFromString(*encoded)) {
    return absl::InternalError(
        absl::StrCat("the committed record of training job '", job_name, "' does not parse"));
  }
  auto json = std::make_shared<const std::string>(ToSageMakerJson(record));
  absl::MutexLock lock(&mu_);
  ++printed_;
  auto found = entries_.find(job_name);
  if (found == entries_.end()) {
    if (entries_.size() >= capacity_) entries_.clear();
    entries_.emplace(std::string(job_name), Entry{.encoded = std::move(encoded), .json = json});
  } else {
    found->second = Entry{.encoded = std::move(encoded), .json = json};
  }
  return json;
}

void DescribeJsonCache::Forget(absl::string_view job_name) {
  absl::MutexLock lock(&mu_);
  entries_.erase(job_name);
}

size_t DescribeJsonCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

int64_t DescribeJsonCache::printed() const {
  absl::MutexLock lock(&mu_);
  return printed_;
}

}  // namespace debugplane::service::http
