// The tensor queries (rules_engine/query/) over the fixture trials and over
// trials written here with known values: listings, series per mode checked
// against an independent TrialReader pass, reductions, bucketing, bounds,
// errors.

#include "rules_engine/query/trial_query.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/query/tensor_series.h"
#include "rules_engine/smdebug/trial_reader.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

namespace fs = std::filesystem;
using ::debugplane::rules_engine::testing::TrialWriter;
using ::debugplane::testing::ScopedTempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kLoss[] = "CrossEntropyLoss_output_0";
const fs::path kSmdebug = fs::path(DP_TEST_DATA_DIR) / "smdebug";

objectstore::StoreLocation Trial(const fs::path& dir) {
  auto store = objectstore::LocalObjectStore::Open(dir.string());
  EXPECT_TRUE(store.ok()) << store.status();
  return objectstore::StoreLocation{*std::move(store), ""};
}

// (global step -> value) of `tensor` in `mode`, read with a plain TrialReader.
std::map<int64_t, double> ReadIndependently(const fs::path& dir, const std::string& tensor,
                                            Mode mode) {
  TrialReader reader(Trial(dir));
  std::map<int64_t, double> values;
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(
      [&](const std::string& name, const TrialInfo&) { return name == tensor; });
  EXPECT_TRUE(steps.ok()) << steps.status();
  for (const Step& step : *steps) {
    const Tensor* t = step.Find(tensor);
    if (step.mode == mode && t != nullptr) values[step.global_step] = t->values.at(0);
  }
  return values;
}

TEST(TrialQueryTest, OverfitLossPerModeIsWhatTheTrialHolds) {
  for (const Mode mode : {Mode::kTrain, Mode::kEval}) {
    const std::map<int64_t, double> expected = ReadIndependently(kSmdebug / "overfit", kLoss, mode);
    ASSERT_GT(expected.size(), 10u);
    SeriesQuery query{.tensor = kLoss, .mode = mode, .max_points = 10000};
    absl::StatusOr<TensorSeries> series = ReadTensorSeries(Trial(kSmdebug / "overfit"), query, {});
    ASSERT_TRUE(series.ok()) << series.status();
    EXPECT_FALSE(series->bucketed);
    EXPECT_FALSE(series->truncated);
    EXPECT_EQ(DtypeName(series->dtype), "float32");
    EXPECT_TRUE(series->shape.empty());
    std::map<int64_t, double> got;
    for (const SeriesPoint& p : series->points) {
      EXPECT_EQ(p.mode, mode);
      ASSERT_TRUE(p.value.has_value());
      EXPECT_EQ(*p.mean, *p.value);
      got[p.step] = *p.value;
    }
    EXPECT_EQ(got, expected) << ModeName(mode);
  }
}

TEST(TrialQueryTest, AStepRangeAndModeSelectOnlyThoseSteps) {
  SeriesQuery query{.tensor = kLoss, .start_step = 100, .end_step = 130};
  absl::StatusOr<TensorSeries> series = ReadTensorSeries(Trial(kSmdebug / "overfit"), query, {});
  ASSERT_TRUE(series.ok()) << series.status();
  ASSERT_FALSE(series->points.empty());
  std::map<Mode, int> modes;
  for (const SeriesPoint& p : series->points) {
    EXPECT_GE(p.step, 100);
    EXPECT_LE(p.step, 130);
    ++modes[p.mode];
  }
  const auto train = ReadIndependently(kSmdebug / "overfit", kLoss, Mode::kTrain);
  const auto eval = ReadIndependently(kSmdebug / "overfit", kLoss, Mode::kEval);
  int expected_train = 0, expected_eval = 0;
  for (const auto& [step, v] : train) expected_train += step >= 100 && step <= 130;
  for (const auto& [step, v] : eval) expected_eval += step >= 100 && step <= 130;
  EXPECT_EQ(modes[Mode::kTrain], expected_train);
  EXPECT_EQ(modes[Mode::kEval], expected_eval);
  EXPECT_GT(expected_eval, 0);
}

