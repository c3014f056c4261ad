// Queries of one smdebug trial, or of a job's TensorBoard logs, for people
// and dashboards: which tensors it holds (smdebug's trial.tensor_names(),
// with collections, modes and steps; TensorBoard's tags) and one tensor's
// values over a step range (trial.tensor(n).value(step, mode)), reduced for
// charts (tensor_series.h). Read through an ObjectStore, so a local trial
// and an s3:// one are queried alike. No gRPC, no job manager: the caller
// resolves the job to a StoreLocation.

#ifndef DEBUGPLANE_RULES_ENGINE_QUERY_TRIAL_QUERY_H_
#define DEBUGPLANE_RULES_ENGINE_QUERY_TRIAL_QUERY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "objectstore/object_store.h"
#include "rules_engine/query/tensor_series.h"
#include "rules_engine/smdebug/step.h"
#include "rules_engine/tensorboard/tensorboard_reader.h"

namespace debugplane::rules_engine {

// How much one query may read, so that one query cannot hold a thread for
// long: past either bound it stops after the step it is on and says so
// (truncated, with the last step read).
struct QueryLimits {
  int64_t max_steps_read = 100000;
  absl::Duration max_time = absl::Seconds(20);
  std::function<absl::Time()> now = [] { return absl::Now(); };
  // Set by the caller to stop early (the client went away): the query then
  // returns CANCELLED. May be null.
  const std::atomic<bool>* cancelled = nullptr;
};

// TensorFlow's name of DataType number `dtype` ("float32", "int64", ...), or
// "dtype <n>" for one smdebug does not write.
std::string DtypeName(int dtype);

struct ModeSteps {
  int64_t first_step = 0, last_step = 0, step_count = 0;  // Global steps.
};

struct TensorListing {
  std::string name;
  std::vector<std::string> collections;  // Sorted.
  std::map<Mode, ModeSteps> modes;
  // As decoded at the first step read that has it; dtype 0: not known.
  int dtype = 0;
  std::vector<int64_t> shape;
  // TensorBoard tags only: logged as a histogram, and the tag without its
  // mode words (tensorboard::SeriesOfTag), which the tags of one quantity
  // in several modes share ("train/loss" and "eval/loss": "loss").
  bool histogram = false;
  std::string series;
};

struct CollectionListing {
  std::string name;
  std::vector<std::string> tensor_names;  // The trial's tensors in it, sorted.
  std::vector<std::string> include_regex;
};

struct TrialListing {
  std::string path;                            // As TrialSummary::path.
  std::vector<TensorListing> tensors;          // By name.
  std::vector<CollectionListing> collections;  // By name.
  int64_t step_count = 0;
  int64_t last_step = -1;
  bool training_ended = false;
  std::vector<std::string> workers;
  bool truncated = false;  // Stopped at QueryLimits after last_step.
};

// Lists the trial at `trial`. Every step's index files are read; each tensor
// is decoded once (its first step) for its dtype and shape. `training_ended`:
// the job says training is over (steps a worker skipped are then counted).
// Errors: FAILED_PRECONDITION when the trial holds no complete step yet,
// naming the path and what was there (no directory; no collections file; no
// step); CANCELLED; the reader's errors (DATA_LOSS, INVALID_ARGUMENT,
// the store's), which name the file.
absl::StatusOr<TrialListing> ListTrialTensors(const objectstore::StoreLocation& trial,
                                              bool training_ended, const QueryLimits& limits);

struct SeriesQuery {
  std::string tensor;
  int64_t start_step = 0;           // Global steps, inclusive.
  std::optional<int64_t> end_step;  // Unset: to the last step saved.
  std::optional<Mode> mode;         // Unset: every mode.
  size_t max_points = 2000;         // Per mode (BucketByMode). >= 1.
  std::string worker;               // Empty: the first worker that has it.
  bool training_ended = false;      // As ListTrialTensors'.
};

struct TensorSeries {
  std::string path;
  std::vector<SeriesPoint> points;  // Ascending steps.
  int dtype = 0;                    // Of the first point read; 0 if none.
  std::vector<int64_t> shape;
  bool bucketed = false;  // Some point stands for several steps.
  bool truncated = false;
  int64_t last_step_read = -1;  // The last global step read (any tensor, any mode).
};

// Reads `query.tensor` at the steps and mode asked for: only its records
// are decoded, and the steps before start_step are not read at all.
// Memory: the steps of one reader call (as many as keep the decoded values
// near 8 MiB, at least one), each reduced to its point and dropped; one
// SeriesPoint per step read is kept until the read ends (bucketing needs
// each mode's last step).
// A tensor the trial holds that has no step in the range gives no points.
// Errors: NOT_FOUND when the trial (read from its first step) never saved
// the tensor, naming at most 10 that it did; FAILED_PRECONDITION as
// ListTrialTensors when there is no step at all; CANCELLED; the reader's.
absl::StatusOr<TensorSeries> ReadTensorSeries(const objectstore::StoreLocation& trial,
                                              const SeriesQuery& query, const QueryLimits& limits);

// The same of TensorBoard logs (rules_engine/tensorboard/): every event
// file under `logs`, read with `options` (collections' include_regex). Tags
// are the tensor names; a scalar is a one-element tensor, a histogram has
// no shape (TensorListing::histogram). step_count counts global steps.
// Errors as ListTrialTensors' (FAILED_PRECONDITION when no value has been
// logged yet, naming the path and the event files found), and the reader's.
absl::StatusOr<TrialListing> ListTensorBoardTensors(const objectstore::StoreLocation& logs,
                                                    const tensorboard::TensorBoardOptions& options,
                                                    bool training_ended,
                                                    const QueryLimits& limits);

// ReadTensorSeries over TensorBoard logs: the values of one tag. Every
// record is read (event files have no index); steps before start_step are
// passed over. NOT_FOUND naming at most 10 tags the logs hold when the tag
// is not among them.
absl::StatusOr<TensorSeries> ReadTensorBoardSeries(const objectstore::StoreLocation& logs,
                                                   const tensorboard::TensorBoardOptions& options,
                                                   const SeriesQuery& query,
                                                   const QueryLimits& limits);

// One listing of a job's two trials (the smdebug trial and the TensorBoard
// logs), each tensor under its own name: tensors and collections by name
// (a collection of both holds the tensors of both), step_count and
// last_step the larger, workers of both, truncated if either was, path
// "<smdebug path> + <tensorboard path>".
TrialListing MergeListings(TrialListing smdebug, TrialListing tensorboard);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_QUERY_TRIAL_QUERY_H_
