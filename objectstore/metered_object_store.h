// Metered(): an ObjectStore that counts every request it forwards
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

// `store` metered under the store kind `kind` ("local", "s3") if `metrics`
// is not null; `store` itself otherwise (and when it is null).
// REQUIRES: `metrics`, if not null, outlives the result. The result is
// thread-safe as `store` is.
std::shared_ptr<const ObjectStore> Metered(std::shared_ptr<const ObjectStore> store,
                                           std::string kind, metrics::ObjectStoreMetrics* metrics);

}  // namespace debugplane::objectstore

#endif  // DEBUGPLANE_OBJECTSTORE_METERED_OBJECT_STORE_H_
