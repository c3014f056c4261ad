#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/smdebug/smdebug_event.pb.h"
#include "rules_engine/smdebug/smdebug_json.h"
#include "rules_engine/smdebug/tfrecord.h"
#include "rules_engine/smdebug/trial_reader.h"
#include "tests/rules_engine/local_store.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Local;
using ::testing::Not;
using testing::TensorSpec;
using testing::TrialWriter;

const char kFixtures[] = DP_TEST_DATA_DIR "/smdebug";

bool All(const std::string&, const TrialInfo&) { return true; }

std::string Fixture(const std::string& name) { return absl::StrCat(kFixtures, "/", name); }

// Reads a whole trial in one call.
std::vector<Step> ReadAll(const std::string& dir, TrialReader* reader = nullptr,
                          const TensorFilter& filter = All) {
  TrialReader local(Local(dir));
  TrialReader* r = reader != nullptr ? reader : &local;
  absl::StatusOr<std::vector<Step>> steps = r->ReadNewSteps(filter);
  EXPECT_TRUE(steps.ok()) << steps.status();
  EXPECT_TRUE(r->finished());
  return steps.ok() ? *steps : std::vector<Step>();
}

// A fresh empty directory under the test temp dir.
std::string TempTrial(const std::string& name) {
  return testing::FreshTempDir(absl::StrCat("reader_test_", name));
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Copies one fixture file (by its path relative to the trial) into `dst`,
// optionally only its first `size` bytes. Never writes to the fixture.
void CopyRel(const std::string& src_trial, const std::string& dst_trial, const std::string& rel,
             size_t size = std::string::npos) {
  const std::string src = absl::StrCat(src_trial, "/", rel);
  ASSERT_TRUE(fs::exists(src)) << src;
  std::string data = ReadFile(src);
  if (size != std::string::npos) data.resize(size);
  ASSERT_TRUE(testing::WriteFile(absl::StrCat(dst_trial, "/", rel), data));
}

std::string EventRel(int64_t step) {
  return absl::StrFormat("events/%012d/%012d_worker_0.tfevents", step, step);
}
std::string IndexRel(int64_t step) {
  return absl::StrFormat("index/000000000/%012d_worker_0.json", step);
}
const char kCollectionsRel[] = "collections/000000000/worker_0_collections.json";

// --- The fixtures: real PyTorch + smdebug output -------------------------------

TEST(ReaderFixtureTest, HealthyHasTheMeasuredShape) {
  TrialReader reader(Local(Fixture("healthy")));
  std::vector<Step> steps = ReadAll(Fixture("healthy"), &reader);
  ASSERT_EQ(steps.size(), 72u);
  std::set<std::string> names;
  std::map<Mode, std::vector<int64_t>> mode_steps;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    EXPECT_EQ(s.global_step, static_cast<int64_t>(i));
    mode_steps[s.mode].push_back(s.mode_step);
    for (const Tensor& t : s.tensors) {
      names.insert(t.name);
      EXPECT_EQ(t.worker, "worker_0");
      // Labels and predictions (argmax) are int64 class ids; the rest float32.
      EXPECT_EQ(t.dtype, t.name == "labels" || t.name == "predictions" ? 9 : 1) << t.name;
    }
    const Tensor* loss = s.Find("CrossEntropyLoss_output_0");
    ASSERT_NE(loss, nullptr) << s.global_step;
    ASSERT_EQ(loss->values.size(), 1u);
    EXPECT_TRUE(std::isfinite(loss->values[0]));
    EXPECT_GT(loss->values[0], 0);
  }
  EXPECT_EQ(names.size(), 17u);
  ASSERT_EQ(mode_steps[Mode::kTrain].size(), 60u);
  ASSERT_EQ(mode_steps[Mode::kEval].size(), 12u);
  // Mode steps count up within each mode.
  for (size_t i = 0; i < 60; ++i) EXPECT_EQ(mode_steps[Mode::kTrain][i], static_cast<int64_t>(i));
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(mode_steps[Mode::kEval][i], static_cast<int64_t>(i));
  // Global step 5 is the first EVAL step (see its index file).
  EXPECT_EQ(steps[5].mode, Mode::kEval);
  EXPECT_EQ(steps[5].mode_step, 0);
  EXPECT_EQ(steps[5].Find("gradient/Sequential_fc1.weight"), nullptr);
  const Tensor* w = steps[0].Find("Sequential_fc1.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_THAT(w->shape, ElementsAre(32, 16));
  EXPECT_EQ(w->values.size(), 32u * 16u);

  const TrialSummary& summary = reader.summary();
  EXPECT_TRUE(summary.exists);
  EXPECT_TRUE(summary.has_collections);
  EXPECT_TRUE(summary.training_ended);
  EXPECT_EQ(summary.steps_seen, 72);
  EXPECT_EQ(summary.last_global_step, 71);
  EXPECT_EQ(summary.tensor_names_seen.size(), 17u);
  EXPECT_EQ(summary.records_skipped, 0);
  EXPECT_EQ(reader.info().num_workers, 1);
  EXPECT_THAT(reader.info().workers, ElementsAre("worker_0"));
  // Collections and smdebug's lookahead patterns (std::regex fallback).
  const TrialInfo& info = reader.info();
  EXPECT_TRUE(info.collections.count("relu_output"));
  EXPECT_TRUE(info.InCollection("weights", "Sequential_fc1.weight"));
  EXPECT_FALSE(info.InCollection("weights", "gradient/Sequential_fc1.weight"));
  EXPECT_TRUE(info.InCollection("gradients", "gradient/Sequential_fc1.weight"));
  EXPECT_TRUE(info.InCollection("biases", "Sequential_out.bias"));
  EXPECT_TRUE(info.InCollection("losses", "CrossEntropyLoss_output_0"));
  EXPECT_TRUE(info.InCollection("relu_output", "relu2_output_0"));
  EXPECT_FALSE(info.InCollection("nonexistent", "relu2_output_0"));
}

TEST(ReaderFixtureTest, FilterReadsOnlyWantedTensors) {
  std::vector<Step> steps =
      ReadAll(Fixture("healthy"), nullptr, [](const std::string& name, const TrialInfo& info) {
        return info.InCollection("losses", name);
      });
  ASSERT_EQ(steps.size(), 72u);
  for (const Step& s : steps) {
    ASSERT_EQ(s.tensors.size(), 1u);
    EXPECT_EQ(s.tensors[0].name, "CrossEntropyLoss_output_0");
  }
}

TEST(ReaderFixtureTest, AtMostMaxStepsPerCall) {
  TrialReader reader(Local(Fixture("healthy")));
  std::vector<int64_t> seen;
  for (int call = 0; call < 100 && !reader.finished(); ++call) {
    absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All, 10);
    ASSERT_TRUE(steps.ok()) << steps.status();
    EXPECT_LE(steps->size(), 10u);
    for (const Step& s : *steps) seen.push_back(s.global_step);
  }
  EXPECT_TRUE(reader.finished());
  ASSERT_EQ(seen.size(), 72u);  // Each step once, in order.
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int64_t>(i));
}

