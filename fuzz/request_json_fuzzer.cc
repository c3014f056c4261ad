// libFuzzer target: the JSON values users put in requests and that
// debugplane parses: RuleParameters["action_json"] (core/jobs/rule_actions.h) and
// the ProfilingParameters entries (core/jobs/profiling_parameters.h).
//
// Build and run (see tfrecord_fuzzer.cc for the cmake line):
//   ninja -C /work/main/build-fuzz -j2 request_json_fuzzer
//   /work/main/build-fuzz/request_json_fuzzer -max_total_time=60 -max_len=4096
// The first byte picks the parser; the rest is the value.

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/jobs/profiling_parameters.h"
#include "core/jobs/rule_actions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view value(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto actions = debugplane::core::ParseActionJson(value);
      // Accepted actions are bounded and carry what their type needs.
      if (actions.ok() && (actions->empty() || actions->size() > 10)) abort();
      if (actions.ok()) {
        for (const auto& action : *actions) {
          if (action.type != debugplane::core::RuleActionType::kStopTraining &&
              action.target.empty()) {
            abort();
          }
        }
      }
      break;
    }
    case 1:
      (void)debugplane::core::CheckProfilingParameter("DetailedProfilingConfig", value);
      break;
    case 2:
      (void)debugplane::core::CheckProfilingParameter("PythonProfilingConfig", value);
      break;
    default: {
      // Stripping trailing commas never grows the text.
      if (debugplane::core::StripTrailingCommas(value).size() > value.size()) abort();
    }
  }
  return 0;
}
