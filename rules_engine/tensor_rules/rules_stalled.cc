// StalledTrainingRule: no new step within `threshold` seconds.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/utc_time.h"
#include "rules_engine/tensor_rules/rule_internal.h"

namespace debugplane::rules_engine::internal {
namespace {

// absl::RFC3339_sec in UTC: 2026-11-21T22:35:00+00:00.
constexpr char kRfc3339Seconds[] = "%Y-%m-%dT%H:%M:%S+00:00";

// How the scheduler drives it (see Rule::NextDeadline in rule.h): the rule's
// clock starts when it is created (evaluation start stands in for training
// start); every step delivered to OnStep restarts it; NextDeadline() is the
// last progress + threshold; OnTick(now) at or after it fires. The scheduler
// must deliver every step to OnStep, even one holding none of the wanted
// tensors (Wants is false for all tensors: the rule needs arrivals, not
// values). After a restart, replayed steps arrive "now", so the stall
// window restarts with the service: a stall is never reported early.
// stop_training_on_fire / training_job_name_prefix are accepted for
// compatibility; stopping is done by the scheduler's actions (action_json).
class StalledTrainingRule : public Rule {
 public:
  StalledTrainingRule(absl::Duration threshold, std::function<absl::Time()> now)
      : threshold_(threshold), now_(std::move(now)), last_progress_(now_()) {}

  std::string name() const override { return "StalledTrainingRule"; }
  bool Wants(const std::string&, const TrialInfo&) const override { return false; }
  std::vector<std::string> RequiredCollections() const override { return {}; }

  RuleVerdict OnStep(const Step& step, const TrialInfo&) override {
    last_progress_ = now_();
    last_step_ = step.global_step;
    steps_.Add(step.mode);  // Every mode is progress, GLOBAL included.
    return RuleVerdict::Continue();
  }

  RuleVerdict OnTrainingEnd(const TrialInfo& info) override {
    done_ = true;
    if (steps_.Total() > 0) {
      return RuleVerdict::NoIssues(absl::StrCat(steps_.Total(), " steps (", steps_.Describe(),
                                                "), none stalled longer than ",
                                                absl::FormatDuration(threshold_)));
    }
    return RuleVerdict::Error(Clip(absl::StrCat(
        "training ended without saving any step: the rule needs tensors saved periodically "
        "(any tensor, in any mode); ",
        DescribeTrial(info, steps_))));
  }

  absl::optional<absl::Time> NextDeadline() const override {
    if (done_) return absl::nullopt;
    return last_progress_ + threshold_;
  }

  RuleVerdict OnTick(absl::Time now) override {
    if (done_ || now - last_progress_ < threshold_) return RuleVerdict::Continue();
    done_ = true;
    const std::string since =
        last_step_ < 0 ? std::string("evaluation started") : absl::StrCat("step ", last_step_);
    return RuleVerdict::Issues(
        Clip(absl::StrCat("no new step for ", absl::FormatDuration(now - last_progress_), " since ",
                          since, " at ", base::FormatUtc(last_progress_, kRfc3339Seconds),
                          " >= threshold ", absl::ToInt64Seconds(threshold_), "s")));
  }

 private:
  absl::Duration threshold_;
  std::function<absl::Time()> now_;
  absl::Time last_progress_;
  int64_t last_step_ = -1;
  ModeCounts steps_;  // Steps delivered, by mode.
  bool done_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Rule>> MakeStalledTrainingRule(RuleParameterReader& p,
                                                              const RuleContext& ctx) {
  const int64_t threshold = p.Int("threshold", 1800, 1);
  p.Bool("stop_training_on_fire", false);
  p.OptionalString("training_job_name_prefix");
  if (absl::Status s = p.status(); !s.ok()) return s;
  std::function<absl::Time()> now = ctx.now ? ctx.now : [] { return absl::Now(); };
  return std::make_unique<StalledTrainingRule>(absl::Seconds(threshold), std::move(now));
}

}  // namespace debugplane::rules_engine::internal
