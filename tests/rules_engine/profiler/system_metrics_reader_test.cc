// SystemMetricsReader over the fixture system metrics, the upstream samples
// (one corrupt) and synthetic incremental writes.

#include "rules_engine/profiler/system_metrics_reader.h"

#include <unistd.h>

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

// One local file read whole through a store.
SystemMetricsFileResult ReadLocalMetricsFile(const std::string& path) {
  const objectstore::StoreLocation location = Local(path);
  return ReadSystemMetricsFile(*location.store, location.prefix);
}

const char kProfiler[] = DP_TEST_DATA_DIR "/profiler";

void Append(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::app);
  out << text;
}

std::string Line(const std::string& name, const std::string& dim, double value, double ts) {
  return absl::StrCat("{\"Type\": \"", name.substr(0, 3), "\", \"Name\": \"", name,
                      "\", \"Dimension\": \"", dim, "\", \"Value\": ", value,
                      ", \"NodeId\": \"algo-1\", \"Timestamp\": ", ts, "}\n");
}

TEST(SystemMetricsReaderTest, ReadsEveryFixtureFolderCompletely) {
  for (const char* folder : {"healthy", "low_gpu_utilization", "cpu_bottleneck", "io_bottleneck",
                             "gpu_memory_increase"}) {
    SCOPED_TRACE(folder);
    SystemMetricsReader reader(Local(absl::StrCat(kProfiler, "/system/", folder)));
    std::vector<SystemMetricPoint> points = reader.ReadNew();
    // 15 minutes at 500 ms = 1800 samples of 8 metrics (4 CPUs, memory,
    // GPU, GPU memory, I/O wait).
    EXPECT_EQ(points.size(), 1800u * 8);
    EXPECT_EQ(reader.malformed_lines(), 0);
    EXPECT_EQ(reader.files_seen(), 16);
    EXPECT_TRUE(reader.directory_exists());
    ASSERT_FALSE(points.empty());
    EXPECT_EQ(points.front().node_id, "algo-1");
    // File order: timestamps never go back.
    for (size_t i = 1; i < points.size(); ++i) {
      ASSERT_LE(points[i - 1].timestamp, points[i].timestamp) << i;
    }
    EXPECT_TRUE(reader.ReadNew().empty());  // Nothing new.
    EXPECT_EQ(reader.points_read(), 1800 * 8);
    EXPECT_EQ(reader.Summary(), "16 files, 14400 points");
  }
}

TEST(SystemMetricsReaderTest, FirstFixtureLineParsed) {
  SystemMetricsReader reader(Local(absl::StrCat(kProfiler, "/system/healthy")));
  std::vector<SystemMetricPoint> points = reader.ReadNew();
  ASSERT_FALSE(points.empty());
  const SystemMetricPoint& p = points.front();
  EXPECT_EQ(p.type, "cpu");
  EXPECT_EQ(p.name, "cpu0");
  EXPECT_EQ(p.dimension, "CPUUtilization");
  EXPECT_EQ(p.dim, MetricDimension::kCpuUtilization);
  EXPECT_DOUBLE_EQ(p.value, 34.23);
  EXPECT_DOUBLE_EQ(p.timestamp, 1795300000.0);
}

TEST(SystemMetricsReaderTest, UpstreamGoodSampleParsed) {
  SystemMetricsFileResult r =
      ReadLocalMetricsFile(absl::StrCat(kProfiler, "/upstream-samples/1591160699.algo-1.json"));
  EXPECT_TRUE(r.opened);
  EXPECT_EQ(r.points.size(), 14u);
  EXPECT_EQ(r.malformed_lines, 0);
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.points.size(), 14u);
  EXPECT_EQ(r.points[0].name, "cpu0");
  EXPECT_DOUBLE_EQ(r.points[0].value, 4.76);
  EXPECT_DOUBLE_EQ(r.points[0].timestamp, 1591160699.4570894);
  EXPECT_EQ(r.points[13].name, "gpu1");
  EXPECT_EQ(r.points[13].dim, MetricDimension::kGpuMemoryUtilization);
  EXPECT_DOUBLE_EQ(r.points[13].value, 47.76);
}

