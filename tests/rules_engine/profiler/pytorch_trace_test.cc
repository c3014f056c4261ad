// PyTorchTraceParser over the real Kineto traces of an H200 run and of a
// data-loader-bound run (tests/data/frameworks, checked against an
// independent nlohmann::json reading), synthetic traces of both forms from
// tests/rules_engine/pytorch_trace_writer.h, every cut of the bytes, files
// cut short, hostile values and the record budget.

#include "rules_engine/profiler/pytorch_trace.h"

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "rules_engine/profiler/framework_phase.h"
#include "tests/rules_engine/pytorch_trace_writer.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::HasSubstr;
using testing::StepsOf;
using testing::SyntheticTrace;
using testing::SyntheticTraceOptions;

const char kH200Trace[] = DP_TEST_DATA_DIR
    "/frameworks/pytorch-h200-phases/trace/vm_659.1795819707712812939.pt.trace.json";
const char kDataLoaderTrace[] = DP_TEST_DATA_DIR
    "/frameworks/pytorch-dataloader-trace/vm_1244.1795819821628555495.pt.trace.json";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<const FrameworkEvent*> StepsIn(const PyTorchTraceFile& f) {
  std::vector<const FrameworkEvent*> out;
  for (const FrameworkEvent& e : f.events) {
    if (e.name == "Step:ModeKeys.TRAIN") out.push_back(&e);
  }
  return out;
}

std::map<FrameworkPhase, int64_t> PhaseTotals(const PyTorchTraceFile& f) {
  std::map<FrameworkPhase, int64_t> totals;
  for (const FrameworkEvent& e : f.events) {
    if (e.name != "Step:ModeKeys.TRAIN") totals[PhaseOfEvent(e)] += e.duration_us;
  }
  return totals;
}

// The CPU ProfilerStep#N spans as nlohmann reads them: (N, start us, dur us).
std::vector<std::tuple<int64_t, int64_t, int64_t>> IndependentSteps(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  const int64_t base_us = j["baseTimeNanoseconds"].get<int64_t>() / 1000;
  std::vector<std::tuple<int64_t, int64_t, int64_t>> steps;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("cat", "") != "user_annotation") continue;
    const std::string name = e.value("name", "");
    if (!absl::StartsWith(name, "ProfilerStep#")) continue;
    steps.emplace_back(std::stoll(name.substr(13)), base_us + std::llround(e["ts"].get<double>()),
                       std::llround(e["dur"].get<double>()));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

TEST(PyTorchTraceTest, H200TraceGivesItsFourStepsOfAbout150Ms) {
  const std::string text = ReadAll(kH200Trace);
  const PyTorchTraceFile f = ParsePyTorchTrace(text, kH200Trace);
  EXPECT_TRUE(f.complete);
  EXPECT_TRUE(f.has_base_time);
  EXPECT_EQ(f.malformed_events, 0);
  EXPECT_TRUE(f.errors.empty()) << f.errors[0];
  std::vector<std::tuple<int64_t, int64_t, int64_t>> steps;
  for (const FrameworkEvent* e : StepsIn(f)) {
    steps.emplace_back(e->step, e->start_us, e->duration_us);
    EXPECT_EQ(e->node_id, "algo-1");
    EXPECT_EQ(e->process, 659);
    EXPECT_NEAR(e->duration_us, 150000, 25000) << "step " << e->step;
  }
  std::sort(steps.begin(), steps.end());
  EXPECT_EQ(steps, IndependentSteps(text));  // Not the GPU mirrors: 4 steps.
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(std::get<0>(steps.front()), 4);
  // Every phase is there, and GPU kernels as stream intervals in steps.
  const auto totals = PhaseTotals(f);
  EXPECT_GT(totals.at(FrameworkPhase::kForward), 0);
  EXPECT_GT(totals.at(FrameworkPhase::kBackward), 0);
  int64_t gpu = 0;
  for (const FrameworkEvent& e : f.events) {
    if (absl::StartsWith(e.category, "GPU stream ")) {
      gpu += e.duration_us;
      EXPECT_GE(e.step, 4);
    }
  }
  EXPECT_GT(gpu, 0);
}

