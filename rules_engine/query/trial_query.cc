#include "rules_engine/query/trial_query.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/message_text.h"
#include "rules_engine/smdebug/trial_reader.h"

namespace debugplane::rules_engine {
namespace {

// Steps per ReadNewSteps call: the limits and cancellation are checked
// between calls.
constexpr size_t kStepsPerRead = 256;
// Tensor names an error lists.
constexpr size_t kNamesInErrors = 10;

// Reads the steps of `reader` and hands each to `on_step` (false: stop).
// Returns true if the read stopped at `limits` with steps left, false if it
// read everything there was or `on_step` stopped it.
absl::StatusOr<bool> ReadSteps(TrialReader& reader, const TensorFilter& wanted,
                               const QueryLimits& limits,
                               absl::FunctionRef<bool(Step& step)> on_step) {
  const absl::Time deadline = limits.now() + limits.max_time;
  int64_t read = 0;
  while (true) {
    if (limits.cancelled != nullptr && limits.cancelled->load()) {
      return absl::CancelledError("the query was cancelled");
    }
    const auto left = static_cast<size_t>(std::max<int64_t>(1, limits.max_steps_read - read));
    ReadBudget budget{
        .max_steps = std::min(kStepsPerRead, left), .deadline = deadline, .now = limits.now};
    absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(wanted, budget);
    if (!steps.ok()) {
      return absl::Status(steps.status().code(), absl::StrCat("trial ", reader.summary().path, ": ",
                                                              steps.status().message()));
    }
    for (Step& step : *steps) {
      ++read;
      if (!on_step(step)) return false;
    }
    if (!reader.stopped_at_budget()) return false;
    if (read >= limits.max_steps_read || limits.now() >= deadline) return true;
  }
}

// FAILED_PRECONDITION: the trial has no complete step; says what is there.
absl::Status NoData(const TrialSummary& summary) {
  std::string what;
  if (!summary.exists) {
    what =
        "it does not exist (training has not saved its first step yet, or the hook writes "
        "elsewhere than DebugHookConfig.S3OutputPath)";
  } else if (!summary.has_collections) {
    what =
        "it has no collections file (collections/000000000/*_collections.json), which "
        "smdebug writes before the first step";
  } else {
    what =
        "it has a collections file but no complete step (an index/ and an events/ file of "
        "every worker)";
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no tensors saved yet: read ", summary.path, ": ", what));
}

std::string ShownNames(const std::vector<std::string>& names) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < names.size() && i < kNamesInErrors; ++i) {
    shown.push_back(base::QuoteForMessage(names[i], 60));
  }
  std::string list = absl::StrJoin(shown, ", ");
  if (names.size() > kNamesInErrors) {
    absl::StrAppend(&list, ", ... (", names.size(), " in all)");
  }
  return list;
}

void CountStep(const Step& step, std::map<Mode, ModeSteps>& modes) {
  ModeSteps& m = modes[step.mode];
  if (m.step_count == 0) m.first_step = step.global_step;
  m.last_step = step.global_step;
  ++m.step_count;
}

}  // namespace

std::string DtypeName(int dtype) {
  switch (dtype) {
    case 1:
      return "float32";
    case 2:
      return "float64";
    case 3:
      return "int32";
    case 4:
      return "uint8";
    case 5:
      return "int16";
    case 6:
      return "int8";
    case 7:
      return "string";
    case 8:
      return "complex64";
    case 9:
      return "int64";
    case 10:
      return "bool";
    case 14:
      return "bfloat16";
    case 17:
      return "uint16";
    case 18:
      return "complex128";
    case 19:
      return "float16";
    case 22:
      return "uint32";
    case 23:
      return "uint64";
    default:
      return absl::StrCat("dtype ", dtype);
  }
}

