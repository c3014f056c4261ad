// FrameworkTimelineReader and ReadFrameworkTimelineFile over the real
// PyTorch timelines of tests/data/profiler/framework (checked
// against an independent nlohmann::json reading of the same files), the
// upstream TensorFlow model timeline, files being appended, cut short,
// corrupt, pretty-printed and on one line.

#include "rules_engine/profiler/framework_timeline_reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "objectstore/local_object_store.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/rules_engine/local_store.h"

namespace debugplane::rules_engine {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;
using ::testing::HasSubstr;
using testing::Local;
using ::testing::Not;
using ::testing::StartsWith;

// One local file read whole through a store.
FrameworkTimelineFileResult ReadLocalTimelineFile(const std::string& path) {
  const objectstore::StoreLocation location = Local(path);
  return ReadFrameworkTimelineFile(*location.store, location.prefix);
}

const char kStepOutlier[] = DP_TEST_DATA_DIR "/profiler/framework/pytorch-step-outlier";
const char kHour[] = "2026112207";
const char kModelTimeline[] = DP_TEST_DATA_DIR
    "/profiler/upstream-samples/model_timeline_traces/framework/pevents/2020052602/"
    "1590461127873222_0001_model_timeline.json";

using EventTuple =
    std::tuple<std::string, std::string, int64_t, int64_t, int64_t, int64_t, int64_t, std::string>;
EventTuple AsTuple(const FrameworkEvent& e) {
  return {e.name, e.category, e.start_us, e.duration_us, e.step, e.track, e.process, e.node_id};
}
std::vector<EventTuple> AsTuples(const std::vector<FrameworkEvent>& events) {
  std::vector<EventTuple> out;
  for (const FrameworkEvent& e : events) out.push_back(AsTuple(e));
  return out;
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void WriteAll(const fs::path& path, const std::string& data, bool append = false) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  out << data;
}

std::vector<fs::path> FixtureFiles() {
  std::vector<fs::path> files;
  for (const auto& e :
       fs::directory_iterator(fs::path(kStepOutlier) / "framework" / "pevents" / kHour)) {
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The oracle: each file parsed whole by nlohmann, the format applied by hand.
std::vector<EventTuple> ExpectedFromDom(const std::vector<fs::path>& files,
                                        const std::string& node) {
  std::vector<EventTuple> out;
  for (const fs::path& f : files) {
    nlohmann::json array = nlohmann::json::parse(ReadAll(f));
    int64_t start = -1;
    std::map<int64_t, std::string> names;
    for (const nlohmann::json& e : array) {
      const int64_t pid = e.value("pid", 0);
      if (e["ph"] == "M") {
        const nlohmann::json& args = e["args"];
        if (start < 0 && args.contains("start_time_since_epoch_in_micros")) {
          start = args["start_time_since_epoch_in_micros"].get<int64_t>();
        }
        if (e["name"] == "process_name" && args.contains("name")) names[pid] = args["name"];
        continue;
      }
      int64_t step = -1, process = 0;
      if (e.contains("args")) {
        if (e["args"].contains("step_num"))
          step = std::stoll(e["args"]["step_num"].get<std::string>());
        process = e["args"].value("pid", 0);
      }
      out.emplace_back(e["name"].get<std::string>(), names.count(pid) ? names[pid] : "",
                       start + e["ts"].get<int64_t>(), e["dur"].get<int64_t>(), step, pid, process,
                       node);
    }
  }
  return out;
}

TEST(FrameworkTimelineReaderTest, FixtureParsesCompletelyAndMatchesNlohmann) {
  FrameworkTimelineReader reader(Local(kStepOutlier));
  std::vector<FrameworkEvent> events = reader.ReadNew();
  EXPECT_TRUE(reader.directory_exists());
  EXPECT_EQ(reader.malformed_events(), 0);
  EXPECT_THAT(reader.errors(), ::testing::IsEmpty());
  EXPECT_EQ(reader.files_seen(), 4);
  EXPECT_EQ(reader.files_complete(), 4);
  EXPECT_EQ(AsTuples(events), ExpectedFromDom(FixtureFiles(), "vm"));
  EXPECT_EQ(reader.events_read(), 5760);

  // 640 TRAIN steps, each step number once, in order.
  std::vector<int64_t> steps;
  for (const FrameworkEvent& e : events) {
    if (StepEventMode(e.name).empty()) continue;
    EXPECT_EQ(StepEventMode(e.name), "TRAIN");
    EXPECT_EQ(e.category, "Step:ModeKeys.TRAIN");
    EXPECT_EQ(e.track, 2);
    EXPECT_EQ(e.process, 11570);
    steps.push_back(e.step);
  }
  ASSERT_EQ(steps.size(), 640u);
  for (int64_t i = 0; i < 640; ++i) EXPECT_EQ(steps[i], i);
  EXPECT_EQ(reader.step_events_read(), 640);
  // The first step: the file's start time plus its "ts" (8488).
  auto first = std::find_if(events.begin(), events.end(), [](const FrameworkEvent& e) {
    return e.name == "Step:ModeKeys.TRAIN";
  });
  EXPECT_EQ(first->start_us, 1795331436525518 + 8488);
  EXPECT_EQ(first->duration_us, 6155);
  EXPECT_EQ(reader.earliest_start_us(), 1795331436525518);
  EXPECT_EQ(reader.Summary(), "4 files, 5760 events, 640 steps");

  // Nothing new: nothing returned.
  EXPECT_TRUE(reader.ReadNew().empty());
  EXPECT_EQ(reader.events_read(), 5760);
}

TEST(FrameworkTimelineReaderTest, MissingDirectoryIsNotAnError) {
  ScopedTempDir dir;
  FrameworkTimelineReader reader(Local((dir.path() / "nothing").string()));
  EXPECT_TRUE(reader.ReadNew().empty());
  EXPECT_FALSE(reader.directory_exists());
  EXPECT_THAT(reader.errors(), ::testing::IsEmpty());
  EXPECT_THAT(reader.Summary(), StartsWith("no framework timeline yet: "));
  EXPECT_THAT(reader.Summary(), HasSubstr("framework/pevents does not exist"));
}

// The fixture's files written progressively (odd chunk sizes, so lines and
// events are cut everywhere), read after each write: the same events as one
// read, none malformed, none early.
TEST(FrameworkTimelineReaderTest, AppendedFilesGiveTheSameEventsAsOneRead) {
  FrameworkTimelineReader whole(Local(kStepOutlier));
  const std::vector<EventTuple> expected = AsTuples(whole.ReadNew());

  for (size_t chunk : {4093u, 65537u}) {
    SCOPED_TRACE(chunk);
    ScopedTempDir dir;
    FrameworkTimelineReader reader(Local(dir.path().string()));
    std::vector<EventTuple> got;
    for (const fs::path& f : FixtureFiles()) {
      const std::string data = ReadAll(f);
      const fs::path target = dir.path() / "framework" / "pevents" / kHour / f.filename();
      for (size_t pos = 0; pos < data.size(); pos += chunk) {
        WriteAll(target, data.substr(pos, chunk), /*append=*/true);
        for (const FrameworkEvent& e : reader.ReadNew()) got.push_back(AsTuple(e));
        // Never ahead of what was written: only events of complete lines.
        ASSERT_LE(got.size(), expected.size());
      }
    }
    EXPECT_EQ(got, expected);
    EXPECT_EQ(reader.malformed_events(), 0) << reader.Summary();
    EXPECT_EQ(reader.files_complete(), 4);
  }
}

// A small timeline with every shape the reader handles, written one byte
// at a time.
TEST(FrameworkTimelineReaderTest, ByteByByteAppendsGiveTheSameEvents) {
  const std::string content =
      "[\n"
      "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
      "{\"start_time_since_epoch_in_micros\": 1000000}},\n"
      "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 3, \"args\": {\"name\": "
      "\"Step:ModeKeys.EVAL\"}},\n"
      "{\"name\": \"Step:ModeKeys.EVAL\", \"pid\": 3, \"ph\": \"X\", \"ts\": 10, \"dur\": 5, "
      "\"args\": {\"pid\": 7, \"step_num\": 4}},\n"
      "{\n  \"name\": \"multi\\\"line\",\n  \"ph\": \"X\",\n  \"ts\": 20,\n  \"dur\": 1,\n"
      "  \"args\": {\"list\": [1, {\"a\": 2}]}\n},\n"
      "{\"name\": \"a\", \"ph\": \"X\", \"ts\": 30, \"dur\": 2}, {\"name\": \"b\", \"ph\": \"X\", "
      "\"ts\": 31, \"dur\": 3, \"cat\": null, \"flag\": true}\n"
      "]";
  const FrameworkTimelineFileResult oneshot =
      ParseFrameworkTimeline(content, "1_9-host-a_pythontimeline.json");
  ASSERT_EQ(oneshot.malformed_events, 0) << oneshot.errors.front();
  ASSERT_EQ(oneshot.events.size(), 4u);
  EXPECT_TRUE(oneshot.complete);
  EXPECT_EQ(AsTuple(oneshot.events[0]),
            EventTuple("Step:ModeKeys.EVAL", "Step:ModeKeys.EVAL", 1000010, 5, 4, 3, 7, "host-a"));
  EXPECT_EQ(oneshot.events[1].name, "multi\"line");
  EXPECT_EQ(oneshot.events[3].name, "b");

  ScopedTempDir dir;
  const fs::path target =
      dir.path() / "framework" / "pevents" / kHour / "1_9-host-a_pythontimeline.json";
  FrameworkTimelineReader reader(Local(dir.path().string()));
  std::vector<EventTuple> got;
  for (char c : content) {
    WriteAll(target, std::string(1, c), /*append=*/true);
    for (const FrameworkEvent& e : reader.ReadNew()) got.push_back(AsTuple(e));
  }
  EXPECT_EQ(got, AsTuples(oneshot.events));
  EXPECT_EQ(reader.malformed_events(), 0) << reader.Summary();
  EXPECT_EQ(reader.files_complete(), 1);
}

TEST(FrameworkTimelineReaderTest, CutShortFileGivesItsCompleteEvents) {
  const fs::path source = FixtureFiles().front();
  const std::string data = ReadAll(source);
  // Cut in the middle of the 1000th line.
  size_t cut = 0;
  for (int i = 0; i < 1000; ++i) cut = data.find('\n', cut) + 1;
  cut += 30;
  const std::string head = data.substr(0, cut);

  // The lines before the cut, parsed as a complete array by nlohmann.
  std::string complete_part = head.substr(0, head.rfind('\n'));
  complete_part.pop_back();  // The last line's ','.
  ScopedTempDir dir;
  const fs::path closed = dir.path() / "closed" / source.filename();
  WriteAll(closed, complete_part + "\n]");
  const std::vector<EventTuple> expected = ExpectedFromDom({closed}, "vm");
  ASSERT_GT(expected.size(), 100u);

  const fs::path cut_file = dir.path() / "cut" / source.filename();
  WriteAll(cut_file, head);
  FrameworkTimelineFileResult r = ReadLocalTimelineFile(cut_file.string());
  EXPECT_TRUE(r.opened);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.malformed_events, 0);
  EXPECT_EQ(AsTuples(r.events), expected);
  EXPECT_EQ(r.start_time_us, 1795331436525518);

  // The reader: the same now, the rest once the file is finished.
  const fs::path in_dir = dir.path() / "job" / "framework" / "pevents" / kHour / source.filename();
  WriteAll(in_dir, head);
  FrameworkTimelineReader reader(Local((dir.path() / "job").string()));
  EXPECT_EQ(AsTuples(reader.ReadNew()), expected);
  EXPECT_EQ(reader.files_complete(), 0);
  WriteAll(in_dir, data.substr(cut), /*append=*/true);
  std::vector<EventTuple> all = expected;
  for (const FrameworkEvent& e : reader.ReadNew()) all.push_back(AsTuple(e));
  EXPECT_EQ(all, ExpectedFromDom({source}, "vm"));
  EXPECT_EQ(reader.files_complete(), 1);
  EXPECT_EQ(reader.malformed_events(), 0);
}

TEST(FrameworkTimelineReaderTest, CorruptEventsAreSkippedAndCountedWithFileAndLine) {
  const std::string content =
      "[\n"                                                                 // 1
      "{\"name\": \"X0\", \"ph\": \"X\", \"ts\": 1, \"dur\": 1},\n"         // 2
      "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "  // 3
      "{\"start_time_since_epoch_in_micros\": 5000}},\n"
      "{\"name\": \"good1\", \"ph\": \"X\", \"ts\": 1, \"dur\": 1},\n"              // 4
      "{\"name\": \"bad\", \"ph\": \"X\", \"ts\": \"abc\", \"dur\": 1},\n"          // 5
      "this is not json,\n"                                                         // 6
      "{\"name\": \"Step:ModeKeys.TRAIN\", \"ph\": \"X\", \"ts\": 2, \"dur\": 1, "  // 7
      "\"args\": {\"step_num\": \"seven\"}},\n"
      "{\"name\": \"nodur\", \"ph\": \"X\", \"ts\": 3},\n"               // 8
      "{\"name\": \"unterminated\", \"ph\": \"X\", \"ts\": 3,\n"         // 9
      "{\"name\": \"good2\", \"ph\": \"X\", \"ts\": 4, \"dur\": -1},\n"  // 10
      "{\"name\": \"good3\", \"ph\": \"X\", \"ts\": 5, \"dur\": 2, \"args\": {\"step_num\": "
      "3}},\n"                                                                   // 11
      "{\"ph\": \"X\", \"name\": \"trailing\", \"ts\": 6, \"dur\": 1} extra,\n"  // 12
      "]\n";
  ScopedTempDir dir;
  WriteAll(dir.path() / "framework" / "pevents" / kHour / "7_1-n_pythontimeline.json", content);
  FrameworkTimelineReader reader(Local(dir.path().string()));
  std::vector<FrameworkEvent> events = reader.ReadNew();
  std::vector<std::string> names;
  for (const FrameworkEvent& e : events) names.push_back(e.name);
  EXPECT_THAT(names, ::testing::ElementsAre("good1", "good3"));
  EXPECT_EQ(events[0].start_us, 5001);
  EXPECT_EQ(events[1].step, 3);
  // Lines 2 (before the start time), 5, 6, 7, 8, 9, 10 (negative dur), 12.
  EXPECT_EQ(reader.malformed_events(), 8);
  ASSERT_EQ(reader.errors().size(), static_cast<size_t>(FrameworkTimelineReader::kMaxErrors));
  const std::string prefix =
      absl::StrCat("framework/pevents/", kHour, "/7_1-n_pythontimeline.json:");
  EXPECT_THAT(reader.errors()[0], StartsWith(prefix + "2: complete event before any"));
  EXPECT_THAT(reader.errors()[1], StartsWith(prefix + "5: \"ts\" is not a number"));
  EXPECT_THAT(reader.errors()[2], StartsWith(prefix + "6: expected an event object"));
  EXPECT_THAT(reader.errors()[3], StartsWith(prefix + "7: args.step_num \"seven\" is not"));
  EXPECT_THAT(reader.errors()[4], StartsWith(prefix + "8: complete event without \"dur\""));
  EXPECT_THAT(reader.Summary(),
              HasSubstr("2 events, 0 steps, 8 malformed events skipped (first: "));
  EXPECT_EQ(reader.files_complete(), 1);

  // The whole-file helper reports the same, with the path.
  FrameworkTimelineFileResult r = ParseFrameworkTimeline(content, "f.json");
  EXPECT_EQ(r.malformed_events, 8);
  EXPECT_EQ(r.events.size(), 2u);
  EXPECT_THAT(r.errors[1], StartsWith("f.json:5: "));
}

TEST(FrameworkTimelineReaderTest, UnterminatedObjectAtTheEndWaitsThenIsReported) {
  ScopedTempDir dir;
  const fs::path f = dir.path() / "framework" / "pevents" / kHour / "7_1-n_pythontimeline.json";
  WriteAll(f,
           "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"args\": "
           "{\"start_time_since_epoch_in_micros\": 0}},\n{\"name\": \"open\", \"ph\": \"X\",\n");
  FrameworkTimelineReader reader(Local(dir.path().string()));
  EXPECT_TRUE(reader.ReadNew().empty());
  EXPECT_EQ(reader.malformed_events(), 0);  // May still be completed.
  WriteAll(f, "{\"name\": \"next\", \"ph\": \"X\", \"ts\": 1, \"dur\": 1}\n]", /*append=*/true);
  std::vector<FrameworkEvent> events = reader.ReadNew();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "next");
  EXPECT_EQ(reader.malformed_events(), 1);
  EXPECT_THAT(reader.errors()[0], HasSubstr(":3: unterminated object"));
  EXPECT_EQ(reader.files_complete(), 1);
}

// A timeline of `names` (one complete event each, a microsecond apart),
// without the closing "]" (a file being written).
std::string SmallTimeline(const std::vector<std::string>& names) {
  std::string out =
      "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": "
      "{\"name\": \"Python\", \"start_time_since_epoch_in_micros\": 1795300000000000}},\n";
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&out, "{\"name\": \"", names[i], "\", \"ph\": \"X\", \"pid\": 1, \"ts\": ", i + 1,
                    ", \"dur\": 1},\n");
  }
  return out;
}

