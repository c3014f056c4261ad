// TrialReader over a store whose Stat is a request (S3's HEAD;
// ObjectStore::StatIsARoundTrip): the event files of the pending steps are
// found by one listing of events/ instead of a Stat each. The steps read are
// those of the local path (which still Stats), and a listing that lies
// (about sizes, or by leaving a file out), an event file gone between the
// listing and its read, and a listing that fails lose nothing.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "rules_engine/smdebug/trial_reader.h"
#include "tests/rules_engine/local_store.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

using testing::TrialWriter;

bool All(const std::string&, const TrialInfo&) { return true; }

// The local store as a remote one would look: Stat said to be a round trip,
// listings in pages of at most `page_keys` keys, and faults on demand.
// Counts the Stat calls and the listings of events/.
class RemoteLikeStore : public testing::LocalStoreWrapper {
 public:
  using LocalStoreWrapper::LocalStoreWrapper;

  absl::StatusOr<objectstore::ListResult> List(
      const objectstore::ListOptions& options) const override {
    objectstore::ListOptions paged = options;
    paged.max_keys = std::min(options.max_keys, page_keys);
    const bool events = absl::StartsWith(options.prefix, "events/");
    if (events) ++event_listings;
    absl::MutexLock lock(&mu);
    if (events && fail_event_listings > 0) {
      --fail_event_listings;
      return absl::UnavailableError(
          "S3 at http://127.0.0.1:1 could not serve the listing (SlowDown, HTTP 503)");
    }
    absl::StatusOr<objectstore::ListResult> result = LocalStoreWrapper::List(paged);
    if (!result.ok()) return result;
    std::vector<objectstore::ObjectEntry> kept;
    for (objectstore::ObjectEntry& entry : result->objects) {
      if (hidden.count(entry.key) > 0) continue;
      if (lie_about_sizes) entry.size = UINT64_MAX;
      kept.push_back(std::move(entry));
    }
    result->objects = std::move(kept);
    return result;
  }
  absl::Status ReadRangeInto(absl::string_view key, uint64_t offset, uint64_t length,
                             std::string* out) const override {
    {
      absl::MutexLock lock(&mu);
      if (gone.count(std::string(key)) > 0) {
        out->clear();
        return absl::NotFoundError(absl::StrCat(Describe(key), ": no such object"));
      }
    }
    return LocalStoreWrapper::ReadRangeInto(key, offset, length, out);
  }
  absl::StatusOr<objectstore::ObjectEntry> Stat(absl::string_view key) const override {
    ++stats;
    return LocalStoreWrapper::Stat(key);
  }
  bool StatIsARoundTrip() const override { return round_trip; }

  bool round_trip = true;
  size_t page_keys = 1000;
  bool lie_about_sizes = false;
  mutable std::atomic<int> stats{0};
  mutable std::atomic<int> event_listings{0};
  mutable absl::Mutex mu;
  // Left out of listings; answered NOT_FOUND when read; listings refused.
  std::set<std::string> hidden ABSL_GUARDED_BY(mu);
  std::set<std::string> gone ABSL_GUARDED_BY(mu);
  mutable int fail_event_listings ABSL_GUARDED_BY(mu) = 0;
};

std::shared_ptr<RemoteLikeStore> OpenRemoteLike(const std::string& dir) {
  return testing::WrapLocal<RemoteLikeStore>(dir);
}

// Two workers, `steps` steps of two tensors each.
std::string WriteTrial(const std::string& name, int64_t steps, bool end = true) {
  const std::string dir = testing::FreshTempDir(absl::StrCat("reader_event_listing_", name));
  TrialWriter w0(dir, "worker_0", 2);
  TrialWriter w1(dir, "worker_1", 2);
  for (int64_t step = 0; step < steps; ++step) {
    const double x = static_cast<double>(step);
    w0.AddStep(step, Mode::kTrain, step,
               {{"loss_output_0", {}, {x}}, {"gradient/fc1.weight", {2, 2}, {x, 1, 2, 3}}});
    w1.AddStep(step, Mode::kTrain, step,
               {{"loss_output_0", {}, {-x}}, {"gradient/fc1.weight", {2, 2}, {3, 2, 1, x}}});
  }
  if (end) w0.EndTraining();
  return dir;
}

std::string EventKey(int64_t step, const std::string& worker) {
  char name[64];
  std::snprintf(name, sizeof(name), "events/%012lld/%012lld_%s.tfevents",
                static_cast<long long>(step), static_cast<long long>(step), worker.c_str());
  return name;
}

// Every step read, by global step, with its tensors' names and values.
std::vector<std::string> Digest(const std::vector<Step>& steps) {
  std::vector<std::string> out;
  for (const Step& step : steps) {
    std::string line = absl::StrCat(step.global_step, ":");
    for (const Tensor& t : step.tensors) {
      absl::StrAppend(&line, " ", t.name, "@", t.worker, "=");
      for (double v : t.values) absl::StrAppend(&line, v, ",");
    }
    out.push_back(line);
  }
  return out;
}

std::vector<std::string> ReadAll(const std::shared_ptr<objectstore::ObjectStore>& store) {
  TrialReader reader(objectstore::StoreLocation{store, ""});
  reader.SetTrainingEnded();
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All);
  EXPECT_TRUE(steps.ok()) << steps.status();
  EXPECT_TRUE(reader.finished());
  return steps.ok() ? Digest(*steps) : std::vector<std::string>{};
}

