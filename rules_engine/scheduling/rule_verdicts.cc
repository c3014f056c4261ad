#include "rules_engine/scheduling/rule_verdicts.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/message_text.h"

namespace debugplane::rules_engine {
namespace {

constexpr size_t kMaxTensorsListed = 12;
constexpr size_t kMaxTensorNameChars = 40;

// True for the bytes that continue a UTF-8 sequence (10xxxxxx).
bool IsContinuationByte(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }

std::vector<std::string> ListedTensorNames(const TrialSummary& summary) {
  const size_t shown = std::min(summary.tensor_names_seen.size(), kMaxTensorsListed);
  std::vector<std::string> names;
  names.reserve(shown);
  for (size_t i = 0; i < shown; ++i) {
    names.push_back(
        base::EscapeForMessage(summary.tensor_names_seen[i], kMaxTensorNameChars));
  }
  return names;
}

std::string StepsPart(const TrialSummary& summary) {
  return absl::StrCat(summary.path, " has ", summary.steps_seen, " steps (last global step ",
                      summary.last_global_step, ")");
}

std::string TensorsPart(const TrialSummary& summary, const std::vector<std::string>& names) {
  return absl::StrCat(" with tensors [", absl::StrJoin(names, ", "),
                      summary.tensor_names_seen.size() > names.size() ? ", ..." : "", "]");
}

}  // namespace

v1::RuleEvaluationStatus::Value StatusOf(RuleVerdict::Kind kind) {
  switch (kind) {
    case RuleVerdict::Kind::kIssuesFound:
      return v1::RuleEvaluationStatus::IssuesFound;
    case RuleVerdict::Kind::kNoIssuesFound:
      return v1::RuleEvaluationStatus::NoIssuesFound;
    default:
      return v1::RuleEvaluationStatus::Error;
  }
}

std::string SanitizeStatusDetails(std::string text) {
  if (text.size() <= kMaxStatusDetailsBytes) return text;
  constexpr absl::string_view kEllipsis = "...";
  size_t cut = kMaxStatusDetailsBytes - kEllipsis.size();
  // Back up to the first byte of the character the cut would split.
  while (cut > 0 && IsContinuationByte(text[cut])) --cut;
  text.resize(cut);
  absl::StrAppend(&text, kEllipsis);
  return text;
}

std::string DescribeTrial(const TrialSummary& summary) {
  if (!summary.exists) {
    return absl::StrCat("the directory ", summary.path,
                        " does not exist: the training script saved nothing there (is the smdebug "
                        "hook registered and its LocalPath/S3OutputPath this one?)");
  }
  if (summary.steps_seen == 0) {
    return absl::StrCat(summary.path, " has no complete step",
                        summary.has_collections ? "" : " and no collections file");
  }
  return absl::StrCat(StepsPart(summary), TensorsPart(summary, ListedTensorNames(summary)));
}

std::string ErrorWithTrialDescription(std::string error, const TrialSummary& summary) {
  const std::string description = DescribeTrial(summary);
  if (absl::StrContains(error, description)) return error;
  if (summary.exists && summary.steps_seen > 0) {
    const std::vector<std::string> names = ListedTensorNames(summary);
    const bool all_named = std::all_of(names.begin(), names.end(), [&](const std::string& name) {
      return absl::StrContains(error, name);
    });
    if (all_named && summary.tensor_names_seen.size() <= names.size()) {
      absl::StrAppend(&error, ". Read: ", StepsPart(summary));
      return error;
    }
  }
  absl::StrAppend(&error, ". Read: ", description);
  return error;
}

}  // namespace debugplane::rules_engine
