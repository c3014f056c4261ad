// ReadTally: how much a reader has fetched from an ObjectStore, for the
// read progress a user sees (DescribeTrainingJob's ReadProgress).
//
// The reader counts, not the store: only the reader knows when a read is of
// an object it had not read before (it keeps per-object state anyway), so
// counting distinct objects costs no set of keys.

#ifndef DEBUGPLANE_OBJECTSTORE_READ_TALLY_H_
#define DEBUGPLANE_OBJECTSTORE_READ_TALLY_H_

#include <cstdint>

namespace debugplane::objectstore {

struct ReadTally {
  int64_t bytes = 0;    // Bytes fetched, re-fetched ones included.
  int64_t objects = 0;  // Distinct objects some bytes were fetched from.

  // A read of `fetched` bytes; `first_of_object` when the reader had fetched
  // nothing from that object before.
  void Add(uint64_t fetched, bool first_of_object) {
    bytes += static_cast<int64_t>(fetched);
    if (first_of_object) ++objects;
  }
  ReadTally& operator+=(const ReadTally& other) {
    bytes += other.bytes;
    objects += other.objects;
    return *this;
  }
  bool operator==(const ReadTally& other) const {
    return bytes == other.bytes && objects == other.objects;
  }
  bool operator!=(const ReadTally& other) const { return !(*this == other); }
};

}  // namespace debugplane::objectstore

#endif  // DEBUGPLANE_OBJECTSTORE_READ_TALLY_H_
