#include "metrics/object_store_metrics.h"

#include <iterator>
#include <string>

#include "metrics/family.h"

namespace debugplane::metrics {

absl::string_view StoreOperationName(StoreOperation operation) {
  // Indexed by StoreOperation.
  static constexpr absl::string_view kNames[] = {"list", "read", "stat"};
  const auto index = static_cast<size_t>(operation);
  return index < std::size(kNames) ? kNames[index] : "unknown";
}

ObjectStoreMetrics::ObjectStoreMetrics(prometheus::Registry& registry)
    : requests_(
          CounterFamily(registry, "debugplane_object_store_requests_total",
                        "Requests to object stores (local data roots, S3 buckets) by store kind "
                        "and operation")),
      errors_(
          CounterFamily(registry, "debugplane_object_store_errors_total",
                        "Object store requests that failed (NOT_FOUND excluded: nothing written "
                        "yet), by store kind, operation and status code")) {}

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