TEST(ReaderFixtureTest, EveryFixtureReads) {
  for (const auto& entry : fs::directory_iterator(kFixtures)) {
    TrialReader reader(Local(entry.path().string()));
    absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All);
    ASSERT_TRUE(steps.ok()) << entry.path() << ": " << steps.status();
    EXPECT_TRUE(reader.finished()) << entry.path();
    const size_t expected = entry.path().filename() == "overfit" ? 220u : 72u;
    EXPECT_EQ(steps->size(), expected) << entry.path();
    // A second call returns nothing new.
    absl::StatusOr<std::vector<Step>> again = reader.ReadNewSteps(All);
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->empty());
  }
}

bool AllFinite(const Step& s) {
  for (const Tensor& t : s.tensors) {
    for (double v : t.values) {
      if (!std::isfinite(v)) return false;
    }
  }
  return true;
}

TEST(ReaderFixtureTest, ExplodingTensorHasNonFiniteValuesFromStep2) {
  std::vector<Step> steps = ReadAll(Fixture("exploding_tensor"));
  ASSERT_EQ(steps.size(), 72u);
  EXPECT_TRUE(AllFinite(steps[0]));
  for (size_t i = 2; i < steps.size(); ++i) EXPECT_FALSE(AllFinite(steps[i])) << i;
  const Tensor* loss = steps[3].Find("CrossEntropyLoss_output_0");
  ASSERT_NE(loss, nullptr);
  EXPECT_FALSE(std::isfinite(loss->values[0]));
}

