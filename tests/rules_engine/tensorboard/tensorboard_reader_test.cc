// TensorBoardReader over event files: the real fixtures of today's
// frameworks (tests/data/frameworks/) and synthetic files of the test-side
// writer (torn records, rotated files, both scalar forms, histograms,
// several workers, hostile data).

#include "rules_engine/tensorboard/tensorboard_reader.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rules_engine/smdebug/crc32c.h"
#include "rules_engine/smdebug/tfrecord.h"
#include "rules_engine/tensorboard/tag_naming.h"
#include "tests/rules_engine/local_store.h"
#include "tests/rules_engine/tb_event_writer.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::rules_engine::tensorboard {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Local;
using testing::TbEventWriter;

const std::string kFrameworks = DP_TEST_DATA_DIR "/frameworks";

bool All(const std::string&, const TrialInfo&) { return true; }

absl::StatusOr<std::vector<Step>> Read(TensorBoardReader& reader, const TensorFilter& f = All) {
  return reader.ReadNewSteps(f);
}

// Every step of `dir` (training ended), read in one call.
std::vector<Step> ReadAll(const std::string& dir, TensorBoardReader* out = nullptr) {
  TensorBoardReader local(Local(dir));
  TensorBoardReader& reader = out != nullptr ? *out : local;
  reader.SetTrainingEnded();
  absl::StatusOr<std::vector<Step>> steps = Read(reader);
  EXPECT_TRUE(steps.ok()) << steps.status();
  EXPECT_TRUE(reader.finished());
  return steps.ok() ? *steps : std::vector<Step>();
}

// The value of `tag` at each step that has it, in order.
std::map<int64_t, double> Series(const std::vector<Step>& steps, const std::string& tag) {
  std::map<int64_t, double> out;
  for (const Step& s : steps) {
    if (const Tensor* t = s.Find(tag); t != nullptr && !t->values.empty()) {
      out[s.global_step] = t->values[0];
    }
  }
  return out;
}

TEST(TagNamingTest, ModesAndCollectionsOfTodaysFrameworks) {
  EXPECT_EQ(ModeOfTag("train/loss"), Mode::kTrain);
  EXPECT_EQ(ModeOfTag("eval/loss"), Mode::kEval);
  EXPECT_EQ(ModeOfTag("train_loss"), Mode::kTrain);
  EXPECT_EQ(ModeOfTag("val_loss"), Mode::kEval);
  EXPECT_EQ(ModeOfTag("Loss/train"), Mode::kTrain);
  EXPECT_EQ(ModeOfTag("Loss/eval"), Mode::kEval);
  EXPECT_EQ(ModeOfTag("loss_validation"), Mode::kEval);
  EXPECT_EQ(ModeOfTag("gradients/fc1.weight"), Mode::kGlobal);
  EXPECT_EQ(ModeOfTag("trainable_params"), Mode::kGlobal);  // A word, not a mode token.
  EXPECT_EQ(CollectionOfTag("train/train_loss"), "losses");
  EXPECT_EQ(CollectionOfTag("val_loss"), "losses");
  EXPECT_EQ(CollectionOfTag("Loss/eval"), "losses");
  EXPECT_EQ(CollectionOfTag("train/grad_norm"), "gradients");
  EXPECT_EQ(CollectionOfTag("gradients/fc1.weight"), "gradients");
  EXPECT_EQ(CollectionOfTag("grad/0.weight"), "gradients");
  EXPECT_EQ(CollectionOfTag("weights/fc1.weight"), "weights");
  EXPECT_EQ(CollectionOfTag("params/fc1"), "weights");
  EXPECT_EQ(CollectionOfTag("train/learning_rate"), "");
  EXPECT_EQ(SeriesOfTag("train/loss"), SeriesOfTag("eval/loss"));
  EXPECT_EQ(SeriesOfTag("train_loss"), SeriesOfTag("val_loss"));
}

