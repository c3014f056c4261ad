#include "client/agent/profiler_module.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/agent/debugplane_profiler_py.h"
#include "client/agent/smdebug_config_files.h"

namespace debugplane::client {

absl::string_view ProfilerModuleText() {
  return absl::string_view(kDebugplaneProfilerPy, sizeof(kDebugplaneProfilerPy) - 1);
}

absl::Status WriteProfilerModule(const std::string& dir) {
  return WriteFileAtomically(absl::StrCat(dir, "/debugplane_profiler.py"),
                             std::string(ProfilerModuleText()));
}

std::string ProfilerTraceDir(const std::string& profiler_dir, const std::string& node_id) {
  return absl::StrCat(profiler_dir, "/framework/pytorch/", node_id);
}

void AddProfilerModuleEnvironment(std::vector<std::string>& environment,
                                  const std::string& module_dir, const std::string& trace_dir,
                                  const std::string& node_id) {
  std::string python_path = module_dir;
  std::vector<std::string> kept;
  for (std::string& entry : environment) {
    if (absl::StartsWith(entry, "PYTHONPATH=")) {
      const std::string old = entry.substr(sizeof("PYTHONPATH=") - 1);
      if (!old.empty()) absl::StrAppend(&python_path, ":", old);
      continue;
    }
    if (absl::StartsWith(entry, "DEBUGPLANE_TRACE_DIR=") ||
        absl::StartsWith(entry, "DEBUGPLANE_NODE_ID=")) {
      continue;
    }
    kept.push_back(std::move(entry));
  }
  kept.push_back(absl::StrCat("PYTHONPATH=", python_path));
  kept.push_back(absl::StrCat("DEBUGPLANE_TRACE_DIR=", trace_dir));
  kept.push_back(absl::StrCat("DEBUGPLANE_NODE_ID=", node_id));
  environment = std::move(kept);
}

}  // namespace debugplane::client
