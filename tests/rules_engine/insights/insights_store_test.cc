// InsightsStore over a real job manager: which jobs it follows in the
// background (InProgress with profiling, polled by the options' clock), when
// it stops, and its LRU bound.

#include "rules_engine/insights/insights_store.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/support/wait_until.h"

namespace debugplane::rules_engine::insights {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::WaitUntil;

class InsightsStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto manager = debugplane::testing::OpenTestManager(dir_.path());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
  }
  void TearDown() override {
    if (store_) store_->Shutdown();
    manager_->Shutdown();
  }

  // A job profiling to <dir>/<name>, with the healthy fixture's metrics.
  void CreateJob(const std::string& name, bool profiling = true) {
    fs::copy(fs::path(DP_TEST_DATA_DIR) / "profiler/system/healthy", dir_.path() / name,
             fs::copy_options::recursive);
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(name);
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
    if (profiling) {
      request.mutable_profiler_config()->set_s3_output_path((dir_.path() / name).string());
    } else {
      request.mutable_profiler_config()->set_disable_profiler(true);
    }
    auto created = debugplane::testing::CallSync<v1::CreateTrainingJobResponse>(
        *manager_, &core::TrainingJobHandler::CreateTrainingJob, request);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  void StartStore(size_t max_jobs = 32,
                  std::function<void(const std::string&)> on_new_data = nullptr) {
    InsightsStoreOptions options;
    options.data_roots = {dir_.path()};
    options.clock = clock_;
    options.max_jobs = max_jobs;
    options.on_new_data = std::move(on_new_data);
    store_ = std::make_unique<InsightsStore>(manager_.get(), options);
  }

  int64_t Points(const std::string& job) {
    absl::Notification done;
    int64_t points = -1;
    store_->WithJob(job, [&](absl::StatusOr<JobView> view) {
      if (view.ok()) points = view->data->metric_points();
      done.Notify();
    });
    done.WaitForNotification();
    return points;
  }

  ScopedTempDir dir_;
  // A few days after the fixtures' data (2026-11-21): the store takes no
  // time from more than a day past its clock (plausible_times.h).
  std::shared_ptr<base::FakeClock> clock_ =
      std::make_shared<base::FakeClock>(absl::FromUnixSeconds(1795600000));
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<InsightsStore> store_;
};

TEST_F(InsightsStoreTest, LiveProfiledJobIsReadInTheBackgroundAndPolled) {
  CreateJob("live");
  CreateJob("quiet", /*profiling=*/false);
  StartStore();
  EXPECT_TRUE(store_->IsLive("live"));
  EXPECT_FALSE(store_->IsLive("quiet"));
  // Read without any request.
  ASSERT_TRUE(WaitUntil([&] { return store_->memory_bytes() > 0; }));
  const size_t before = store_->memory_bytes();
  EXPECT_EQ(store_->job_count(), 1u);

  // New data of another node: the next poll (500 ms of the clock) reads it.
  std::ofstream(dir_.path() / "live/system/incremental/2026112122/1795309999.algo-2.json")
      << "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", "
         "\"Value\": 5, \"NodeId\": \"algo-2\", \"Timestamp\": 1795309999.0}\n";
  ASSERT_TRUE(WaitUntil([&] {
    clock_->Advance(absl::Milliseconds(500));
    return store_->memory_bytes() > before;
  }));

  // A job that is not live is read on its first request.
  EXPECT_EQ(Points("quiet"), 0);  // Profiling disabled: nothing to read.
  EXPECT_EQ(store_->job_count(), 2u);
  EXPECT_EQ(Points("live"), 1800 * 8 + 1);
}

// The dashboard's live updates are told of each read that added data, after
// the data is in (the page then asks again and sees it); polls that find
// nothing new tell nothing.
TEST_F(InsightsStoreTest, EveryReadThatAddedDataIsTold) {
  CreateJob("live");
  absl::Mutex mu;
  std::vector<std::string> told;
  StartStore(32, [&](const std::string& job) {
    absl::MutexLock lock(&mu);
    told.push_back(job);
  });
  const auto told_count = [&] {
    absl::MutexLock lock(&mu);
    return told.size();
  };
  ASSERT_TRUE(WaitUntil([&] { return told_count() >= 1; }));
  EXPECT_EQ(Points("live"), 1800 * 8);
  // Polls of the same files: nothing new, nothing told.
  for (int i = 0; i < 4; ++i) clock_->Advance(absl::Milliseconds(500));
  std::ofstream(dir_.path() / "live/system/incremental/2026112122/1795309999.algo-2.json")
      << "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", "
         "\"Value\": 5, \"NodeId\": \"algo-2\", \"Timestamp\": 1795309999.0}\n";
  ASSERT_TRUE(WaitUntil([&] {
    clock_->Advance(absl::Milliseconds(500));
    return told_count() >= 2;
  }));
  EXPECT_EQ(Points("live"), 1800 * 8 + 1);
  // More polls: still nothing new.
  for (int i = 0; i < 4; ++i) clock_->Advance(absl::Milliseconds(500));
  EXPECT_EQ(Points("live"), 1800 * 8 + 1);
  absl::MutexLock lock(&mu);
  EXPECT_EQ(told, (std::vector<std::string>{"live", "live"}));
}

