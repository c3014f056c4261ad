// Reads an smdebug trial directory (docs/smdebug-format.md)
// incrementally while training writes it, through an ObjectStore
// (objectstore/object_store.h): listings under a prefix, whole and ranged
// reads. It never opens a file itself.

#ifndef DEBUGPLANE_RULES_ENGINE_SMDEBUG_TRIAL_READER_H_
#define DEBUGPLANE_RULES_ENGINE_SMDEBUG_TRIAL_READER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "objectstore/object_store.h"
#include "objectstore/read_tally.h"
#include "rules_engine/smdebug/smdebug_json.h"
#include "rules_engine/smdebug/step.h"
#include "rules_engine/smdebug/tensor_trial.h"

namespace debugplane::rules_engine {

// What the reader keeps of one file, at most (objectstore::ReadLimit); a
// file over its limit is an error naming it, its size and the limit
// (RESOURCE_EXHAUSTED), never an allocation of its size. smdebug's own files
// are far smaller: an index file lists a step's tensors in ~150 bytes each,
// a collections file a few KiB of regexes.
//   index JSON         16 MiB (over 100000 tensors in one step)
//   collections JSON    4 MiB
//   one event record  128 MiB (one tensor: 32M floats), read as the range
//                      the index gives, never the whole event file
// An event file is read whole (one read instead of one per tensor) only up
// to the end of its last indexed record, and only when that is at most
// kMaxEventFileReadBytes; otherwise record by record.
inline constexpr objectstore::ReadLimit kIndexFileLimit{16 << 20, "a tensor index file"};
inline constexpr objectstore::ReadLimit kCollectionsFileLimit{4 << 20, "a collections file"};
inline constexpr objectstore::ReadLimit kEventRecordLimit{128 << 20, "one event record"};
inline constexpr uint64_t kMaxEventFileReadBytes = 64 << 20;

// Which tensors to decode; the others are skipped using the index files
// without reading their records. Called with the tensor name and the trial
// info as known when the step is read.
// (TensorFilter is declared in tensor_trial.h.)

// How much one ReadNewSteps call may do, so that a caller sharing a thread
// between trials (the scheduler's turns) gets the thread back in time
// whatever is pending: a trial replayed from the start has every index file
// and every step pending at once.
//
// The work of a call is counted in units: one index file parsed, one step
// read (all its workers' records, decoded). Before each unit the call stops
// if it has done at least one unit and the budget is spent, so every call
// makes progress and overruns its deadline by at most one unit. A unit is
// never cut: a step is returned whole or not at all.
struct ReadBudget {
  // At most this many steps returned.
  size_t max_steps = SIZE_MAX;
  // No unit is started once now() has reached this.
  absl::Time deadline = absl::InfiniteFuture();
  // The caller's clock. REQUIRED when `deadline` is finite.
  std::function<absl::Time()> now;
};

// What the reader has seen, for error messages a person can act on
// ("No debugging data" with the cause).
struct TrialSummary {
  std::string path;              // The trial location read, as a person finds it.
  bool exists = false;           // The directory is there.
  bool has_collections = false;  // collections/ file parsed.
  int64_t steps_seen = 0;        // Complete steps found.
  int64_t last_global_step = -1;
  std::vector<std::string> tensor_names_seen;  // Sorted, at most 200.
  int64_t records_skipped = 0;                 // Corrupt records skipped (see ReadNewSteps).
  bool end_marker_seen = false;                // training_job_end.ts present.
  // Training ended as far as the reader is concerned (see finished()).
  bool training_ended = false;
  // What was fetched: collections, index and event files (a record of a
  // step that had to wait is fetched again; tensors not wanted are not).
  objectstore::ReadTally read;
};

// Not thread-safe: one reader per rule evaluation (or one shared under the
// caller's lock).
class TrialReader : public TensorTrial {
 public:
  // A reader of the trial under `trial` (a store and the trial's key
  // prefix). Does no I/O: a missing directory is not an error (training may
  // not have started).
  explicit TrialReader(objectstore::StoreLocation trial);

