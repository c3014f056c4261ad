#include "metrics/registry.h"

#include <utility>

#include "prometheus/text_serializer.h"

namespace debugplane::metrics {

MetricsRegistry::MetricsRegistry()
    // Throw on a name registered twice: two classes claiming one family is
    // a programming error, found by the first test that builds them.
    : registry_(
          std::make_shared<prometheus::Registry>(prometheus::Registry::InsertBehavior::Throw)) {}

void MetricsRegistry::AddScrapeHook(std::function<void()> hook) {
  absl::MutexLock lock(&mu_);
  hooks_.push_back(std::move(hook));
}

std::string MetricsRegistry::Scrape() const {
  absl::MutexLock lock(&mu_);
  for (const auto& hook : hooks_) hook();
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace debugplane::metrics