TEST(PyTorchTraceTest, DataLoaderTraceIsMostlyDataLoading) {
  const std::string text = ReadAll(kDataLoaderTrace);
  const PyTorchTraceFile f = ParsePyTorchTrace(text, kDataLoaderTrace);
  EXPECT_TRUE(f.complete);
  int64_t step_total = 0;
  for (const FrameworkEvent* e : StepsIn(f)) step_total += e->duration_us;
  EXPECT_EQ(StepsIn(f).size(), 6u);
  EXPECT_EQ(IndependentSteps(text).size(), 6u);
  const auto totals = PhaseTotals(f);
  const int64_t data = totals.at(FrameworkPhase::kData);
  // About 69 of 72 ms per step (the fixture's README).
  EXPECT_GT(data, step_total * 9 / 10);
  EXPECT_LT(data, step_total);
  for (const auto& [phase, total] : totals) {
    if (phase != FrameworkPhase::kData) EXPECT_LT(total, data / 5) << FrameworkPhaseName(phase);
  }
}

TEST(PyTorchTraceTest, SyntheticKinetoPhasesCountOuterEventsOnly) {
  SyntheticTraceOptions o;
  const std::string text = SyntheticTrace(o, StepsOf(10, {2000, 2000, 2000}));
  const PyTorchTraceFile f = ParsePyTorchTrace(text, "w_4242.1795819707000000000.pt.trace.json");
  ASSERT_TRUE(f.complete);
  ASSERT_EQ(StepsIn(f).size(), 3u);
  EXPECT_EQ(StepsIn(f)[0]->step, 10);
  EXPECT_EQ(StepsIn(f)[0]->duration_us, 6500);
  EXPECT_EQ(StepsIn(f)[0]->start_us, 1795819707000000 + 1000);
  const auto totals = PhaseTotals(f);
  EXPECT_EQ(totals.at(FrameworkPhase::kData), 3 * 1000);
  EXPECT_EQ(totals.at(FrameworkPhase::kForward), 3 * 2000);
  EXPECT_EQ(totals.at(FrameworkPhase::kBackward), 3 * 3000);
  std::map<std::string, int64_t> by_category;
  for (const FrameworkEvent& e : f.events) by_category[e.category] += e.duration_us;
  EXPECT_EQ(by_category["Optimizer"], 3 * 500);
  EXPECT_EQ(by_category["GPU stream 7"], 3 * 2 * 100);
  EXPECT_EQ(by_category.count("CPU"), 0u);  // Nested operators are inside.
  for (const FrameworkEvent& e : f.events) {
    EXPECT_EQ(e.process, e.category.rfind("GPU", 0) == 0 ? 0 : 4242);
    EXPECT_GE(e.step, 10) << e.name;
  }
}

TEST(PyTorchTraceTest, EveryCutOfTheBytesReadsTheSame) {
  const std::string text = SyntheticTrace(SyntheticTraceOptions(), StepsOf(1, {2000, 3000}));
  const PyTorchTraceFile whole = ParsePyTorchTrace(text, "a.pt.trace.json");
  for (size_t cut = 1; cut < text.size(); cut += 7) {
    PyTorchTraceParser p("a.pt.trace.json");
    p.Feed(text.substr(0, cut));
    EXPECT_EQ(p.complete(), cut > text.rfind('}')) << cut;
    p.Feed(text.substr(cut));
    PyTorchTraceFile f = p.Finish(TraceFileInfo());
    ASSERT_TRUE(f.complete) << cut;
    ASSERT_EQ(f.events.size(), whole.events.size()) << cut;
    for (size_t i = 0; i < f.events.size(); ++i) {
      EXPECT_EQ(f.events[i].start_us, whole.events[i].start_us);
      EXPECT_EQ(f.events[i].name, whole.events[i].name);
    }
  }
}

TEST(PyTorchTraceTest, ArrayFormTakesItsTimeFromTheFileName) {
  SyntheticTraceOptions o;
  o.kineto = false;
  const std::string text = SyntheticTrace(o, StepsOf(200, {2000, 2000}));
  // torch 1.13 names files <host>_<pid>.<ms>.pt.trace.json: written when
  // the last event ended.
  const PyTorchTraceFile f = ParsePyTorchTrace(text, "dir/vm_1438.1795851405979.pt.trace.json");
  ASSERT_TRUE(f.complete);
  EXPECT_FALSE(f.has_base_time);
  ASSERT_EQ(StepsIn(f).size(), 2u);
  const FrameworkEvent& last = *StepsIn(f)[1];
  EXPECT_EQ(last.step, 201);
  EXPECT_EQ(last.start_us + last.duration_us, int64_t{1795851405979} * 1000);
  EXPECT_EQ(last.process, 1438);  // "pid": "CPU functions": the name's.
  const auto totals = PhaseTotals(f);
  EXPECT_EQ(totals.at(FrameworkPhase::kBackward), 2 * 3000);
  EXPECT_EQ(totals.at(FrameworkPhase::kData), 2 * 1000);

  const PyTorchTraceFile anonymous = ParsePyTorchTrace(text, "trace.pt.trace.json");
  EXPECT_TRUE(anonymous.events.empty());
  ASSERT_FALSE(anonymous.errors.empty());
  EXPECT_THAT(anonymous.errors[0], HasSubstr("no wall-clock time"));
}