TEST(TensorBoardFixturesTest, PyTorchH200PhasesHasTheNaNAtStep183) {
  TensorBoardReader reader(Local(kFrameworks + "/pytorch-h200-phases/tb"));
  const std::vector<Step> steps = ReadAll(kFrameworks + "/pytorch-h200-phases/tb", &reader);
  const std::map<int64_t, double> loss = Series(steps, "loss/train");
  ASSERT_TRUE(loss.count(183));
  EXPECT_TRUE(std::isnan(loss.at(183)));
  ASSERT_TRUE(loss.count(182));
  EXPECT_GT(loss.at(182), 1e32);
  for (const auto& [step, v] : loss) {
    if (step < 182) {
      EXPECT_TRUE(std::isfinite(v)) << step;
    }
  }
  // Histograms of weights and gradients, by HistogramProto, in their collections.
  const TensorBoardSummary& tb = reader.tensorboard_summary();
  EXPECT_GT(tb.histograms, 0);
  bool histogram = false;
  for (const Step& s : steps) {
    for (const Tensor& t : s.tensors) {
      if (!t.histogram) continue;
      histogram = true;
      EXPECT_TRUE(reader.info().InCollection("gradients", t.name) ||
                  reader.info().InCollection("weights", t.name))
          << t.name;
      EXPECT_EQ(t.histogram->bucket.size(), t.histogram->bucket_limit.size());
      EXPECT_GT(t.histogram->num, 0);
    }
  }
  EXPECT_TRUE(histogram);
  EXPECT_TRUE(reader.info().InCollection("losses", "loss/train"));
  EXPECT_EQ(reader.info().workers, std::vector<std::string>{"."});
}

TEST(TensorBoardFixturesTest, HuggingFaceDivergeHasNaNGradNormFromStep5) {
  const std::vector<Step> steps = ReadAll(kFrameworks + "/hf-trainer-diverge/tb");
  const std::map<int64_t, double> grad_norm = Series(steps, "train/grad_norm");
  ASSERT_FALSE(grad_norm.empty());
  EXPECT_EQ(grad_norm.begin()->first, 5);
  EXPECT_TRUE(std::isnan(grad_norm.begin()->second));
  // eval/loss comes as an EVAL step of the same global step, after the TRAIN one.
  bool eval_nan = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].mode != Mode::kEval) continue;
    ASSERT_GT(i, 0u);
    EXPECT_LE(steps[i - 1].global_step, steps[i].global_step);
    if (const Tensor* t = steps[i].Find("eval/loss"); t != nullptr) {
      eval_nan |= std::isnan(t->values.at(0));
    }
  }
  EXPECT_TRUE(eval_nan);
  // The Trainer's filter: train/loss reads 0.0 from step 10.
  EXPECT_EQ(Series(steps, "train/loss").at(10), 0.0);
}

TEST(TensorBoardFixturesTest, HuggingFaceOverfitTrainFallsEvalRises) {
  TensorBoardReader reader(Local(kFrameworks + "/hf-trainer-overfit/tb"));
  const std::vector<Step> steps = ReadAll(kFrameworks + "/hf-trainer-overfit/tb", &reader);
  const std::map<int64_t, double> train = Series(steps, "train/loss");
  const std::map<int64_t, double> eval = Series(steps, "eval/loss");
  ASSERT_GE(train.size(), 2u);
  ASSERT_GE(eval.size(), 2u);
  EXPECT_LT(train.rbegin()->second, train.begin()->second);
  EXPECT_GT(eval.rbegin()->second, eval.begin()->second);
  // The text summaries of the arguments are skipped, with a count.
  EXPECT_GT(reader.tensorboard_summary().skipped_values, 0);
}

TEST(TensorBoardFixturesTest, LightningVersionDirectoryIsTheWorker) {
  TensorBoardReader reader(Local(kFrameworks + "/lightning-overfit/tb"));
  const std::vector<Step> steps = ReadAll(kFrameworks + "/lightning-overfit/tb", &reader);
  EXPECT_FALSE(Series(steps, "train_loss").empty());
  EXPECT_FALSE(Series(steps, "val_loss").empty());
  EXPECT_EQ(reader.info().workers, std::vector<std::string>{"version_0"});
  EXPECT_TRUE(reader.info().InCollection("losses", "val_loss"));
}