std::vector<std::string> Names(const std::vector<FrameworkEvent>& events) {
  std::vector<std::string> names;
  for (const FrameworkEvent& e : events) names.push_back(e.name);
  return names;
}

// A growing file: each read fetches what was appended (and the few bytes
// before it that tell an append from a replacement), never the file again.
TEST(FrameworkTimelineReaderTest, GrowingFileIsReadOnlyForWhatWasAppended) {
  ScopedTempDir dir;
  const fs::path f = dir.path() / "framework" / "pevents" / kHour / "7_1-n_pythontimeline.json";
  const fs::path fixture = FixtureFiles().front();
  const std::string data = ReadAll(fixture);
  const size_t expected = ReadLocalTimelineFile(fixture.string()).events.size();
  ASSERT_GT(expected, 100u);
  FrameworkTimelineReader reader(Local(dir.path().string()));
  size_t events = 0;
  int64_t fetched = 0;
  const size_t step = data.size() / 10 + 1;
  for (size_t pos = 0; pos < data.size(); pos += step) {
    const std::string part = data.substr(pos, step);
    WriteAll(f, part, /*append=*/true);
    events += reader.ReadNew().size();
    const int64_t now = reader.read_tally().bytes;
    // The appended part, the half line left from the last read (< 1 KB
    // here) and the tail checked.
    EXPECT_LE(now - fetched, static_cast<int64_t>(part.size() + 1024 + 64)) << pos;
    fetched = now;
  }
  EXPECT_EQ(events, expected);
  EXPECT_LT(reader.read_tally().bytes, static_cast<int64_t>(data.size() + 12 * 1024));
  EXPECT_EQ(reader.files_restarted(), 0);
  EXPECT_EQ(reader.malformed_events(), 0) << reader.Summary();
}

