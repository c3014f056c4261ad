// libFuzzer target: the framework timeline parser
// (rules_engine/profiler/framework_timeline_reader.h) on arbitrary bytes, as a whole
// file and split in two at a point the first byte picks (the way a file
// being written is read: its complete lines first, the rest later).
//
// Build and run (see tfrecord_fuzzer.cc for the cmake line):
//   ninja -C /work/main/build-fuzz -j2 framework_timeline_fuzzer
//   /work/main/build-fuzz/framework_timeline_fuzzer -max_total_time=60 -max_len=8192
//
// Checked beyond "no crash": errors are bounded, durations are never
// negative, and reading a prefix of the file never yields more events than
// the whole file.

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "rules_engine/profiler/framework_timeline_reader.h"

using debugplane::rules_engine::FrameworkEvent;
using debugplane::rules_engine::FrameworkTimelineFileResult;
using debugplane::rules_engine::FrameworkTimelineReader;
using debugplane::rules_engine::ParseFrameworkTimeline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const FrameworkTimelineFileResult whole =
      ParseFrameworkTimeline(text, "1_2-host_pythontimeline.json");
  if (whole.errors.size() > static_cast<size_t>(FrameworkTimelineReader::kMaxErrors)) abort();
  if (whole.malformed_events < static_cast<int64_t>(whole.errors.size())) abort();
  for (const FrameworkEvent& e : whole.events) {
    if (e.duration_us < 0 || e.node_id != "host") abort();
  }
  // A prefix cut at a line end: what the incremental reader sees mid-write.
  size_t cut = text.size() * data[0] / 255;
  const size_t nl = text.rfind('\n', cut);
  cut = nl == absl::string_view::npos ? 0 : nl + 1;
  const FrameworkTimelineFileResult prefix =
      ParseFrameworkTimeline(text.substr(0, cut), "1_2-host_pythontimeline.json");
  if (prefix.events.size() > whole.events.size() + prefix.malformed_events) abort();
  return 0;
}