TEST(TrialQueryTest, ListingCountsStepsPerModeAndNamesCollections) {
  absl::StatusOr<TrialListing> listing = ListTrialTensors(Trial(kSmdebug / "overfit"), false, {});
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_EQ(listing->tensors.size(), 1u);
  const TensorListing& loss = listing->tensors[0];
  EXPECT_EQ(loss.name, kLoss);
  EXPECT_EQ(DtypeName(loss.dtype), "float32");
  EXPECT_THAT(loss.collections, ::testing::Contains("losses"));
  const auto train = ReadIndependently(kSmdebug / "overfit", kLoss, Mode::kTrain);
  ASSERT_TRUE(loss.modes.count(Mode::kTrain));
  EXPECT_EQ(loss.modes.at(Mode::kTrain).step_count, static_cast<int64_t>(train.size()));
  EXPECT_EQ(loss.modes.at(Mode::kTrain).first_step, train.begin()->first);
  EXPECT_EQ(loss.modes.at(Mode::kTrain).last_step, train.rbegin()->first);
  EXPECT_TRUE(listing->training_ended);
  EXPECT_EQ(listing->workers, std::vector<std::string>{"worker_0"});
  bool losses_listed = false;
  for (const CollectionListing& c : listing->collections) {
    if (c.name == "losses") {
      losses_listed = true;
      EXPECT_THAT(c.tensor_names, ElementsAre(kLoss));
    }
  }
  EXPECT_TRUE(losses_listed);
}

TEST(TrialQueryTest, ListingGivesShapesOfNonScalarTensors) {
  absl::StatusOr<TrialListing> listing =
      ListTrialTensors(Trial(kSmdebug / "exploding_tensor"), false, {});
  ASSERT_TRUE(listing.ok()) << listing.status();
  bool found = false;
  for (const TensorListing& t : listing->tensors) {
    if (t.name != "Sequential_fc1.weight") continue;
    found = true;
    EXPECT_EQ(t.shape.size(), 2u);
    EXPECT_THAT(t.collections, ::testing::Contains("weights"));
  }
  EXPECT_TRUE(found);
}

TEST(TrialQueryTest, ReductionsOfAKnownTensor) {
  ScopedTempDir dir;
  TrialWriter writer(dir.path().string());
  writer.AddStep(0, Mode::kTrain, 0, {{"w", {5}, {3, -4, NAN, INFINITY, 0}}});
  writer.AddStep(1, Mode::kTrain, 1, {{"w", {5}, {NAN, NAN, NAN, NAN, NAN}}});
  writer.EndTraining();
  absl::StatusOr<TensorSeries> series =
      ReadTensorSeries(Trial(dir.path()), SeriesQuery{.tensor = "w"}, {});
  ASSERT_TRUE(series.ok()) << series.status();
  ASSERT_EQ(series->points.size(), 2u);
  const SeriesPoint& p = series->points[0];
  EXPECT_FALSE(p.value.has_value());
  EXPECT_DOUBLE_EQ(*p.mean, -1.0 / 3);
  EXPECT_DOUBLE_EQ(*p.norm, 5);
  EXPECT_EQ(*p.min, -4);
  EXPECT_EQ(*p.max, 3);
  EXPECT_EQ(p.non_finite, 2);
  EXPECT_EQ(p.elements, 5);
  const SeriesPoint& all_nan = series->points[1];
  EXPECT_FALSE(all_nan.mean.has_value());
  EXPECT_FALSE(all_nan.min.has_value());
  EXPECT_EQ(all_nan.non_finite, 5);
  EXPECT_THAT(series->shape, ElementsAre(5));
}

// A decoded-like tensor of `n` values from a fixed generator; every
// `non_finite_every`-th is NaN or an infinity (0: none).
Tensor LargeTensor(size_t n, size_t non_finite_every) {
  Tensor t;
  t.dtype = 1;
  t.shape = {static_cast<int64_t>(n)};
  uint64_t x = 88172645463325252ull;
  std::vector<double> values;
  values.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    values.push_back(static_cast<float>(static_cast<double>(x % 2000001) / 1000.0 - 1000.0));
    if (non_finite_every != 0 && i % non_finite_every == 3) {
      values.back() = i % 2 == 0 ? NAN : -INFINITY;
    }
  }
  t.values = std::move(values);
  return t;
}

