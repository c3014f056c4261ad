// A built-in rule: evaluated step by step as data arrives.

#ifndef DEBUGPLANE_RULES_ENGINE_RULE_RULE_H_
#define DEBUGPLANE_RULES_ENGINE_RULE_RULE_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine {

using RuleParameters = std::map<std::string, std::string>;

// What a rule concluded after a step or at the end of training.
struct RuleVerdict {
  enum class Kind {
    kContinue,       // No conclusion yet: keep feeding steps.
    kIssuesFound,    // The condition was met (terminal).
    kNoIssuesFound,  // Only from OnTrainingEnd: all data evaluated, no issue.
    kError,          // The rule cannot evaluate (e.g. no usable data).
  };
  Kind kind = Kind::kContinue;
  // For kIssuesFound: which step, mode and tensor and the value that crossed
  // which threshold, e.g. "step 12 (TRAIN step 10): gradient/fc1.weight mean
  // |x| 1.5e-39 < threshold 1e-07". For kError: the cause. At most 1024 chars.
  std::string details;

  static RuleVerdict Continue() { return {}; }
  static RuleVerdict Issues(std::string details) {
    return {Kind::kIssuesFound, std::move(details)};
  }
  static RuleVerdict NoIssues(std::string details = "") {
    return {Kind::kNoIssuesFound, std::move(details)};
  }
  static RuleVerdict Error(std::string details) { return {Kind::kError, std::move(details)}; }
};

// What a rule that writes a report (CreateXgboostReport) renders it for.
struct RuleReportContext {
  std::string training_job_name;
  std::string rule_configuration_name;
  absl::Time generated_at;
  bool final = false;  // Training ended and the rule concluded: no later version.
};

// A rendered report: the self-contained page and its JSON summary.
struct RuleReport {
  std::string html;
  std::string json;
};

// A rule instance for one trial. Not thread-safe; deterministic: the same
// steps give the same verdicts (evaluation resumes after a restart by
// replaying steps).
class Rule {
 public:
  virtual ~Rule() = default;
  // The rule's name, e.g. "VanishingGradient".
  virtual std::string name() const = 0;
  // Whether the rule needs `tensor` from each step (only those are decoded).
  virtual bool Wants(const std::string& tensor, const TrialInfo& info) const = 0;
  // Collections the hook must save for this rule to have data, e.g.
  // {"gradients"}; used to warn at CreateTrainingJob time.
  virtual std::vector<std::string> RequiredCollections() const = 0;
  // Evaluates one step (only the wanted tensors are in it). Steps come in
  // ascending global step order.
  virtual RuleVerdict OnStep(const Step& step, const TrialInfo& info) = 0;
  // Training ended and every step was evaluated: NoIssuesFound, IssuesFound
  // (for rules that judge the whole run) or Error (no usable data; details
  // say what was needed).
  virtual RuleVerdict OnTrainingEnd(const TrialInfo& info) = 0;

  // Wall-clock rules (StalledTrainingRule). A scheduler that evaluates a rule
  // also drives time: after creating it and after every OnStep it asks
  // NextDeadline(); if that is set, it calls OnTick(now) at (or after) that
  // time, and again whenever the deadline moves. Rules that do not depend on
  // time return nullopt and ignore ticks (the defaults).
  virtual absl::optional<absl::Time> NextDeadline() const { return absl::nullopt; }
  virtual RuleVerdict OnTick(absl::Time now) { return RuleVerdict::Continue(); }

  // Rules that write a report (CreateXgboostReport) name its files' stem:
  // "<stem>.html" and "<stem>.json" (SageMaker's "xgboost_report"); the
  // scheduler then renders it as steps arrive (throttled) and once more
  // when the rule concludes. "" (the default): no report.
  virtual std::string ReportFileStem() const { return ""; }
  // The report of everything evaluated so far. Only called on rules with a
  // ReportFileStem().
  virtual RuleReport RenderReport(const RuleReportContext& context) const { return {}; }
};

// Reads tensor `tensor` at global step `global_step` of the trial named by
// SimilarAcrossRuns' `other_trials` parameter (a training job name or trial
// path: the caller resolves it). NOT_FOUND when that trial has no such
// tensor at that step (the rule skips it); any other error makes the rule
// report kError with the message.
using OtherTrialLookup = std::function<absl::StatusOr<Tensor>(
    const std::string& other_trial, int64_t global_step, const std::string& tensor)>;

// What some rules need from their environment.
struct RuleContext {
  // The clock of wall-clock rules; absl::Now when unset.
  std::function<absl::Time()> now;
  // SimilarAcrossRuns' access to the other trial; without it that rule is
  // UNIMPLEMENTED at creation.
  OtherTrialLookup other_trial;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_RULE_RULE_H_
