// MeteredObjectStore: an ObjectStore that counts every request it forwards
// (List, ReadRangeInto, Stat) and the failed ones in
// metrics::ObjectStoreMetrics (debugplane_object_store_requests_total and
// _errors_total), by store kind and operation. Describe and
// OpenDirectoryForWatch are forwarded uncounted: they are not requests to
// the store's data.

#ifndef DEBUGPLANE_OBJECTSTORE_METERED_OBJECT_STORE_H_
#define DEBUGPLANE_OBJECTSTORE_METERED_OBJECT_STORE_H_

#include <memory>
#include <string>

#include "metrics/object_store_metrics.h"
#include "objectstore/object_store.h"

namespace debugplane::objectstore {

class MeteredObjectStore final : public ObjectStore {
 public:
  // Forwards to `store`, counting under the store kind `kind` ("local",
  // "s3"). REQUIRES: `store` is not null; `metrics` is not null and
  // outlives this object. Thread-safe as `store` is.
  MeteredObjectStore(std::shared_ptr<const ObjectStore> store, std::string kind,
                     metrics::ObjectStoreMetrics* metrics);

  absl::StatusOr<ListResult> List(const ListOptions& options) const override;
  absl::Status ReadRangeInto(absl::string_view key, uint64_t offset, uint64_t length,
                             std::string* out) const override;
  absl::StatusOr<ObjectEntry> Stat(absl::string_view key) const override;
  std::string Describe(absl::string_view key) const override;
  absl::StatusOr<base::UniqueFd> OpenDirectoryForWatch(absl::string_view prefix) const override;

 private:
  const std::shared_ptr<const ObjectStore> store_;
  const std::string kind_;
  metrics::ObjectStoreMetrics* const metrics_;
};

// `store` metered under `kind` if `metrics` is not null; `store` itself
// otherwise (and when it is null).
std::shared_ptr<const ObjectStore> Metered(std::shared_ptr<const ObjectStore> store,
                                           std::string kind, metrics::ObjectStoreMetrics* metrics);

}  // namespace debugplane::objectstore

#endif  // DEBUGPLANE_OBJECTSTORE_METERED_OBJECT_STORE_H_
