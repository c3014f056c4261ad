// Request validation as SageMaker documents it (shapes, limits, patterns in
// reference/sagemaker-training-job-api.json), plus debugplane's own rules for
// output paths and rule evaluators.
//
// Every function returns OK, or INVALID_ARGUMENT carrying one
// google.rpc.BadRequest field violation per problem (see field_violations.h);
// field paths use the SageMaker member names, e.g.
// "DebugRuleConfigurations[1].RuleParameters.rule_to_invoke". A map entry is
// `Map.key` when the key is an identifier ([A-Za-z_][A-Za-z0-9_]*, as
// rule_to_invoke) and `Map["key"]` otherwise (e.g.
// `CollectionParameters["train.save_interval"]`), as in JavaScript; user
// values in paths and descriptions are escaped and cut to 64 characters.
//
// All problems of a request are reported at once, not only the first, up to
// 20 violations or about 1.8 KB of text; a last violation then counts the
// rest. That keeps the error within gRPC's default 8 KiB of trailers (the
// message travels twice) whatever the size of the request.
// Lengths are counted in characters (code points), as SageMaker does.
// Thread-safe: all functions are pure (output paths read the file system).

#ifndef DEBUGPLANE_CORE_JOBS_VALIDATION_H_
#define DEBUGPLANE_CORE_JOBS_VALIDATION_H_

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "debugplane/v1/training_job.pb.h"

namespace debugplane::core {

using RuleParameterMap = std::map<std::string, std::string>;

struct ValidationOptions {
  // Absolute, canonical directories that local output paths may point into.
  std::vector<std::filesystem::path> data_roots;
  // RuleEvaluatorImage values (other than built-in images) the server runs
  // as custom rule evaluators.
  std::vector<std::string> allowed_custom_evaluators;
  // Checks the parameters of built-in rule `rule` (rule_to_invoke; debugging
  // and profiler rules): OK or
  // INVALID_ARGUMENT whose message names the parameter. Unset: parameters are
  // not checked beyond their sizes. The rules engine provides it, so core
  // does not depend on the rules.
  std::function<absl::Status(const std::string& rule, const RuleParameterMap& parameters)>
      check_rule_parameters;
  // The tensor collections built-in rule `rule` reads (e.g. {"gradients"}),
  // for CreateTrainingJobWarnings. Unset: no collection warnings.
  std::function<std::vector<std::string>(const std::string& rule,
                                         const RuleParameterMap& parameters)>
      rule_collections;
};

// The allowed ProfilingIntervalInMilliseconds values.
inline constexpr int64_t kProfilingIntervalsMs[] = {100, 200, 500, 1000, 5000, 60000};
inline constexpr int kMaxRulesPerKind = 20;

// Checks a TrainingJobName ([a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}, 1-63 chars)
// reporting violations against `field`.
absl::Status ValidateTrainingJobName(absl::string_view name,
                                     absl::string_view field = "TrainingJobName");

// Checks a whole CreateTrainingJob request: required members, name pattern and
// length, map sizes and key/value limits, list limits, unique rule
// configuration names, at most 20 debug and 20 profiler rules, rule
// evaluator images and rule_to_invoke (built-in names of the right kind, or
// an allowed custom evaluator), ProfilingIntervalInMilliseconds, and output
// paths (ResolveOutputPath against options.data_roots).
absl::Status ValidateCreateTrainingJobRequest(const v1::CreateTrainingJobRequest& request,
                                              const ValidationOptions& options);

// Problems that do not make a valid CreateTrainingJob request invalid but
// that a person should hear of now rather than find as a rule Error later:
// a built-in debug rule that reads a collection the DebugHookConfig does not
// save (e.g. VanishingGradient without "gradients"), debug rules with
// neither DebugHookConfig nor TensorBoardOutputConfig, and, for a job whose
// only trial is its TensorBoard logs, each built-in debug rule whose data
// TensorBoard's scalars and histograms cannot carry (DeadRelu, Confusion,
// the XGBoost rules, ...). A rule TensorBoard carries gets no collection
// warning (the tags name the collections). A DebugHookConfig whose
// S3OutputPath is the TensorBoard location only configures collections: no
// smdebug trial. REQUIRES: the request passed validation.
std::vector<std::string> CreateTrainingJobWarnings(const v1::CreateTrainingJobRequest& request,
                                                   const ValidationOptions& options);

// Checks what can be checked of an UpdateTrainingJob request without the
// job: name, ProfilerConfig (interval, parameters, paths; DisableProfiler not
// combined with other profiler changes), and each new profiler rule. Checks
// against the job's state (InProgress, unique names across old and new rules,
// 20 rules in all) are the job manager's.
absl::Status ValidateUpdateTrainingJobRequest(const v1::UpdateTrainingJobRequest& request,
                                              const ValidationOptions& options);

// Problems of a valid UpdateTrainingJob request that do not make it invalid
// but that a person should hear of now: ProfilingParameters changes that the
// training frameworks smdebug documents cannot apply while the training
// runs. smdebug (up to 1.0) re-reads profilerconfig.json at every step, but
//   - PythonProfilingConfig and DataloaderProfilingConfig set or changed
//     mid-run crash the training process under PyTorch >= 1.9 (and AWS
//     TensorFlow cannot change data loader profiling mid-run);
//   - DetailedProfilingConfig set or changed mid-run is ignored under
//     PyTorch >= 1.9 (and TensorFlow >= 2.11 has no detailed profiling).
// One warning per such entry, naming the parameter, the frameworks and what
// to do instead (set it at CreateTrainingJob, i.e. restart the training).
// `current` is the job's ProfilerConfig before the update: an entry equal to
// its current value is no change and gets no warning. Keys match whatever
// their case, as smdebug lower-cases the whole file. No warnings when the
// update disables the profiler or has no ProfilerConfig.
// REQUIRES: the request passed ValidateUpdateTrainingJobRequest.
std::vector<std::string> UpdateTrainingJobWarnings(const v1::UpdateTrainingJobRequest& request,
                                                   const v1::ProfilerConfig& current);

// Checks a ListTrainingJobs request: MaxResults in 1..100, NameContains
// pattern and length, time ranges, NextToken length (its content is checked
// by the job manager).
absl::Status ValidateListTrainingJobsRequest(const v1::ListTrainingJobsRequest& request);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_VALIDATION_H_