// The bulk scanner (string bodies and nested values taken in runs) reads
// the same in any chunking: the data-loader fixture plus events whose
// strings hold escaped quotes and backslashes, a nested args object with
// brackets inside strings, and whitespace, fed in 1-, 3- and 4096-byte
// chunks.
TEST(PyTorchTraceTest, ChunkSizesAndEscapesReadTheSame) {
  std::string text = ReadAll(kDataLoaderTrace);
  const size_t last = text.rfind(']');
  ASSERT_NE(last, std::string::npos);
  const std::string extra =
      ",\n {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::\\\"odd\\\\\\\"{[\",\n"
      "  \"pid\": 1, \"tid\": 2, \"ts\": 5, \"dur\": 7,  \"args\": {\"s\": \"]}\\\\\", "
      "\"l\": [ {\"x\": \"\\\"}\"} ] } }\n";
  text.insert(last, extra);
  const PyTorchTraceFile whole = ParsePyTorchTrace(text, "a.pt.trace.json");
  ASSERT_TRUE(whole.complete);
  EXPECT_EQ(whole.malformed_events, 0) << (whole.errors.empty() ? "" : whole.errors[0]);
  bool odd_found = false;
  for (const FrameworkEvent& e : whole.events) odd_found |= e.name == "aten::\"odd\\\"{[";
  EXPECT_TRUE(odd_found);
  for (const size_t chunk : {size_t{1}, size_t{3}, size_t{4096}}) {
    PyTorchTraceParser p("a.pt.trace.json");
    for (size_t at = 0; at < text.size(); at += chunk) p.Feed(text.substr(at, chunk));
    const PyTorchTraceFile f = p.Finish(TraceFileInfoFromName("a.pt.trace.json"));
    ASSERT_TRUE(f.complete) << chunk;
    EXPECT_EQ(f.malformed_events, whole.malformed_events) << chunk;
    ASSERT_EQ(f.events.size(), whole.events.size()) << chunk;
    for (size_t i = 0; i < f.events.size(); ++i) {
      EXPECT_EQ(f.events[i].name, whole.events[i].name) << chunk;
      EXPECT_EQ(f.events[i].start_us, whole.events[i].start_us) << chunk;
      EXPECT_EQ(f.events[i].duration_us, whole.events[i].duration_us) << chunk;
    }
  }
}

TEST(PyTorchTraceTest, FileCutShortGivesItsCompleteEvents) {
  const std::string text = SyntheticTrace(SyntheticTraceOptions(), StepsOf(1, {2000, 2000, 2000}));
  const size_t cut = text.find("ProfilerStep#3");
  const PyTorchTraceFile f = ParsePyTorchTrace(text.substr(0, cut), "a.pt.trace.json");
  EXPECT_FALSE(f.complete);
  EXPECT_EQ(StepsIn(f).size(), 2u);
  EXPECT_EQ(f.malformed_events, 0);
}

TEST(PyTorchTraceTest, HostileValuesAreCountedNeverFatal) {
  const std::string head = "{\"baseTimeNanoseconds\": 1795819707000000000, \"traceEvents\": [";
  const std::string good =
      "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 1, "
      "\"tid\": 1, \"ts\": 10, \"dur\": 100}";
  const std::vector<std::string> bad = {
      "{\"ph\": \"X\", \"name\": \"aten::mm\", \"ts\": 1, \"dur\": -5}",
      "{\"ph\": \"X\", \"name\": \"aten::mm\", \"ts\": 1e400, \"dur\": 5}",
      "{\"ph\": \"X\", \"name\": \"aten::mm\", \"ts\": \"1\", \"dur\": 5}",
      "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#x\", \"ts\": 1, "
      "\"dur\": 5}",
      "{\"ph\": \"X\", \"name\": \"\xff\xfe\", \"ts\": 1, \"dur\": 5}",
      "[1, 2, 3]",
      "17",
      "{\"ph\": \"X\", \"name\": \"a\", \"ts\": 1, \"dur\": 5, \"args\": " + std::string(600, '[') +
          std::string(600, ']') + "}",
      "{\"ph\": \"X\", \"name\": \"" + std::string(kTraceEventTextLimit + 10, 'a') +
          "\", \"ts\": 1, \"dur\": 5}",
  };
  std::string text = head;
  for (const std::string& b : bad) absl::StrAppend(&text, b, ",\n");
  absl::StrAppend(&text, good, "]}");
  const PyTorchTraceFile f = ParsePyTorchTrace(text, "h.pt.trace.json");
  EXPECT_TRUE(f.complete);
  EXPECT_EQ(f.malformed_events, static_cast<int64_t>(bad.size()));
  EXPECT_EQ(f.errors.size(), kMaxTraceErrors);
  EXPECT_THAT(f.errors[0], HasSubstr("h.pt.trace.json: event 1: "));
  ASSERT_EQ(StepsIn(f).size(), 1u);
  EXPECT_EQ(StepsIn(f)[0]->step, 1);
}

