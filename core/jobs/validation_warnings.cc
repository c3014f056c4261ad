// The warnings of valid requests (validation.h): rules that will find no
// data, profiling changes that cannot take effect while the training runs.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/jobs/rule_catalog.h"
#include "core/jobs/validation.h"
#include "core/jobs/validation_checks.h"

namespace debugplane::core {

using validation_internal::EntryField;

namespace {

absl::string_view WithoutTrailingSlashes(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return path;
}

// Whether the job has an smdebug trial: a DebugHookConfig that does not
// merely configure the collections of its TensorBoard logs (a TensorBoard
// job may give one for CollectionConfigurations alone, naming the
// TensorBoard location as its S3OutputPath).
bool HasSmdebugTrial(const v1::CreateTrainingJobRequest& request) {
  if (!request.has_debug_hook_config()) return false;
  if (!request.has_tensor_board_output_config()) return true;
  return WithoutTrailingSlashes(request.debug_hook_config().s3_output_path()) !=
         WithoutTrailingSlashes(request.tensor_board_output_config().s3_output_path());
}

// The collections rule `i` (rule_to_invoke `invoke`) reads that
// DebugHookConfig.CollectionConfigurations does not save.
void AddCollectionWarnings(const v1::CreateTrainingJobRequest& request, int i,
                           const std::string& invoke, const ValidationOptions& options,
                           std::vector<std::string>& warnings) {
  if (!options.rule_collections) return;
  std::set<std::string> saved = {"losses"};  // smdebug saves losses by default.
  for (const auto& collection : request.debug_hook_config().collection_configurations()) {
    saved.insert(collection.collection_name());
  }
  const auto& rule = request.debug_rule_configurations(i);
  const RuleParameterMap parameters(rule.rule_parameters().begin(), rule.rule_parameters().end());
  for (const std::string& needed : options.rule_collections(invoke, parameters)) {
    if (saved.count(needed) != 0) continue;
    warnings.push_back(absl::StrCat(
        "DebugRuleConfigurations[", i, "] (", rule.rule_configuration_name(), ", ", invoke,
        ") reads the '", needed,
        "' collection, which DebugHookConfig.CollectionConfigurations does not save: the "
        "rule will find no data unless the training script saves it; add {\"CollectionName\": \"",
        needed, "\"}"));
  }
}

// The rule catalog says why (TensorBoardGap), e.g. "it reads the labels
// and predictions tensors".
std::string TensorBoardCannotCarry(const v1::DebugRuleConfiguration& rule, int i,
                                   const std::string& invoke, absl::string_view gap) {
  return absl::StrCat(
      "DebugRuleConfigurations[", i, "] (", rule.rule_configuration_name(), ", ", invoke,
      ") cannot be evaluated on TensorBoard logs, which hold scalars and histograms only: ", gap,
      "; the job has TensorBoardOutputConfig without an smdebug DebugHookConfig, so the rule "
      "will end in Error; save its tensors with smdebug (a DebugHookConfig whose S3OutputPath is "
      "not the TensorBoard location) or remove the rule");
}

}  // namespace

std::vector<std::string> CreateTrainingJobWarnings(const v1::CreateTrainingJobRequest& request,
                                                   const ValidationOptions& options) {
  std::vector<std::string> warnings;
  if (request.debug_rule_configurations().empty()) return warnings;
  const bool tensorboard = request.has_tensor_board_output_config();
  const bool smdebug = HasSmdebugTrial(request);
  if (!tensorboard && !smdebug) {
    warnings.push_back(
        "DebugRuleConfigurations are set but neither DebugHookConfig nor "
        "TensorBoardOutputConfig is: no tensors will be saved, so the rules will end in Error; "
        "add a TensorBoardOutputConfig with the S3OutputPath the training's TensorBoard logs go "
        "to, or a DebugHookConfig with S3OutputPath and the collections the rules read");
    return warnings;
  }
  for (int i = 0; i < request.debug_rule_configurations_size(); ++i) {
    const auto& rule = request.debug_rule_configurations(i);
    if (!IsBuiltinRuleEvaluatorImage(rule.rule_evaluator_image())) continue;
    auto invoke = rule.rule_parameters().find("rule_to_invoke");
    if (invoke == rule.rule_parameters().end()) continue;
    // TensorBoard logs name their collections by their tags, not by
    // CollectionConfigurations: nothing to warn of for a rule they carry.
    const absl::string_view gap = TensorBoardGap(invoke->second);
    if (tensorboard && gap.empty()) continue;
    if (!smdebug) {
      warnings.push_back(TensorBoardCannotCarry(rule, i, invoke->second, gap));
      continue;
    }
    AddCollectionWarnings(request, i, invoke->second, options, warnings);
  }
  return warnings;
}

namespace {

// A framework-profiling parameter that cannot take effect mid-run: what
// happens there, and where.
struct RunTimeLimitation {
  absl::string_view parameter;
  absl::string_view what_happens;
  // What a PyTorch 2 job profiling with debugplane_profiler (the agent's
  // module, client/agent/debugplane_profiler.py) gets of it mid-run.
  absl::string_view pytorch2;
};

constexpr RunTimeLimitation kRunTimeLimitations[] = {
    {"PythonProfilingConfig",
     "smdebug 0.x-1.0 with PyTorch 1.9 or later crashes the training process when Python "
     "profiling is set or changed while it runs",
     "a torch.profiler trace of the window with Python stacks (with_stack); no cProfile or "
     "pyinstrument output (ProfilerName, cProfileTimer are not served)"},
    {"DataloaderProfilingConfig",
     "smdebug 0.x-1.0 with PyTorch 1.9 or later crashes the training process when data loader "
     "profiling is set or changed while it runs, and AWS TensorFlow cannot change data loader "
     "profiling while a job runs",
     "a torch.profiler trace of the window, with the data loader's enumerate(DataLoader) spans "
     "(MetricsRegex is not served)"},
    {"DetailedProfilingConfig",
     "smdebug 0.x-1.0 with PyTorch 1.9 or later ignores detailed profiling set or changed while "
     "the training runs (no framework profile is written), and TensorFlow 2.11 and later has no "
     "detailed profiling at all",
     "a torch.profiler trace of the window (StartStep/NumSteps or "
     "StartTimeInSecSinceEpoch/DurationInSeconds)"},
};

}  // namespace

std::vector<std::string> UpdateTrainingJobWarnings(const v1::UpdateTrainingJobRequest& request,
                                                   const v1::ProfilerConfig& current) {
  std::vector<std::string> warnings;
  if (!request.has_profiler_config() || request.profiler_config().disable_profiler()) {
    return warnings;
  }
  // Sorted, so that the warnings come in the same order every time.
  const std::map<std::string, std::string> changes(
      request.profiler_config().profiling_parameters().begin(),
      request.profiler_config().profiling_parameters().end());
  for (const auto& [key, value] : changes) {
    auto unchanged = current.profiling_parameters().find(key);
    if (unchanged != current.profiling_parameters().end() && unchanged->second == value) continue;
    for (const RunTimeLimitation& limitation : kRunTimeLimitations) {
      if (!absl::EqualsIgnoreCase(key, limitation.parameter)) continue;
      warnings.push_back(absl::StrCat(
          EntryField("ProfilerConfig.ProfilingParameters", key), ": ", limitation.what_happens,
          "; set ", limitation.parameter,
          " in the ProfilerConfig of CreateTrainingJob instead (for this job: stop it and start "
          "the training again as a new job with it). PyTorch 2 jobs that profile with "
          "debugplane_profiler (debugplane_profiler.profile(), prof.step()) get it at their "
          "next step(): ",
          limitation.pytorch2));
    }
  }
  return warnings;
}
}  // namespace debugplane::core
