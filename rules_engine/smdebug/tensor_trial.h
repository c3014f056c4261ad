// A trial of tensors read incrementally step by step, whatever wrote it:
// smdebug's trial directory (TrialReader) or TensorBoard event files
// (rules_engine/tensorboard/tensorboard_reader.h). The scheduler evaluates
// debugging rules over one of these per job.

#ifndef DEBUGPLANE_RULES_ENGINE_SMDEBUG_TENSOR_TRIAL_H_
#define DEBUGPLANE_RULES_ENGINE_SMDEBUG_TENSOR_TRIAL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine {

struct ReadBudget;
struct TrialSummary;
using TensorFilter = std::function<bool(const std::string& tensor, const TrialInfo& info)>;

// The contract of each method is TrialReader's (trial_reader.h): steps in
// ascending global step order, each returned once; bounded calls; training's
// end told by the caller; errors that recur on the next call.
class TensorTrial {
 public:
  virtual ~TensorTrial() = default;
  virtual absl::StatusOr<std::vector<Step>> ReadNewSteps(const TensorFilter& wanted,
                                                         const ReadBudget& budget) = 0;
  virtual bool stopped_at_budget() const = 0;
  virtual void SetTrainingEnded() = 0;
  virtual bool finished() const = 0;
  virtual int64_t newest_step_seen() const = 0;
  virtual const TrialInfo& info() const = 0;
  virtual const TrialSummary& summary() const = 0;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SMDEBUG_TENSOR_TRIAL_H_
