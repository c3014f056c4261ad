// SystemMetricsReader and FrameworkTimelineReader against files whose sizes
// are hostile: sparse 100 GB files (ftruncate: no disk used), a hole after
// real lines, files longer than several read chunks. Files are read in
// chunks under their limits (the readers' headers); a line over its limit
// ends that file with an error naming it and the limit, and the other files
// are read on. Before, each file was read whole and a sparse one aborted
// the process with std::bad_alloc.

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/profiler/framework_timeline_reader.h"
#include "rules_engine/profiler/system_metrics_reader.h"
#include "tests/rules_engine/local_store.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using testing::Local;

constexpr int64_t kHundredGb = int64_t{100} << 30;

void Append(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::app);
  out << text;
}

void MakeSparse(const fs::path& path, int64_t size) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::app).close();
  ASSERT_EQ(::truncate(path.c_str(), size), 0) << path;
}

std::string MetricLines(int first, int count) {
  std::string text;
  for (int i = first; i < first + count; ++i) {
    absl::StrAppend(&text,
                    "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": "
                    "\"CPUUtilization\", \"Value\": ",
                    i % 100, ", \"NodeId\": \"algo-1\", \"Timestamp\": ", 1795300000 + i, ".5}\n");
  }
  return text;
}

class ProfilerReaderLimitsTest : public ::testing::Test {
 protected:
  std::string dir_ = testing::FreshTempDir("profiler_reader_limits_test");
  fs::path hour_ = fs::path(dir_) / "system/incremental/2026112207";
  fs::path pevents_ = fs::path(dir_) / "framework/pevents/2026112207";
};