TEST(TrialReaderEventListingTest, OneListingInsteadOfAStatPerEventFileAndTheSameSteps) {
  const std::string dir = WriteTrial("same", 40);
  auto local = OpenRemoteLike(dir);
  local->round_trip = false;
  auto remote = OpenRemoteLike(dir);
  const std::vector<std::string> from_local = ReadAll(local);
  const std::vector<std::string> from_remote = ReadAll(remote);
  ASSERT_EQ(from_local.size(), 40u);
  EXPECT_EQ(from_remote, from_local);
  // The local path is as it was: a Stat per event file, no listing of them.
  EXPECT_EQ(local->stats.load(), 80);
  EXPECT_EQ(local->event_listings.load(), 0);
  EXPECT_EQ(remote->stats.load(), 0);
  EXPECT_EQ(remote->event_listings.load(), 1);
}

TEST(TrialReaderEventListingTest, ListingPagesAreFollowedUntilEveryPendingFileIsCovered) {
  const std::string dir = WriteTrial("pages", 12);
  auto remote = OpenRemoteLike(dir);
  remote->page_keys = 5;  // 24 event files: five pages.
  auto local = OpenRemoteLike(dir);
  local->round_trip = false;
  EXPECT_EQ(ReadAll(remote), ReadAll(local));
  EXPECT_EQ(remote->stats.load(), 0);
  EXPECT_EQ(remote->event_listings.load(), 5);
}

TEST(TrialReaderEventListingTest, SizesInTheListingAreNotBelieved) {
  const std::string dir = WriteTrial("lying_sizes", 6);
  auto remote = OpenRemoteLike(dir);
  remote->lie_about_sizes = true;  // Every object "is" 2^64 - 1 bytes.
  auto local = OpenRemoteLike(dir);
  local->round_trip = false;
  EXPECT_EQ(ReadAll(remote), ReadAll(local));
}

TEST(TrialReaderEventListingTest, AFileTheListingLacksIsStatedBeforeTheStepIsReadWithoutIt) {
  const std::string dir = WriteTrial("hidden", 5, /*end=*/false);
  auto remote = OpenRemoteLike(dir);
  {
    absl::MutexLock lock(&remote->mu);
    remote->hidden.insert(EventKey(2, "worker_1"));  // A listing that lags the store.
  }
  TrialReader reader(objectstore::StoreLocation{remote, ""});
  absl::StatusOr<std::vector<Step>> first = reader.ReadNewSteps(All);
  ASSERT_TRUE(first.ok()) << first.status();
  // Step 2 waits for worker_1's event file: steps 0 and 1 only.
  EXPECT_EQ(Digest(*first).size(), 2u);
  EXPECT_EQ(remote->stats.load(), 0);
  // Now a later step was seen whole, so step 2 would be read without the
  // file (a worker that skipped it): a Stat finds it first.
  absl::StatusOr<std::vector<Step>> rest = reader.ReadNewSteps(All);
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_EQ(rest->size(), 3u);
  EXPECT_EQ((*rest)[0].global_step, 2);
  EXPECT_EQ((*rest)[0].tensors.size(), 4u);  // Both workers' tensors: nothing skipped.
  EXPECT_EQ(reader.summary().records_skipped, 0);
  EXPECT_EQ(remote->stats.load(), 1);
}

TEST(TrialReaderEventListingTest, NoEventsDirectoryYetIsOneListingAPassNotOnePerStep) {
  const std::string dir = WriteTrial("no_events", 6, /*end=*/false);
  std::filesystem::remove_all(std::filesystem::path(dir) / "events");
  auto remote = OpenRemoteLike(dir);  // Lists NOT_FOUND, as a local store does.
  TrialReader reader(objectstore::StoreLocation{remote, ""});
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All);
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_TRUE(steps->empty());  // Waiting for the event files.
  EXPECT_EQ(remote->event_listings.load(), 1);
  EXPECT_EQ(remote->stats.load(), 0);
}

TEST(TrialReaderEventListingTest, AnEventFileGoneAfterTheListingIsAnErrorNamingItThenRead) {
  const std::string dir = WriteTrial("gone", 4);
  auto remote = OpenRemoteLike(dir);
  {
    absl::MutexLock lock(&remote->mu);
    remote->gone.insert(EventKey(0, "worker_0"));
  }
  TrialReader reader(objectstore::StoreLocation{remote, ""});
  absl::StatusOr<std::vector<Step>> failed = reader.ReadNewSteps(All);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsNotFound(failed.status())) << failed.status();
  EXPECT_TRUE(absl::StrContains(failed.status().message(),
                                "events/000000000000/000000000000_worker_0.tfevents"))
      << failed.status();
  {
    absl::MutexLock lock(&remote->mu);
    remote->gone.clear();
  }
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All);
  ASSERT_TRUE(steps.ok()) << steps.status();
  auto local = OpenRemoteLike(dir);
  local->round_trip = false;
  EXPECT_EQ(Digest(*steps), ReadAll(local));
}

TEST(TrialReaderEventListingTest, AThrottledListingIsReturnedAndTheNextReadLosesNothing) {
  const std::string dir = WriteTrial("throttled", 6);
  auto remote = OpenRemoteLike(dir);
  {
    absl::MutexLock lock(&remote->mu);
    remote->fail_event_listings = 1;
  }
  TrialReader reader(objectstore::StoreLocation{remote, ""});
  reader.SetTrainingEnded();
  absl::StatusOr<std::vector<Step>> failed = reader.ReadNewSteps(All);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsUnavailable(failed.status())) << failed.status();
  EXPECT_TRUE(absl::StrContains(failed.status().message(), "SlowDown")) << failed.status();
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All);
  ASSERT_TRUE(steps.ok()) << steps.status();
  auto local = OpenRemoteLike(dir);
  local->round_trip = false;
  EXPECT_EQ(Digest(*steps), ReadAll(local));
  EXPECT_TRUE(reader.finished());
}

}  // namespace
}  // namespace debugplane::rules_engine