// A file cut shorter than what was read of it is read again from its start.
TEST(FrameworkTimelineReaderTest, TruncatedFileIsReadAgainFromItsStart) {
  ScopedTempDir dir;
  const fs::path f = dir.path() / "framework" / "pevents" / kHour / "7_1-n_pythontimeline.json";
  WriteAll(f, SmallTimeline({"a", "b", "c", "d"}));
  FrameworkTimelineReader reader(Local(dir.path().string()));
  EXPECT_EQ(Names(reader.ReadNew()), (std::vector<std::string>{"a", "b", "c", "d"}));
  WriteAll(f, SmallTimeline({"x"}));
  EXPECT_EQ(Names(reader.ReadNew()), (std::vector<std::string>{"x"}));
  EXPECT_EQ(reader.files_restarted(), 1);
  // Then followed as it grows again.
  WriteAll(f, "{\"name\": \"y\", \"ph\": \"X\", \"pid\": 1, \"ts\": 9, \"dur\": 1},\n",
           /*append=*/true);
  EXPECT_EQ(Names(reader.ReadNew()), (std::vector<std::string>{"y"}));
  EXPECT_EQ(reader.files_restarted(), 1);
  EXPECT_EQ(reader.malformed_events(), 0) << reader.Summary();
}

// A file replaced by another one at least as long (a rotation reusing the
// name, a copy over it): not taken for an append of the old one.
TEST(FrameworkTimelineReaderTest, ReplacedFileIsReadAgainFromItsStart) {
  ScopedTempDir dir;
  const fs::path f = dir.path() / "framework" / "pevents" / kHour / "7_1-n_pythontimeline.json";
  WriteAll(f, SmallTimeline({"a", "b"}));
  FrameworkTimelineReader reader(Local(dir.path().string()));
  EXPECT_EQ(Names(reader.ReadNew()), (std::vector<std::string>{"a", "b"}));
  // Same length, other names; then longer.
  WriteAll(f, SmallTimeline({"p", "q"}));
  EXPECT_EQ(Names(reader.ReadNew()), (std::vector<std::string>{}));  // Nothing new by size.
  const fs::path replacement = dir.path() / "replacement.json";
  WriteAll(replacement, SmallTimeline({"r", "s", "t"}));
  fs::rename(replacement, f);
  EXPECT_EQ(Names(reader.ReadNew()), (std::vector<std::string>{"r", "s", "t"}));
  EXPECT_EQ(reader.files_restarted(), 1);
  EXPECT_EQ(reader.malformed_events(), 0) << reader.Summary();
}