TEST_F(ProfilerReaderLimitsTest, SparseHugeMetricsFileEndsThatFileNamingItAndTheLimit) {
  Append(hour_ / "1795300000.algo-1.json", MetricLines(0, 10));
  const fs::path sparse = hour_ / "1795300060.algo-1.json";
  MakeSparse(sparse, kHundredGb);
  Append(hour_ / "1795300120.algo-1.json", MetricLines(10, 5));
  SystemMetricsReader reader(Local(dir_));
  EXPECT_EQ(reader.ReadNew().size(), 15u);  // The other files, whole.
  EXPECT_EQ(reader.limit_error().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(reader.limit_error().message(),
              AllOf(HasSubstr(sparse.string()), HasSubstr("line 1"),
                    HasSubstr("one system metrics line may have at most 1 MiB")));
  EXPECT_THAT(reader.Summary(), HasSubstr("1 MiB"));
  // That file is not read again; the others go on.
  const int64_t fetched = reader.read_tally().bytes;
  EXPECT_LE(fetched, 5 << 20);
  Append(hour_ / "1795300120.algo-1.json", MetricLines(15, 1));
  EXPECT_EQ(reader.ReadNew().size(), 1u);
  EXPECT_LT(reader.read_tally().bytes - fetched, 1024);
}

TEST_F(ProfilerReaderLimitsTest, HoleAfterRealLinesGivesTheLinesThenTheLimit) {
  const fs::path file = hour_ / "1795300000.algo-1.json";
  Append(file, MetricLines(0, 100));
  MakeSparse(file, kHundredGb);
  SystemMetricsReader reader(Local(dir_));
  EXPECT_EQ(reader.ReadNew().size(), 100u);
  EXPECT_THAT(reader.limit_error().message(),
              AllOf(HasSubstr(file.string()), HasSubstr("line 101")));
}

TEST_F(ProfilerReaderLimitsTest, MetricsFilesOfManyChunksReadWholeAndInBatches) {
  // ~12 MiB: three chunks and a bit, lines cut at every chunk boundary.
  const std::string text = MetricLines(0, 110000);
  ASSERT_GT(text.size(), 3 * kSystemMetricsChunkBytes);
  Append(hour_ / "1795300000.algo-1.json", text);
  Append(hour_ / "1795300060.algo-1.json", MetricLines(110000, 10));
  SystemMetricsReader whole(Local(dir_));
  std::vector<SystemMetricPoint> points = whole.ReadNew();
  ASSERT_EQ(points.size(), 110010u);
  for (size_t i = 0; i < points.size(); ++i) {
    ASSERT_EQ(points[i].timestamp, 1795300000 + static_cast<double>(i) + 0.5) << i;
  }
  EXPECT_TRUE(whole.limit_error().ok());
  EXPECT_EQ(whole.malformed_lines(), 0);

  // In batches of about 1 MiB: the same points, in order, in many calls.
  SystemMetricsReader batched(Local(dir_));
  std::vector<SystemMetricPoint> again;
  int calls = 0;
  do {
    for (SystemMetricPoint& p : batched.ReadNew(1 << 20)) again.push_back(p);
    ++calls;
  } while (batched.more_pending() && calls < 1000);
  EXPECT_GT(calls, 3);
  ASSERT_EQ(again.size(), points.size());
  for (size_t i = 0; i < again.size(); ++i) ASSERT_EQ(again[i].timestamp, points[i].timestamp);
}

std::string TimelineLines(int first, int count) {
  std::string text;
  for (int i = first; i < first + count; ++i) {
    absl::StrAppend(&text, "{\"name\": \"op", i,
                    "\", \"pid\": 0, \"ph\": \"X\", \"ts\": ", 1000 * i,
                    ", \"dur\": 10, \"args\": {\"step_num\": \"", i, "\"}},\n");
  }
  return text;
}

constexpr char kTimelineStart[] =
    "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
    "{\"start_time_since_epoch_in_micros\": 1795331436525518}},\n";

TEST_F(ProfilerReaderLimitsTest, SparseHugeTimelineEndsThatFileNamingItAndTheLimit) {
  Append(pevents_ / "1795331438761047_11570-vm_pythontimeline.json",
         absl::StrCat(kTimelineStart, TimelineLines(0, 10)));
  const fs::path sparse = pevents_ / "1795331438761048_11571-vm_pythontimeline.json";
  MakeSparse(sparse, kHundredGb);
  FrameworkTimelineReader reader(Local(dir_));
  EXPECT_EQ(reader.ReadNew().size(), 10u);
  EXPECT_EQ(reader.limit_error().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(reader.limit_error().message(),
              AllOf(HasSubstr(sparse.string()),
                    HasSubstr("one framework timeline line may have at most 1 MiB")));
  EXPECT_THAT(reader.errors(), Contains(HasSubstr("the rest of the file is not read")));
  const int64_t fetched = reader.read_tally().bytes;
  EXPECT_LE(fetched, 5 << 20);
  EXPECT_TRUE(reader.ReadNew().empty());
  EXPECT_EQ(reader.read_tally().bytes, fetched);
}

TEST_F(ProfilerReaderLimitsTest, TimelineOfManyChunksReadsEveryEventOnce) {
  // ~9 MiB of events: lines cut at the chunk boundaries, some ending in ']'
  // ("args": [...]) where a chunk ends.
  std::string text = kTimelineStart;
  for (int i = 0; i < 90000; ++i) {
    absl::StrAppend(&text, "{\"name\": \"op", i,
                    "\", \"pid\": 0, \"ph\": \"X\", \"ts\": ", 1000 * i,
                    ", \"dur\": 10, \"args\": {\"shape\": [1, 2]}},\n");
  }
  ASSERT_GT(text.size(), 2 * kFrameworkTimelineChunkBytes);
  const fs::path file = pevents_ / "1795331438761047_11570-vm_pythontimeline.json";
  Append(file, text);
  FrameworkTimelineReader reader(Local(dir_));
  std::vector<FrameworkEvent> events = reader.ReadNew();
  ASSERT_EQ(events.size(), 90000u);
  for (size_t i = 0; i < events.size(); ++i) ASSERT_EQ(events[i].name, absl::StrCat("op", i));
  EXPECT_EQ(reader.malformed_events(), 0);
  EXPECT_TRUE(reader.limit_error().ok());
  EXPECT_EQ(ParseFrameworkTimeline(text, "x").events.size(), events.size());
}

}  // namespace
}  // namespace debugplane::rules_engine