TEST(ReaderFixtureTest, DeadReluOutputsAreAllZero) {
  std::vector<Step> steps = ReadAll(Fixture("dead_relu"));
  ASSERT_EQ(steps.size(), 72u);
  int relu_tensors = 0;
  for (const Step& s : steps) {
    for (const Tensor& t : s.tensors) {
      if (t.name.find("relu") == std::string::npos) continue;
      ++relu_tensors;
      ASSERT_FALSE(t.values.empty());
      for (double v : t.values) ASSERT_EQ(v, 0.0) << t.name << " step " << s.global_step;
    }
  }
  EXPECT_EQ(relu_tensors, 72 * 2);
  // And in healthy most ReLU units are active.
  std::vector<Step> healthy = ReadAll(Fixture("healthy"));
  const Tensor* relu = healthy[10].Find("relu1_output_0");
  ASSERT_NE(relu, nullptr);
  size_t zeros = 0;
  for (double v : relu->values) zeros += v == 0.0;
  EXPECT_LT(zeros, relu->values.size());
}

// --- Incremental reading ------------------------------------------------------

TEST(ReaderIncrementalTest, StepsAppearExactlyOnceAsFilesArrive) {
  const std::string src = Fixture("healthy");
  const std::string dst = TempTrial("incremental");
  TrialReader reader(Local(dst));
  // Nothing yet: not even the collections file.
  absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  EXPECT_TRUE(reader.summary().exists);
  EXPECT_FALSE(reader.summary().has_collections);

  // An index and event file before the collections file: held back
  // (num_workers is not known yet).
  CopyRel(src, dst, EventRel(0));
  CopyRel(src, dst, IndexRel(0));
  got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  CopyRel(src, dst, kCollectionsRel);

  std::vector<int64_t> seen;
  for (int64_t step = 0; step < 12; ++step) {
    if (step > 0) {
      // Index without its event file: not complete yet.
      CopyRel(src, dst, IndexRel(step));
      got = reader.ReadNewSteps(All);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(got->empty()) << step;
      CopyRel(src, dst, EventRel(step));
    }
    got = reader.ReadNewSteps(All);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 1u) << step;
    EXPECT_EQ((*got)[0].global_step, step);
    seen.push_back(step);
    got = reader.ReadNewSteps(All);  // Nothing new.
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(got->empty());
  }
  EXPECT_FALSE(reader.finished());

  // Several at once, then the end marker.
  for (int64_t step = 12; step < 20; ++step) {
    CopyRel(src, dst, EventRel(step));
    CopyRel(src, dst, IndexRel(step));
  }
  CopyRel(src, dst, "training_job_end.ts");
  got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ((*got)[i].global_step, 12 + static_cast<int64_t>(i));
  EXPECT_TRUE(reader.finished());
  EXPECT_EQ(reader.summary().steps_seen, 20);
}

TEST(ReaderIncrementalTest, HalfWrittenEventFileHoldsStepBack) {
  const std::string src = Fixture("healthy");
  const std::string dst = TempTrial("half_written");
  CopyRel(src, dst, kCollectionsRel);
  CopyRel(src, dst, EventRel(0));
  CopyRel(src, dst, IndexRel(0));
  const size_t full = ReadFile(absl::StrCat(src, "/", EventRel(1))).size();
  // Cut in the middle of a record's payload, then inside a header.
  for (size_t cut : {full / 2, size_t{2203 + 5}, full - 1}) {
    CopyRel(src, dst, EventRel(1), cut);
    CopyRel(src, dst, IndexRel(1));
    TrialReader reader(Local(dst));
    absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 1u) << cut;  // Step 0 only.
    EXPECT_EQ((*got)[0].global_step, 0);
    got = reader.ReadNewSteps(All);
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(got->empty());
    // The writer finishes the file: step 1 comes, once.
    CopyRel(src, dst, EventRel(1));
    got = reader.ReadNewSteps(All);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 1u);
    EXPECT_EQ((*got)[0].global_step, 1);
    EXPECT_EQ((*got)[0].tensors.size(), 17u);
  }
}

