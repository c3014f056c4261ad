// libFuzzer target: the PyTorch profiler trace parser
// (rules_engine/profiler/pytorch_trace.h) on arbitrary bytes, fed whole and
// in two pieces cut where the first byte says (the parser streams: any cut
// of the bytes must read the same), with a small record budget so that the
// budget's path is taken too.
//
// Build and run:
//   scripts/fuzz.sh 60 pytorch_trace_fuzzer
//
// Checked beyond "no crash": the two feedings agree, errors are bounded,
// durations are never negative, every step event has a step number.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "rules_engine/profiler/pytorch_trace.h"

using debugplane::rules_engine::FrameworkEvent;
using debugplane::rules_engine::kMaxTraceErrors;
using debugplane::rules_engine::PyTorchTraceFile;
using debugplane::rules_engine::PyTorchTraceParser;
using debugplane::rules_engine::TraceFileInfoFromName;

namespace {
constexpr char kName[] = "host_7.1795819707000000000.pt.trace.json";
constexpr size_t kBudget = 64;

PyTorchTraceFile Parse(absl::string_view first, absl::string_view second) {
  PyTorchTraceParser parser(kName, kBudget);
  parser.Feed(first);
  parser.Feed(second);
  return parser.Finish(TraceFileInfoFromName(kName));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const PyTorchTraceFile whole = Parse(text, "");
  const size_t cut = text.size() * data[0] / 255;
  const PyTorchTraceFile split = Parse(text.substr(0, cut), text.substr(cut));
  if (whole.errors.size() > kMaxTraceErrors) abort();
  if (whole.events.size() != split.events.size() || whole.complete != split.complete ||
      whole.malformed_events != split.malformed_events) {
    abort();
  }
  for (size_t i = 0; i < whole.events.size(); ++i) {
    const FrameworkEvent& e = whole.events[i];
    if (e.duration_us < 0 || e.start_us != split.events[i].start_us) abort();
    if (e.name == "Step:ModeKeys.TRAIN" && e.step < 0) abort();
  }
  return 0;
}