// The same events whether the array is written one element a line (as
// smdebug does), pretty-printed, or on one line.
TEST(FrameworkTimelineReaderTest, PrettyPrintedAndSingleLineArrays) {
  const std::string lines = ReadAll(FixtureFiles().front());
  nlohmann::json array = nlohmann::json::parse(lines);
  const FrameworkTimelineFileResult base =
      ParseFrameworkTimeline(lines, "1_2-vm_pythontimeline.json");
  ASSERT_GT(base.events.size(), 1000u);
  for (int indent : {2, -1}) {
    SCOPED_TRACE(indent);
    const FrameworkTimelineFileResult r =
        ParseFrameworkTimeline(array.dump(indent), "1_2-vm_pythontimeline.json");
    EXPECT_EQ(r.malformed_events, 0) << (r.errors.empty() ? "" : r.errors.front());
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(AsTuples(r.events), AsTuples(base.events));
  }
}

TEST(FrameworkTimelineReaderTest, UpstreamTensorFlowModelTimelineParses) {
  FrameworkTimelineFileResult r = ReadLocalTimelineFile(kModelTimeline);
  EXPECT_TRUE(r.opened);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.malformed_events, 0);
  // Every "ph": "X" line is an event.
  int x_lines = 0;
  for (absl::string_view line : absl::StrSplit(ReadAll(kModelTimeline), '\n')) {
    if (absl::StrContains(line, "\"ph\": \"X\"")) ++x_lines;
  }
  ASSERT_EQ(r.events.size(), static_cast<size_t>(x_lines));
  ASSERT_GT(x_lines, 50);
  const FrameworkEvent& first = r.events.front();
  EXPECT_EQ(AsTuple(first), EventTuple("dataset::GetNext", "DataIterator",
                                       1590461107892211 + 18057039, 4, -1, 1, 0, "0001"));
  EXPECT_EQ(r.start_time_us, 1590461107892211);

  // And through the reader, from its profiler directory.
  FrameworkTimelineReader reader(
      Local(DP_TEST_DATA_DIR "/profiler/upstream-samples/model_timeline_traces"));
  EXPECT_EQ(AsTuples(reader.ReadNew()), AsTuples(r.events));
  EXPECT_EQ(reader.Summary(), absl::StrCat("1 file, ", x_lines, " events, 0 steps"));
}