TEST(ReaderIncrementalTest, TruncatedRecordAfterTrainingEndIsSkippedAndCounted) {
  const std::string src = Fixture("healthy");
  const std::string dst = TempTrial("truncated_end");
  CopyRel(src, dst, kCollectionsRel);
  CopyRel(src, dst, EventRel(0));
  CopyRel(src, dst, IndexRel(0));
  CopyRel(src, dst, EventRel(1), 3000);
  CopyRel(src, dst, IndexRel(1));
  CopyRel(src, dst, "training_job_end.ts");
  TrialReader reader(Local(dst));
  absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  // The records wholly within the first 3000 bytes are read, the rest counted.
  absl::StatusOr<StepIndex> index =
      ParseIndexJson(ReadFile(absl::StrCat(src, "/", IndexRel(1))), "index");
  ASSERT_TRUE(index.ok());
  size_t whole = 0;
  for (const IndexEntry& e : index->tensors) whole += e.start_idx + e.length <= 3000;
  ASSERT_GT(whole, 0u);
  EXPECT_EQ((*got)[1].tensors.size(), whole);
  EXPECT_EQ(reader.summary().records_skipped, static_cast<int64_t>(17 - whole));
  EXPECT_TRUE(reader.finished());
}

TEST(ReaderIncrementalTest, CorruptByteIsDataLossNamingFileOffsetAndTensor) {
  const std::string src = Fixture("healthy");
  const std::string dst = TempTrial("corrupt");
  CopyRel(src, dst, kCollectionsRel);
  CopyRel(src, dst, EventRel(0));
  CopyRel(src, dst, IndexRel(0));
  CopyRel(src, dst, IndexRel(1));
  std::string event = ReadFile(absl::StrCat(src, "/", EventRel(1)));
  // Flip a byte inside the second record's payload (it starts at 2203).
  event[2203 + 12 + 40] ^= 0x10;
  ASSERT_TRUE(testing::WriteFile(absl::StrCat(dst, "/", EventRel(1)), event));
  TrialReader reader(Local(dst));
  absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
  // Step 0 is good and returned; the error comes with the next call, and recurs.
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  for (int i = 0; i < 2; ++i) {
    got = reader.ReadNewSteps(All);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(got.status().message(), HasSubstr(EventRel(1)));
    EXPECT_THAT(got.status().message(), HasSubstr("offset 2203"));
    EXPECT_THAT(got.status().message(), HasSubstr("Sequential_fc1.bias"));
  }
  // A filter that does not need the damaged tensor reads the step.
  got = reader.ReadNewSteps([](const std::string& name, const TrialInfo&) {
    return name == "CrossEntropyLoss_output_0";
  });
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
}

TEST(ReaderIncrementalTest, MissingDirectoryYieldsNoSteps) {
  TrialReader reader(Local("/nonexistent/debugplane/trial"));
  absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  EXPECT_FALSE(reader.summary().exists);
  EXPECT_FALSE(reader.finished());
  EXPECT_EQ(reader.summary().path, "/nonexistent/debugplane/trial");
}

// --- Written with the test writer ---------------------------------------------

TEST(ReaderWriterTest, RoundTripWithPlaceholderFooter) {
  const std::string dir = TempTrial("writer");
  TrialWriter w(dir);
  w.AddStep(
      0, Mode::kTrain, 0,
      {{"CrossEntropyLoss_output_0", {}, {0.75}}, {"gradient/fc1.weight", {2, 2}, {1, -2, 3, -4}}});
  w.UsePlaceholderFooter(true);
  w.AddStep(1, Mode::kEval, 0, {{"CrossEntropyLoss_output_0", {}, {0.5}}});
  w.EndTraining();
  // The second step's records end with smdebug's placeholder footer.
  const std::string event = ReadFile(w.EventFile(1));
  TfRecordParse r = ParseTfRecord(event);
  ASSERT_EQ(r.kind, TfRecordParse::Kind::kOk);
  EXPECT_TRUE(r.placeholder_footer);

  std::vector<Step> steps = ReadAll(dir);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].mode, Mode::kTrain);
  ASSERT_EQ(steps[0].tensors.size(), 2u);
  EXPECT_EQ(steps[0].tensors[0].name, "CrossEntropyLoss_output_0");  // Sorted by name.
  EXPECT_THAT(steps[0].Find("gradient/fc1.weight")->values, ElementsAre(1, -2, 3, -4));
  EXPECT_THAT(steps[0].Find("gradient/fc1.weight")->shape, ElementsAre(2, 2));
  EXPECT_EQ(steps[1].mode, Mode::kEval);
  EXPECT_THAT(steps[1].Find("CrossEntropyLoss_output_0")->values, ElementsAre(0.5));
}