class TensorBoardSyntheticTest : public ::testing::Test {
 protected:
  std::string File(const std::string& rel) { return (dir_.path() / rel).string(); }
  std::string dir() const { return dir_.path().string(); }
  ::debugplane::testing::ScopedTempDir dir_;
};

TEST_F(TensorBoardSyntheticTest, BothScalarFormsAndBothHistogramForms) {
  TbEventWriter w(File("events.out.tfevents.1.host.1.0"));
  w.Scalar(1, "train/loss", 2.5f);
  w.TensorScalar(1, "eval/loss", 3.5f);
  HistogramStats h;
  h.min = -1;
  h.max = 2;
  h.num = 4;
  h.sum = 2;
  h.sum_squares = 6;
  h.bucket_limit = {0, 1, 2};
  h.bucket = {1, 2, 1};
  w.Histogram(1, "gradients/fc1.weight", h);
  w.Tf2Histogram(1, "weights/fc1.weight", {{{-1, 0, 1}}, {{0, 1, 0}}, {{1, 3, 2}}});
  w.Text(1, "args", "lr=1e-3");
  w.Scalar(2, "train/loss", 2.0f);
  const std::vector<Step> steps = ReadAll(dir());
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].mode, Mode::kTrain);
  EXPECT_EQ(steps[1].mode, Mode::kEval);
  EXPECT_EQ(steps[1].global_step, 1);
  EXPECT_EQ(steps[1].Find("eval/loss")->values, std::vector<double>{3.5});
  const Tensor* g = steps[0].Find("gradients/fc1.weight");
  ASSERT_NE(g, nullptr);
  ASSERT_TRUE(g->histogram);
  EXPECT_TRUE(g->values.empty());
  EXPECT_EQ(g->histogram->sum_squares, 6);
  EXPECT_TRUE(g->histogram->exact_moments);
  const Tensor* wt = steps[0].Find("weights/fc1.weight");
  ASSERT_NE(wt, nullptr);
  ASSERT_TRUE(wt->histogram);
  EXPECT_FALSE(wt->histogram->exact_moments);
  EXPECT_EQ(wt->histogram->num, 3);
  EXPECT_EQ(wt->histogram->min, -1);  // Outer edges of the non-empty buckets.
  EXPECT_EQ(wt->histogram->max, 3);
  EXPECT_EQ(steps[0].Find("args"), nullptr);
}

TEST_F(TensorBoardSyntheticTest, TornRecordIsNeverReadAndResumesAtItsStart) {
  TbEventWriter w(File("events.out.tfevents.1.host.1.0"));
  w.Scalar(1, "train/loss", 1.0f);
  w.Scalar(2, "train/loss", 0.9f);
  const std::string record = testing::TbRecord(testing::TbScalarEvent(3, "train/loss", 0.8f, 2e9));
  w.Raw(record.substr(0, record.size() / 2));  // Half of step 3.
  TensorBoardReader reader(Local(dir()));
  absl::StatusOr<std::vector<Step>> first = Read(reader);
  ASSERT_TRUE(first.ok()) << first.status();
  // Step 1 is complete (step 2 was written after it); step 2 waits for a later step.
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].global_step, 1);
  w.Raw(record.substr(record.size() / 2));
  w.Scalar(4, "train/loss", 0.7f);
  absl::StatusOr<std::vector<Step>> second = Read(reader);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->size(), 2u);
  EXPECT_EQ((*second)[1].global_step, 3);
  EXPECT_FLOAT_EQ((*second)[1].Find("train/loss")->values[0], 0.8f);
  EXPECT_EQ(reader.summary().records_skipped, 0);
  // Training ends with a torn record: counted, and the last step returned.
  w.Raw(record.substr(0, 7));
  reader.SetTrainingEnded();
  absl::StatusOr<std::vector<Step>> last = Read(reader);
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ((*last)[0].global_step, 4);
  EXPECT_EQ(reader.summary().records_skipped, 1);
  EXPECT_TRUE(reader.finished());
}

