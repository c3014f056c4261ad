#include "metrics/object_store_metrics.h"

#include <string>

namespace debugplane::metrics {

absl::string_view StoreOperationName(StoreOperation operation) {
  switch (operation) {
    case StoreOperation::kList:
      return "list";
    case StoreOperation::kRead:
      return "read";
    case StoreOperation::kStat:
      return "stat";
  }
  return "unknown";
}

ObjectStoreMetrics::ObjectStoreMetrics(prometheus::Registry& registry)
    : requests_(prometheus::BuildCounter()
                    .Name("debugplane_object_store_requests_total")
                    .Help("Requests to object stores (local data roots, S3 buckets) by store kind "
                          "and operation")
                    .Register(registry)),
      errors_(prometheus::BuildCounter()
                  .Name("debugplane_object_store_errors_total")
                  .Help("Object store requests that failed (NOT_FOUND excluded: nothing written "
                        "yet), by store kind, operation and status code")
                  .Register(registry)) {}

void ObjectStoreMetrics::CountRequest(absl::string_view store, StoreOperation operation,
                                      const absl::Status& result) {
  const std::string op(StoreOperationName(operation));
  requests_.Add({{"store", std::string(store)}, {"operation", op}}).Increment();
  if (result.ok() || absl::IsNotFound(result)) return;
  errors_
      .Add({{"store", std::string(store)},
            {"operation", op},
            {"code", absl::StatusCodeToString(result.code())}})
      .Increment();
}

}  // namespace debugplane::metrics