TEST(ReaderWriterTest, UnknownDtypeIsInvalidArgumentNamingTensor) {
  const std::string dir = TempTrial("dtype");
  TrialWriter w(dir);
  w.AddStep(0, Mode::kTrain, 0, {{"Sequential_fc1.weight", {2}, {1, 2}}});
  w.EndTraining();
  // Replace the record by one with dtype 99 (same framing, real CRCs).
  smdebug::Event event;
  ASSERT_TRUE(event.ParseFromString(
      TrialWriter::EncodeTensorEvent(0, Mode::kTrain, 0, {"Sequential_fc1.weight", {2}, {1, 2}})));
  event.mutable_summary()->mutable_value(0)->mutable_tensor()->set_dtype(
      static_cast<smdebug::DataType>(99));
  const std::string record = EncodeTfRecord(event.SerializeAsString());
  ASSERT_EQ(record.size(), ReadFile(w.EventFile(0)).size());
  ASSERT_TRUE(testing::WriteFile(w.EventFile(0), record));

  TrialReader reader(Local(dir));
  absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("Sequential_fc1.weight"));
  EXPECT_THAT(got.status().message(), HasSubstr("dtype 99"));
  EXPECT_THAT(got.status().message(), HasSubstr("000000000000_worker_0.tfevents"));
}

TEST(ReaderWriterTest, ErrorsNameFilesInTheTrialAndQuoteNoMoreThanAnExcerpt) {
  // A tensor named by 300 bytes of someone else's data, with a newline and
  // a control character in it, whose record has an unknown dtype.
  const std::string name = std::string(300, 'k') + "\n\x01" + "end";
  const std::string dir = TempTrial("hostile_name");
  TrialWriter w(dir);
  w.AddStep(0, Mode::kTrain, 0, {{name, {2}, {1, 2}}});
  w.EndTraining();
  smdebug::Event event;
  ASSERT_TRUE(event.ParseFromString(
      TrialWriter::EncodeTensorEvent(0, Mode::kTrain, 0, {name, {2}, {1, 2}})));
  event.mutable_summary()->mutable_value(0)->mutable_tensor()->set_dtype(
      static_cast<smdebug::DataType>(99));
  ASSERT_TRUE(testing::WriteFile(w.EventFile(0), EncodeTfRecord(event.SerializeAsString())));

  TrialReader reader(Local(dir));
  absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
  ASSERT_FALSE(got.ok());
  const std::string message(got.status().message());
  EXPECT_THAT(message, HasSubstr("events/000000000000/000000000000_worker_0.tfevents offset 0"));
  EXPECT_THAT(message, Not(HasSubstr(dir)));  // Relative to the trial.
  EXPECT_THAT(message, HasSubstr(absl::StrCat("\"", std::string(40, 'k'), "...\"")));
  EXPECT_THAT(message, Not(HasSubstr(std::string(41, 'k'))));
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_LT(message.size(), 300u);
}

TEST(ReaderWriterTest, SymbolicLinkInTheTrialIsAnErrorNamingIt) {
  const std::string dir = TempTrial("linked_index");
  const std::string outside = TempTrial("linked_index_outside");
  TrialWriter w(dir);
  w.AddStep(0, Mode::kTrain, 0, {{"loss_output_0", {}, {1}}});
  w.AddStep(1, Mode::kTrain, 1, {{"loss_output_0", {}, {2}}});
  w.EndTraining();
  // Step 1's index file becomes a link to a copy outside the trial.
  ASSERT_TRUE(testing::WriteFile(outside + "/index.json", ReadFile(w.IndexFile(1))));
  fs::remove(w.IndexFile(1));
  fs::create_symlink(outside + "/index.json", w.IndexFile(1));

  TrialReader reader(Local(dir));
  absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(got.status().message(),
              HasSubstr(absl::StrCat(w.IndexFile(1),
                                     " is a symbolic link; debugplane does not "
                                     "follow links inside a data root")));
}