TEST(FrameworkTimelineReaderTest, NodeIdFromFileName) {
  EXPECT_EQ(TimelineFileNodeId("1795331438761047_11570-vm_pythontimeline.json"), "vm");
  EXPECT_EQ(TimelineFileNodeId("1795331438761047_11570-algo-1_pythontimeline.json"), "algo-1");
  EXPECT_EQ(TimelineFileNodeId("1590461127873222_0001_model_timeline.json"), "0001");
  EXPECT_EQ(TimelineFileNodeId("1590461127873222_algo-2_model_timeline.json"), "algo-2");
  EXPECT_EQ(TimelineFileNodeId("timeline.json"), "");
  EXPECT_EQ(TimelineFileNodeId("notjson.txt"), "");
}

TEST(FrameworkTimelineReaderTest, MalformedEventErrorsQuoteNoMoreThanAnExcerpt) {
  const std::string secret = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  const std::string content = absl::StrCat(
      "[\n",
      "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "  // 2
      "{\"start_time_since_epoch_in_micros\": 5000}},\n",
      "{\"name\": \"", secret, "\x01\", \"ph\": \"X\"},\n",  // 3: a raw control character.
      secret, " \"and more\",\n",                            // 4: not an object.
      "{\"name\": \"s\", \"ph\": \"X\", \"ts\": 1, \"dur\": 1, \"args\": {\"step_num\": \"", secret,
      "\"}},\n",  // 5: a step that is no number.
      "]\n");
  FrameworkTimelineFileResult r = ParseFrameworkTimeline(content, "f.json");
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_THAT(r.errors[0], StartsWith("f.json:3: JSON parse error at byte "));
  EXPECT_THAT(r.errors[1],
              StartsWith("f.json:4: expected an event object, got \"aws_secret_access_ke...\""));
  EXPECT_THAT(r.errors[2],
              StartsWith("f.json:5: args.step_num \"aws_secret_access_ke...\" is not"));
  for (const std::string& error : r.errors) {
    EXPECT_THAT(error, Not(HasSubstr("wJalrXUtnFEMI")));
    EXPECT_THAT(error, Not(HasSubstr("last read")));
  }
}

