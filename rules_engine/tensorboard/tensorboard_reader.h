// Reads TensorBoard event files (`events.out.tfevents.*`, as torch's
// SummaryWriter, Lightning's TensorBoardLogger, Hugging Face's Trainer,
// Keras and tf.summary write them) as a tensor trial, incrementally while
// training writes them, through an ObjectStore (local or s3://, the seam
// the smdebug TrialReader uses).
//
// Layout. Every event file under the location, at any depth (Lightning's
// lightning_logs/version_N/, Hugging Face's runs/<date>_<host>/), is read.
// A file's worker is its directory relative to the location ("." for the
// location itself); files of a second host in one directory (the host is
// the name's part after the timestamp) are the worker "<dir>@<host>". Several
// files of one worker (a restart, a rotated file) are one series: a value
// at a step already returned is late and counted (late_records), never
// returned out of order; at a step not returned yet, the later file's value
// replaces the earlier one.
//
// Steps. An event carries (step, tags); the values of one global step,
// every worker's, are returned together as up to two Steps of that global
// step: first the TRAIN and GLOBAL tensors (mode TRAIN if it has a TRAIN
// tag, else GLOBAL), then the EVAL tensors (mode EVAL). mode_step is the
// global step. A step is returned once every live worker has written a
// later step (a worker is no longer live once another worker started after
// its last event: a restart into a new run directory), or once training has
// ended. Tags become tensor names (tag_naming.h gives modes and collections).
//
// Reads are incremental: each file is read from the end of its last complete
// record; a record still being written is never decoded (the next read goes
// on from its start). Once training has ended a torn last record is counted
// in TrialSummary::records_skipped.

#ifndef DEBUGPLANE_RULES_ENGINE_TENSORBOARD_TENSORBOARD_READER_H_
#define DEBUGPLANE_RULES_ENGINE_TENSORBOARD_TENSORBOARD_READER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "objectstore/object_store.h"
#include "rules_engine/smdebug/step.h"
#include "rules_engine/smdebug/tensor_trial.h"
#include "rules_engine/smdebug/trial_reader.h"

namespace debugplane::rules_engine::tensorboard {

// Bounds on hostile data (see trial_reader.h for the smdebug ones):
//   one event record  128 MiB (kEventRecordLimit: a record whose length
//                      field says more is RESOURCE_EXHAUSTED, never read)
//   one read           4 MiB of a file per unit of work (or one whole record,
//                      up to the record limit): a large file is read in pieces,
//                      and no further than the steps a call may return need
//   event files        kMaxEventFiles under the location
inline constexpr size_t kMaxEventFiles = 4096;
inline constexpr uint64_t kReadChunkBytes = 4 << 20;

// The file name TensorBoard writers give event files.
inline constexpr absl::string_view kEventFilePrefix = "events.out.tfevents.";

struct TensorBoardOptions {
  // DebugHookConfig.CollectionConfigurations[].CollectionParameters
  // .include_regex, by collection: a collection given here holds the tags
  // its patterns match (Python re.search, as for smdebug) instead of those
  // the tag naming puts in it.
  std::map<std::string, std::vector<std::string>> include_regex;
};

// What the reader found beyond TrialSummary.
struct TensorBoardSummary {
  int64_t event_files = 0;     // Event files found.
  int64_t records = 0;         // Complete records decoded.
  int64_t values = 0;          // Summary values read (scalars, histograms, tensors).
  int64_t histograms = 0;      // Of which histograms.
  int64_t skipped_values = 0;  // Text, image, audio and other non-numeric values.
  int64_t late_records = 0;    // Values at a step already returned (see above).
};

// Not thread-safe: one reader per evaluation, as TrialReader.
class TensorBoardReader : public TensorTrial {
 public:
  // Does no I/O: a missing location is not an error (training may not have
  // started).
  explicit TensorBoardReader(objectstore::StoreLocation location, TensorBoardOptions options = {});
  ~TensorBoardReader() override;

  // Steps completed since the last call (see above), within `budget`: a unit
  // of work is one piece of a file read and decoded (at most
  // kReadChunkBytes) or one step returned. Errors (the message names the
  // file relative to the location and the byte offset): DATA_LOSS for a CRC
  // mismatch or a record that is not an Event, INVALID_ARGUMENT for a
  // wanted value that does not decode, RESOURCE_EXHAUSTED for a record over its limit or
  // too many files, and the store's errors other than NOT_FOUND. After an
  // error the same error recurs. `wanted` is asked once per tag per call
  // (before any value of the tag is decoded; a value not wanted is skipped
  // by its length), so its answers must not change during a call.
  absl::StatusOr<std::vector<Step>> ReadNewSteps(const TensorFilter& wanted,
                                                 const ReadBudget& budget) override;
  absl::StatusOr<std::vector<Step>> ReadNewSteps(const TensorFilter& wanted);

  bool stopped_at_budget() const override;
  void SetTrainingEnded() override;
  bool finished() const override;
  int64_t newest_step_seen() const override;
  const TrialInfo& info() const override;
  const TrialSummary& summary() const override;
  const TensorBoardSummary& tensorboard_summary() const;

 private:
  struct State;
  struct File;
  // Lists every event file under the location (new ones, and the sizes of
  // those known). False when the location does not exist (yet).
  absl::StatusOr<bool> ListEventFiles();
  // Reads and decodes the next piece of `file`; false when nothing could be
  // taken (the file ends inside a record that is still being written).
  absl::StatusOr<bool> ReadPiece(File& file, const TensorFilter& wanted, bool ended);
  // Takes one decoded record of `file` into the pending steps.
  absl::Status TakeRecord(File& file, absl::string_view payload, uint64_t offset,
                          const TensorFilter& wanted);
  // Appends the ready pending steps to `out` within the budget; false when
  // it stopped at the budget.
  bool ReturnReady(std::vector<Step>& out, const ReadBudget& budget, size_t& units, bool ended);

  const objectstore::StoreLocation location_;
  std::unique_ptr<State> state_;
};

}  // namespace debugplane::rules_engine::tensorboard

#endif  // DEBUGPLANE_RULES_ENGINE_TENSORBOARD_TENSORBOARD_READER_H_