TEST(ReaderWriterTest, MultipleWorkersCompleteTogether) {
  const std::string dir = TempTrial("workers");
  TrialWriter w0(dir, "worker_0", 2);
  TrialWriter w1(dir, "worker_1", 2);
  w0.AddStep(0, Mode::kTrain, 0, {{"loss_output_0", {}, {1}}});
  TrialReader reader(Local(dir));
  absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());  // worker_1 has not written step 0.
  w1.AddStep(0, Mode::kTrain, 0, {{"loss_output_0", {}, {2}}});
  got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  ASSERT_EQ((*got)[0].tensors.size(), 2u);
  EXPECT_EQ((*got)[0].tensors[0].worker, "worker_0");
  EXPECT_EQ((*got)[0].tensors[1].worker, "worker_1");
  EXPECT_EQ((*got)[0].Find("loss_output_0")->values[0], 1);
  EXPECT_THAT(reader.info().workers, ElementsAre("worker_0", "worker_1"));
  // worker_1 skips step 1; once step 2 was seen complete (at a read before:
  // a listing made while files are created can miss a worker's step 1 and
  // show its step 2), step 1 is returned with what exists.
  w0.AddStep(1, Mode::kTrain, 1, {{"loss_output_0", {}, {3}}});
  got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  w0.AddStep(2, Mode::kTrain, 2, {{"loss_output_0", {}, {4}}});
  w1.AddStep(2, Mode::kTrain, 2, {{"loss_output_0", {}, {5}}});
  w0.AddStep(3, Mode::kTrain, 3, {{"loss_output_0", {}, {6}}});
  got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].global_step, 1);
  EXPECT_EQ((*got)[0].tensors.size(), 1u);
  EXPECT_EQ((*got)[1].tensors.size(), 2u);
  // One worker's training_job_end.ts does not end a trial of two: step 3
  // still waits for worker_1.
  w0.EndTraining();
  got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  EXPECT_FALSE(reader.finished());
  EXPECT_TRUE(reader.summary().end_marker_seen);
  EXPECT_FALSE(reader.summary().training_ended);
  // The job's end does: the last read returns what is there.
  reader.SetTrainingEnded();
  got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].global_step, 3);
  EXPECT_EQ((*got)[0].tensors.size(), 1u);
  EXPECT_TRUE(reader.finished());
  EXPECT_TRUE(reader.summary().training_ended);
}

TEST(ReaderWriterTest, AStepAWorkerWritesAfterAnotherWorkersEndIsReadWhole) {
  // torch.distributed: rank 1 writes steps 0-2 and training_job_end.ts and
  // exits; rank 0 is slower and writes its steps 1 and 2 afterwards.
  const std::string dir = TempTrial("staggered_end");
  TrialWriter w0(dir, "worker_0", 2);
  TrialWriter w1(dir, "worker_1", 2);
  w0.AddStep(0, Mode::kTrain, 0, {{"loss_output_0", {}, {1}}});
  for (int step = 0; step < 3; ++step)
    w1.AddStep(step, Mode::kTrain, step, {{"loss_output_0", {}, {1}}});
  w1.EndTraining();
  TrialReader reader(Local(dir));
  for (int call = 0; call < 3; ++call) {
    absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), call == 0 ? 1u : 0u);  // Step 0 only, complete.
    EXPECT_FALSE(reader.finished());
  }
  w0.AddStep(1, Mode::kTrain, 1, {{"loss_output_0", {}, {2}}});
  w0.AddStep(2, Mode::kTrain, 2, {{"loss_output_0", {}, {std::nan("")}}});
  w0.EndTraining();
  absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  for (const Step& step : *got) EXPECT_EQ(step.tensors.size(), 2u) << step.global_step;
  EXPECT_TRUE(std::isnan((*got)[1].tensors[0].values[0]));
  EXPECT_FALSE(reader.finished());  // Only the job knows that both ended.
  reader.SetTrainingEnded();
  got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  EXPECT_TRUE(reader.finished());
}

TEST(ReaderWriterTest, AJobThatEndedWithoutATrialFinishesTheReader) {
  TrialReader reader(Local(TempTrial("never_written") + "/trial"));
  absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(reader.finished());
  reader.SetTrainingEnded();
  got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  EXPECT_TRUE(reader.finished());
  EXPECT_FALSE(reader.summary().exists);
}

