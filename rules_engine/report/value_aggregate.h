// The sum, count, minimum and maximum of the values added to one bucket of
// a time series, and the merge of two buckets: what the report's charts
// (Buckets) and the dashboard's series (insights' SampleCell) keep per
// bucket.

#ifndef DEBUGPLANE_RULES_ENGINE_REPORT_VALUE_AGGREGATE_H_
#define DEBUGPLANE_RULES_ENGINE_REPORT_VALUE_AGGREGATE_H_

#include <algorithm>

namespace debugplane::rules_engine {

// count == 0: nothing added (min, max and sum are 0 then). Value is the
// stored precision (float for the dashboard's many cells); Count the counter.
template <typename Value, typename Count>
struct ValueAggregate {
  Value min = 0;
  Value max = 0;
  Value sum = 0;
  Count count = 0;

  // Adds `value`, stored as a Value.
  template <typename T>
  void Add(T value) {
    const Value v = static_cast<Value>(value);
    if (count == 0) {
      min = max = v;
    } else {
      min = std::min(min, v);
      max = std::max(max, v);
    }
    sum += v;
    ++count;
  }

  // Adds every value `other` holds.
  void Merge(const ValueAggregate& other) {
    if (other.count == 0) return;
    if (count == 0) {
      *this = other;
      return;
    }
    min = std::min(min, other.min);
    max = std::max(max, other.max);
    sum += other.sum;
    count += other.count;
  }
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_REPORT_VALUE_AGGREGATE_H_