  // Returns the steps completed since the last call, in ascending global
  // step order, each read once: a step is complete when its index and event
  // files are there for all `num_workers` workers and every record it needs
  // is whole. A step some worker skipped is returned once a later step is
  // complete (smdebug writes each worker's steps in order), and every step
  // once training has ended (see finished()), with what is there. A
  // half-written last record is not an error: the step is returned by a
  // later call (or, once training has ended, without that record, counted in
  // records_skipped).
  //
  // Errors (the trial is unusable; the message names the file relative to
  // the trial directory, the byte offset and the tensor, and quotes no file
  // content beyond a short escaped excerpt): DATA_LOSS for a CRC mismatch or
  // a record that does not parse, INVALID_ARGUMENT for an unknown dtype or a
  // size that does not match the shape, RESOURCE_EXHAUSTED for a file or
  // record over its limit (above), and the store's errors other than
  // NOT_FOUND (e.g. PERMISSION_DENIED naming a symbolic link in the trial,
  // which is never followed). After an error the reader may be called
  // again; the same error recurs.
  absl::StatusOr<std::vector<Step>> ReadNewSteps(const TensorFilter& wanted);
  // The same, returning at most `max_steps` steps (the next call goes on
  // from there): bounds the memory a caller that keeps what it reads needs.
  absl::StatusOr<std::vector<Step>> ReadNewSteps(const TensorFilter& wanted, size_t max_steps);
  // The same within `budget` (see ReadBudget): returns the steps finished
  // within it. A call that stops at its budget keeps its place (the index
  // files parsed, the steps not returned) and sets stopped_at_budget(); the
  // next call continues from there before it lists the trial again, so a
  // backlog is read in bounded calls, each step once and in order, exactly
  // as one unbounded call would return it.
  absl::StatusOr<std::vector<Step>> ReadNewSteps(const TensorFilter& wanted,
                                                 const ReadBudget& budget) override;
  // True if the last ReadNewSteps call stopped at its budget (steps or time)
  // with work it had found left undone: call again without waiting for new
  // files. False after a call that read everything there was.
  bool stopped_at_budget() const override;

  // Tells the reader that training has ended: every training process has
  // exited (the job says so: the agent reported the command's exit, or the
  // job was stopped), so no file will be written any more. The next call is
  // the last complete read. Needed with several workers, where
  // training_job_end.ts only says that some worker ended. Sticky.
  // REQUIRES: the caller learned of the end before this call (so the
  // listings of the next read see every file training wrote).
  void SetTrainingEnded() override;

  // Skips the steps before `first_step`: they are neither listed (index/
  // directories and names before it are not read) nor returned. For queries
  // of a step range (rules_engine/query/).
  // REQUIRES: called before the first ReadNewSteps.
  void StartAt(int64_t first_step);

  // From now on every returned Step lists in saved_tensors the tensors its
  // index files name, wanted or not (ListTensors needs every name without
  // decoding any). Off by default: rules need only what they decode.
  void ListSavedTensors();

  // True once training has ended and every step was returned. Training has
  // ended when SetTrainingEnded was called, or when training_job_end.ts
  // appeared in a trial of one worker (`num_workers` 1, or no collections
  // file). With several workers every one of them writes the same
  // training_job_end.ts when it exits and smdebug writes no per-worker end,
  // so there the marker does not end the trial: steps missing a worker are
  // still waited for, until SetTrainingEnded.
  bool finished() const override;

  // The highest global step of any index file listed so far (returned or
  // still pending), -1 before any: how far training has written, as far as
  // this reader knows (evaluation lag is this minus the last step returned).
  int64_t newest_step_seen() const override;

  const TrialInfo& info() const override;
  const TrialSummary& summary() const override;