// The reductions of `t` with long double sums, one element at a time.
struct Reference {
  long double sum = 0, squares = 0;
  double lo = INFINITY, hi = -INFINITY;
  int64_t finite = 0, non_finite = 0;
};
Reference ReferenceOf(const Tensor& t) {
  Reference r;
  for (const double v : t.values) {
    if (!std::isfinite(v)) {
      ++r.non_finite;
      continue;
    }
    ++r.finite;
    r.sum += v;
    r.squares += static_cast<long double>(v) * v;
    r.lo = std::min(r.lo, v);
    r.hi = std::max(r.hi, v);
  }
  return r;
}

TEST(TrialQueryTest, ReductionsOfLargeTensorsMatchAnExactSumWithOrWithoutTheDecodersFacts) {
  for (const size_t every : {size_t{0}, size_t{1000}}) {
    for (const size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{100003}}) {
      Tensor tensor = LargeTensor(n, every);
      const Reference ref = ReferenceOf(tensor);
      tensor.facts.reset();  // Every element checked.
      const SeriesPoint checked = ReduceTensor(tensor, 5, Mode::kTrain, 4);
      if (ref.non_finite == 0) tensor.facts = Tensor::ValueFacts{.all_finite = true};
      const SeriesPoint trusted = ReduceTensor(tensor, 5, Mode::kTrain, 4);
      SCOPED_TRACE(::testing::Message() << n << " values, non-finite every " << every);
      EXPECT_EQ(checked.non_finite, ref.non_finite);
      EXPECT_EQ(checked.elements, static_cast<int64_t>(n));
      ASSERT_TRUE(checked.mean.has_value());
      const double mean = static_cast<double>(ref.sum / ref.finite);
      const double norm = static_cast<double>(std::sqrt(ref.squares));
      EXPECT_NEAR(*checked.mean, mean, 1e-12 * std::max(1.0, std::abs(mean)));
      EXPECT_NEAR(*checked.norm, norm, 1e-12 * norm);
      EXPECT_EQ(*checked.min, ref.lo);
      EXPECT_EQ(*checked.max, ref.hi);
      // The decoder's facts skip the checks, not the arithmetic.
      EXPECT_EQ(trusted.mean, checked.mean);
      EXPECT_EQ(trusted.norm, checked.norm);
      EXPECT_EQ(trusted.min, checked.min);
      EXPECT_EQ(trusted.max, checked.max);
      if (n == 1) {
        EXPECT_EQ(checked.value, tensor.values[0]);
        EXPECT_EQ(checked.mean, tensor.values[0]);
      } else {
        EXPECT_FALSE(checked.value.has_value());
      }
    }
  }
}

TEST(TrialQueryTest, BucketingKeepsEachModesMinAndMaxWithinMaxPoints) {
  std::vector<SeriesPoint> points;
  for (int step = 0; step < 100; ++step) {
    Tensor t;
    t.values = {step == 37 ? 1000.0 : step == 80 ? -5.0 : 1.0};
    points.push_back(ReduceTensor(t, step, step % 10 == 9 ? Mode::kEval : Mode::kTrain, step));
  }
  std::vector<SeriesPoint> bucketed = BucketByMode(points, 7);
  std::map<Mode, int> count;
  std::map<Mode, int64_t> steps;
  double hi = -INFINITY, lo = INFINITY;
  for (size_t i = 0; i < bucketed.size(); ++i) {
    const SeriesPoint& p = bucketed[i];
    ++count[p.mode];
    steps[p.mode] += p.step_count;
    hi = std::max(hi, *p.max);
    lo = std::min(lo, *p.min);
    if (i > 0) {
      EXPECT_LE(bucketed[i - 1].step, p.step);
    }
    EXPECT_LE(p.step, p.last_step);
  }
  EXPECT_LE(count[Mode::kTrain], 7);
  EXPECT_LE(count[Mode::kEval], 7);
  EXPECT_GE(count[Mode::kTrain], 5);
  EXPECT_EQ(steps[Mode::kTrain], 90);
  EXPECT_EQ(steps[Mode::kEval], 10);
  EXPECT_EQ(hi, 1000);
  EXPECT_EQ(lo, -5);
  // Fewer points than the bound are left alone.
  EXPECT_EQ(BucketByMode(points, 100).size(), 100u);
}

