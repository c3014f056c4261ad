// PyTorch profiler traces (torch.profiler's Chrome-trace JSON, the
// `*.pt.trace.json` files of tensorboard_trace_handler or
// export_chrome_trace) read as a framework timeline: the FrameworkEvents
// every framework consumer reads (framework rules, ProfilerReport, the
// dashboard), so a PyTorch 2 job without smdebug has a framework view.
//
//   PyTorchTraceParser parser("vm_659.1795819707712812939.pt.trace.json");
//   while (more bytes) parser.Feed(chunk);       // in any cut
//   PyTorchTraceFile file = parser.Finish(info);  // the events
//
// Both forms of the format: Kineto's object ({"baseTimeNanoseconds": N,
// "traceEvents": [...], ...}: "ts" in microseconds after the base time) and
// the array of torch builds without Kineto ([{...}, ...]: "ts" after the
// profiler's start, no "cat", "pid" "CPU functions"). An array form carries
// no wall-clock time: debugplane_profiler writes its traces in the object
// form with baseTimeNanoseconds (client/agent/debugplane_profiler.py); for
// other array-form files the time in the file name
// (<worker>.<time>.pt.trace.json, the time the trace was written, in ms or
// ns) is taken as the end of its last event (TraceFileInfo).
//
// Mapping (of complete events, "ph": "X"):
//   ProfilerStep#N on the CPU     "Step:ModeKeys.TRAIN", step N (its GPU
//                                 mirror, cat gpu_user_annotation, is not
//                                 read);
//   enumerate(DataLoader)#...     category "DataLoader" (the dataloader phase);
//   autograd::engine::evaluate_function: ...
//                                 category "Backward"; the operators under
//                                 it are inside it and not listed again;
//   Optimizer.step#..., Optimizer.zero_grad#...
//                                 category "Optimizer";
//   other CPU operators           the outermost ones of their thread only
//                                 (nested ones are inside them): category
//                                 "Forward" when they start in a step
//                                 before its first backward event, "CPU"
//                                 otherwise;
//   GPU kernels, memcpy, memset   per stream, merged where they touch or
//                                 overlap: "GPU stream <tid>" intervals
//                                 numbered with the step they start in
//                                 (GPU busy time per step and stream);
//   cuda_runtime/driver, python_function, flows, metadata: not read.
// FrameworkEvent.process is the event's pid (the file name's pid where the
// pid is not a number: the array form), track its tid; node_id comes from
// TraceFileInfo.
//
// Memory (bounded, whatever the file's size): the bytes are scanned as they
// come, one event's text at a time (at most kTraceEventTextLimit bytes: a
// longer event is skipped and counted as malformed); of each event a
// TraceRecord of ~48 bytes is kept until Finish() maps them (events need
// not come in time order, and an operator's phase depends on later events).
// At most kTraceRecordBudget records are kept per file: past it operators
// and kernels are no longer kept (counted in operators_dropped and said in
// the errors), steps, data loading, backward and optimizer events still are
// up to twice the budget; then nothing more is kept. The default budget is
// 1.4M records (64 MiB of them; a trace of ~350 MB). The vector's growth and
// the mapped events come on top: a 237 MB synthetic trace (1.65M events)
// peaked at 155 MiB RSS (bench/pytorch_trace_bench.cc).
//
// Errors never abort: malformed events are counted ("file: event N: what",
// the first kMaxTraceErrors kept); text that is not a trace (not JSON at the
// top, a top-level value that is not an object or array) ends the parse
// (failed()).

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_PYTORCH_TRACE_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_PYTORCH_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "rules_engine/profiler/framework_event.h"