TEST(ReaderWriterTest, HalfWrittenIndexWaitsThenErrorsWhenSettled) {
  const std::string dir = TempTrial("bad_index");
  TrialWriter w(dir);
  w.AddStep(0, Mode::kTrain, 0, {{"loss_output_0", {}, {1}}});
  const std::string index = ReadFile(w.IndexFile(0));
  ASSERT_TRUE(testing::WriteFile(w.IndexFile(0), index.substr(0, index.size() / 2)));
  TrialReader reader(Local(dir));
  absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  ASSERT_TRUE(testing::WriteFile(w.IndexFile(0), index));
  got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 1u);
  // A step whose index never parses is an error once a later step was seen
  // complete (at the read before).
  w.AddStep(1, Mode::kTrain, 1, {{"loss_output_0", {}, {1}}});
  ASSERT_TRUE(testing::WriteFile(w.IndexFile(1), "{\"meta\": "));
  w.AddStep(2, Mode::kTrain, 2, {{"loss_output_0", {}, {1}}});
  got = reader.ReadNewSteps(All);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  got = reader.ReadNewSteps(All);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("000000000001_worker_0.json"));
}

TEST(ReaderWriterTest, IndexLengthDisagreeingWithRecordIsDataLoss) {
  const std::string dir = TempTrial("bad_length");
  TrialWriter w(dir);
  w.AddStep(0, Mode::kTrain, 0, {{"a_output_0", {}, {1}}, {"b_output_0", {}, {2}}});
  w.EndTraining();
  std::string index = ReadFile(w.IndexFile(0));
  absl::StatusOr<StepIndex> parsed = ParseIndexJson(index, "i");
  ASSERT_TRUE(parsed.ok());
  // Point the second entry at offset 1: the "record" there fails its CRC.
  const std::string needle = absl::StrCat("\"start_idx\":", parsed->tensors[1].start_idx);
  const size_t pos = index.find(needle);
  ASSERT_NE(pos, std::string::npos) << index;
  index.replace(pos, needle.size(), "\"start_idx\":1");
  ASSERT_TRUE(testing::WriteFile(w.IndexFile(0), index));
  TrialReader reader(Local(dir));
  absl::StatusOr<std::vector<Step>> got = reader.ReadNewSteps(All);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("offset 1"));
  EXPECT_THAT(got.status().message(), HasSubstr("b_output_0"));
}

// --- JSON parsers and Step helpers ---------------------------------------------

TEST(ReaderJsonTest, IndexAndCollections) {
  absl::StatusOr<StepIndex> index = ParseIndexJson(
      R"({"meta": {"mode": "EVAL", "mode_step": 3, "event_file_name": "e"},
          "tensor_payload": [{"tensorname": "x", "start_idx": 5, "length": 20}]})",
      "f.json");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->mode, Mode::kEval);
  EXPECT_EQ(index->mode_step, 3);
  ASSERT_EQ(index->tensors.size(), 1u);
  EXPECT_EQ(index->tensors[0].start_idx, 5u);
  for (const char* bad :
       {"", "[]", "{", R"({"tensor_payload": [{"tensorname": 1}]})",
        R"({"tensor_payload": [{"tensorname": "x", "start_idx": -1, "length": 2}]})"}) {
    absl::StatusOr<StepIndex> r = ParseIndexJson(bad, "bad.json");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("bad.json"));
  }
  absl::StatusOr<CollectionsFile> c = ParseCollectionsJson(
      R"({"collections": {"losses": {"name": "losses", "include_regex": ["loss"],
          "tensor_names": ["a", 3]}}, "_meta": {"num_workers": 4}})",
      "c.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_workers, 4);
  EXPECT_THAT(c->collections["losses"].tensor_names, ElementsAre("a"));
}

