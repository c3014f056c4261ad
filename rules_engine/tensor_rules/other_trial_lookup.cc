#include "rules_engine/tensor_rules/other_trial_lookup.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rules_engine/tensorboard/tensorboard_reader.h"

namespace debugplane::rules_engine {
namespace {

// What one kept step costs besides its tensors (its map node), so that steps
// without a wanted tensor count against the bound too.
constexpr size_t kStepBytes = 64;

size_t BytesOf(const Tensor& t) {
  return sizeof(Tensor) + t.name.size() + t.worker.size() + t.shape.size() * sizeof(int64_t) +
         t.values.size() * sizeof(double);
}

// The trial at `location`: smdebug's when it has an index/ directory, else
// TensorBoard logs when it holds event files (read as a finished run: the
// other trial is a reference run, and TensorBoard files carry no end
// marker), else smdebug's (which waits for its files).
std::unique_ptr<TensorTrial> OpenOtherTrial(const objectstore::StoreLocation& location) {
  const objectstore::ObjectStore& store = *location.store;
  absl::StatusOr<objectstore::ListResult> index =
      store.ListAll({.prefix = location.DirectoryPrefix("index"), .max_keys = 1}, 1);
  if (index.ok() && !index->objects.empty()) return std::make_unique<TrialReader>(location);
  constexpr size_t kLookedAt = 1000;
  absl::StatusOr<objectstore::ListResult> all =
      store.ListAll({.prefix = location.DirectoryPrefix()}, kLookedAt);
  if (all.ok()) {
    for (const objectstore::ObjectEntry& object : all->objects) {
      const size_t slash = object.key.rfind('/');
      const absl::string_view base =
          absl::string_view(object.key).substr(slash == std::string::npos ? 0 : slash + 1);
      if (!absl::StartsWith(base, tensorboard::kEventFilePrefix)) continue;
      auto reader = std::make_unique<tensorboard::TensorBoardReader>(location);
      reader->SetTrainingEnded();
      return reader;
    }
  }
  return std::make_unique<TrialReader>(location);
}

}  // namespace

struct OtherTrialCache::Trial {
  explicit Trial(objectstore::StoreLocation location) : location(std::move(location)) {}

  absl::Mutex mu;
  const objectstore::StoreLocation location;
  std::unique_ptr<TensorTrial> reader ABSL_GUARDED_BY(mu);
  std::set<std::string> wanted ABSL_GUARDED_BY(mu);  // Names decoded when read.
  // The wanted tensors of the steps read and not dropped, by global step,
  // then name (first worker's). A step read without any wanted tensor is
  // kept empty: it tells "the step exists, the tensor does not".
  std::map<int64_t, std::map<std::string, Tensor>> steps ABSL_GUARDED_BY(mu);
  size_t bytes ABSL_GUARDED_BY(mu) = 0;
  int64_t last_read ABSL_GUARDED_BY(mu) = -1;     // Highest global step read.
  int64_t dropped_upto ABSL_GUARDED_BY(mu) = -1;  // Steps <= this were dropped.

  // Starts over from the trial's first step (with the current `wanted`).
  void Reset() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    reader = OpenOtherTrial(location);
    steps.clear();
    bytes = 0;
    last_read = -1;
    dropped_upto = -1;
  }

  // Drops the lowest steps while over `max_bytes`, keeping `keep`.
  void Shrink(size_t max_bytes, int64_t keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    while (bytes > max_bytes && !steps.empty()) {
      auto lowest = steps.begin();
      if (lowest->first == keep) {
        if (steps.size() == 1) return;
        lowest = std::next(lowest);
      }
      bytes -= kStepBytes;
      for (const auto& [name, t] : lowest->second) bytes -= BytesOf(t);
      dropped_upto = std::max(dropped_upto, lowest->first);
      steps.erase(lowest);
    }
  }
};

OtherTrialCache::OtherTrialCache() : OtherTrialCache(Options()) {}

OtherTrialCache::OtherTrialCache(Options options) : options_(options) {}

OtherTrialCache::~OtherTrialCache() = default;

OtherTrialCache::Trial& OtherTrialCache::TrialAt(const objectstore::StoreLocation& location) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Trial>& trial = trials_[{location.store.get(), location.prefix}];
  if (trial == nullptr) trial = std::make_unique<Trial>(location);
  return *trial;  // Never erased: the reference stays valid (and the store alive).
}

absl::StatusOr<Tensor> OtherTrialCache::Read(const objectstore::StoreLocation& location,
                                             int64_t global_step, const std::string& tensor) {
  Trial& trial = TrialAt(location);
  absl::MutexLock lock(&trial.mu);
  if (trial.reader == nullptr) trial.Reset();
  // A new name, or a step dropped from memory: the reader only goes
  // forward, so start over.
  if (trial.wanted.insert(tensor).second || global_step <= trial.dropped_upto) {
    trial.Reset();
  }
  const auto not_found = [&](absl::string_view why) {
    return absl::NotFoundError(absl::StrCat("trial ", location.Describe(), " has no tensor ",
                                            tensor, " at step ", global_step, ": ", why));
  };
  const auto wanted = [&trial](const std::string& name, const TrialInfo&) {
    return trial.wanted.count(name) > 0;
  };
  while (trial.last_read < global_step) {
    absl::StatusOr<std::vector<Step>> read =
        trial.reader->ReadNewSteps(wanted, ReadBudget{.max_steps = options_.steps_per_read});
    if (!read.ok()) return read.status();
    if (read->empty()) {
      return not_found(trial.reader->finished() ? "the trial ended before that step"
                                                : "the step is not written yet");
    }
    for (Step& step : *read) {
      std::map<std::string, Tensor>& kept = trial.steps[step.global_step];
      trial.bytes += kStepBytes;
      for (Tensor& t : step.tensors) {
        if (kept.count(t.name)) continue;  // Another worker's copy.
        // Kept as owned doubles: a view would keep its whole event file
        // buffer, which the bound below does not count.
        t.values = t.values.ToVector();
        trial.bytes += BytesOf(t);
        kept.emplace(t.name, std::move(t));
      }
      trial.last_read = step.global_step;
    }
    trial.Shrink(options_.max_bytes_per_trial, global_step);
  }
  auto step = trial.steps.find(global_step);
  if (step == trial.steps.end()) return not_found("the trial has no such step");
  auto found = step->second.find(tensor);
  if (found == step->second.end()) return not_found("the step does not hold it");
  return found->second;
}

OtherTrialLookup OtherTrialCache::AsLookup(
    std::function<absl::StatusOr<objectstore::StoreLocation>(const std::string& other_trial)>
        resolve) {
  return [this, resolve = std::move(resolve)](const std::string& other_trial, int64_t global_step,
                                              const std::string& tensor) -> absl::StatusOr<Tensor> {
    absl::StatusOr<objectstore::StoreLocation> location = resolve(other_trial);
    if (!location.ok()) return location.status();
    return Read(*location, global_step, tensor);
  };
}

size_t OtherTrialCache::BytesHeld(const objectstore::StoreLocation& location) {
  Trial& trial = TrialAt(location);
  absl::MutexLock lock(&trial.mu);
  return trial.bytes;
}

}  // namespace debugplane::rules_engine
