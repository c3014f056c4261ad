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
  Entry entry{.encoded = std::move(encoded), .json = json};
  const size_t entry_bytes = BytesOf(entry);
  absl::MutexLock lock(&mu_);
  ++printed_;
  if (auto found = entries_.find(job_name); found != entries_.end()) {
    bytes_ -= BytesOf(found->second);
    entries_.erase(found);
  }
  if (entry_bytes > capacity_bytes_) return json;  // Served, not kept.
  if (entries_.size() >= capacity_ || bytes_ + entry_bytes > capacity_bytes_) {
    entries_.clear();
    bytes_ = 0;
  }
  entries_.emplace(std::string(job_name), std::move(entry));
  bytes_ += entry_bytes;
  return json;
}

void DescribeJsonCache::Forget(absl::string_view job_name) {
  absl::MutexLock lock(&mu_);
  if (auto found = entries_.find(job_name); found != entries_.end()) {
    bytes_ -= BytesOf(found->second);
    entries_.erase(found);
  }
}

size_t DescribeJsonCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
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