TEST(SystemMetricsReaderTest, UpstreamCorruptSampleReportedWithFileAndLine) {
  const std::string path =
      absl::StrCat(kProfiler, "/upstream-samples/1591160699.algo-1.json.corrupt");
  SystemMetricsFileResult r = ReadLocalMetricsFile(path);
  EXPECT_TRUE(r.opened);
  EXPECT_EQ(r.points.size(), 13u);  // The 13 good lines are kept.
  EXPECT_EQ(r.malformed_lines, 1);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_THAT(r.errors[0], HasSubstr("1591160699.algo-1.json.corrupt:14: "));
  EXPECT_THAT(r.errors[0], HasSubstr("parse"));
}

TEST(SystemMetricsReaderTest, MissingFileIsReported) {
  SystemMetricsFileResult r = ReadLocalMetricsFile("/nonexistent/dp/x.json");
  EXPECT_FALSE(r.opened);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_THAT(r.errors[0], HasSubstr("cannot open"));
}

TEST(SystemMetricsReaderTest, MissingDirectoryIsNoDataYet) {
  ScopedTempDir dir;
  SystemMetricsReader reader(Local((dir.path() / "profiler").string()));
  EXPECT_TRUE(reader.ReadNew().empty());
  EXPECT_FALSE(reader.directory_exists());
  EXPECT_EQ(reader.malformed_lines(), 0);
  EXPECT_THAT(reader.Summary(), HasSubstr("no system metrics yet"));
  EXPECT_THAT(reader.Summary(), HasSubstr("does not exist"));
  // Appears later: read then.
  Append(dir.path() / "profiler/system/incremental/2026112122/1.algo-1.json",
         Line("gpu0", "GPUUtilization", 50, 1));
  EXPECT_EQ(reader.ReadNew().size(), 1u);
  EXPECT_TRUE(reader.directory_exists());
}

TEST(SystemMetricsReaderTest, HalfWrittenLineLeftForNextCall) {
  ScopedTempDir dir;
  const fs::path file = dir.path() / "system/incremental/2026112122/100.algo-1.json";
  const std::string first = Line("cpu0", "CPUUtilization", 12.5, 100.0);
  const std::string second = Line("gpu0", "GPUUtilization", 77.25, 100.5);
  Append(file, first);
  Append(file, second.substr(0, 30));  // Half a line, no newline.
  SystemMetricsReader reader(Local(dir.path().string()));
  std::vector<SystemMetricPoint> p1 = reader.ReadNew();
  ASSERT_EQ(p1.size(), 1u);
  EXPECT_EQ(p1[0].name, "cpu0");
  EXPECT_EQ(reader.malformed_lines(), 0);  // The half line is not malformed.
  EXPECT_TRUE(reader.ReadNew().empty());   // Still half.
  Append(file, second.substr(30));
  std::vector<SystemMetricPoint> p2 = reader.ReadNew();
  ASSERT_EQ(p2.size(), 1u);
  EXPECT_EQ(p2[0].name, "gpu0");
  EXPECT_EQ(p2[0].dim, MetricDimension::kGpuUtilization);
  EXPECT_DOUBLE_EQ(p2[0].value, 77.25);
  EXPECT_DOUBLE_EQ(p2[0].timestamp, 100.5);
  EXPECT_EQ(reader.malformed_lines(), 0);
  EXPECT_EQ(reader.points_read(), 2);
}