// Large tensors are read a few steps per reader call (their decoded values
// bound the call; steps without the tensor are read more at a time): the
// series is the one of reading every step at once and bucketing the
// reductions, as the query did before, field by field.
TEST(TrialQueryTest, ASeriesOfLargeTensorsIsTheBucketingOfEveryStepsReduction) {
  ScopedTempDir dir;
  TrialWriter writer(dir.path().string());
  Tensor base = LargeTensor(300000, 0);  // 2.4 MB decoded: three steps per read.
  for (int64_t step = 0; step < 40; ++step) {
    std::vector<double> values = base.values.ToVector();
    for (double& v : values) v = v * (1 + step) / 8;
    if (step == 11) values[5] = NAN;
    std::vector<rules_engine::testing::TensorSpec> tensors = {{"loss", {}, {1.0 / (1 + step)}}};
    // Saved at every step at first, then at every 7th.
    if (step < 23 || step % 7 == 0) tensors.push_back({"w", {300000}, values});
    writer.AddStep(step, step % 5 == 4 ? Mode::kEval : Mode::kTrain, step, tensors);
  }
  writer.EndTraining();
  TrialReader reader(Trial(dir.path()));
  absl::StatusOr<std::vector<Step>> steps =
      reader.ReadNewSteps([](const std::string& name, const TrialInfo&) { return name == "w"; });
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->size(), 40u);
  std::vector<SeriesPoint> every;
  for (const Step& step : *steps) {
    if (step.Find("w") == nullptr) continue;
    every.push_back(ReduceTensor(*step.Find("w"), step.global_step, step.mode, step.mode_step));
  }
  ASSERT_EQ(every.size(), 25u);  // 0-22, 28 and 35.
  for (const size_t max_points : {size_t{3}, size_t{10000}}) {
    absl::StatusOr<TensorSeries> series = ReadTensorSeries(
        Trial(dir.path()), SeriesQuery{.tensor = "w", .max_points = max_points}, {});
    ASSERT_TRUE(series.ok()) << series.status();
    const std::vector<SeriesPoint> expected = BucketByMode(every, max_points);
    EXPECT_EQ(series->bucketed, expected.size() < every.size());
    EXPECT_EQ(series->last_step_read, 39);
    ASSERT_EQ(series->points.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      const SeriesPoint& got = series->points[i];
      const SeriesPoint& want = expected[i];
      SCOPED_TRACE(::testing::Message() << "point " << i << " of MaxPoints " << max_points);
      EXPECT_EQ(got.step, want.step);
      EXPECT_EQ(got.mode, want.mode);
      EXPECT_EQ(got.mode_step, want.mode_step);
      EXPECT_EQ(got.last_step, want.last_step);
      EXPECT_EQ(got.step_count, want.step_count);
      EXPECT_EQ(got.mean, want.mean);
      EXPECT_EQ(got.norm, want.norm);
      EXPECT_EQ(got.min, want.min);
      EXPECT_EQ(got.max, want.max);
      EXPECT_EQ(got.non_finite, want.non_finite);
      EXPECT_EQ(got.elements, 300000);
      EXPECT_EQ(got.worker, "worker_0");
    }
  }
}

