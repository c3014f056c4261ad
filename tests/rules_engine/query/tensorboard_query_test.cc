// The tensor queries over TensorBoard logs (issue 24): tags as tensors,
// scalars as values, histograms as their statistics and buckets, the
// pairing of a quantity's TRAIN and EVAL tags, over real framework output
// (tests/data/frameworks/) and logs written here from the format.

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/query/trial_query.h"
#include "tests/rules_engine/tb_event_writer.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::rules_engine {
namespace {

namespace fs = std::filesystem;
using ::debugplane::rules_engine::testing::TbEventWriter;
using ::debugplane::testing::ScopedTempDir;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const fs::path kFrameworks = fs::path(DP_TEST_DATA_DIR) / "frameworks";

objectstore::StoreLocation Logs(const fs::path& dir) {
  auto store = objectstore::LocalObjectStore::Open(dir.string());
  EXPECT_TRUE(store.ok()) << store.status();
  return objectstore::StoreLocation{*std::move(store), ""};
}

const TensorListing* Find(const TrialListing& listing, const std::string& name) {
  for (const TensorListing& t : listing.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

TEST(TensorBoardQueryTest, HuggingFaceTagsAreListedWithModesCollectionsAndSeries) {
  absl::StatusOr<TrialListing> listing = ListTensorBoardTensors(
      Logs(kFrameworks / "hf-trainer-diverge" / "tb"), {}, /*training_ended=*/true, {});
  ASSERT_TRUE(listing.ok()) << listing.status();
  const TensorListing* grad_norm = Find(*listing, "train/grad_norm");
  ASSERT_NE(grad_norm, nullptr);
  EXPECT_THAT(grad_norm->collections, Contains("gradients"));
  EXPECT_EQ(grad_norm->modes.count(Mode::kTrain), 1u);
  const TensorListing* train_loss = Find(*listing, "train/loss");
  const TensorListing* eval_loss = Find(*listing, "eval/loss");
  ASSERT_NE(train_loss, nullptr);
  ASSERT_NE(eval_loss, nullptr);
  // One quantity in two modes: the Model view shows them side by side.
  EXPECT_EQ(train_loss->series, "loss");
  EXPECT_EQ(eval_loss->series, "loss");
  EXPECT_EQ(eval_loss->modes.count(Mode::kEval), 1u);
  EXPECT_THAT(train_loss->collections, Contains("losses"));
  EXPECT_FALSE(train_loss->histogram);
}

TEST(TensorBoardQueryTest, TheNanGradNormTheTrainerHidesIsInItsValuesAtStep5) {
  SeriesQuery query{.tensor = "train/grad_norm", .max_points = 10000, .training_ended = true};
  absl::StatusOr<TensorSeries> series =
      ReadTensorBoardSeries(Logs(kFrameworks / "hf-trainer-diverge" / "tb"), {}, query, {});
  ASSERT_TRUE(series.ok()) << series.status();
  ASSERT_FALSE(series->points.empty());
  bool nan_at_5 = false;
  for (const SeriesPoint& p : series->points) {
    EXPECT_EQ(p.mode, Mode::kTrain);
    ASSERT_TRUE(p.value.has_value()) << p.step;  // A scalar.
    if (p.step == 5) nan_at_5 = std::isnan(*p.value);
  }
  EXPECT_TRUE(nan_at_5);
}

TEST(TensorBoardQueryTest, HistogramsAreServedAsTheirStatisticsAndBuckets) {
  ScopedTempDir dir;
  TbEventWriter writer((dir.path() / "runs/a/events.out.tfevents.1700000000.host.1.0").string());
  HistogramStats h;
  h.min = -2;
  h.max = 4;
  h.num = 4;
  h.sum = 6;
  h.sum_squares = 36;
  h.bucket_limit = {-1, 0, 1, 5};
  h.bucket = {1, 0, 1, 2};
  for (int step = 0; step < 3; ++step) {
    writer.Histogram(step, "gradients/fc1.weight", h);
    writer.Scalar(step, "train/loss", 1.0f / (1 + step));
  }
  absl::StatusOr<TrialListing> listing = ListTensorBoardTensors(Logs(dir.path()), {}, true, {});
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_NE(Find(*listing, "gradients/fc1.weight"), nullptr);
  EXPECT_TRUE(Find(*listing, "gradients/fc1.weight")->histogram);
  EXPECT_EQ(listing->step_count, 3);

  SeriesQuery query{.tensor = "gradients/fc1.weight", .start_step = 1, .training_ended = true};
  absl::StatusOr<TensorSeries> series = ReadTensorBoardSeries(Logs(dir.path()), {}, query, {});
  ASSERT_TRUE(series.ok()) << series.status();
  ASSERT_EQ(series->points.size(), 2u);  // Steps before StartStep are passed over.
  const SeriesPoint& p = series->points[0];
  EXPECT_EQ(p.step, 1);
  EXPECT_FALSE(p.value.has_value());
  EXPECT_DOUBLE_EQ(*p.mean, 1.5);
  EXPECT_DOUBLE_EQ(*p.norm, 6);
  EXPECT_DOUBLE_EQ(*p.min, -2);
  EXPECT_DOUBLE_EQ(*p.max, 4);
  EXPECT_EQ(p.elements, 4);
  EXPECT_EQ(p.non_finite, 0);
  EXPECT_THAT(p.bucket_limits, ElementsAre(-1, 0, 1, 5));
  EXPECT_THAT(p.bucket_counts, ElementsAre(1, 0, 1, 2));

  h.sum = NAN;
  h.max = INFINITY;
  writer.Histogram(3, "gradients/fc1.weight", h);
  query.start_step = 3;
  series = ReadTensorBoardSeries(Logs(dir.path()), {}, query, {});
  ASSERT_TRUE(series.ok()) << series.status();
  ASSERT_EQ(series->points.size(), 1u);
  EXPECT_EQ(series->points[0].non_finite, 1);
  EXPECT_FALSE(series->points[0].mean.has_value());
  EXPECT_FALSE(series->points[0].max.has_value());
  EXPECT_DOUBLE_EQ(*series->points[0].min, -2);
}

TEST(TensorBoardQueryTest, AnUnknownTagOrEmptyLogsSayWhatIsThere) {
  SeriesQuery query{.tensor = "train/accuracy", .training_ended = true};
  absl::StatusOr<TensorSeries> missing =
      ReadTensorBoardSeries(Logs(kFrameworks / "lightning-overfit" / "tb"), {}, query, {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              AllOf(HasSubstr("\"train/accuracy\""), HasSubstr("train_loss")));

  ScopedTempDir empty;
  absl::StatusOr<TrialListing> none = ListTensorBoardTensors(Logs(empty.path()), {}, false, {});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("no event file"));
}

TEST(TensorBoardQueryTest, MergedListingsKeepEachTrialsTensorsAndUniteCollections) {
  TrialListing smdebug, tensorboard;
  smdebug.path = "/s";
  smdebug.tensors.push_back({.name = "CrossEntropyLoss_output_0"});
  smdebug.collections.push_back({.name = "losses", .tensor_names = {"CrossEntropyLoss_output_0"}});
  smdebug.step_count = 10;
  smdebug.last_step = 9;
  tensorboard.path = "/t";
  tensorboard.tensors.push_back({.name = "train/loss"});
  tensorboard.collections.push_back({.name = "losses", .tensor_names = {"train/loss"}});
  tensorboard.step_count = 20;
  tensorboard.last_step = 19;
  const TrialListing merged = MergeListings(smdebug, tensorboard);
  EXPECT_EQ(merged.path, "/s + /t");
  ASSERT_EQ(merged.tensors.size(), 2u);
  ASSERT_EQ(merged.collections.size(), 1u);
  EXPECT_THAT(merged.collections[0].tensor_names,
              ElementsAre("CrossEntropyLoss_output_0", "train/loss"));
  EXPECT_EQ(merged.step_count, 20);
  EXPECT_EQ(merged.last_step, 19);
}

}  // namespace
}  // namespace debugplane::rules_engine
