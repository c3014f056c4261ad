// The warnings of valid requests (validation.h): rules that will find no
// data, profiling changes that cannot take effect while the training runs.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/jobs/rule_catalog.h"
#include "core/jobs/validation.h"
#include "core/jobs/validation_checks.h"

namespace debugplane::core {

using validation_internal::EntryField;

std::vector<std::string> CreateTrainingJobWarnings(const v1::CreateTrainingJobRequest& request,
                                                   const ValidationOptions& options) {
  std::vector<std::string> warnings;
  if (request.debug_rule_configurations().empty()) return warnings;
  if (!request.has_debug_hook_config()) {
    warnings.push_back(
        "DebugRuleConfigurations are set but DebugHookConfig is not: no tensors will be saved, "
        "so the rules will end in Error; add a DebugHookConfig with S3OutputPath and the "
        "collections the rules read");
    return warnings;
  }
  if (!options.rule_collections) return warnings;
  std::set<std::string> saved = {"losses"};  // smdebug saves losses by default.
  for (const auto& collection : request.debug_hook_config().collection_configurations()) {
    saved.insert(collection.collection_name());
  }
  for (int i = 0; i < request.debug_rule_configurations_size(); ++i) {
    const auto& rule = request.debug_rule_configurations(i);
    if (!IsBuiltinRuleEvaluatorImage(rule.rule_evaluator_image())) continue;
    auto invoke = rule.rule_parameters().find("rule_to_invoke");
    if (invoke == rule.rule_parameters().end()) continue;
    const RuleParameterMap parameters(rule.rule_parameters().begin(), rule.rule_parameters().end());
    for (const std::string& needed : options.rule_collections(invoke->second, parameters)) {
      if (saved.count(needed) != 0) continue;
      warnings.push_back(absl::StrCat(
          "DebugRuleConfigurations[", i, "] (", rule.rule_configuration_name(), ", ",
          invoke->second, ") reads the '", needed,
          "' collection, which DebugHookConfig.CollectionConfigurations does not save: the "
          "rule will find no data unless the training script saves it; add {\"CollectionName\": \"",
          needed, "\"}"));
    }
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