TEST_F(TensorBoardSyntheticTest, IncrementalReadsFetchOnlyNewBytes) {
  TbEventWriter w(File("events.out.tfevents.1.host.1.0"));
  for (int step = 0; step < 50; ++step) w.Scalar(step, "train/loss", 1.0f / (step + 1));
  TensorBoardReader reader(Local(dir()));
  ASSERT_TRUE(Read(reader).ok());
  const int64_t after_first = reader.summary().read.bytes;
  EXPECT_EQ(after_first, static_cast<int64_t>(fs::file_size(w.path())));
  w.Scalar(50, "train/loss", 0.01f);
  absl::StatusOr<std::vector<Step>> more = Read(reader);
  ASSERT_TRUE(more.ok());
  ASSERT_EQ(more->size(), 1u);
  EXPECT_EQ((*more)[0].global_step, 49);
  EXPECT_EQ(reader.summary().read.bytes, static_cast<int64_t>(fs::file_size(w.path())));
}

TEST_F(TensorBoardSyntheticTest, RestartFileReplacesPendingValuesAndCountsLateOnes) {
  TbEventWriter first(File("events.out.tfevents.1.host.1.0"), 1000);
  for (int step = 0; step <= 5; ++step) first.Scalar(step, "train/loss", 1.0f);
  TensorBoardReader reader(Local(dir()));
  ASSERT_EQ(Read(reader)->size(), 5u);  // Steps 0-4; 5 waits.
  // The restart resumes from a checkpoint at step 3 in a new file of the same host.
  TbEventWriter second(File("events.out.tfevents.2.host.2.0"), 2000);
  for (int step = 3; step <= 7; ++step) second.Scalar(step, "train/loss", 2.0f);
  reader.SetTrainingEnded();
  absl::StatusOr<std::vector<Step>> rest = Read(reader);
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_EQ(rest->size(), 3u);
  EXPECT_EQ((*rest)[0].global_step, 5);
  EXPECT_EQ((*rest)[0].Find("train/loss")->values[0], 2.0);  // The later file's value.
  EXPECT_EQ(reader.tensorboard_summary().late_records, 2);   // Steps 3 and 4 again.
  EXPECT_EQ(reader.info().workers, std::vector<std::string>{"."});
}

TEST_F(TensorBoardSyntheticTest, WorkersOfSeveralHostsAndRunDirectoriesStayApart) {
  TbEventWriter a(File("runs/a/events.out.tfevents.1.host-a.1.0"), 1000);
  TbEventWriter b(File("runs/a/events.out.tfevents.1.host-b.7.0"), 1000);
  TbEventWriter c(File("runs/b/events.out.tfevents.1.host-a.3.0"), 1000);
  for (int step = 0; step < 3; ++step) {
    a.Scalar(step, "train/loss", 1);
    b.Scalar(step, "train/loss", 2);
  }
  c.Scalar(0, "train/loss", 3);
  TensorBoardReader reader(Local(dir()));
  absl::StatusOr<std::vector<Step>> live = Read(reader);
  ASSERT_TRUE(live.ok());
  // runs/b has written only step 0: nothing after step 0 is complete yet.
  EXPECT_EQ(live->size(), 0u);
  reader.SetTrainingEnded();
  const std::vector<Step> steps = *Read(reader);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].tensors.size(), 3u);
  EXPECT_THAT(reader.info().workers, ElementsAre("runs/a", "runs/a@host-b", "runs/b"));
}

TEST_F(TensorBoardSyntheticTest, RunThatEndedBeforeAnotherStartedDoesNotHoldItBack) {
  // Hugging Face restarts into a new runs/<date>_<host>/: the old run's
  // last event is older than the new run's first, so it is no longer live.
  TbEventWriter old_run(File("runs/a/events.out.tfevents.1.host.1.0"), 1000);
  for (int step = 0; step <= 5; ++step) old_run.Scalar(step, "train/loss", 1);
  TbEventWriter new_run(File("runs/b/events.out.tfevents.2.host.1.0"), 5000);
  for (int step = 0; step <= 10; ++step) new_run.Scalar(step, "train/loss", 2);
  TensorBoardReader reader(Local(dir()));
  absl::StatusOr<std::vector<Step>> steps = Read(reader);
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->size(), 10u);  // Steps 0-9; step 10 waits for a later one.
  EXPECT_EQ(steps->back().global_step, 9);
  EXPECT_EQ((*steps)[0].tensors.size(), 2u);  // Both runs' values at step 0, as two workers.
}

