#include "core/jobs/rule_catalog.h"

#include <array>

#include "absl/strings/match.h"

namespace debugplane::core {
namespace {

// One row per rule, in the order of the Debugger developer guide. The rows
// share a shape because they are a table, not a copy of logic.
constexpr std::array<BuiltinRuleInfo, 32> kBuiltinRules = {{
    // Profiler rules (debugger-built-in-rules.md, "Debugger ProfilerRule").
    {"ProfilerReport", RuleKind::kProfiler,
     "Runs every built-in profiler rule and renders a profiling report (HTML and JSON) of system "
     "usage, step durations and each rule's findings.",
     "Open the profiling report and act on the rules it lists as having found issues."},
    {"BatchSize", RuleKind::kProfiler,
     "Detects GPUs that are underused because the batch is too small: low GPU utilization and low "
     "GPU memory use while CPU usage is low too.",
     "Increase the batch size (scaling the learning rate), or move to a smaller instance type."},
    {"CPUBottleneck", RuleKind::kProfiler,
     "Counts the times CPU utilization is above a threshold while GPU utilization is low: the GPUs "
     "wait for the CPUs.",
     "Move preprocessing off the training path (more data loader workers, prefetching, "
     "preprocessing ahead of training) or use an instance with more CPU cores."},
    {"GPUMemoryIncrease", RuleKind::kProfiler,
     "Watches each GPU's memory utilization for a large increase over a moving window, which often "
     "precedes running out of GPU memory.",
     "Check for tensors kept across steps (accumulated losses or graphs), reduce the batch size, "
     "or use a GPU with more memory."},
    {"IOBottleneck", RuleKind::kProfiler,
     "Counts the times I/O wait is above a threshold while GPU utilization is low: the GPUs wait "
     "for data from storage.",
     "Pre-fetch and cache the data, use faster storage or a streaming input format, and read with "
     "more parallel workers."},
    {"LoadBalancing", RuleKind::kProfiler,
     "Compares the workload across the GPUs of a node and flags a large imbalance between them.",
     "Check how the data and the model are split across devices; a data-parallel library or "
     "balanced sharding evens the load."},
    {"LowGPUUtilization", RuleKind::kProfiler,
     "Flags GPUs whose utilization stays low (or swings widely) over a window of samples.",
     "Increase the batch size, remove data-loading stalls, or use an instance with fewer or "
     "smaller GPUs."},
    {"OverallSystemUsage", RuleKind::kProfiler,
     "Summarizes CPU, GPU, memory and I/O utilization per node (percentiles) over the whole job.",
     "Use the summary to size the instance: consistently low utilization means a smaller or "
     "cheaper instance would do."},
    {"MaxInitializationTime", RuleKind::kProfiler,
     "Measures the time from the start of training to the first step and flags it when it exceeds "
     "a threshold (minutes).",
     "Shorten start-up: download less data before the first step, stream the input, and check for "
     "slow model building or compilation."},
    {"OverallFrameworkMetrics", RuleKind::kProfiler,
     "Summarizes where framework time goes: initialization, training loop and finalization, "
     "forward and backward passes, data loading, and the busiest operations.",
     "Look at the largest phases and operations first; time outside steps or in data loading is "
     "overhead to reduce."},
    {"StepOutlier", RuleKind::kProfiler,
     "Flags steps whose duration is more than a number of standard deviations above the mean for "
     "their mode.",
     "Look at what runs during the slow steps (checkpointing, evaluation, data reloads or garbage "
     "collection) and move or spread that work."},
    // Debugging rules (debugger-built-in-rules.md, "Debugger Rule").
    {"CreateXgboostReport", RuleKind::kDebug,
     "Collects XGBoost training tensors (metrics, predictions, labels, feature importance, SHAP "
     "values, hyperparameters) and writes the XGBoost training report.",
     "Read the report: loss curves with overfitting hints, feature importance, and the confusion "
     "matrix and ROC curve (classification) or the residuals (regression).",
     "it reads XGBoost's metrics, predictions, labels and feature importance, which TensorBoard "
     "logs do not hold"},
    {"DeadRelu", RuleKind::kDebug,
     "Detects ReLU layers where too many activations are zero (dead units) for several steps in a "
     "row.",
     "Lower the learning rate, use a leaky ReLU or another activation, and check the weight "
     "initialization.",
     "it counts zero activations per unit in ReLU output tensors; a TensorBoard histogram gives no "
     "per-unit values"},
    {"ExplodingTensor", RuleKind::kDebug, "Detects tensors that contain NaN or infinite values.",
     "Lower the learning rate, clip gradients, check the input data for bad values, and look for "
     "divisions or logarithms of zero."},
    {"PoorWeightInitialization", RuleKind::kDebug,
     "Checks the variance of activations across layers and the change of loss in the first steps "
     "for signs of a poor weight initialization.",
     "Use an initialization suited to the activation (He for ReLU, Xavier for tanh) and normalize "
     "the inputs.",
     "it compares the variance of activations layer by layer and the loss in the first steps from "
     "whole activation tensors, which TensorBoard logs do not hold"},
    {"SaturatedActivation", RuleKind::kDebug,
     "Detects tanh and sigmoid layers whose activations sit mostly at their limits, where "
     "gradients vanish.",
     "Normalize the inputs, lower the learning rate, use batch normalization, or switch to "
     "ReLU-like activations.",
     "it counts tanh and sigmoid activations at their limits per unit; a TensorBoard histogram "
     "gives no per-unit values"},
    {"VanishingGradient", RuleKind::kDebug,
     "Flags gradients whose mean absolute value falls below a threshold: the layers before them "
     "stop learning.",
     "Use ReLU-like activations, residual connections or batch normalization, and a better weight "
     "initialization."},
    {"WeightUpdateRatio", RuleKind::kDebug,
     "Checks the ratio of each weight update to the weight itself; too large or too small ratios "
     "mean unstable or stalled training.",
     "Adjust the learning rate (down for large ratios, up for tiny ones) or use an adaptive "
     "optimizer.",
     "it divides each weight's update by the weight element by element; TensorBoard histograms "
     "give no elements"},
    {"AllZero", RuleKind::kDebug, "Detects tensors whose values are all (or mostly) zero.",
     "Check that the tensor is computed and saved as intended, and look for dead layers or inputs "
     "that are zero."},
    {"ClassImbalance", RuleKind::kDebug,
     "Measures how unevenly the classes appear in the labels and in the predictions.",
     "Resample or weight the classes, or collect more data for the rare ones.",
     "it reads the labels and predictions tensors, which TensorBoard logs do not hold"},
    {"LossNotDecreasing", RuleKind::kDebug,
     "Flags a loss that does not decrease by at least a given percentage over a number of steps.",
     "Check the learning rate and the data (shuffled, correctly labelled), and whether the model "
     "is too small or already converged."},
    {"Overfit", RuleKind::kDebug,
     "Compares training and validation loss and flags when validation loss rises while training "
     "loss keeps falling.",
     "Add regularization (dropout, weight decay), augment or add data, or stop earlier."},
    {"Overtraining", RuleKind::kDebug,
     "Flags a training or validation loss that no longer improves over many steps: training goes "
     "on without benefit.",
     "Stop earlier (early stopping) or lower the learning rate once the loss plateaus."},
    {"SimilarAcrossRuns", RuleKind::kDebug,
     "Compares tensors of this run with those of another run and flags steps where they differ.",
     "Check what changed between the runs: data, hyperparameters, random seeds or code."},
    {"StalledTrainingRule", RuleKind::kDebug,
     "Flags a training that wrote no new tensors for longer than a threshold: it may be stuck.",
     "Check the training logs for hangs (deadlocks, waits on data or on other hosts) and stop the "
     "job if it is stuck."},
    {"TensorVariance", RuleKind::kDebug,
     "Flags tensors whose variance gets very high or very low, a sign of exploding or vanishing "
     "values.",
     "Normalize inputs and layers, adjust the learning rate, and check the weight initialization."},
    {"UnchangedTensor", RuleKind::kDebug, "Detects tensors that stop changing across steps.",
     "Check that those parameters receive gradients (not frozen or detached) and that the learning "
     "rate is not too small."},
    {"CheckInputImages", RuleKind::kDebug,
     "Checks that input images are normalized: their mean near zero and standard deviation near "
     "one.",
     "Normalize the images (subtract the mean, divide by the standard deviation) before training.",
     "it reads the input image tensors, which TensorBoard logs do not hold (image summaries are "
     "encoded pictures)"},
    {"NLPSequenceRatio", RuleKind::kDebug,
     "Measures the share of padding or unknown tokens in input sequences.",
     "Bucket sequences by length to reduce padding, or extend the vocabulary to cut unknown "
     "tokens.",
     "it reads the input token sequences, which TensorBoard logs do not hold"},
    {"Confusion", RuleKind::kDebug,
     "Evaluates the confusion matrix of a classifier and flags when the diagonal or off-diagonal "
     "shares cross thresholds.",
     "Look at the classes that are confused with each other: more or cleaner data for them, or "
     "class weights.",
     "it reads the labels and predictions tensors, which TensorBoard logs do not hold"},
    {"FeatureImportanceOverweight", RuleKind::kDebug,
     "Flags XGBoost models where a few features carry too much of the importance.",
     "Check the dominant features for target leakage, and consider regularization or feature "
     "selection.",
     "it reads XGBoost's feature importance, which TensorBoard logs do not hold"},
    {"TreeDepth", RuleKind::kDebug,
     "Checks the depth of the XGBoost trees against the data size: trees too deep overfit.",
     "Lower max_depth or increase min_child_weight and regularization.",
     "it reads XGBoost's trees, which TensorBoard logs do not hold"},
}};

}  // namespace

std::span<const BuiltinRuleInfo> BuiltinRules() { return kBuiltinRules; }

const BuiltinRuleInfo* FindBuiltinRule(absl::string_view name) {
  for (const BuiltinRuleInfo& rule : kBuiltinRules) {
    if (rule.name == name) return &rule;
  }
  return nullptr;
}

absl::string_view TensorBoardGap(absl::string_view name) {
  const BuiltinRuleInfo* rule = FindBuiltinRule(name);
  return rule != nullptr && rule->kind == RuleKind::kDebug ? rule->tensorboard_gap
                                                           : absl::string_view();
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