absl::StatusOr<TrialListing> ListTrialTensors(const objectstore::StoreLocation& trial,
                                              bool training_ended, const QueryLimits& limits) {
  TrialReader reader(trial);
  reader.ListSavedTensors();
  if (training_ended) reader.SetTrainingEnded();
  std::map<std::string, TensorListing> tensors;
  // Decoded once each, for dtype and shape: the filter asks only for those
  // not decoded yet (a batch of steps may decode one a few times).
  absl::flat_hash_set<std::string> described;
  const TensorFilter undescribed = [&](const std::string& name, const TrialInfo&) {
    return !described.contains(name);
  };
  TrialListing listing;
  absl::StatusOr<bool> truncated = ReadSteps(reader, undescribed, limits, [&](Step& step) {
    ++listing.step_count;
    listing.last_step = step.global_step;
    for (const std::string& name : step.saved_tensors) {
      TensorListing& t = tensors[name];
      if (t.name.empty()) t.name = name;
      CountStep(step, t.modes);
    }
    for (const Tensor& tensor : step.tensors) {
      if (!described.insert(tensor.name).second) continue;
      TensorListing& t = tensors[tensor.name];
      t.dtype = tensor.dtype;
      t.shape = tensor.shape;
    }
    return true;
  });
  if (!truncated.ok()) return truncated.status();
  const TrialSummary& summary = reader.summary();
  if (listing.step_count == 0) return NoData(summary);
  listing.path = summary.path;
  listing.truncated = *truncated;
  listing.training_ended = summary.training_ended;
  listing.workers = reader.info().workers;
  const TrialInfo& info = reader.info();
  for (const auto& [name, collection] : info.collections) {
    CollectionListing& c = listing.collections.emplace_back();
    c.name = name;
    c.include_regex = collection.include_regex;
    for (auto& [tensor_name, tensor] : tensors) {
      if (!info.InCollection(name, tensor_name)) continue;
      c.tensor_names.push_back(tensor_name);
      tensor.collections.push_back(name);
    }
  }
  for (auto& [name, tensor] : tensors) listing.tensors.push_back(std::move(tensor));
  return listing;
}

absl::StatusOr<TensorSeries> ReadTensorSeries(const objectstore::StoreLocation& trial,
                                              const SeriesQuery& query, const QueryLimits& limits) {
  TrialReader reader(trial);
  reader.StartAt(query.start_step);
  if (query.training_ended) reader.SetTrainingEnded();
  const TensorFilter only_it = [&](const std::string& name, const TrialInfo&) {
    return name == query.tensor;
  };
  TensorSeries series;
  std::vector<SeriesPoint> points;
  absl::StatusOr<bool> truncated = ReadSteps(reader, only_it, limits, [&](Step& step) {
    if (query.end_step && step.global_step > *query.end_step) return false;
    series.last_step_read = step.global_step;
    if (query.mode && step.mode != *query.mode) return true;
    for (const Tensor& tensor : step.tensors) {
      if (tensor.name != query.tensor) continue;
      if (!query.worker.empty() && tensor.worker != query.worker) continue;
      if (points.empty()) {
        series.dtype = tensor.dtype;
        series.shape = tensor.shape;
      }
      points.push_back(ReduceTensor(tensor, step.global_step, step.mode, step.mode_step));
      break;  // Ordered by worker: the first that has it.
    }
    return true;
  });
  if (!truncated.ok()) return truncated.status();
  series.path = reader.summary().path;
  series.truncated = *truncated;
  if (points.empty()) {
    // Nothing in the range: is the tensor in the trial at all? Read the
    // trial's names from its first step (index files only; no record is
    // decoded) until it shows up.
    TrialReader names_reader(trial);
    names_reader.ListSavedTensors();
    if (query.training_ended) names_reader.SetTrainingEnded();
    std::set<std::string> names;
    bool found = false;
    int64_t steps = 0;
    const TensorFilter none = [](const std::string&, const TrialInfo&) { return false; };
    absl::StatusOr<bool> scanned = ReadSteps(names_reader, none, limits, [&](Step& step) {
      ++steps;
      names.insert(step.saved_tensors.begin(), step.saved_tensors.end());
      found = names.count(query.tensor) > 0;
      return !found;
    });
    if (!scanned.ok()) return scanned.status();
    if (steps == 0) return NoData(names_reader.summary());
    if (!found && !*scanned) {
      return absl::NotFoundError(
          absl::StrCat("tensor ", base::QuoteForMessage(query.tensor, 60),
                       " is not in the trial ", series.path, "; it holds ",
                       ShownNames(std::vector<std::string>(names.begin(), names.end()))));
    }
  }
  const size_t read = points.size();
  series.points = BucketByMode(std::move(points), query.max_points);
  series.bucketed = series.points.size() < read;
  return series;
}

}  // namespace debugplane::rules_engine
