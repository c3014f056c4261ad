// MetricsRegistry: the server's Prometheus metrics (prometheus-cpp's core
// library: a prometheus::Registry and its text serializer) and what runs at
// each scrape.
//
// Components record into the small metric classes of this folder
// (job_metrics.h, evaluation_metrics.h, ...), each built on a registry and
// handed to the component that records, as a pointer that may be null: a
// component given no metrics works as before and records nothing. Gauges
// whose truth lives elsewhere (jobs by status, pending actions) are set by
// scrape hooks from their owner at scrape time rather than kept in step on
// every change.
//
// Served as GET /metrics on the HTTP listener (service/http/metrics_route.h).
// No job names, keys or paths are used as label values anywhere: labels
// take values from small fixed sets (statuses, operations, codes), so the
// number of series stays bounded whatever the number of jobs.
//
// Thread-safety: every method may be called from any thread.

#ifndef DEBUGPLANE_METRICS_REGISTRY_H_
#define DEBUGPLANE_METRICS_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/registry.h"

namespace debugplane::metrics {

// The Content-Type of Scrape()'s text: Prometheus' text exposition format.
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

class MetricsRegistry {
 public:
  MetricsRegistry();

  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Where the metric classes register their families. Valid as long as this
  // object lives.
  prometheus::Registry& registry() { return *registry_; }

  // Runs `hook` at the start of every Scrape (to set gauges from their
  // owner). Hooks must not block for long (they run on the HTTP listener's
  // thread) and must not call Scrape or AddScrapeHook. A hook's captures must
  // outlive this registry, or the registry must stop being scraped first.
  void AddScrapeHook(std::function<void()> hook);

  // Runs the scrape hooks (one scrape at a time), then returns every family
  // in the text exposition format (kExpositionContentType).
  std::string Scrape() const;

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  mutable absl::Mutex mu_;  // One scrape at a time: hooks set shared gauges.
  std::vector<std::function<void()>> hooks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace debugplane::metrics

#endif  // DEBUGPLANE_METRICS_REGISTRY_H_
