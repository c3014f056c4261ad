// Incremental reader of smdebug framework timelines
// (<profiler_dir>/framework/pevents/<YYYYMMDDHH>/<end_us>_<pid>-<host>_pythontimeline.json
// and ..._model_timeline.json: Chrome trace-event JSON arrays, see
// docs/smdebug-format.md section 2), through an ObjectStore
// (objectstore/object_store.h): it never opens a file itself.
//
//   FrameworkTimelineReader reader(profiler_location);  // a StoreLocation
//   std::vector<FrameworkEvent> events = reader.ReadNew();  // again later
//
// Each ReadNew() returns the complete events ("ph": "X") added since the
// previous call, in file order (hour directories sorted, then file names
// sorted; within a file, as written), with start_us made absolute (the
// file's start_time_since_epoch_in_micros plus "ts") and category set from
// the file's process_name metadata in force for the event's pid.
//
// smdebug writes one array element per line and closes the array ("]")
// only when it rotates the file, so a file being written has no "]" and may
// end in half a line. Per file the reader remembers the byte offset after
// the last complete line (and the file's start time and process names): a
// half-written line is left for the next call. An element spread over
// several lines (pretty-printed JSON) is read once all its lines are there.
// A malformed element is skipped and counted with "file:line: what" (never
// aborts; "what" quotes at most a short escaped excerpt of the element). A
// missing directory is not an error (no data yet); Summary() says so. A
// directory or file the store refuses (a symbolic link) is not read, and
// Summary() names it.
//
// A file found shorter than what was consumed of it (truncated), or whose
// bytes just before that point differ from the ones consumed there
// (replaced: checked on each read of new bytes, with the kTailCheckBytes
// before the offset read again), is read again from its start: its state
// is forgotten and files_restarted() counts it. The events returned before
// from that file are then stale: a consumer that keeps events (the
// dashboard's InsightsStore) starts over with a new reader.
//
// Memory: files are read in chunks (kFrameworkTimelineChunkBytes), never
// whole (a timeline reaches hundreds of MB; a sparse file may claim 100 GB),
// each call at most up to the size the listing gave. One line may have at
// most kFrameworkTimelineLineLimit bytes: a longer one ends the reading of
// that file with an error naming it and the limit (limit_error()); the
// other files are read on. (An element over several lines is limited to
// 1 MiB too, and skipped as malformed.)

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_FRAMEWORK_TIMELINE_READER_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_FRAMEWORK_TIMELINE_READER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "objectstore/object_store.h"
#include "objectstore/read_tally.h"
#include "rules_engine/profiler/framework_event.h"
#include "rules_engine/profiler/hour_directories.h"
#include "rules_engine/profiler/pytorch_trace_reader.h"

namespace debugplane::rules_engine {

// See the file comment. smdebug writes an element per line, ~150 bytes.
inline constexpr objectstore::ReadLimit kFrameworkTimelineLineLimit{1 << 20,
                                                                    "one framework timeline line"};
inline constexpr uint64_t kFrameworkTimelineChunkBytes = 4 << 20;
// What ReadFrameworkTimelineFile (one file read whole) reads at most.
inline constexpr objectstore::ReadLimit kFrameworkTimelineFileLimit{
    64 << 20, "a framework timeline file read whole"};

namespace framework_timeline_internal {
// What parsing a timeline keeps between chunks of one file.
struct ParseState {
  int64_t lines = 0;  // Lines consumed so far.
  bool array_opened = false;
  bool closed = false;                           // The closing "]" was read.
  int64_t start_us = -1;                         // start_time_since_epoch_in_micros; -1 before it.
  std::map<int64_t, std::string> process_names;  // Trace pid -> process_name.
  std::string node_id;
};
}  // namespace framework_timeline_internal

// The node a timeline file belongs to, from its name: "vm" for
// "1795331438761047_11570-vm_pythontimeline.json" (<end_us>_<pid>-<host>),
// "0001" for "1590461127873222_0001_model_timeline.json" (<end_us>_<node>);
// empty if the name has neither shape.
std::string TimelineFileNodeId(absl::string_view file_name);

// What reading one whole file gave (for single files such as the upstream
// samples). A file cut short (no closing "]", half an element at the end)
// gives its complete elements; the rest is not counted as malformed.
struct FrameworkTimelineFileResult {
  bool opened = false;    // False: the file could not be read (see errors).
  bool complete = false;  // The closing "]" was read.
  std::vector<FrameworkEvent> events;
  int64_t malformed_events = 0;
  std::vector<std::string> errors;  // "path:line: what", at most kMaxErrors.
  // start_time_since_epoch_in_micros of the file; -1 if it has none.
  int64_t start_time_us = -1;
};
// Reads the object `key` of `store` whole, up to kFrameworkTimelineFileLimit
// (node_id from its name; "path" in errors is store.Describe(key)). Never
// fails: an unreadable (or larger) object gives opened == false and the
// store's error.
FrameworkTimelineFileResult ReadFrameworkTimelineFile(const objectstore::ObjectStore& store,
                                                      absl::string_view key);

// Parses `data` as the whole content of a timeline file named `file_name`
// (for tests and fuzzing; errors say "<file_name>:<line>: what").
FrameworkTimelineFileResult ParseFrameworkTimeline(absl::string_view data,
                                                   absl::string_view file_name);

// Not thread-safe (one reader per job, used by one thread at a time).
class FrameworkTimelineReader {
 public:
  // How many "file:line: what" messages are kept.
  static constexpr int kMaxErrors = 5;