TEST(FrameworkTimelineReaderTest, SymlinkedDirectoryIsNotFollowedAndNamed) {
  ScopedTempDir dir;
  ScopedTempDir outside;
  WriteAll(outside.path() / kHour / "7_1-n_pythontimeline.json",
           "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
           "{\"start_time_since_epoch_in_micros\": 5000}},\n"
           "{\"name\": \"outside\", \"ph\": \"X\", \"ts\": 1, \"dur\": 1},\n");
  fs::create_directories(dir.path() / "framework");
  fs::create_directory_symlink(outside.path(), dir.path() / "framework" / "pevents");
  FrameworkTimelineReader reader(Local(dir.path().string()));
  EXPECT_TRUE(reader.ReadNew().empty());
  EXPECT_TRUE(reader.directory_exists());
  EXPECT_THAT(reader.Summary(),
              HasSubstr(absl::StrCat("framework timelines cannot be read: ",
                                     (dir.path() / "framework" / "pevents").string(),
                                     " is a symbolic link; debugplane does not follow links "
                                     "inside a data root")));
}

TEST(FrameworkTimelineReaderTest, UnreadableFileIsReported) {
  FrameworkTimelineFileResult r = ReadLocalTimelineFile("/nonexistent/x_timeline.json");
  EXPECT_FALSE(r.opened);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_THAT(r.errors[0], HasSubstr("cannot open"));
}

}  // namespace
}  // namespace debugplane::rules_engine