TEST_F(TensorBoardSyntheticTest, BoundedCallsReadALargeBacklogInOrder) {
  TbEventWriter w(File("events.out.tfevents.1.host.1.0"));
  for (int step = 0; step < 2000; ++step) w.Scalar(step, "train/loss", static_cast<float>(step));
  TensorBoardReader reader(Local(dir()));
  reader.SetTrainingEnded();
  int64_t next = 0;
  int calls = 0;
  while (!reader.finished()) {
    absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All, ReadBudget{.max_steps = 64});
    ASSERT_TRUE(steps.ok()) << steps.status();
    ASSERT_LE(steps->size(), 64u);
    for (const Step& s : *steps) EXPECT_EQ(s.global_step, next++);
    ASSERT_LT(++calls, 100);
  }
  EXPECT_EQ(next, 2000);
}

TEST_F(TensorBoardSyntheticTest, ExtremeValuesArriveUnchanged) {
  TbEventWriter w(File("events.out.tfevents.1.host.1.0"));
  const float inf = std::numeric_limits<float>::infinity();
  w.Scalar(1, "a", std::numeric_limits<float>::quiet_NaN());
  w.Scalar(1, "b", -inf);
  w.Scalar(1, "c", std::numeric_limits<float>::max());
  w.Scalar(1, "d", std::numeric_limits<float>::denorm_min());
  w.Scalar(-3, "e", 1);  // Negative steps are steps too (before every other).
  const std::vector<Step> steps = ReadAll(dir());
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].global_step, -3);
  EXPECT_TRUE(std::isnan(steps[1].Find("a")->values[0]));
  EXPECT_EQ(steps[1].Find("b")->values[0], -inf);
  EXPECT_EQ(steps[1].Find("c")->values[0], std::numeric_limits<float>::max());
  EXPECT_EQ(steps[1].Find("d")->values[0], std::numeric_limits<float>::denorm_min());
}

TEST_F(TensorBoardSyntheticTest, IncludeRegexOverridesTheNaming) {
  TbEventWriter w(File("events.out.tfevents.1.host.1.0"));
  w.Scalar(1, "train/loss", 1);
  w.Scalar(1, "objective", 1);
  TensorBoardReader reader(Local(dir()),
                           TensorBoardOptions{.include_regex = {{"losses", {"obj"}}}});
  ReadAll(dir(), &reader);
  EXPECT_TRUE(reader.info().InCollection("losses", "objective"));
  EXPECT_FALSE(reader.info().InCollection("losses", "train/loss"));
}

TEST_F(TensorBoardSyntheticTest, OnlyWantedTensorsAreKept) {
  TbEventWriter w(File("events.out.tfevents.1.host.1.0"));
  w.Scalar(1, "train/loss", 1);
  w.Scalar(1, "train/learning_rate", 1);
  TensorBoardReader reader(Local(dir()));
  reader.SetTrainingEnded();
  absl::StatusOr<std::vector<Step>> steps =
      reader.ReadNewSteps([](const std::string& tag,
                             const TrialInfo& info) { return info.InCollection("losses", tag); },
                          ReadBudget{});
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 1u);
  ASSERT_EQ((*steps)[0].tensors.size(), 1u);
  EXPECT_EQ((*steps)[0].tensors[0].name, "train/loss");
}

// --- Error paths -----------------------------------------------------------------

