#include "core/jobs/rule_catalog.h"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace debugplane::core {
namespace {

// The catalog, as a document: one block per rule, in the order of the
// Debugger developer guide, blocks separated by blank lines. A block is
//   <Name>: debug|profiler
//   checks: <what the rule checks>
//   suggestion: <what to do when it finds an issue>
// where a line indented by two spaces continues the line above (joined with
// one space). Lines starting with '#' are comments.
constexpr absl::string_view kCatalogDocument = R"catalog(
# Profiler rules (debugger-built-in-rules.md, "Debugger ProfilerRule").
ProfilerReport: profiler
checks: Runs every built-in profiler rule and renders a profiling report (HTML and JSON) of system
  usage, step durations and each rule's findings.
suggestion: Open the profiling report and act on the rules it lists as having found issues.

BatchSize: profiler
checks: Detects GPUs that are underused because the batch is too small: low GPU utilization and low
  GPU memory use while CPU usage is low too.
suggestion: Increase the batch size (scaling the learning rate), or move to a smaller instance
  type.

CPUBottleneck: profiler
checks: Counts the times CPU utilization is above a threshold while GPU utilization is low: the
  GPUs wait for the CPUs.
suggestion: Move preprocessing off the training path (more data loader workers, prefetching,
  preprocessing ahead of training) or use an instance with more CPU cores.

GPUMemoryIncrease: profiler
checks: Watches each GPU's memory utilization for a large increase over a moving window, which
  often precedes running out of GPU memory.
suggestion: Check for tensors kept across steps (accumulated losses or graphs), reduce the batch
  size, or use a GPU with more memory.

IOBottleneck: profiler
checks: Counts the times I/O wait is above a threshold while GPU utilization is low: the GPUs wait
  for data from storage.
suggestion: Pre-fetch and cache the data, use faster storage or a streaming input format, and read
  with more parallel workers.

LoadBalancing: profiler
checks: Compares the workload across the GPUs of a node and flags a large imbalance between them.
suggestion: Check how the data and the model are split across devices; a data-parallel library or
  balanced sharding evens the load.

LowGPUUtilization: profiler
checks: Flags GPUs whose utilization stays low (or swings widely) over a window of samples.
suggestion: Increase the batch size, remove data-loading stalls, or use an instance with fewer or
  smaller GPUs.

OverallSystemUsage: profiler
checks: Summarizes CPU, GPU, memory and I/O utilization per node (percentiles) over the whole job.
suggestion: Use the summary to size the instance: consistently low utilization means a smaller or
  cheaper instance would do.

MaxInitializationTime: profiler
checks: Measures the time from the start of training to the first step and flags it when it exceeds
  a threshold (minutes).
suggestion: Shorten start-up: download less data before the first step, stream the input, and check
  for slow model building or compilation.

OverallFrameworkMetrics: profiler
checks: Summarizes where framework time goes: initialization, training loop and finalization,
  forward and backward passes, data loading, and the busiest operations.
suggestion: Look at the largest phases and operations first; time outside steps or in data loading
  is overhead to reduce.

StepOutlier: profiler
checks: Flags steps whose duration is more than a number of standard deviations above the mean for
  their mode.
suggestion: Look at what runs during the slow steps (checkpointing, evaluation, data reloads or
  garbage collection) and move or spread that work.

# Debugging rules (debugger-built-in-rules.md, "Debugger Rule").
CreateXgboostReport: debug
checks: Collects XGBoost training tensors (metrics, feature importance, trees) and writes a
  training report.
suggestion: Read the report for loss curves, feature importance and tree statistics.

DeadRelu: debug
checks: Detects ReLU layers where too many activations are zero (dead units) for several steps in a
  row.
suggestion: Lower the learning rate, use a leaky ReLU or another activation, and check the weight
  initialization.

ExplodingTensor: debug
checks: Detects tensors that contain NaN or infinite values.
suggestion: Lower the learning rate, clip gradients, check the input data for bad values, and look
  for divisions or logarithms of zero.

PoorWeightInitialization: debug
checks: Checks the variance of activations across layers and the change of loss in the first steps
  for signs of a poor weight initialization.
suggestion: Use an initialization suited to the activation (He for ReLU, Xavier for tanh) and
  normalize the inputs.

SaturatedActivation: debug
checks: Detects tanh and sigmoid layers whose activations sit mostly at their limits, where
  gradients vanish.
suggestion: Normalize the inputs, lower the learning rate, use batch normalization, or switch to
  ReLU-like activations.

VanishingGradient: debug
checks: Flags gradients whose mean absolute value falls below a threshold: the layers before them
  stop learning.
suggestion: Use ReLU-like activations, residual connections or batch normalization, and a better
  weight initialization.

WeightUpdateRatio: debug
checks: Checks the ratio of each weight update to the weight itself; too large or too small ratios
  mean unstable or stalled training.
suggestion: Adjust the learning rate (down for large ratios, up for tiny ones) or use an adaptive
  optimizer.

AllZero: debug
checks: Detects tensors whose values are all (or mostly) zero.
suggestion: Check that the tensor is computed and saved as intended, and look for dead layers or
  inputs that are zero.

ClassImbalance: debug
checks: Measures how unevenly the classes appear in the labels and in the predictions.
suggestion: Resample or weight the classes, or collect more data for the rare ones.

LossNotDecreasing: debug
checks: Flags a loss that does not decrease by at least a given percentage over a number of steps.
suggestion: Check the learning rate and the data (shuffled, correctly labelled), and whether the
  model is too small or already converged.

Overfit: debug
checks: Compares training and validation loss and flags when validation loss rises while training
  loss keeps falling.
suggestion: Add regularization (dropout, weight decay), augment or add data, or stop earlier.

Overtraining: debug
checks: Flags a training or validation loss that no longer improves over many steps: training goes
  on without benefit.
suggestion: Stop earlier (early stopping) or lower the learning rate once the loss plateaus.

SimilarAcrossRuns: debug
checks: Compares tensors of this run with those of another run and flags steps where they differ.
suggestion: Check what changed between the runs: data, hyperparameters, random seeds or code.

StalledTrainingRule: debug
checks: Flags a training that wrote no new tensors for longer than a threshold: it may be stuck.
suggestion: Check the training logs for hangs (deadlocks, waits on data or on other hosts) and stop
  the job if it is stuck.

TensorVariance: debug
checks: Flags tensors whose variance gets very high or very low, a sign of exploding or vanishing
  values.
suggestion: Normalize inputs and layers, adjust the learning rate, and check the weight
  initialization.

UnchangedTensor: debug
checks: Detects tensors that stop changing across steps.
suggestion: Check that those parameters receive gradients (not frozen or detached) and that the
  learning rate is not too small.

CheckInputImages: debug
checks: Checks that input images are normalized: their mean near zero and standard deviation near
  one.
suggestion: Normalize the images (subtract the mean, divide by the standard deviation) before
  training.

NLPSequenceRatio: debug
checks: Measures the share of padding or unknown tokens in input sequences.
suggestion: Bucket sequences by length to reduce padding, or extend the vocabulary to cut unknown
  tokens.

Confusion: debug
checks: Evaluates the confusion matrix of a classifier and flags when the diagonal or off-diagonal
  shares cross thresholds.
suggestion: Look at the classes that are confused with each other: more or cleaner data for them,
  or class weights.

FeatureImportanceOverweight: debug
checks: Flags XGBoost models where a few features carry too much of the importance.
suggestion: Check the dominant features for target leakage, and consider regularization or feature
  selection.

TreeDepth: debug
checks: Checks the depth of the XGBoost trees against the data size: trees too deep overfit.
suggestion: Lower max_depth or increase min_child_weight and regularization.
)catalog";

