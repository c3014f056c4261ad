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
#include "rules_engine/tensorboard/tag_naming.h"

namespace debugplane::rules_engine {
namespace {

// Steps per ReadNewSteps call: the limits and cancellation are checked
// between calls.
constexpr size_t kStepsPerRead = 256;
// What the decoded tensors of one ReadNewSteps call may hold, about: a
// series keeps only each step's reduction, so its read takes as few steps
// per call as keep the decoded values near this (see SeriesReadSize). 256
// steps of a 1M-element tensor were 2 GB at once, and the kernel's zeroing
// of those fresh pages was a third of the CPU.
constexpr size_t kDecodedBytesPerRead = 8 << 20;
// Tensor names an error lists.
constexpr size_t kNamesInErrors = 10;

// Reads the steps of `reader` and hands each to `on_step` (false: stop).
// Returns true if the read stopped at `limits` with steps left, false if it
// read everything there was or `on_step` stopped it.
// `steps_per_read` (null: kStepsPerRead) is read before each call, so
// `on_step` may change it as it learns how large the steps are.
absl::StatusOr<bool> ReadSteps(TensorTrial& reader, const TensorFilter& wanted,
                               const QueryLimits& limits,
                               absl::FunctionRef<bool(Step& step)> on_step,
                               const size_t* steps_per_read = nullptr) {
  const absl::Time deadline = limits.now() + limits.max_time;
  int64_t read = 0;
  while (true) {
    if (limits.cancelled != nullptr && limits.cancelled->load()) {
      return absl::CancelledError("the query was cancelled");
    }
    const auto left = static_cast<size_t>(std::max<int64_t>(1, limits.max_steps_read - read));
    const size_t batch = steps_per_read != nullptr ? *steps_per_read : kStepsPerRead;
    ReadBudget budget{
        .max_steps = std::min(batch, left), .deadline = deadline, .now = limits.now};
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

// How many steps each ReadNewSteps call of a series read takes, learnt from
// the steps read so far: as many as hold about kDecodedBytesPerRead of the
// query's tensor on average (a tensor saved every 100th step is read ~100
// steps per call, one saved at every step of 8 MB one step per call), but
// never more than 16 steps of the largest seen, should a sparse tensor
// become dense. Until the tensor shows up the size doubles with each step
// read, from 1: few calls (each walks the reader's pending steps) without
// guessing its size.
class SeriesReadSize {
 public:
  void Saw(const Step& step) {
    ++steps_;
    size_t bytes = 0;
    for (const Tensor& tensor : step.tensors) {
      bytes += tensor.values.size() * sizeof(double) + tensor.strings.size() * sizeof(std::string);
    }
    bytes_ += bytes;
    largest_ = std::max(largest_, bytes);
    if (bytes_ == 0) {
      steps_per_read_ = std::min(kStepsPerRead, steps_per_read_ * 2);
      return;
    }
    const double per_step = std::max(static_cast<double>(bytes_) / static_cast<double>(steps_),
                                     static_cast<double>(largest_) / 16);
    steps_per_read_ = static_cast<size_t>(std::clamp(
        static_cast<double>(kDecodedBytesPerRead) / per_step, 1.0, double{kStepsPerRead}));
  }
  const size_t* steps_per_read() const { return &steps_per_read_; }

 private:
  size_t steps_per_read_ = 1;  // One step first.
  uint64_t steps_ = 0, bytes_ = 0;
  size_t largest_ = 0;
};

// The query's tensor in `step` (its mode and worker, if asked for) as a
// point of the series; the first point also gives the series its dtype and
// shape.
void AddPointOf(const Step& step, const SeriesQuery& query, TensorSeries& series,
                std::vector<SeriesPoint>& points) {
  if (query.mode && step.mode != *query.mode) return;
  for (const Tensor& tensor : step.tensors) {
    if (tensor.name != query.tensor) continue;
    if (!query.worker.empty() && tensor.worker != query.worker) continue;
    if (points.empty()) {
      series.dtype = tensor.dtype;
      series.shape = tensor.shape;
    }
    points.push_back(ReduceTensor(tensor, step.global_step, step.mode, step.mode_step));
    return;  // Ordered by worker: the first that has it.
  }
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
  SeriesReadSize read_size;
  absl::StatusOr<bool> truncated = ReadSteps(
      reader, only_it, limits,
      [&](Step& step) {
        if (query.end_step && step.global_step > *query.end_step) return false;
        series.last_step_read = step.global_step;
        read_size.Saw(step);
        AddPointOf(step, query, series, points);
        return true;
      },
      read_size.steps_per_read());
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

namespace {

// FAILED_PRECONDITION: the logs hold no value yet; says what is there.
absl::Status NoTensorBoardData(const tensorboard::TensorBoardReader& reader) {
  const int64_t files = reader.tensorboard_summary().event_files;
  return absl::FailedPreconditionError(absl::StrCat(
      "no TensorBoard values logged yet: read ", reader.summary().path, ": ",
      files == 0 ? std::string("no event file (events.out.tfevents.*) there yet; the training's "
                               "SummaryWriter writes to DP_TENSORBOARD_DIR under the agent")
                 : absl::StrCat(files, " event files without a complete step of values")));
}

// Adds `step` to `listing` and the tensors it holds.
void ListTensorBoardStep(const Step& step, std::map<std::string, TensorListing>& tensors,
                         TrialListing& listing) {
  if (listing.step_count == 0 || step.global_step != listing.last_step) ++listing.step_count;
  listing.last_step = step.global_step;
  const std::string* previous = nullptr;  // Tensors come ordered by (name, worker).
  for (const Tensor& tensor : step.tensors) {
    if (previous != nullptr && *previous == tensor.name) continue;
    previous = &tensor.name;
    TensorListing& t = tensors[tensor.name];
    if (t.name.empty()) {
      t.name = tensor.name;
      t.dtype = tensor.dtype;
      t.shape = tensor.shape;
      t.histogram = tensor.histogram.has_value();
      t.series = tensorboard::SeriesOfTag(tensor.name);
    }
    CountStep(step, t.modes);
  }
}

}  // namespace

absl::StatusOr<TrialListing> ListTensorBoardTensors(const objectstore::StoreLocation& logs,
                                                    const tensorboard::TensorBoardOptions& options,
                                                    bool training_ended,
                                                    const QueryLimits& limits) {
  tensorboard::TensorBoardReader reader(logs, options);
  if (training_ended) reader.SetTrainingEnded();
  const TensorFilter every = [](const std::string&, const TrialInfo&) { return true; };
  std::map<std::string, TensorListing> tensors;
  TrialListing listing;
  absl::StatusOr<bool> truncated = ReadSteps(reader, every, limits, [&](Step& step) {
    ListTensorBoardStep(step, tensors, listing);
    return true;
  });
  if (!truncated.ok()) return truncated.status();
  if (listing.step_count == 0) return NoTensorBoardData(reader);
  listing.path = reader.summary().path;
  listing.truncated = *truncated;
  listing.training_ended = reader.summary().training_ended;
  listing.workers = reader.info().workers;
  const TrialInfo& info = reader.info();
  for (const auto& [name, collection] : info.collections) {
    CollectionListing c;
    c.name = name;
    c.include_regex = collection.include_regex;
    for (auto& [tensor_name, tensor] : tensors) {
      if (!info.InCollection(name, tensor_name)) continue;
      c.tensor_names.push_back(tensor_name);
      tensor.collections.push_back(name);
    }
    // The default collections TensorBoard logs may fill, only when they do.
    if (!c.tensor_names.empty() || !c.include_regex.empty()) {
      listing.collections.push_back(std::move(c));
    }
  }
  for (auto& [name, tensor] : tensors) listing.tensors.push_back(std::move(tensor));
  return listing;
}

absl::StatusOr<TensorSeries> ReadTensorBoardSeries(const objectstore::StoreLocation& logs,
                                                   const tensorboard::TensorBoardOptions& options,
                                                   const SeriesQuery& query,
                                                   const QueryLimits& limits) {
  tensorboard::TensorBoardReader reader(logs, options);
  if (query.training_ended) reader.SetTrainingEnded();
  // The tags seen, for NOT_FOUND: the filter is asked about every one.
  std::set<std::string> tags;
  bool seen = false;
  const TensorFilter only_it = [&](const std::string& name, const TrialInfo&) {
    if (name == query.tensor) seen = true;
    if (tags.size() <= kNamesInErrors) tags.insert(name);
    return name == query.tensor;
  };
  TensorSeries series;
  std::vector<SeriesPoint> points;
  int64_t steps = 0;
  absl::StatusOr<bool> truncated = ReadSteps(reader, only_it, limits, [&](Step& step) {
    ++steps;
    if (query.end_step && step.global_step > *query.end_step) return false;
    series.last_step_read = step.global_step;
    if (step.global_step < query.start_step) return true;
    AddPointOf(step, query, series, points);
    return true;
  });
  if (!truncated.ok()) return truncated.status();
  series.path = reader.summary().path;
  series.truncated = *truncated;
  if (points.empty() && steps == 0 && !seen) return NoTensorBoardData(reader);
  if (points.empty() && !seen && !*truncated) {
    return absl::NotFoundError(absl::StrCat(
        "tag ", base::QuoteForMessage(query.tensor, 60), " is not in the TensorBoard logs ",
        series.path, "; they hold ",
        ShownNames(std::vector<std::string>(tags.begin(), tags.end()))));
  }
  const size_t read = points.size();
  series.points = BucketByMode(std::move(points), query.max_points);
  series.bucketed = series.points.size() < read;
  return series;
}

TrialListing MergeListings(TrialListing smdebug, TrialListing tensorboard) {
  TrialListing merged = std::move(smdebug);
  merged.path = absl::StrCat(merged.path, " + ", tensorboard.path);
  std::map<std::string, TensorListing> tensors;
  for (TensorListing& t : merged.tensors) tensors.emplace(t.name, std::move(t));
  for (TensorListing& t : tensorboard.tensors) tensors.emplace(t.name, std::move(t));
  merged.tensors.clear();
  for (auto& [name, t] : tensors) merged.tensors.push_back(std::move(t));
  std::map<std::string, CollectionListing> collections;
  for (CollectionListing& c : merged.collections) collections.emplace(c.name, std::move(c));
  for (CollectionListing& c : tensorboard.collections) {
    auto [it, added] = collections.emplace(c.name, c);
    if (added) continue;
    std::set<std::string> names(it->second.tensor_names.begin(), it->second.tensor_names.end());
    names.insert(c.tensor_names.begin(), c.tensor_names.end());
    it->second.tensor_names.assign(names.begin(), names.end());
    it->second.include_regex.insert(it->second.include_regex.end(), c.include_regex.begin(),
                                    c.include_regex.end());
  }
  merged.collections.clear();
  for (auto& [name, c] : collections) merged.collections.push_back(std::move(c));
  merged.step_count = std::max(merged.step_count, tensorboard.step_count);
  merged.last_step = std::max(merged.last_step, tensorboard.last_step);
  merged.training_ended = merged.training_ended && tensorboard.training_ended;
  merged.workers.insert(merged.workers.end(), tensorboard.workers.begin(),
                        tensorboard.workers.end());
  merged.truncated = merged.truncated || tensorboard.truncated;
  return merged;
}

}  // namespace debugplane::rules_engine
