// What rules see of a training trial: steps of decoded tensors.

#ifndef DEBUGPLANE_RULES_ENGINE_SMDEBUG_STEP_H_
#define DEBUGPLANE_RULES_ENGINE_SMDEBUG_STEP_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rules_engine/smdebug/tensor_values.h"

namespace debugplane::rules_engine {

class PythonRegex;

// smdebug's modes; the values are those of the `mode` plugin data.
enum class Mode { kTrain = 1, kEval = 2, kPredict = 3, kGlobal = 4 };

// "TRAIN", "EVAL", "PREDICT", "GLOBAL".
absl::string_view ModeName(Mode mode);

// Facts about a tensor's values that several rules need, found by the
// decoder in the pass that converts them (the rules then skip a pass of their
// own over every tensor). Exact: the same answers as scanning the values.
// (At namespace scope: clang cannot use a nested class's default member
// initializers, for std::optional::emplace, before the enclosing class ends.)
struct TensorValueFacts {
  bool all_finite = true;  // No NaN and no infinity.
  int64_t zeros = 0;       // Values equal to 0 (either sign).
};

// A tensor logged as its histogram (TensorBoard's HistogramProto, or TF2's
// [k, 3] histogram tensor) instead of its elements: what rules can still
// compute from it.
struct HistogramStats {
  double min = 0;
  double max = 0;
  double num = 0;  // Values counted.
  double sum = 0;
  double sum_squares = 0;
  // False for TF2's [k, 3] form, which keeps only bucket edges and counts:
  // sum and sum_squares are then estimated from the bucket centres, and min
  // and max are the outer edges of the non-empty buckets.
  bool exact_moments = true;
  // Bucket i counts the values in (bucket_limit[i-1], bucket_limit[i]]
  // (bucket 0 from -infinity; HistogramProto), same sizes.
  std::vector<double> bucket_limit;
  std::vector<double> bucket;
};

// One decoded tensor of one worker at one step.
struct Tensor {
  std::string name;    // e.g. "gradient/Sequential_fc1.weight".
  std::string worker;  // e.g. "worker_0".
  int dtype = 0;       // TensorFlow DataType number (FLOAT=1, DOUBLE=2, ...).
  std::vector<int64_t> shape;
  // The elements in C order, read as doubles (bool -> 0/1; half and
  // bfloat16 widened) where they lie: a decoded tensor_content is a view of
  // the buffer its record was read into (TensorValues). Empty for a tensor
  // saved without values.
  TensorValues values;
  // The elements of a STRING tensor (dtype 7), in C order (e.g. the XGBoost
  // hook's "hyperparameters/objective": {"binary:logistic"}); empty for
  // other dtypes and for a string tensor saved without values.
  std::vector<std::string> strings;

  using ValueFacts = TensorValueFacts;
  // Facts about `values` (TensorValueFacts). Set by the decoder (for the dtypes whose conversion
  // finds them) and unset for a Tensor built otherwise. Whoever changes `values` of a decoded
  // Tensor must reset it.
  std::optional<ValueFacts> facts;

  // Set for a tensor logged as a histogram (then `values` is empty and
  // `shape` is {}): rules that can judge a histogram read it.
  std::optional<HistogramStats> histogram;
};

// Everything saved at one global step, by all workers, with only the
// tensors that were asked for.
struct Step {
  int64_t global_step = 0;
  Mode mode = Mode::kGlobal;
  int64_t mode_step = 0;
  std::vector<Tensor> tensors;  // Ordered by (name, worker).
  // When the step arrived: the latest modification time of its workers'
  // index files (smdebug writes a step's index file after its events), as
  // the store listed them; InfinitePast when the store does not say.
  absl::Time written = absl::InfinitePast();
  // Every tensor the step's index files name, sorted and unique; filled only
  // by a TrialReader told to (TrialReader::ListSavedTensors).
  std::vector<std::string> saved_tensors;

  // The tensor named `name` of the first worker that has it, or nullptr.
  const Tensor* Find(absl::string_view name) const;
};

// One collection of the trial's collections file.
struct Collection {
  std::string name;
  std::vector<std::string> include_regex;
  std::vector<std::string> tensor_names;
};

// A number unique to each object, copies included: caches of answers about
// one object (see TrialInfo::instance) must not be reused for another that
// happens to live at the same address later.
class InstanceId {
 public:
  InstanceId() : value_(Next()) {}
  InstanceId(const InstanceId&) : value_(Next()) {}
  InstanceId& operator=(const InstanceId&) {
    value_ = Next();
    return *this;
  }
  uint64_t value() const { return value_; }

 private:
  static uint64_t Next();
  uint64_t value_;
};

// What the trial says about itself (collections file, workers).
struct TrialInfo {
  std::map<std::string, Collection> collections;  // By name.
  int num_workers = 1;
  std::vector<std::string> workers;  // Seen so far, sorted.

  // True if `tensor` is listed in collection `name` or matches one of its
  // include_regex patterns with Python's re.search (rules_engine/
  // python_regex.h: RE2, plus one negative lookahead as in smdebug's
  // "^(?!gradient).*bias" and "[Ll]oss_(?!input).*output"). A
  // pattern RE2 refuses matches nothing; it is logged once per trial and
  // listed by CollectionPatternErrors().
  // Answers are remembered per (collection, tensor): rules ask at every step.
  // Not thread-safe (one evaluation uses a TrialInfo at a time).
  bool InCollection(absl::string_view name, absl::string_view tensor) const;

  // One line per include_regex pattern of `collections` that cannot be
  // used, e.g. "collection 'weights': include_regex '(?<=x)w' cannot be used
  // (it matches nothing): invalid perl operator: (?<= ...", for messages
  // that explain why a rule found no tensors. Empty when all compile.
  std::vector<std::string> CollectionPatternErrors() const;

  // Identifies this object; with collections.size(), the key of caches that
  // remember answers about the trial (rules ask about the same tensor names
  // at every step). `collections` is filled once (the collections file).
  uint64_t instance() const { return instance_.value(); }

 private:
  // The compiled `pattern` of `collection`, or null when it cannot be used.
  std::shared_ptr<const PythonRegex> IncludeRegex(absl::string_view collection,
                                                  const std::string& pattern) const;

  // collection -> tensor -> member; cleared when `collections` changes size.
  // Looked up with string_views: no allocation when the answer is known.
  mutable absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, bool>> membership_;
  mutable size_t membership_collections_ = 0;
  // include_regex patterns found unusable (see InCollection).
  mutable absl::flat_hash_set<std::string> refused_include_regexes_;
  InstanceId instance_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SMDEBUG_STEP_H_
