// Rule verdicts as the job record shows them: which RuleEvaluationStatus a
// verdict records, and the status details text (bounded, and not repeating
// itself). Written once here for debugging, profiler and custom rules.
//
// Pure functions: thread-safe, no I/O.

#ifndef DEBUGPLANE_RULES_ENGINE_SCHEDULING_RULE_VERDICTS_H_
#define DEBUGPLANE_RULES_ENGINE_SCHEDULING_RULE_VERDICTS_H_

#include <cstddef>
#include <string>

#include "debugplane/v1/training_job.pb.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/smdebug/trial_reader.h"

namespace debugplane::rules_engine {

// The most bytes of status details a rule status records.
inline constexpr size_t kMaxStatusDetailsBytes = 1024;

// The terminal status a verdict of kind `kind` records: IssuesFound,
// NoIssuesFound, and Error for anything else (kError; kContinue is not a
// verdict and is never passed by the scheduler).
v1::RuleEvaluationStatus::Value StatusOf(RuleVerdict::Kind kind);

// `text` cut to at most kMaxStatusDetailsBytes bytes, ending in "..." when
// cut. The cut falls on a UTF-8 character boundary (a multi-byte character is
// kept whole or dropped whole), so the result is valid UTF-8 whenever `text`
// is: protobuf string fields must be.
std::string SanitizeStatusDetails(std::string text);

// What the reader found, for a rule that saw no usable data: the directory
// is missing, has no complete step, or has N steps with tensors [...] (at
// most 12 names, each escaped and cut to 40 characters: they come from the
// trial's files).
std::string DescribeTrial(const TrialSummary& summary);

// A rule's Error at the end of training, followed by ". Read: " and what the
// trial held (DescribeTrial) where that adds to what `error` says: nothing
// when `error` already contains the whole description; without the tensors
// list when every tensor listed there is already named in `error`.
std::string ErrorWithTrialDescription(std::string error, const TrialSummary& summary);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SCHEDULING_RULE_VERDICTS_H_
