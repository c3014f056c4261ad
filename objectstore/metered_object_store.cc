#include "objectstore/metered_object_store.h"

#include <utility>

namespace debugplane::objectstore {
namespace {

using metrics::StoreOperation;

// Forwards to `store_`, counting List, ReadRangeInto and Stat under `kind_`
// (see Metered()).
class MeteredObjectStore final : public ObjectStore {
 public:
  MeteredObjectStore(std::shared_ptr<const ObjectStore> store, std::string kind,
                     metrics::ObjectStoreMetrics* metrics)
      : store_(std::move(store)), kind_(std::move(kind)), metrics_(metrics) {}

  absl::StatusOr<ListResult> List(const ListOptions& options) const override {
    absl::StatusOr<ListResult> result = store_->List(options);
    metrics_->CountRequest(kind_, StoreOperation::kList, result.status());
    return result;
  }
  absl::Status ReadRangeInto(absl::string_view key, uint64_t offset, uint64_t length,
                             std::string* out) const override {
    absl::Status result = store_->ReadRangeInto(key, offset, length, out);
    metrics_->CountRequest(kind_, StoreOperation::kRead, result);
    return result;
  }
  absl::StatusOr<ObjectEntry> Stat(absl::string_view key) const override {
    absl::StatusOr<ObjectEntry> result = store_->Stat(key);
    metrics_->CountRequest(kind_, StoreOperation::kStat, result.status());
    return result;
  }
  std::string Describe(absl::string_view key) const override { return store_->Describe(key); }
  absl::StatusOr<base::UniqueFd> OpenDirectoryForWatch(absl::string_view prefix) const override {
    return store_->OpenDirectoryForWatch(prefix);
  }
  bool StatIsARoundTrip() const override { return store_->StatIsARoundTrip(); }

 private:
  const std::shared_ptr<const ObjectStore> store_;
  const std::string kind_;
  metrics::ObjectStoreMetrics* const metrics_;
};

}  // namespace

std::shared_ptr<const ObjectStore> Metered(std::shared_ptr<const ObjectStore> store,
                                           std::string kind, metrics::ObjectStoreMetrics* metrics) {
  if (metrics == nullptr || store == nullptr) return store;
  return std::make_shared<MeteredObjectStore>(std::move(store), std::move(kind), metrics);
}

}  // namespace debugplane::objectstore