namespace debugplane::rules_engine {

inline constexpr size_t kTraceEventTextLimit = 1 << 20;
inline constexpr size_t kTraceRecordBudget = 1400000;
inline constexpr size_t kMaxTraceErrors = 5;

// Whether `name` is a PyTorch trace file's name: *.pt.trace.json or
// *.pt.trace.json.gz.
bool IsPyTorchTraceName(absl::string_view name);

// What the file's name and place say (the rest comes from its content).
struct TraceFileInfo {
  std::string node_id = "algo-1";
  // The pid of "<host>_<pid>.<time>.pt.trace.json", -1 when the name has
  // none.
  int64_t file_pid = -1;
  // The time of that name in microseconds since the epoch (a number of 13
  // digits is ms, of 19 ns), -1 when none.
  int64_t file_time_us = -1;
};
// TraceFileInfo from a file name (the last path component), node "algo-1".
TraceFileInfo TraceFileInfoFromName(absl::string_view file_name);

// One trace event as kept until Finish().
enum class TraceKind : uint8_t { kStep, kData, kBackward, kOptimizer, kOperator, kKernel };
struct TraceRecord {
  double ts = 0, dur = 0;  // Microseconds, as in the file.
  int64_t pid = 0, tid = 0;
  int64_t step = -1;  // kStep: N of ProfilerStep#N.
  uint32_t name = 0;  // Index into the parser's names.
  TraceKind kind = TraceKind::kOperator;
  bool pid_is_text = false;
};

struct PyTorchTraceFile {
  std::vector<FrameworkEvent> events;  // Sorted by start.
  int64_t steps = 0;
  int64_t malformed_events = 0;
  int64_t operators_dropped = 0;    // Past kTraceRecordBudget.
  std::vector<std::string> errors;  // At most kMaxTraceErrors.
  bool complete = false;            // The whole top-level value was read.
  bool has_base_time = false;       // baseTimeNanoseconds (else the name's time).
};

// Not thread-safe.
class PyTorchTraceParser {
 public:
  // `shown`: the file as messages name it. `record_budget`: see the file
  // comment (smaller in tests).
  explicit PyTorchTraceParser(std::string shown, size_t record_budget = kTraceRecordBudget);

  // The next bytes of the file. False once the text is known not to be a
  // trace (failed()); later calls do nothing.
  bool Feed(absl::string_view bytes);
  // The top-level value ended (the file is whole).
  bool complete() const { return top_closed_; }
  bool failed() const { return failed_; }
  // The events of the elements read so far (a file cut short gives those
  // it has; `complete` says whether it was whole). Call once.
  PyTorchTraceFile Finish(const TraceFileInfo& info);

 private:
  enum class Top { kUnknown, kObject, kArray };
  void Fail(std::string what);
  void AddError(std::string message);
  void OnByte(char c);
  // Takes the bytes from `p` on that need no decision (a string's body up
  // to its next quote or backslash; inside a nested value, the bytes up to
  // its next quote or bracket) in bulk, with OnByte's effect on them;
  // returns how many (0: `*p` needs OnByte).
  size_t TakeRun(const char* p, const char* end);
  // Inside an element being captured: takes its bytes from `p` up to and
  // including its closing bracket (or `end`, or the element's size limit)
  // in one pass and one append; returns how many.
  size_t CaptureRun(const char* p, const char* end);
  void Append(char c);  // To element_, up to its limit.
  void StartValueAtTop(char c);
  void EndElement();
  void EndScalar();
  void ParseElement(absl::string_view text);
  uint32_t Intern(absl::string_view name);

  std::string shown_;
  size_t record_budget_;
  Top top_ = Top::kUnknown;
  bool failed_ = false, top_closed_ = false;
  // The byte scanner's state.
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
  // Object form: the member being read at depth 1.
  bool expect_key_ = true;
  std::string key_;
  bool reading_key_ = false;
  int events_depth_ = -1;   // Depth of the traceEvents elements; -1 outside.
  bool capturing_ = false;  // Inside an element (or the base time's value).
  bool capturing_base_ = false;
  bool element_too_long_ = false;
  std::string element_;
  int64_t element_index_ = 0;
  // What was read.
  int64_t base_time_ns_ = -1;
  std::vector<TraceRecord> records_;
  std::vector<std::string> names_;
  absl::flat_hash_map<std::string, uint32_t> name_index_;
  int64_t malformed_ = 0, dropped_ = 0;
  std::vector<std::string> errors_;
};

// Parses `data` as a whole trace file named `file_name` (for tests, the
// fuzzer and single files): Feed + Finish with TraceFileInfoFromName.
PyTorchTraceFile ParsePyTorchTrace(absl::string_view data, absl::string_view file_name,
                                   size_t record_budget = kTraceRecordBudget);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_PYTORCH_TRACE_H_
