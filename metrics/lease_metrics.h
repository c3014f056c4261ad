// Evaluation leases (which replica evaluates which job's rules): how many
// this server owns, and how many it took over from a replica whose lease
// expired. Recorded by the lease code (the `leases` work): call SetOwned
// whenever the set of owned leases changes (after an acquire, renewal
// failure or release) and CountTakeover when a lease held by another
// replica is acquired after it expired.

#ifndef DEBUGPLANE_METRICS_LEASE_METRICS_H_
#define DEBUGPLANE_METRICS_LEASE_METRICS_H_

#include <cstdint>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace debugplane::metrics {

class LeaseMetrics {
 public:
  // Registers debugplane_leases_owned and debugplane_lease_takeovers_total
  // in `registry`, which must outlive this object. Throws (prometheus-cpp)
  // if they are registered there already.
  explicit LeaseMetrics(prometheus::Registry& registry);

  // This server now owns `count` evaluation leases.
  void SetOwned(int64_t count);
  // This server took over one lease another replica held (expired).
  void CountTakeover();

 private:
  prometheus::Gauge& owned_;
  prometheus::Counter& takeovers_;
};

}  // namespace debugplane::metrics

#endif  // DEBUGPLANE_METRICS_LEASE_METRICS_H_