  // `profiler_dir` holds framework/pevents/<hour>/... . PyTorch profiler
  // traces are read too (pytorch_trace_reader.h), from anywhere under
  // `profiler_dir` and `more_trace_roots` (TensorBoardOutputConfig's
  // S3OutputPath), after the timelines' events in each ReadNew(). Does no
  // I/O.
  explicit FrameworkTimelineReader(objectstore::StoreLocation profiler_dir,
                                   std::vector<objectstore::StoreLocation> more_trace_roots = {});

  // The complete events appended since the last call (see the file
  // comment). Never fails: unreadable files and malformed elements are
  // counted in errors() / malformed_events().
  std::vector<FrameworkEvent> ReadNew();

  // What was fetched from the store over all calls (a half-written last
  // line is fetched again with the rest of it), PyTorch traces included.
  objectstore::ReadTally read_tally() const {
    objectstore::ReadTally tally = read_;
    tally += traces_.read_tally();
    return tally;
  }
  // The PyTorch traces' reader (its counts).
  const PyTorchTraceReader& traces() const { return traces_; }
  // Totals over all calls (of the smdebug timelines; traces() has the
  // traces').
  int64_t events_read() const { return events_read_; }
  // Of events_read(), the step boundaries ("Step:ModeKeys.<MODE>").
  int64_t step_events_read() const { return step_events_read_; }
  int64_t malformed_events() const { return malformed_events_; }
  int64_t files_seen() const { return static_cast<int64_t>(files_.size()); }
  // Files whose closing "]" was read.
  int64_t files_complete() const;
  // Files read again from their start since they were truncated or
  // replaced (see the file comment), over all calls.
  int64_t files_restarted() const { return files_restarted_; }
  // The smallest start_time_since_epoch_in_micros of the files read so far
  // (when the profiler started: the job's training start as the timelines
  // know it); -1 before any.
  int64_t earliest_start_us() const { return earliest_start_us_; }
  // The first kMaxErrors problems,
  // "framework/pevents/<hour>/<file>:<line>: what" (also files and listings
  // the store refused, with its error, and the PyTorch traces' problems).
  const std::vector<std::string>& errors() const { return errors_; }
  // OK, or RESOURCE_EXHAUSTED for the first file found over a limit
  // (kFrameworkTimelineLineLimit), naming it and the limit: that file is
  // read no further (the rest are), so the data is known to be incomplete.
  const absl::Status& limit_error() const { return limit_error_; }
  // Whether <profiler_dir>/framework/pevents existed at the last ReadNew()
  // (true also when it is there but could not be listed).
  bool directory_exists() const { return listing_.directory_exists(); }
  // <profiler_dir>/framework/pevents, as a person finds it.
  const std::string& directory() const { return pevents_dir_; }
  // One line for status details, e.g. "4 files, 5760 events, 640 steps",
  // "no framework timeline yet: <dir> does not exist" or "framework
  // timelines cannot be read: <the store's error>"; with PyTorch traces,
  // their summary (after "; " when there are timelines too).
  std::string Summary() const;

 private:
  // What the reader keeps of a file between calls.
  struct FileState {
    bool fetched = false;     // Some bytes were (for the tally's distinct objects).
    uint64_t offset = 0;      // After the last consumed line.
    bool over_limit = false;  // A line over its limit: not read any further.
    framework_timeline_internal::ParseState parse;
    // The last bytes consumed (at most kTailCheckBytes, ending at offset):
    // read again with new bytes, they tell an appended file from a
    // replaced one.
    std::string tail;
  };
  static constexpr uint64_t kTailCheckBytes = 64;
  // Forgets what was read of `state`'s file (truncated or replaced).
  void Restart(const HourFile& file, FileState& state);
  // Reads the next chunk of `file` at state.offset into buffer_, with the
  // tail before it checked; false when the read failed (error added) or the
  // file was found replaced (state restarted: call again).
  bool ReadChunk(const HourFile& file, const std::string& shown, FileState& state,
                 absl::string_view* data, bool* restarted);
  void AddError(std::string message);
  void ReadFile(const HourFile& file, FileState& state, std::vector<FrameworkEvent>& out);

  objectstore::StoreLocation pevents_;      // <profiler_dir>/framework/pevents.
  std::string pevents_dir_;                 // pevents_.Describe().
  std::map<std::string, FileState> files_;  // Keyed by "<hour>/<file>".
  int64_t events_read_ = 0;
  int64_t step_events_read_ = 0;
  int64_t malformed_events_ = 0;
  int64_t files_restarted_ = 0;
  int64_t earliest_start_us_ = -1;
  std::vector<std::string> errors_;
  HourFileListing listing_;
  absl::Status limit_error_;  // See limit_error().
  objectstore::ReadTally read_;
  std::string buffer_;  // File bytes, reused across files and calls.
  PyTorchTraceReader traces_;
  size_t trace_errors_taken_ = 0;  // Of traces_.errors(), copied into errors_.
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_FRAMEWORK_TIMELINE_READER_H_