// ParseIndexJson's in-place scanner must give nlohmann's outcome for every
// input: the smdebug form, variants it leaves to nlohmann, and every prefix
// and single-byte change of them.
void ExpectSameIndex(const std::string& text) {
  absl::StatusOr<StepIndex> fast = ParseIndexJson(text, "f.json");
  absl::StatusOr<StepIndex> ref = ParseIndexJsonWithNlohmann(text, "f.json");
  ASSERT_EQ(fast.status(), ref.status()) << text;
  if (!fast.ok()) return;
  EXPECT_EQ(fast->mode, ref->mode) << text;
  EXPECT_EQ(fast->mode_step, ref->mode_step) << text;
  EXPECT_EQ(fast->event_file_name, ref->event_file_name) << text;
  ASSERT_EQ(fast->tensors.size(), ref->tensors.size()) << text;
  for (size_t i = 0; i < fast->tensors.size(); ++i) {
    EXPECT_EQ(fast->tensors[i].tensor_name, ref->tensors[i].tensor_name) << text;
    EXPECT_EQ(fast->tensors[i].start_idx, ref->tensors[i].start_idx) << text;
    EXPECT_EQ(fast->tensors[i].length, ref->tensors[i].length) << text;
  }
}

TEST(ReaderJsonTest, IndexScannerAgreesWithJsonParser) {
  const std::vector<std::string> texts = {
      R"({"meta": {"mode": "TRAIN", "mode_step": 0, "event_file_name": "events/000000000000/000000000000_worker_0.tfevents"}, "tensor_payload": [{"tensorname": "Sequential_fc1.weight", "start_idx": 0, "length": 2201}, {"tensorname": "gradient/fc1.bias", "start_idx": 2201, "length": 247}], "shape_payload": []})",
      R"({"tensor_payload": []})",
      R"( { "tensor_payload" : [ ] , "meta" : null } )",
      R"({"meta": {"mode": "EVAL", "mode_step": 3.0}, "tensor_payload": []})",
      R"({"meta": {"mode": 2, "mode_step": -4, "x": [1, {"y": [true, false, null]}]}, "tensor_payload": []})",
      R"({"meta": {"mode": "PREDICT", "mode_step": "7"}, "tensor_payload": [{"tensorname": "a", "start_idx": 12.0, "length": 3}]})",
      R"({"meta": {"mode": "TRAIN", "mode": "EVAL"}, "tensor_payload": []})",
      R"({"tensor_payload": [{"tensorname": "a", "start_idx": 1, "length": 2}], "tensor_payload": []})",
      R"({"tensor_payload": [{"tensorname": "a\u0062", "start_idx": 1, "length": 2, "extra": {"k": "v"}}]})",
      R"({"tensor_payload": [{"tensorname": "a", "start_idx": 18446744073709551615, "length": 2}]})",
      R"({"tensor_payload": [{"tensorname": "a", "start_idx": 9223372036854775807, "length": 02}]})",
      R"({"tensor_payload": [{"tensorname": "a", "start_idx": 1, "length": 2}]} x)",
      "{\"tensor_payload\": [{\"tensorname\": \"caf\xc3\xa9\", \"start_idx\": 1, \"length\": 2}]}",
      "\xef\xbb\xbf{\"tensor_payload\": []}",
      R"({"shape_payload": [{"tensorname": "a", "originalshape": [-1, 1e3]}], "tensor_payload": []})",
  };
  for (const std::string& text : texts) {
    ExpectSameIndex(text);
    for (size_t n = 0; n < text.size(); ++n) ExpectSameIndex(text.substr(0, n));
    for (size_t i = 0; i < text.size(); ++i) {
      for (char c : {'"', '{', '}', '[', ']', ',', ':', '0', '-', '.', 'e', '\\', ' ', 'x'}) {
        std::string changed = text;
        changed[i] = c;
        ExpectSameIndex(changed);
      }
    }
  }
}

TEST(ReaderStepTest, FindAndModeName) {
  Step s;
  s.tensors = {{"a", "worker_0"}, {"b", "worker_0"}, {"b", "worker_1"}};
  ASSERT_NE(s.Find("b"), nullptr);
  EXPECT_EQ(s.Find("b")->worker, "worker_0");
  EXPECT_EQ(s.Find("c"), nullptr);
  EXPECT_EQ(ModeName(Mode::kTrain), "TRAIN");
  EXPECT_EQ(ModeName(Mode::kGlobal), "GLOBAL");
  TrialInfo info;
  info.collections["bad"] = {"bad", {"(unclosed", "^ok$"}, {}};
  EXPECT_FALSE(info.InCollection("bad", "x"));  // Invalid patterns match nothing.
  EXPECT_TRUE(info.InCollection("bad", "ok"));
}

}  // namespace
}  // namespace debugplane::rules_engine