TEST(SystemMetricsReaderTest, FileOrderHourThenName) {
  ScopedTempDir dir;
  const fs::path inc = dir.path() / "system/incremental";
  Append(inc / "2026112123/300.algo-1.json", Line("cpu0", "CPUUtilization", 3, 300));
  Append(inc / "2026112122/200.algo-1.json", Line("cpu0", "CPUUtilization", 2, 200));
  Append(inc / "2026112122/100.algo-1.json", Line("cpu0", "CPUUtilization", 1, 100));
  Append(inc / "2026112122/notes.txt", "ignored\n");
  SystemMetricsReader reader(Local(dir.path().string()));
  std::vector<SystemMetricPoint> p = reader.ReadNew();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].value, 1);
  EXPECT_EQ(p[1].value, 2);
  EXPECT_EQ(p[2].value, 3);
  // New lines in an old file and a new file both come on the next call.
  Append(inc / "2026112122/100.algo-1.json", Line("cpu0", "CPUUtilization", 4, 101));
  Append(inc / "2026112123/400.algo-1.json", Line("cpu0", "CPUUtilization", 5, 400));
  p = reader.ReadNew();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].value, 4);
  EXPECT_EQ(p[1].value, 5);
}

TEST(SystemMetricsReaderTest, MalformedLinesSkippedAndCounted) {
  ScopedTempDir dir;
  const fs::path file = dir.path() / "system/incremental/2026112122/100.algo-1.json";
  Append(file, Line("cpu0", "CPUUtilization", 1, 100));
  Append(file, "{\"Type\": \"cpu\", \"Name\": \"cpu0\"\n");  // Line 2: truncated.
  Append(file, "\n");                                        // Line 3: blank, ignored.
  Append(file,
         "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", "
         "\"Value\": 5, \"NodeId\": \"algo-1\"}\n");  // Line 4: no Timestamp.
  Append(file,
         "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", "
         "\"Value\": \"high\", \"NodeId\": \"algo-1\", \"Timestamp\": 1}\n");  // Line 5.
  Append(file, "[1, 2]\n");                                                    // Line 6.
  // Line 7: escapes and extra members go through the slow path and parse.
  Append(file,
         "{\"Type\": \"gpu\", \"Name\": \"gpu\\u0030\", \"Dimension\": \"GPUUtilization\", "
         "\"Value\": 9, \"NodeId\": \"algo-1\", \"Timestamp\": 101, \"Extra\": {\"a\": null}}\n");
  Append(file, Line("cpu0", "CPUUtilization", 2, 102));
  SystemMetricsReader reader(Local(dir.path().string()));
  std::vector<SystemMetricPoint> p = reader.ReadNew();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[1].name, "gpu0");
  EXPECT_EQ(p[2].value, 2);
  EXPECT_EQ(reader.malformed_lines(), 4);
  ASSERT_EQ(reader.errors().size(), 4u);
  EXPECT_THAT(reader.errors()[0], HasSubstr("system/incremental/2026112122/100.algo-1.json:2: "));
  EXPECT_THAT(reader.errors()[1], HasSubstr("100.algo-1.json:4: missing \"Timestamp\""));
  EXPECT_THAT(reader.errors()[2], HasSubstr(":5: \"Value\" is not a number"));
  EXPECT_THAT(reader.errors()[3], HasSubstr(":6: not a JSON object"));
  EXPECT_THAT(reader.Summary(), HasSubstr("4 malformed lines skipped"));
  EXPECT_THAT(reader.Summary(), HasSubstr("100.algo-1.json:2:"));
  // Line numbers continue across calls.
  Append(file, "garbage\n");
  EXPECT_TRUE(reader.ReadNew().empty());
  EXPECT_EQ(reader.malformed_lines(), 5);
  ASSERT_EQ(reader.errors().size(), 5u);
  EXPECT_THAT(reader.errors()[4], HasSubstr("100.algo-1.json:9: "));
  // Only the first kMaxErrors messages are kept; all are counted.
  Append(file, "garbage\n");
  reader.ReadNew();
  EXPECT_EQ(reader.malformed_lines(), 6);
  EXPECT_EQ(reader.errors().size(), static_cast<size_t>(SystemMetricsReader::kMaxErrors));
}

