// PyTorchTraceReader and FrameworkTimelineReader's traces through a local
// store: traces found anywhere under the roots as they appear, gzip'd ones,
// a file still being written, one cut short for good, one that is no trace,
// the node from framework/pytorch/<node>/, several processes.

#include "rules_engine/profiler/pytorch_trace_reader.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rules_engine/profiler/framework_timeline_reader.h"
#include "tests/rules_engine/local_store.h"
#include "tests/rules_engine/pytorch_trace_writer.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::rules_engine {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;
using ::testing::HasSubstr;
using testing::Local;
using testing::StepsOf;
using testing::SyntheticTrace;
using testing::SyntheticTraceOptions;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

void WriteGzip(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  gzclose(f);
}

std::vector<int64_t> StepNumbers(const std::vector<FrameworkEvent>& events) {
  std::vector<int64_t> steps;
  for (const FrameworkEvent& e : events) {
    if (e.name == "Step:ModeKeys.TRAIN") steps.push_back(e.step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

TEST(PyTorchTraceReaderTest, FindsTracesAnywhereAsTheyAppearGzipToo) {
  ScopedTempDir dir;
  const fs::path profiler = dir.path() / "profiler";
  const fs::path tb = dir.path() / "tb";
  fs::create_directories(profiler / "system/incremental");
  fs::create_directories(tb);
  PyTorchTraceReader reader({Local(profiler.string()), Local(tb.string())});
  EXPECT_TRUE(reader.ReadNew().empty());
  EXPECT_EQ(reader.Summary(), "");

  Write(profiler / "framework/pytorch/algo-2/h_10.1795819707000000000.pt.trace.json",
        SyntheticTrace(SyntheticTraceOptions(), StepsOf(1, {2000, 2000})));
  SyntheticTraceOptions other;
  other.pid = 11;
  WriteGzip(tb / "run/h_11.1795819707000000000.pt.trace.json.gz",
            SyntheticTrace(other, StepsOf(5, {2000})));
  Write(tb / "run/notes.json", "{}");  // Not a trace name: not read.
  std::vector<FrameworkEvent> events = reader.ReadNew();
  EXPECT_EQ(StepNumbers(events), (std::vector<int64_t>{1, 2, 5}));
  std::set<std::pair<std::string, int64_t>> workers;
  for (const FrameworkEvent& e : events) {
    if (e.name == "Step:ModeKeys.TRAIN") workers.emplace(e.node_id, e.process);
  }
  EXPECT_EQ(workers, (std::set<std::pair<std::string, int64_t>>{{"algo-2", 4242}, {"algo-1", 11}}));
  EXPECT_TRUE(reader.errors().empty()) << reader.errors()[0];
  EXPECT_EQ(reader.Summary(),
            absl::StrCat("2 PyTorch traces, ", events.size(), " events, 3 steps"));
  // Read once.
  EXPECT_TRUE(reader.ReadNew().empty());
  EXPECT_EQ(reader.read_tally().objects, 2);
}

TEST(PyTorchTraceReaderTest, FileBeingWrittenIsReadOnceWholeCutShortOneAfterRetries) {
  ScopedTempDir dir;
  const fs::path trace = dir.path() / "a/h_1.1795819707000000000.pt.trace.json";
  const std::string text = SyntheticTrace(SyntheticTraceOptions(), StepsOf(1, {2000, 2000, 2000}));
  const size_t half = text.find("ProfilerStep#3");
  Write(trace, text.substr(0, half));
  PyTorchTraceReader reader({Local(dir.path().string())});
  EXPECT_TRUE(reader.ReadNew().empty());  // Not whole yet.
  Write(trace, text);
  EXPECT_EQ(StepNumbers(reader.ReadNew()), (std::vector<int64_t>{1, 2, 3}));

  const fs::path cut = dir.path() / "b/h_2.1795819707000000000.pt.trace.json";
  Write(cut, text.substr(0, half));
  for (int i = 0; i < kTraceRetries; ++i) {
    EXPECT_TRUE(reader.ReadNew().empty()) << i;
  }
  EXPECT_EQ(StepNumbers(reader.ReadNew()), (std::vector<int64_t>{1, 2}));
  ASSERT_EQ(reader.errors().size(), 1u);
  EXPECT_THAT(reader.errors()[0], HasSubstr("h_2.1795819707000000000.pt.trace.json: cut short"));
  EXPECT_TRUE(reader.ReadNew().empty());
}

TEST(PyTorchTraceReaderTest, NoTraceAndDamagedGzipAreReportedOnce) {
  ScopedTempDir dir;
  Write(dir.path() / "x.pt.trace.json", "<html>");
  Write(dir.path() / "y.pt.trace.json.gz", "not gzip at all");
  PyTorchTraceReader reader({Local(dir.path().string())});
  EXPECT_TRUE(reader.ReadNew().empty());
  ASSERT_EQ(reader.errors().size(), 2u);
  EXPECT_THAT(reader.errors()[0], HasSubstr("x.pt.trace.json: not a PyTorch profiler trace"));
  EXPECT_THAT(reader.errors()[1], HasSubstr("y.pt.trace.json.gz: not a valid gzip stream"));
  EXPECT_TRUE(reader.ReadNew().empty());
  EXPECT_EQ(reader.errors().size(), 2u);
}

TEST(PyTorchTraceReaderTest, FrameworkTimelineReaderCarriesTraces) {
  ScopedTempDir dir;
  Write(dir.path() / "prof/framework/pytorch/algo-1/h_3.1795819707000000000.pt.trace.json",
        SyntheticTrace(SyntheticTraceOptions(), StepsOf(200, std::vector<int64_t>(20, 2000))));
  FrameworkTimelineReader reader(Local((dir.path() / "prof").string()));
  const std::vector<FrameworkEvent> events = reader.ReadNew();
  EXPECT_EQ(StepNumbers(events).size(), 20u);
  EXPECT_EQ(StepNumbers(events).front(), 200);
  EXPECT_THAT(reader.Summary(), HasSubstr("1 PyTorch trace, "));
  EXPECT_THAT(reader.Summary(), HasSubstr(", 20 steps"));
  EXPECT_EQ(reader.read_tally().objects, 1);
}

TEST(PyTorchTraceReaderTest, TraceNodeIds) {
  EXPECT_EQ(TraceNodeId("job/prof/framework/pytorch/algo-3/h_1.1.pt.trace.json"), "algo-3");
  EXPECT_EQ(TraceNodeId("framework/pytorch/n/h.pt.trace.json"), "n");
  EXPECT_EQ(TraceNodeId("tb/h_1.1.pt.trace.json"), "algo-1");
  EXPECT_EQ(TraceNodeId("xframework/pytorch/n/h.pt.trace.json"), "algo-1");
}

}  // namespace
}  // namespace debugplane::rules_engine
