// One complete event ("ph": "X") of an smdebug framework timeline
// (<profiler_dir>/framework/pevents/<hour>/<end_us>_<pid>-<host>_pythontimeline.json,
// shared/reference/smdebug-format.md section 2), with its time made absolute.

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_FRAMEWORK_EVENT_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_FRAMEWORK_EVENT_H_

#include <cstdint>
#include <string>

namespace debugplane::rules_engine {

struct FrameworkEvent {
  // "Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL", "Step:ModeKeys.GLOBAL" for
  // step boundaries; module, operator or data-loader names otherwise.
  std::string name;
  // The process_name metadata in force for the event's pid, e.g.
  // "Forward-SubModuleInternal", "Step:ModeKeys.TRAIN"; empty if none.
  std::string category;
  // Microseconds since the epoch: the file's start_time_since_epoch_in_micros
  // plus the event's "ts".
  int64_t start_us = 0;
  int64_t duration_us = 0;  // "dur".
  // The file's start_time_since_epoch_in_micros: when the profiler started
  // (every rotated file of a run carries the same), -1 if the file has none.
  int64_t timeline_start_us = -1;
  // args.step_num (given as a string or a number), -1 when absent.
  int64_t step = -1;
  // The trace's "pid" (a track index, not an OS process) and args.pid (the
  // training process), 0 when absent.
  int64_t track = 0;
  int64_t process = 0;
  // The host part of the file name ("vm" in ..._11570-vm_pythontimeline.json).
  std::string node_id;
};

// Which step mode a step-boundary event is: "TRAIN", "EVAL", "GLOBAL",
// "PREDICT"; empty if `name` is not "Step:ModeKeys.<MODE>".
inline std::string StepEventMode(const std::string& name) {
  constexpr char kPrefix[] = "Step:ModeKeys.";
  constexpr size_t kPrefixLength = sizeof(kPrefix) - 1;
  if (name.compare(0, kPrefixLength, kPrefix) != 0) return "";
  return name.substr(kPrefixLength);
}

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_FRAMEWORK_EVENT_H_