TEST(SystemMetricsReaderTest, MalformedLineErrorQuotesNoMoreThanAnExcerpt) {
  // nlohmann's own message quotes the whole token it read ("last read:
  // '...'"): a credentials file read as metrics came back in the error.
  const std::string secret = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  SystemMetricPoint p;
  std::string error;
  ASSERT_FALSE(ParseSystemMetricLine(absl::StrCat("{\"Type\": \"", secret, "\x01\"}"), &p, &error));
  EXPECT_THAT(error, HasSubstr("JSON parse error at byte "));
  EXPECT_THAT(error, Not(HasSubstr("wJalrXUtnFEMI")));
  EXPECT_THAT(error, Not(HasSubstr("last read")));
  // The excerpt: at most 20 characters up to the error, escaped.
  EXPECT_THAT(error, HasSubstr("EXAMPLEKEY"));
  const size_t after = error.find(" after \"");
  ASSERT_NE(after, std::string::npos) << error;
  EXPECT_LE(error.size() - after, std::string(" after \"\"").size() + 20 + 3) << error;
}

TEST(SystemMetricsReaderTest, SymlinkedFileIsNotFollowedAndNamed) {
  ScopedTempDir dir;
  ScopedTempDir outside;
  Append(outside.path() / "metrics.json", Line("gpu0", "GPUUtilization", 50, 1));
  const fs::path hour = dir.path() / "system/incremental/2026112122";
  Append(hour / "100.algo-1.json", Line("cpu0", "CPUUtilization", 10, 1));
  fs::create_symlink(outside.path() / "metrics.json", hour / "200.algo-1.json");
  SystemMetricsReader reader(Local(dir.path().string()));
  EXPECT_TRUE(reader.ReadNew().empty());
  EXPECT_TRUE(reader.directory_exists());
  const std::string named =
      absl::StrCat((hour / "200.algo-1.json").string(),
                   " is a symbolic link; debugplane does not follow links inside a data root");
  ASSERT_EQ(reader.errors().size(), 1u);
  EXPECT_THAT(reader.errors()[0], HasSubstr(named));
  EXPECT_THAT(reader.Summary(), HasSubstr("system metrics cannot be read"));
  EXPECT_THAT(reader.Summary(), HasSubstr(named));
  // Once the link is gone, the rest is read.
  fs::remove(hour / "200.algo-1.json");
  EXPECT_EQ(reader.ReadNew().size(), 1u);
  EXPECT_EQ(reader.Summary(), "1 file, 1 point (system/incremental: " + named + ")");
}

TEST(SystemMetricsReaderTest, FastAndSlowPathsAgree) {
  const std::string plain =
      "{\"Type\": \"gpu\", \"Name\":\"gpu1\", \"Dimension\": \"GPUMemoryUtilization\", "
      "\"Value\":-1.5e1,\"NodeId\":\"algo-2\",\"Timestamp\":1591160699.4570894}";
  SystemMetricPoint fast;
  std::string error;
  ASSERT_TRUE(ParseSystemMetricLine(plain, &fast, &error)) << error;
  // The same with a nested member forces nlohmann.
  std::string nested = plain;
  nested.insert(1, "\"x\": [1, {\"y\": true}], ");
  SystemMetricPoint slow;
  ASSERT_TRUE(ParseSystemMetricLine(nested, &slow, &error)) << error;
  for (const SystemMetricPoint* p : {&fast, &slow}) {
    EXPECT_EQ(p->type, "gpu");
    EXPECT_EQ(p->name, "gpu1");
    EXPECT_EQ(p->dim, MetricDimension::kGpuMemoryUtilization);
    EXPECT_DOUBLE_EQ(p->value, -15);
    EXPECT_EQ(p->node_id, "algo-2");
    EXPECT_DOUBLE_EQ(p->timestamp, 1591160699.4570894);
  }
  EXPECT_EQ(ParseMetricDimension("I/OWaitPercentage"), MetricDimension::kIoWaitPercentage);
  EXPECT_EQ(ParseMetricDimension("MemoryUsedPercent"), MetricDimension::kMemoryUsedPercent);
  EXPECT_EQ(ParseMetricDimension("Foo"), MetricDimension::kOther);
}