// Found by pytorch_trace_fuzzer: an operator named like debugplane's step
// event is not a step (only ProfilerStep#N spans are).
TEST(PyTorchTraceTest, AnOperatorNamedLikeTheStepEventIsNoStep) {
  const std::string text =
      "{\"baseTimeNanoseconds\": 1795819707000000000, \"traceEvents\": ["
      "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#3\", "
      "\"pid\": 1, \"tid\": 1, \"ts\": 10, \"dur\": 100},"
      "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"Step:ModeKeys.TRAIN\", \"pid\": 1, "
      "\"tid\": 1, \"ts\": 500, \"dur\": 5}]}";
  const PyTorchTraceFile f = ParsePyTorchTrace(text, "h.pt.trace.json");
  ASSERT_TRUE(f.complete);
  ASSERT_EQ(StepsIn(f).size(), 1u);
  EXPECT_EQ(StepsIn(f)[0]->step, 3);
  bool operator_kept = false;
  for (const FrameworkEvent& e : f.events) {
    if (e.name == "Step:ModeKeys.TRAIN (operator)") operator_kept = true;
  }
  EXPECT_TRUE(operator_kept);
}

TEST(PyTorchTraceTest, TextThatIsNoTraceFailsNamingTheFile) {
  for (const std::string text :
       {"17", "\"x\"", "{\"traceEvents\": []} junk", "{]", "{\"a\" 1, 2: 3}"}) {
    PyTorchTraceParser p("bad.pt.trace.json");
    p.Feed(text);
    PyTorchTraceFile f = p.Finish(TraceFileInfo());
    EXPECT_TRUE(p.failed()) << text;
    EXPECT_FALSE(f.complete) << text;
    ASSERT_FALSE(f.errors.empty()) << text;
    EXPECT_THAT(f.errors[0], HasSubstr("bad.pt.trace.json: not a PyTorch profiler trace"));
  }
  const PyTorchTraceFile base = ParsePyTorchTrace(
      "{\"baseTimeNanoseconds\": \"soon\", \"traceEvents\": []}", "b.pt.trace.json");
  ASSERT_FALSE(base.errors.empty());
  EXPECT_THAT(base.errors[0], HasSubstr("baseTimeNanoseconds is not a non-negative integer"));
}

TEST(PyTorchTraceTest, PastTheRecordBudgetStepsAreStillRead) {
  SyntheticTraceOptions o;
  o.padding_ops = 20;
  const std::string text = SyntheticTrace(o, StepsOf(1, std::vector<int64_t>(50, 2000)));
  const PyTorchTraceFile f = ParsePyTorchTrace(text, "big.pt.trace.json", /*record_budget=*/200);
  EXPECT_TRUE(f.complete);
  EXPECT_GT(f.operators_dropped, 0);
  EXPECT_EQ(StepsIn(f).size(), 50u);
  ASSERT_FALSE(f.errors.empty());
  EXPECT_THAT(f.errors[0], HasSubstr("more than 200 events: later operators and kernels"));
}

TEST(PyTorchTraceTest, FileNames) {
  EXPECT_TRUE(IsPyTorchTraceName("vm_1.2.pt.trace.json"));
  EXPECT_TRUE(IsPyTorchTraceName("vm_1.2.pt.trace.json.gz"));
  EXPECT_FALSE(IsPyTorchTraceName("vm_1.2.pt.trace.json.tmp"));
  const TraceFileInfo ns =
      TraceFileInfoFromName("a/algo-1_77.1795819707712812939.pt.trace.json.gz");
  EXPECT_EQ(ns.file_pid, 77);
  EXPECT_EQ(ns.file_time_us, 1795819707712812);
  const TraceFileInfo none = TraceFileInfoFromName("trace.pt.trace.json");
  EXPECT_EQ(none.file_pid, -1);
  EXPECT_EQ(none.file_time_us, -1);
}

}  // namespace
}  // namespace debugplane::rules_engine
