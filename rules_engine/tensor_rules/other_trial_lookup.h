// Access to other trials' tensors for SimilarAcrossRuns (RuleContext's
// OtherTrialLookup, rule.h).

#ifndef DEBUGPLANE_RULES_ENGINE_TENSOR_RULES_OTHER_TRIAL_LOOKUP_H_
#define DEBUGPLANE_RULES_ENGINE_TENSOR_RULES_OTHER_TRIAL_LOOKUP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "objectstore/object_store.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/smdebug/step.h"
#include "rules_engine/smdebug/trial_reader.h"

namespace debugplane::rules_engine {

// Reads tensors of other trials by (trial location, global step, tensor
// name), with TrialReader (so through the trial's ObjectStore, confined as
// every read is), incrementally: a step that is not there yet is
// looked for again at the next request while that trial has not ended.
// Only the tensors asked for are decoded; they are kept for the steps read
// ahead of the requests, within a memory bound per trial.
//
// SimilarAcrossRuns asks for the same tensor names at ascending steps, which
// costs one pass over the other trial. Asking for a name not asked for
// before, or for a step already dropped from memory, makes that trial be
// read again from its start (the reader only goes forward).
//
// Thread-safe: requests for one trial are served one at a time, requests
// for different trials in parallel.
class OtherTrialCache {
 public:
  struct Options {
    // Decoded tensors kept per trial (values, names, per-step bookkeeping),
    // in bytes.
    size_t max_bytes_per_trial = size_t{64} << 20;
    // Steps read per TrialReader call: what is held at once beyond the bound.
    size_t steps_per_read = 16;
  };

  OtherTrialCache();
  explicit OtherTrialCache(Options options);
  OtherTrialCache(const OtherTrialCache&) = delete;
  OtherTrialCache& operator=(const OtherTrialCache&) = delete;
  ~OtherTrialCache();

  // Tensor `tensor` at global step `global_step` of the trial at `trial`
  // (the first worker's when several wrote it). NOT_FOUND when the trial
  // has no such step or no such tensor at it, and also when the step is not
  // written yet (the trial has not ended: a later request looks again);
  // the reader's errors (DATA_LOSS, PERMISSION_DENIED for a symbolic link,
  // ...) otherwise.
  absl::StatusOr<Tensor> Read(const objectstore::StoreLocation& trial, int64_t global_step,
                              const std::string& tensor);

  // A RuleContext::other_trial for SimilarAcrossRuns: `resolve` maps the
  // rule's other_trials value (a training job name or a path) to the trial's
  // location; its errors are returned as they are. The cache must outlive
  // the lookup.
  OtherTrialLookup AsLookup(
      std::function<absl::StatusOr<objectstore::StoreLocation>(const std::string& other_trial)>
          resolve);

  // Bytes of decoded tensors held for the trial at `trial` (for tests).
  size_t BytesHeld(const objectstore::StoreLocation& trial);

 private:
  struct Trial;
  Trial& TrialAt(const objectstore::StoreLocation& trial);

  const Options options_;
  absl::Mutex mu_;
  // By store and key prefix.
  std::map<std::pair<const objectstore::ObjectStore*, std::string>, std::unique_ptr<Trial>> trials_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_TENSOR_RULES_OTHER_TRIAL_LOOKUP_H_