TEST(SystemMetricsReaderTest, EveryTruncationRejectedEverySpacingAccepted) {
  const std::string line =
      "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", "
      "\"Value\": 34.23, \"NodeId\": \"algo-1\", \"Timestamp\": 1795300000.5}";
  SystemMetricPoint p;
  std::string error;
  ASSERT_TRUE(ParseSystemMetricLine(line, &p, &error)) << error;
  for (size_t n = 0; n < line.size(); ++n) {
    SystemMetricPoint q;
    EXPECT_FALSE(ParseSystemMetricLine(line.substr(0, n), &q, &error)) << n;
    EXPECT_FALSE(error.empty()) << n;
  }
  // Spaces removed or doubled, trailing spaces and CR: the same point.
  std::string compact, wide;
  for (char c : line) {
    if (c != ' ') compact += c;
    wide += c;
    if (c == ',' || c == ':') wide += "  ";
  }
  for (const std::string& variant : {compact, wide, line + "  \r"}) {
    SystemMetricPoint q;
    ASSERT_TRUE(ParseSystemMetricLine(variant, &q, &error)) << variant << ": " << error;
    EXPECT_EQ(q.name, "cpu0");
    EXPECT_EQ(q.dimension, "CPUUtilization");
    EXPECT_EQ(q.node_id, "algo-1");
    EXPECT_DOUBLE_EQ(q.value, 34.23);
    EXPECT_DOUBLE_EQ(q.timestamp, 1795300000.5);
  }
  // Trailing garbage and a number where a string belongs are errors.
  EXPECT_FALSE(ParseSystemMetricLine(line + "x", &p, &error));
  std::string numeric_name = line;
  numeric_name.replace(numeric_name.find("\"cpu0\""), 6, "7");
  EXPECT_FALSE(ParseSystemMetricLine(numeric_name, &p, &error));
  EXPECT_THAT(error, HasSubstr("\"Name\" is not a string"));
}

TEST(MetricStringTest, InternedComparedAndOrderedLikeStrings) {
  const MetricString a("cpu0");
  const MetricString b(std::string("cpu") + "0");
  EXPECT_EQ(&a.str(), &b.str());  // One instance per text.
  EXPECT_TRUE(a == b);
  EXPECT_TRUE(a == "cpu0");
  EXPECT_TRUE(std::string("cpu0") == a);
  EXPECT_TRUE(a != absl::string_view("cpu1"));
  EXPECT_TRUE(MetricString() == "");
  EXPECT_EQ(&MetricString().str(), &MetricString("").str());
  EXPECT_TRUE(MetricString().empty());
  // Ordered by text, as std::string keys were.
  EXPECT_TRUE(MetricString("algo-10") < MetricString("algo-2"));
  EXPECT_FALSE(MetricString("b") < MetricString("a"));
  EXPECT_FALSE(a < b);
  absl::string_view view = a;
  EXPECT_EQ(view, "cpu0");
  std::ostringstream os;
  os << a;
  EXPECT_EQ(os.str(), "cpu0");
  absl::flat_hash_map<MetricString, int> by_pointer = {{a, 1}};
  EXPECT_EQ(by_pointer.at(MetricString("cpu0")), 1);
  MetricString bounded;
  ASSERT_TRUE(MetricString::InternBounded("cpu0", &bounded));
  EXPECT_EQ(bounded, a);
}