 private:
  struct State;
  struct PendingWorker;
  struct ReadPass;
  struct StepAssembly;
  struct EventListing;
  // Loads the collections file of some worker if one parses (num_workers).
  // Returns its parse error if none parses and `must_parse`, the storage's
  // errors; OK otherwise (loaded or not yet there).
  absl::Status LoadCollections(bool must_parse);
  // Lists the trial (its top level, collections, and index files after the
  // last returned step) into the pending steps. Returns false when there is
  // nothing to read yet (no directory, or no collections file while
  // training runs), the storage's errors.
  absl::StatusOr<bool> ListTrial();
  // Adds to the pending steps the index files listed after the last
  // returned step. Only the index/<prefix>/ directories that can hold such
  // steps are listed, and in them only the names after that step's.
  absl::Status ListNewIndexFiles();

  // The steps of ReadNewSteps after the listing, each a part of one call
  // (`pass`) over the pending steps:
  // Parses the index files not parsed yet and looks for the event files, in
  // step order, until the budget is spent. Returns the first step left
  // unparsed (INT64_MAX if none), the storage's errors.
  absl::StatusOr<int64_t> ParsePendingIndexes(ReadPass& pass);
  // Whether `worker`'s event file of `step` is there. Where Stat is a
  // request (StatIsARoundTrip: S3's HEAD), from a listing of events/ (one
  // per page of up to 1000 files, kept until the trial is listed again),
  // and by Stat only to confirm that a file missing from it is missing
  // before its step is read without it; elsewhere by Stat. The storage's
  // errors.
  absl::StatusOr<bool> EventFileExists(const ReadPass& pass, int64_t step,
                                       const std::string& worker);
  // Lists the event files from `first` on, as many as the pending steps
  // wait for (up to a page), into the state's listing. The storage's errors
  // but NOT_FOUND (no events/ directory: nothing listed there).
  absl::Status ListEventFilesFrom(int64_t first);
  // Reads and parses `worker`'s index file; a parse failure is kept in
  // `w` (reported when the step is due), the storage's errors returned.
  absl::Status ParseIndex(ReadPass& pass, const std::string& worker, PendingWorker& w);
  // Every worker's index and event file of a step are there.
  bool FullyPresent(const std::map<std::string, PendingWorker>& workers) const;
  // Appends to `out` the pending steps before `unparsed_from` that are
  // whole (or settled), in order, within the budget (sets
  // `stopped_at_budget` when it runs out). Returns the error that stopped
  // it (the step stays pending), OK otherwise.
  absl::Status ReturnReadySteps(ReadPass& pass, int64_t unparsed_from, std::vector<Step>& out,
                                bool& stopped_at_budget);
  // Reads the wanted records of every worker of `step` into `assembly`;
  // false if a record is still being written (wait), errors for corrupt or
  // oversized records, undecodable values and the storage's errors.
  absl::StatusOr<bool> AssembleStep(ReadPass& pass, int64_t step,
                                    std::map<std::string, PendingWorker>& workers,
                                    StepAssembly& assembly);
  absl::StatusOr<bool> ReadWorkerRecords(ReadPass& pass, int64_t step, const std::string& worker,
                                         PendingWorker& w, StepAssembly& assembly);
  // The index entries of `w` that `pass` wants (none if the event file will
  // never come); lists the saved tensors into `result` when asked to.
  absl::StatusOr<std::vector<IndexEntry*>> WantedRecords(ReadPass& pass,
                                                         const std::string& event_file,
                                                         PendingWorker& w, Step& result);
  // Parses and decodes the record `bytes` (which lie in `buffer`: the
  // tensor's values point into it) of `entry` into the step; false:
  // incomplete while training runs (wait).
  absl::StatusOr<bool> DecodeRecord(ReadPass& pass, absl::string_view bytes,
                                    const std::shared_ptr<const std::string>& buffer,
                                    const std::string& event_rel, const std::string& worker,
                                    IndexEntry& entry, StepAssembly& assembly);
  // Names the step's tensors and sorts them (and the saved tensors' list).
  static Step FinishStep(StepAssembly assembly);

  const objectstore::StoreLocation trial_;
  std::shared_ptr<State> state_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SMDEBUG_TRIAL_READER_H_