// A timeline of `count` one-microsecond events (a growing file: no "]").
std::string Timeline(int first, int count) {
  std::string out =
      "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": "
      "{\"name\": \"Python\", \"start_time_since_epoch_in_micros\": 1795300000000000}},\n";
  for (int i = first; i < first + count; ++i) {
    out += "{\"name\": \"op" + std::to_string(i) +
           "\", \"ph\": \"X\", \"pid\": 1, \"ts\": " + std::to_string(1000 * i + 1) +
           ", \"dur\": 100},\n";
  }
  return out;
}

// Framework timelines are read incrementally: appended events are added to
// those read before; a timeline replaced or truncated is read again whole
// into framework data started afresh (its old events are not kept).
TEST_F(InsightsStoreTest, TimelinesAreReadIncrementallyAndAgainWhenReplaced) {
  CreateJob("job");
  const fs::path dir = dir_.path() / "job/framework/pevents/2026112122";
  fs::create_directories(dir);
  const fs::path file = dir / "1795300100000000_1-algo-1_pythontimeline.json";
  std::ofstream(file) << Timeline(0, 4);
  StartStore();
  const auto events = [&] {
    EXPECT_TRUE(store_->RefreshNow("job").ok());
    absl::Notification done;
    int64_t n = -1;
    store_->WithJob("job", [&](absl::StatusOr<JobView> view) {
      if (view.ok()) n = view->data->framework_events();
      done.Notify();
    });
    done.WaitForNotification();
    return n;
  };
  EXPECT_EQ(events(), 4);
  std::ofstream(file, std::ios::app) << Timeline(4, 3).substr(Timeline(4, 0).size());
  EXPECT_EQ(events(), 7);
  EXPECT_EQ(events(), 7);  // Nothing new: nothing added twice.
  // Replaced by a longer file of other events.
  const fs::path other = dir_.path() / "other.json";
  std::ofstream(other) << Timeline(100, 9);
  fs::rename(other, file);
  EXPECT_EQ(events(), 9);
  // Truncated.
  std::ofstream(file, std::ios::trunc) << Timeline(0, 2);
  EXPECT_EQ(events(), 2);
  std::ofstream(file, std::ios::app) << Timeline(2, 1).substr(Timeline(2, 0).size());
  EXPECT_EQ(events(), 3);
}

TEST_F(InsightsStoreTest, ImplausibleTimesAreSkippedAndTheViewSaysSo) {
  CreateJob("job", /*profiling=*/true);
  // One line at the end of time, one at the epoch, one two days past the
  // store's clock.
  std::ofstream(dir_.path() / "job/system/incremental/2026112122/1795309999.algo-2.json")
      << "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", "
         "\"Value\": 5, \"NodeId\": \"algo-2\", \"Timestamp\": 1e300}\n"
         "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", "
         "\"Value\": 5, \"NodeId\": \"algo-2\", \"Timestamp\": 0}\n"
         "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", "
         "\"Value\": 5, \"NodeId\": \"algo-2\", \"Timestamp\": 1795772800}\n";
  StartStore();
  ASSERT_TRUE(store_->RefreshNow("job").ok());
  absl::Notification done;
  int64_t points = -1;
  std::vector<std::string> read_errors;
  TrainingSummary summary;
  store_->WithJob("job", [&](absl::StatusOr<JobView> view) {
    if (view.ok()) {
      points = view->data->metric_points();
      read_errors = view->read_errors;
      summary = view->data->Summary(false);
    }
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_EQ(points, 1800 * 8);  // The fixture's, no more.
  ASSERT_FALSE(read_errors.empty());
  EXPECT_THAT(read_errors[0],
              ::testing::HasSubstr("skipped 3 system metric samples with implausible times"));
  ASSERT_TRUE(summary.start.has_value());
  EXPECT_LT(summary.latest - *summary.start, 86400);
}

TEST_F(InsightsStoreTest, PollingStopsAfterTheJobEnds) {
  CreateJob("ends");
  StartStore();
  ASSERT_TRUE(WaitUntil([&] { return store_->memory_bytes() > 0; }));
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name("ends");
  ASSERT_TRUE((debugplane::testing::CallSync<v1::StopTrainingJobResponse>(
                   *manager_, &core::TrainingJobHandler::StopTrainingJob, stop))
                  .ok());
  ASSERT_TRUE(WaitUntil([&] {
    clock_->Advance(absl::Milliseconds(500));
    return !store_->IsLive("ends");
  }));
}

TEST_F(InsightsStoreTest, LeastRecentlyUsedJobsAreDroppedPastMaxJobs) {
  CreateJob("a", false);
  CreateJob("b", false);
  CreateJob("c", false);
  StartStore(/*max_jobs=*/2);
  EXPECT_EQ(Points("a"), 0);
  EXPECT_EQ(Points("b"), 0);
  EXPECT_EQ(Points("c"), 0);
  EXPECT_EQ(store_->job_count(), 2u);
  EXPECT_EQ(Points("no-such-job"), -1);
}

}  // namespace
}  // namespace debugplane::rules_engine::insights