// The smdebug-layout path's numbers are the ones std::from_chars gives, in
// the layout and through the general parser (other spacing).
TEST(SystemMetricsReaderTest, NumbersMatchFromChars) {
  std::mt19937_64 random(20261122);
  std::vector<std::string> numbers = {"0",
                                      "-0",
                                      "0.0",
                                      "34.23",
                                      "1795300000.5",
                                      "1e3",
                                      "-1.5e-7",
                                      "1.",
                                      "00012",
                                      "123456789012345678901",
                                      "0.1",
                                      "9007199254740993.0",
                                      "4.9e-324",
                                      "1591160699.4570894",
                                      "99.99999999999999999999999"};
  for (int i = 0; i < 3000; ++i) {
    std::string n = (random() % 4 == 0) ? "-" : "";
    const int whole = 1 + random() % 12, fraction = random() % 12;
    for (int d = 0; d < whole; ++d) n += static_cast<char>('0' + random() % 10);
    if (fraction > 0) n += ".";
    for (int d = 0; d < fraction; ++d) n += static_cast<char>('0' + random() % 10);
    numbers.push_back(n);
  }
  for (const std::string& n : numbers) {
    SCOPED_TRACE(n);
    double want = 0;
    auto r = std::from_chars(n.data(), n.data() + n.size(), want);
    ASSERT_EQ(r.ec, std::errc());
    if (r.ptr != n.data() + n.size()) continue;  // "1." : not wholly a number.
    for (const std::string& line :
         {absl::StrCat("{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", "
                       "\"Value\": ",
                       n, ", \"NodeId\": \"algo-1\", \"Timestamp\": ", n, "}"),
          absl::StrCat("{\"Type\":\"cpu\",\"Name\":\"cpu0\",\"Dimension\":\"CPUUtilization\","
                       "\"Value\":",
                       n, ",\"NodeId\":\"algo-1\",\"Timestamp\":", n, "}")}) {
      SystemMetricPoint p;
      std::string error;
      ASSERT_TRUE(ParseSystemMetricLine(line, &p, &error)) << error;
      EXPECT_EQ(std::memcmp(&p.value, &want, sizeof want), 0) << p.value << " vs " << want;
      EXPECT_EQ(std::memcmp(&p.timestamp, &want, sizeof want), 0);
    }
  }
}

// The reader remembers line prefixes, the node suffix, the last timestamp
// and the texts it interned; whatever it remembers, every point is the one a
// fresh parse of its line gives: names longer than the word compares, more
// prefixes and names than the memos hold, timestamps that extend the last
// one, nodes that change.
TEST(SystemMetricsReaderTest, MemosNeverChangeAPoint) {
  ScopedTempDir dir;
  const fs::path file = dir.path() / "system/incremental/2026112122/100.algo-1.json";
  std::vector<std::string> lines;
  const std::vector<std::string> timestamps = {"100",   "1000", "100",  "100.5", "-100",
                                               "100e1", "100",  "1001", "100.0"};
  for (int i = 0; i < 400; ++i) {
    const std::string name =
        i % 7 == 0 ? absl::StrCat("gpu", i % 90) : absl::StrCat("cpu", i % 3, "-long-name-", i % 5);
    const std::string dim = i % 3 == 0   ? "GPUMemoryUtilization"
                            : i % 3 == 1 ? "CPUUtilization"
                                         : absl::StrCat("Dim", i % 40);
    const std::string node = i % 50 < 25 ? "algo-1" : (i % 2 ? "algo-10" : "algo-1x");
    lines.push_back(absl::StrCat("{\"Type\": \"", name.substr(0, 3), "\", \"Name\": \"", name,
                                 "\", \"Dimension\": \"", dim, "\", \"Value\": ", i % 101,
                                 ".25, \"NodeId\": \"", node,
                                 "\", \"Timestamp\": ", timestamps[i % timestamps.size()], "}"));
  }
  std::string text;
  for (const std::string& line : lines) absl::StrAppend(&text, line, "\n");
  Append(file, text);
  SystemMetricsReader reader(Local(dir.path().string()));
  std::vector<SystemMetricPoint> points = reader.ReadNew();
  ASSERT_EQ(points.size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    SystemMetricPoint fresh;
    std::string error;
    ASSERT_TRUE(ParseSystemMetricLine(lines[i], &fresh, &error)) << error;
    SCOPED_TRACE(lines[i]);
    EXPECT_EQ(points[i].type, fresh.type);
    EXPECT_EQ(points[i].name, fresh.name);
    EXPECT_EQ(points[i].dimension, fresh.dimension);
    EXPECT_EQ(points[i].dim, fresh.dim);
    EXPECT_EQ(points[i].node_id, fresh.node_id);
    EXPECT_EQ(points[i].value, fresh.value);
    EXPECT_EQ(points[i].timestamp, fresh.timestamp);
  }
  EXPECT_EQ(points[1].timestamp, 1000);
  EXPECT_EQ(points[5].timestamp, 1000);  // 100e1
  EXPECT_EQ(points[26].node_id, "algo-1x");
  EXPECT_EQ(points[27].node_id, "algo-10");
}