// A mistake in kCatalogDocument: every test run that reads the catalog
// stops here, so it cannot ship.
[[noreturn]] void BadCatalog(absl::string_view line, absl::string_view why) {
  std::fprintf(stderr, "rule_catalog.cc: kCatalogDocument: %s: \"%.*s\"\n",
               std::string(why).c_str(), static_cast<int>(line.size()), line.data());
  std::abort();
}

// The document's logical lines: comments and blank lines dropped, each
// continuation joined to its line.
std::deque<std::string> LogicalLines(absl::string_view document) {
  std::deque<std::string> lines;
  for (absl::string_view line : absl::StrSplit(document, '\n')) {
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    if (absl::ConsumePrefix(&line, "  ")) {
      if (lines.empty()) BadCatalog(line, "a continuation with no line above");
      absl::StrAppend(&lines.back(), " ", line);
    } else {
      lines.emplace_back(line);
    }
  }
  return lines;
}

// The value of `line`, which must read "<label>: <value>".
absl::string_view Field(absl::string_view line, absl::string_view label) {
  if (!absl::ConsumePrefix(&line, label) || !absl::ConsumePrefix(&line, ": ") || line.empty()) {
    BadCatalog(line, absl::StrCat("expected '", label, ": <text>'"));
  }
  return line;
}

RuleKind KindNamed(absl::string_view word) {
  if (word == "debug") return RuleKind::kDebug;
  if (word == "profiler") return RuleKind::kProfiler;
  BadCatalog(word, "the kind must be 'debug' or 'profiler'");
}

// The rules of kCatalogDocument. The texts live as long as the process.
const std::vector<BuiltinRuleInfo>& Catalog() {
  static const auto* const rules = [] {
    auto* texts = new std::deque<std::string>(LogicalLines(kCatalogDocument));
    if (texts->size() % 3 != 0) BadCatalog("", "every rule needs a name, checks and suggestion");
    auto* parsed = new std::vector<BuiltinRuleInfo>;
    for (size_t i = 0; i < texts->size(); i += 3) {
      const absl::string_view head = (*texts)[i];
      const size_t colon = head.find(": ");
      if (colon == absl::string_view::npos) BadCatalog(head, "expected '<Name>: <kind>'");
      parsed->push_back({.name = head.substr(0, colon),
                         .kind = KindNamed(head.substr(colon + 2)),
                         .checks = Field((*texts)[i + 1], "checks"),
                         .suggestion = Field((*texts)[i + 2], "suggestion")});
    }
    return parsed;
  }();
  return *rules;
}

}  // namespace

std::span<const BuiltinRuleInfo> BuiltinRules() { return Catalog(); }

const BuiltinRuleInfo* FindBuiltinRule(absl::string_view name) {
  for (const BuiltinRuleInfo& rule : Catalog()) {
    if (rule.name == name) return &rule;
  }
  return nullptr;
}

bool IsBuiltinRuleEvaluatorImage(absl::string_view image) {
  if (image == "builtin") return true;
  // "<registry>/sagemaker-debugger-rules:<tag>" (or without a tag).
  const size_t slash = image.rfind('/');
  if (slash == absl::string_view::npos) return false;
  absl::string_view repo = image.substr(slash + 1);
  const size_t colon = repo.find(':');
  if (colon != absl::string_view::npos) repo = repo.substr(0, colon);
  return repo == "sagemaker-debugger-rules";
}

}  // namespace debugplane::core
