// Finds and reads a job's PyTorch profiler traces (`*.pt.trace.json`,
// `*.pt.trace.json.gz`; pytorch_trace.h maps them) anywhere under its roots
// (ProfilerConfig.S3OutputPath and TensorBoardOutputConfig.S3OutputPath),
// local or s3://, through an ObjectStore, as they appear.
//
//   PyTorchTraceReader reader({profiler_dir, tensorboard_dir});
//   std::vector<FrameworkEvent> events = reader.ReadNew();  // again later
//
// A trace file is written whole when its profiling window ends, so each
// file is read once, whole (streamed in kTraceChunkBytes chunks, gunzipped
// as it comes for .gz, never held whole). A file that does not parse to its
// end yet (still being written, or cut short) is read again when a later
// ReadNew() finds it changed; once it was found the same size
// kTraceRetries times in a row it is given up on: its complete events are
// read and the error says it was cut short. A file that is no trace (not
// JSON) is reported and not read again.
//
// Node: a trace under ".../framework/pytorch/<node>/" (where
// debugplane_profiler writes: the agent's --node-id) belongs to <node>; any
// other trace (a user's tensorboard_trace_handler directory) to "algo-1",
// the agent's default node.
//
// Listing: every object under each root (recursively) on each ReadNew(),
// except the smdebug layout's system/ and framework/pevents/ subtrees; at
// most kTraceListLimit objects per root (more: an error says so and the
// rest is not searched).
//
// Not thread-safe (one reader per job, used by one thread at a time).

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_PYTORCH_TRACE_READER_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_PYTORCH_TRACE_READER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "objectstore/object_store.h"
#include "objectstore/read_tally.h"
#include "rules_engine/profiler/framework_event.h"

namespace debugplane::rules_engine {

inline constexpr uint64_t kTraceChunkBytes = 4 << 20;
inline constexpr int kTraceRetries = 3;
inline constexpr size_t kTraceListLimit = 100000;

// The node of a trace at `key` (see the file comment).
std::string TraceNodeId(absl::string_view key);

class PyTorchTraceReader {
 public:
  static constexpr size_t kMaxErrors = 5;

  // Does no I/O.
  explicit PyTorchTraceReader(std::vector<objectstore::StoreLocation> roots);

  // The events of the trace files read whole since the last call, in time
  // order per file. Never fails: problems go to errors().
  std::vector<FrameworkEvent> ReadNew();

  const objectstore::ReadTally& read_tally() const { return read_; }
  int64_t files_seen() const { return static_cast<int64_t>(files_.size()); }
  int64_t files_read() const { return files_read_; }
  int64_t events_read() const { return events_read_; }
  int64_t steps_read() const { return steps_read_; }
  // The first kMaxErrors problems: "<file>: what".
  const std::vector<std::string>& errors() const { return errors_; }
  // "2 PyTorch traces, 1234 events, 20 steps" (with malformed and the first
  // error), or "" when no trace file was found.
  std::string Summary() const;

 private:
  struct FileState {
    bool done = false;
    uint64_t size = 0;  // At the last attempt.
    int same_size_attempts = 0;
  };
  void AddError(std::string message);
  void ListRoot(const objectstore::StoreLocation& root, std::vector<objectstore::ObjectEntry>& out);
  // Reads `entry` whole; false when it did not parse to its end.
  bool ReadFile(const objectstore::StoreLocation& root, const objectstore::ObjectEntry& entry,
                bool give_up, std::vector<FrameworkEvent>& out);

  std::vector<objectstore::StoreLocation> roots_;
  std::map<std::string, FileState> files_;  // Keyed by "<root index>:<key>".
  int64_t files_read_ = 0, events_read_ = 0, steps_read_ = 0, malformed_ = 0;
  std::vector<std::string> errors_;
  objectstore::ReadTally read_;
  std::string chunk_, inflated_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_PYTORCH_TRACE_READER_H_
