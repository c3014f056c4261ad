// Access to other trials' tensors for SimilarAcrossRuns (RuleContext's
// OtherTrialLookup, rule.h).

#ifndef DEBUGPLANE_RULES_ENGINE_OTHER_TRIAL_LOOKUP_H_
#define DEBUGPLANE_RULES_ENGINE_OTHER_TRIAL_LOOKUP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "rules_engine/rule.h"
#include "rules_engine/step.h"
#include "rules_engine/trial_reader.h"
#include "rules_engine/trial_storage.h"

namespace debugplane::rules_engine {

// Reads tensors of other trials by (trial directory, global step, tensor
// name), with TrialReader, incrementally: a step that is not there yet is
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

  explicit OtherTrialCache(std::shared_ptr<TrialStorage> storage);
  OtherTrialCache(std::shared_ptr<TrialStorage> storage, Options options);
  OtherTrialCache(const OtherTrialCache&) = delete;
  OtherTrialCache& operator=(const OtherTrialCache&) = delete;
  ~OtherTrialCache();

  // Tensor `tensor` at global step `global_step` of the trial at `path`
  // (the first worker's when several wrote it). NOT_FOUND when the trial
  // has no such step or no such tensor at it, and also when the step is not
  // written yet (the trial has not ended: a later request looks again);
  // the reader's errors (DATA_LOSS, ...) otherwise.
  absl::StatusOr<Tensor> Read(const std::string& path, int64_t global_step,
                              const std::string& tensor);

  // A RuleContext::other_trial for SimilarAcrossRuns: `resolve_path` maps
  // the rule's other_trials value (a training job name or a path) to the
  // trial directory; its errors are returned as they are. The cache must
  // outlive the lookup.
  OtherTrialLookup AsLookup(
      std::function<absl::StatusOr<std::string>(const std::string& other_trial)> resolve_path);

  // Bytes of decoded tensors held for the trial at `path` (for tests).
  size_t BytesHeld(const std::string& path);

 private:
  struct Trial;
  Trial& TrialAt(const std::string& path);

  const std::shared_ptr<TrialStorage> storage_;
  const Options options_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Trial>> trials_ ABSL_GUARDED_BY(mu_);
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_OTHER_TRIAL_LOOKUP_H_