namespace debugplane::rules_engine {
namespace {

// Elements are read as JSON reads them, whatever their form: escapes are
// decoded, and of repeated keys the last one counts, a repeated "args"
// replacing the earlier one whole (the old fast path merged the two: this
// event got step 7 from the first "args").
TEST(FrameworkTimelineReaderTest, EscapesAndRepeatedKeysReadAsJson) {
  const std::string content =
      "[\n"
      "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
      "{\"start_time_since_epoch_in_micros\": 5000}},\n"
      "{\"name\": \"a\", \"ph\": \"X\", \"ts\": 1, \"dur\": 2, \"args\": {\"step_num\": 7}, "
      "\"args\": {\"pid\": 3}}\n"
      "{\"n\\u0061me\": \"Step:ModeKeys.\\u0054RAIN \\ud83d\\ude00\", \"ph\": \"X\", \"ts\": 3, "
      "\"dur\": 4, \"dur\": 5, \"args\": {\"step_num\": \"8\"}}\n"
      "]\n";
  FrameworkTimelineFileResult r = ParseFrameworkTimeline(content, "f.json");
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].name, "a");
  EXPECT_EQ(r.events[0].step, -1);
  EXPECT_EQ(r.events[0].process, 3);
  EXPECT_EQ(r.events[1].name, "Step:ModeKeys.TRAIN \xf0\x9f\x98\x80");
  EXPECT_EQ(r.events[1].duration_us, 5);
  EXPECT_EQ(r.events[1].step, 8);
}

}  // namespace
}  // namespace debugplane::rules_engine