// Strings are scanned eight bytes at a time: an escape, a control character
// or a non-ASCII byte at any position of any word is still seen.
TEST(SystemMetricsReaderTest, StringScanSeesEveryByte) {
  const std::string base = "abcdefghijklmnopqrstu";
  for (size_t at = 0; at <= base.size(); ++at) {
    SCOPED_TRACE(at);
    auto line = [](const std::string& name) {
      return absl::StrCat("{\"Type\": \"gpu\", \"Name\": \"", name,
                          "\", \"Dimension\": \"GPUUtilization\", \"Value\": 1, \"NodeId\": "
                          "\"algo-1\", \"Timestamp\": 2}");
    };
    SystemMetricPoint p;
    std::string error;
    std::string escaped = base;
    escaped.insert(at, "\\u0041");
    ASSERT_TRUE(ParseSystemMetricLine(line(escaped), &p, &error)) << error;
    std::string unescaped = base;
    unescaped.insert(at, "A");
    EXPECT_EQ(p.name, unescaped);
    std::string quote = base;
    quote.insert(at, "\\\"");
    ASSERT_TRUE(ParseSystemMetricLine(line(quote), &p, &error)) << error;
    EXPECT_EQ(p.name, base.substr(0, at) + "\"" + base.substr(at));
    std::string tab = base;
    tab.insert(at, "\t");
    EXPECT_FALSE(ParseSystemMetricLine(line(tab), &p, &error));  // JSON forbids it raw.
    std::string utf8 = base;
    utf8.insert(at, "\xc3\xa9");
    ASSERT_TRUE(ParseSystemMetricLine(line(utf8), &p, &error)) << error;
    EXPECT_EQ(p.name, utf8);
  }
}

// The pool of interned texts is bounded for text read from files (never
// freed, so a file of ever new names would otherwise grow it without
// limit). In a child process: filling the pool would starve other tests.
TEST(SystemMetricsReaderDeathTest, DistinctNamesAreBounded) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        MetricString s;
        int i = 0;
        while (MetricString::InternBounded(absl::StrCat("filler-", i), &s)) ++i;
        bool ok = i > 0 && static_cast<size_t>(i) <= MetricString::kMaxInterned &&
                  MetricString::InternBounded("filler-0", &s);  // Known: still fine.
        SystemMetricPoint p;
        std::string error;
        const std::string fresh =
            "{\"Type\": \"cpu\", \"Name\": \"never-seen\", \"Dimension\": \"CPUUtilization\", "
            "\"Value\": 1, \"NodeId\": \"algo-1\", \"Timestamp\": 2}";
        ok = ok && !ParseSystemMetricLine(fresh, &p, &error) &&
             error.find("distinct names") != std::string::npos;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace debugplane::rules_engine
