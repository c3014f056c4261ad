// debugplane_profiler (client/agent/debugplane_profiler.py), the Python
// module a PyTorch training loop profiles itself with: the agent carries its
// text (embedded at build time), writes it beside the job's configuration
// files at start-up and puts that directory on the training command's
// PYTHONPATH, so that nothing needs installing.
//
// The module reads profilerconfig.json ($SMPROFILER_CONFIG_PATH) at each
// step() and writes its traces to $DEBUGPLANE_TRACE_DIR,
// <profiler dir>/framework/pytorch/<node id>: where the server reads
// PyTorch traces (rules_engine/profiler/pytorch_trace_reader.h, which takes
// the node from that path) and the agent uploads the profiler output.

#ifndef DEBUGPLANE_CLIENT_AGENT_PROFILER_MODULE_H_
#define DEBUGPLANE_CLIENT_AGENT_PROFILER_MODULE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace debugplane::client {

// The module's text.
absl::string_view ProfilerModuleText();

// Writes <dir>/debugplane_profiler.py (atomically). Errors name the path.
absl::Status WriteProfilerModule(const std::string& dir);

// <profiler_dir>/framework/pytorch/<node_id>.
std::string ProfilerTraceDir(const std::string& profiler_dir, const std::string& node_id);

// Puts `module_dir` first on PYTHONPATH in `environment` ("NAME=value"
// entries; an existing PYTHONPATH is kept after it) and sets
// DEBUGPLANE_TRACE_DIR and DEBUGPLANE_NODE_ID.
void AddProfilerModuleEnvironment(std::vector<std::string>& environment,
                                  const std::string& module_dir, const std::string& trace_dir,
                                  const std::string& node_id);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_PROFILER_MODULE_H_