TEST_F(TensorBoardSyntheticTest, CorruptRecordNamesFileAndOffset) {
  TbEventWriter w(File("runs/x/events.out.tfevents.1.host.1.0"));
  std::string record = testing::TbRecord(testing::TbScalarEvent(1, "loss", 1, 1e9));
  record[20] ^= 0x40;  // Payload byte: the payload CRC no longer matches.
  w.Raw(record);
  TensorBoardReader reader(Local(dir()));
  absl::StatusOr<std::vector<Step>> steps = Read(reader);
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(steps.status().message(), HasSubstr("runs/x/events.out.tfevents.1.host.1.0"));
  EXPECT_THAT(steps.status().message(), HasSubstr("offset"));
  EXPECT_EQ(Read(reader).status(), steps.status());  // The same error recurs.
}

TEST_F(TensorBoardSyntheticTest, RecordThatIsNotAnEventIsDataLoss) {
  TbEventWriter w(File("events.out.tfevents.1.host.1.0"));
  w.Raw(testing::TbRecord(std::string("\xff\xff\xff", 3)));
  TensorBoardReader reader(Local(dir()));
  absl::StatusOr<std::vector<Step>> steps = Read(reader);
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(steps.status().message(), HasSubstr("not a TensorBoard Event"));
}

TEST_F(TensorBoardSyntheticTest, OversizedRecordIsRefusedWithoutReadingIt) {
  TbEventWriter w(File("events.out.tfevents.1.host.1.0"));
  // A verified header (length and its CRC) that claims a 1 GiB payload.
  const uint64_t length = uint64_t{1} << 30;
  std::string header(8, '\0');
  for (int i = 0; i < 8; ++i) header[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  const uint32_t crc = MaskedCrc32c(header);
  for (int i = 0; i < 4; ++i) header.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  w.Raw(header + std::string(100, 'x'));
  TensorBoardReader reader(Local(dir()));
  absl::StatusOr<std::vector<Step>> steps = Read(reader);
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(steps.status().message(), HasSubstr("one event record"));
  EXPECT_LT(reader.summary().read.bytes, 1 << 20);
}

TEST_F(TensorBoardSyntheticTest, InconsistentHistogramNamesTheTag) {
  TbEventWriter w(File("events.out.tfevents.1.host.1.0"));
  HistogramStats h;
  h.bucket_limit = {1, 2};
  h.bucket = {1};
  w.Histogram(1, "gradients/x", h);
  TensorBoardReader reader(Local(dir()));
  absl::StatusOr<std::vector<Step>> steps = Read(reader);
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(steps.status().message(), HasSubstr("gradients/x"));
  EXPECT_THAT(steps.status().message(), HasSubstr("1 bucket counts and 2 bucket limits"));
}

TEST_F(TensorBoardSyntheticTest, Tf2HistogramOfTheWrongShapeIsRefused) {
  TbEventWriter w(File("events.out.tfevents.1.host.1.0"));
  w.Record(testing::TbTensorEvent(1, "h", {2, 2}, {1, 2, 3, 4}, 1e9, "histograms"));
  TensorBoardReader reader(Local(dir()));
  absl::StatusOr<std::vector<Step>> steps = Read(reader);
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(steps.status().message(), HasSubstr("shape [2, 2], not [k, 3]"));
}

TEST_F(TensorBoardSyntheticTest, PlainTensorKeepsItsShapeAndValues) {
  TbEventWriter w(File("events.out.tfevents.1.host.1.0"));
  w.Record(testing::TbTensorEvent(1, "plain", {2, 2}, {1, 2, 3, 4}, 1e9));
  const std::vector<Step> steps = ReadAll(dir());
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].Find("plain")->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(steps[0].Find("plain")->values, (std::vector<double>{1, 2, 3, 4}));
}

TEST_F(TensorBoardSyntheticTest, MissingLocationIsNotAnError) {
  TensorBoardReader reader(Local((dir_.path() / "not-yet").string()));
  absl::StatusOr<std::vector<Step>> steps = Read(reader);
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_TRUE(steps->empty());
  EXPECT_FALSE(reader.summary().exists);
  reader.SetTrainingEnded();
  ASSERT_TRUE(Read(reader).ok());
  EXPECT_TRUE(reader.finished());
}

}  // namespace
}  // namespace debugplane::rules_engine::tensorboard
