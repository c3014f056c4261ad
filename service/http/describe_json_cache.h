// DescribeTrainingJob's SageMaker JSON, kept per committed version of each
// job's record, so that the HTTP API prints a record once per change rather
// than at every Describe (printing through protobuf reflection was a
// quarter of the server's CPU per HTTP Describe).
//
// A version is the committed record's encoded bytes as the handler serves
// them (TrainingJobHandler::DescribeTrainingJobEncoded): the manager makes a
// new object at every committed change of a job, and an entry holds on to
// the object it was printed from, so the object's address cannot be reused
// while the entry exists. An entry is served only for that very object:
// any change of the job (a new object) prints anew and replaces it.

#ifndef DEBUGPLANE_SERVICE_HTTP_DESCRIBE_JSON_CACHE_H_
#define DEBUGPLANE_SERVICE_HTTP_DESCRIBE_JSON_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace debugplane::service::http {

// Thread-safe. Holds at most `capacity` jobs and `capacity_bytes` of JSON
// and encoded records together (an entry may hold a version its job has
// since left behind, until that job's next Describe); when either would be
// exceeded it starts over empty.
class DescribeJsonCache {
 public:
  explicit DescribeJsonCache(size_t capacity = 16384, size_t capacity_bytes = 64 << 20)
      : capacity_(capacity), capacity_bytes_(capacity_bytes) {}

  DescribeJsonCache(const DescribeJsonCache&) = delete;
  DescribeJsonCache& operator=(const DescribeJsonCache&) = delete;

  // The SageMaker JSON (ToSageMakerJson) of `encoded`, the committed record
  // of job `job_name` (a v1::DescribeTrainingJobResponse in wire format):
  // the cached bytes if they were printed from this same object, else
  // printed now and cached. INTERNAL if `encoded` does not parse (the
  // handler's bug, not the caller's).
  absl::StatusOr<std::shared_ptr<const std::string>> Json(
      absl::string_view job_name, std::shared_ptr<const std::string> encoded);

  // Drops the job's entry (it was deleted or is not found).
  void Forget(absl::string_view job_name);

  size_t size() const;
  // Bytes held (JSON and encoded records), as counted against capacity_bytes.
  size_t bytes() const;
  // Records printed (misses) so far, for tests.
  int64_t printed() const;

 private:
  struct Entry {
    std::shared_ptr<const std::string> encoded;  // The version printed.
    std::shared_ptr<const std::string> json;
  };

  static size_t BytesOf(const Entry& entry) {
    return entry.encoded->size() + entry.json->size();
  }

  const size_t capacity_;
  const size_t capacity_bytes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t printed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_DESCRIBE_JSON_CACHE_H_
