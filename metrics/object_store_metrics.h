// Requests debugplane makes to object stores (local data roots and S3
// buckets), by operation, and those that failed. Recorded by
// objectstore::MeteredObjectStore around every store the server reads
// training output from.

#ifndef DEBUGPLANE_METRICS_OBJECT_STORE_METRICS_H_
#define DEBUGPLANE_METRICS_OBJECT_STORE_METRICS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace debugplane::metrics {

enum class StoreOperation { kList, kRead, kStat };

// "list", "read", "stat".
absl::string_view StoreOperationName(StoreOperation operation);

class ObjectStoreMetrics {
 public:
  // Registers debugplane_object_store_requests_total{store,operation} and
  // debugplane_object_store_errors_total{store,operation,code} in
  // `registry`, which must outlive this object. Throws (prometheus-cpp) if
  // they are registered there already.
  explicit ObjectStoreMetrics(prometheus::Registry& registry);

  // One request of `operation` to a store of kind `store` ("local" or "s3":
  // the kind, never the bucket or path, so series stay few) that ended in
  // `result`. NOT_FOUND is not an error here: a directory that does not
  // exist yet is the normal state of a job whose training has not written.
  // Other failures count under their status code name ("UNAVAILABLE", ...).
  void CountRequest(absl::string_view store, StoreOperation operation, const absl::Status& result);

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& errors_;
};

}  // namespace debugplane::metrics

#endif  // DEBUGPLANE_METRICS_OBJECT_STORE_METRICS_H_
