// Two tensor trials of one job read as one: the smdebug trial
// (DebugHookConfig) and the TensorBoard logs (TensorBoardOutputConfig), when
// a job has both. Each keeps its tensors under their own names; steps come
// in ascending global step order across both.

#ifndef DEBUGPLANE_RULES_ENGINE_TENSORBOARD_MERGED_TRIAL_H_
#define DEBUGPLANE_RULES_ENGINE_TENSORBOARD_MERGED_TRIAL_H_

#include <deque>
#include <memory>
#include <vector>

#include "rules_engine/smdebug/tensor_trial.h"
#include "rules_engine/smdebug/trial_reader.h"

namespace debugplane::rules_engine::tensorboard {

// A step of one trial is returned once the other trial has returned a step
// at least as late, has finished, or has no data at all yet (a trial that
// never gets data must not hold the other back). info() unites both trials'
// collections (patterns and tensor names) and workers; summary() adds up
// their counts. Not thread-safe.
class MergedTrial : public TensorTrial {
 public:
  MergedTrial(std::unique_ptr<TensorTrial> first, std::unique_ptr<TensorTrial> second);

  absl::StatusOr<std::vector<Step>> ReadNewSteps(const TensorFilter& wanted,
                                                 const ReadBudget& budget) override;
  bool stopped_at_budget() const override;
  void SetTrainingEnded() override;
  bool finished() const override;
  int64_t newest_step_seen() const override;
  const TrialInfo& info() const override { return info_; }
  const TrialSummary& summary() const override { return summary_; }

 private:
  // Rebuilds info_ when either trial's collections or workers changed.
  void UniteInfo();
  void AddUpSummaries();
  // Whether trial `i`'s queue may hold back the other's steps.
  bool Blocks(int i) const;

  std::unique_ptr<TensorTrial> trials_[2];
  std::deque<Step> queued_[2];
  bool more_ = false;  // The last call stopped at max_steps with steps ready.
  size_t info_key_ = SIZE_MAX;
  TrialInfo info_;
  TrialSummary summary_;
};

}  // namespace debugplane::rules_engine::tensorboard

#endif  // DEBUGPLANE_RULES_ENGINE_TENSORBOARD_MERGED_TRIAL_H_