// Steps and shapes are the trial's word: steps spanning all of int64 and a
// shape whose product passes it are bucketed and counted without overflow
// (before, the span wrapped to 0 and the bucket width divided by zero).
TEST(TrialQueryTest, StepsSpanningAllOfInt64AreBucketedAndHugeShapesSaturate) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<SeriesPoint> points;
  for (const int64_t step : {kMin, int64_t{-1}, int64_t{0}, kMax}) {
    Tensor t;
    t.values = {1.0};
    points.push_back(ReduceTensor(t, step, Mode::kTrain, step));
  }
  std::vector<SeriesPoint> bucketed = BucketByMode(points, 2);
  ASSERT_EQ(bucketed.size(), 2u);
  EXPECT_EQ(bucketed[0].step, kMin);
  EXPECT_EQ(bucketed[0].last_step, -1);
  EXPECT_EQ(bucketed[1].step, 0);
  EXPECT_EQ(bucketed[1].last_step, kMax);

  Tensor huge;
  huge.shape = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(ReduceTensor(huge, 0, Mode::kTrain, 0).elements, kMax);
}

TEST(TrialQueryTest, ReadsStopAtTheStepBoundAndSaySo) {
  QueryLimits limits;
  limits.max_steps_read = 10;
  absl::StatusOr<TensorSeries> series =
      ReadTensorSeries(Trial(kSmdebug / "overfit"), SeriesQuery{.tensor = kLoss}, limits);
  ASSERT_TRUE(series.ok()) << series.status();
  EXPECT_TRUE(series->truncated);
  EXPECT_EQ(series->points.size(), 10u);
  EXPECT_EQ(series->last_step_read, series->points.back().step);
  absl::StatusOr<TrialListing> listing =
      ListTrialTensors(Trial(kSmdebug / "overfit"), false, limits);
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_TRUE(listing->truncated);
  EXPECT_EQ(listing->step_count, 10);
}

TEST(TrialQueryTest, AnUnknownTensorIsNotFoundNamingWhatExists) {
  absl::StatusOr<TensorSeries> series =
      ReadTensorSeries(Trial(kSmdebug / "exploding_tensor"), SeriesQuery{.tensor = "nope"}, {});
  ASSERT_EQ(series.status().code(), absl::StatusCode::kNotFound) << series.status();
  EXPECT_THAT(series.status().message(), HasSubstr("\"nope\""));
  EXPECT_THAT(series.status().message(), HasSubstr("Sequential_fc1.weight"));
  EXPECT_THAT(series.status().message(), HasSubstr("in all)"));  // More than 10: cut.
  // A known tensor outside the range is no error, just no points.
  absl::StatusOr<TensorSeries> late = ReadTensorSeries(
      Trial(kSmdebug / "overfit"), SeriesQuery{.tensor = kLoss, .start_step = 100000}, {});
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_TRUE(late->points.empty());
}

TEST(TrialQueryTest, ATrialWithoutDataIsAFailedPreconditionSayingWhatWasThere) {
  ScopedTempDir dir;
  absl::StatusOr<TrialListing> missing =
      ListTrialTensors(objectstore::StoreLocation{Trial(dir.path()).store, "tensors"}, false, {});
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr((dir.path() / "tensors").string()));
  EXPECT_THAT(missing.status().message(), HasSubstr("does not exist"));

  fs::create_directories(dir.path() / "tensors");
  absl::StatusOr<TensorSeries> empty =
      ReadTensorSeries(objectstore::StoreLocation{Trial(dir.path()).store, "tensors"},
                       SeriesQuery{.tensor = kLoss}, {});
  ASSERT_EQ(empty.status().code(), absl::StatusCode::kFailedPrecondition) << empty.status();
  EXPECT_THAT(empty.status().message(), HasSubstr("no collections file"));
}

TEST(TrialQueryTest, ACancelledQueryStops) {
  std::atomic<bool> cancelled{true};
  QueryLimits limits;
  limits.cancelled = &cancelled;
  absl::StatusOr<TensorSeries> series =
      ReadTensorSeries(Trial(kSmdebug / "overfit"), SeriesQuery{.tensor = kLoss}, limits);
  EXPECT_EQ(series.status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace debugplane::rules_engine
