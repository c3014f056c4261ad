#include "objectstore/metered_object_store.h"

#include <utility>

namespace debugplane::objectstore {

using metrics::StoreOperation;

MeteredObjectStore::MeteredObjectStore(std::shared_ptr<const ObjectStore> store, std::string kind,
                                       metrics::ObjectStoreMetrics* metrics)
    : store_(std::move(store)), kind_(std::move(kind)), metrics_(metrics) {}

absl::StatusOr<ListResult> MeteredObjectStore::List(const ListOptions& options) const {
  absl::StatusOr<ListResult> result = store_->List(options);
  metrics_->CountRequest(kind_, StoreOperation::kList, result.status());
  return result;
}

absl::Status MeteredObjectStore::ReadRangeInto(absl::string_view key, uint64_t offset,
                                               uint64_t length, std::string* out) const {
  absl::Status result = store_->ReadRangeInto(key, offset, length, out);
  metrics_->CountRequest(kind_, StoreOperation::kRead, result);
  return result;
}

absl::StatusOr<ObjectEntry> MeteredObjectStore::Stat(absl::string_view key) const {
  absl::StatusOr<ObjectEntry> result = store_->Stat(key);
  metrics_->CountRequest(kind_, StoreOperation::kStat, result.status());
  return result;
}

std::string MeteredObjectStore::Describe(absl::string_view key) const {
  return store_->Describe(key);
}

absl::StatusOr<base::UniqueFd> MeteredObjectStore::OpenDirectoryForWatch(absl::string_view prefix) const {
  return store_->OpenDirectoryForWatch(prefix);
}

std::shared_ptr<const ObjectStore> Metered(std::shared_ptr<const ObjectStore> store,
                                           std::string kind, metrics::ObjectStoreMetrics* metrics) {
  if (metrics == nullptr || store == nullptr) return store;
  return std::make_shared<MeteredObjectStore>(std::move(store), std::move(kind), metrics);
}

}  // namespace debugplane::objectstore
