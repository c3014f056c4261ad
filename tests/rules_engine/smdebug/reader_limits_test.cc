// TrialReader against files whose sizes are hostile: sparse 100 GB index,
// collections and event files (ftruncate: no disk used) and index entries
// whose offsets and lengths no file has. Each is read within its limit
// (trial_reader.h) or ends in an error naming the file and the limit; before
// the limits, each read the file whole and aborted with std::bad_alloc.

#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/smdebug/trial_reader.h"
#include "tests/rules_engine/local_store.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Local;
using testing::TrialWriter;

constexpr int64_t kHundredGb = int64_t{100} << 30;

bool All(const std::string&, const TrialInfo&) { return true; }

// A finished trial of one step with two tensors.
TrialWriter WriteTrial(const std::string& name) {
  TrialWriter writer(testing::FreshTempDir(absl::StrCat("reader_limits_test_", name)));
  writer.AddStep(0, Mode::kTrain, 0, {{"loss", {}, {0.5}}, {"gradient/w", {2, 2}, {1, 2, 3, 4}}});
  writer.EndTraining();
  return writer;
}

void MakeSparse(const std::string& path, int64_t size) {
  ASSERT_EQ(::truncate(path.c_str(), size), 0) << path;
}

TEST(TrialReaderLimitsTest, SparseHugeIndexFileIsAnErrorNamingItAndTheLimit) {
  TrialWriter writer = WriteTrial("index");
  MakeSparse(writer.IndexFile(0), kHundredGb);
  TrialReader reader(Local(writer.dir()));
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All);
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kResourceExhausted) << steps.status();
  EXPECT_THAT(steps.status().message(),
              AllOf(HasSubstr(writer.IndexFile(0)), HasSubstr("is 107374182400 bytes"),
                    HasSubstr("a tensor index file may have at most 16 MiB")));
  // The same again, not a crash, on the next call.
  EXPECT_EQ(reader.ReadNewSteps(All).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(TrialReaderLimitsTest, SparseHugeCollectionsFileIsAnErrorNamingItAndTheLimit) {
  TrialWriter writer = WriteTrial("collections");
  const std::string collections =
      absl::StrCat(writer.dir(), "/collections/000000000/worker_0_collections.json");
  MakeSparse(collections, kHundredGb);
  TrialReader reader(Local(writer.dir()));
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All);
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kResourceExhausted) << steps.status();
  EXPECT_THAT(
      steps.status().message(),
      AllOf(HasSubstr(collections), HasSubstr("a collections file may have at most 4 MiB")));
}

TEST(TrialReaderLimitsTest, SparseGrownEventFileIsReadOnlyUpToItsLastIndexedRecord) {
  // Records are where the index says; the rest of the 100 GB is never read.
  TrialWriter writer = WriteTrial("event");
  MakeSparse(writer.EventFile(0), kHundredGb);
  TrialReader reader(Local(writer.dir()));
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All);
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->size(), 1u);
  ASSERT_EQ(steps->at(0).tensors.size(), 2u);
  EXPECT_EQ(steps->at(0).tensors[0].values, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_LT(reader.summary().read.bytes, 1 << 20);
}

// An index of one tensor at `start_idx` with `length`, for the event file
// the writer made.
void WriteIndex(const TrialWriter& writer, uint64_t start_idx, uint64_t length) {
  ASSERT_TRUE(testing::WriteFile(
      writer.IndexFile(0),
      absl::StrCat("{\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": 0, \"event_file_name\": "
                   "\"events/000000000000/000000000000_worker_0.tfevents\"}, "
                   "\"tensor_payload\": [{\"tensorname\": \"loss\", \"start_idx\": ",
                   start_idx, ", \"length\": ", length, "}]}")));
}

TEST(TrialReaderLimitsTest, IndexEntryLongerThanARecordMayBeIsAnErrorNamingTheLimit) {
  TrialWriter writer = WriteTrial("length");
  WriteIndex(writer, 0, uint64_t{1} << 40);
  MakeSparse(writer.EventFile(0), kHundredGb);
  TrialReader reader(Local(writer.dir()));
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All);
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kResourceExhausted) << steps.status();
  EXPECT_THAT(steps.status().message(),
              AllOf(HasSubstr(writer.EventFile(0)), HasSubstr("(tensor \"loss\")"),
                    HasSubstr("one event record may have at most 128 MiB")))
      << steps.status();
}

TEST(TrialReaderLimitsTest, IndexEntryPastAnyFileIsSkippedOnceTrainingEnded) {
  // An offset near 2^64: the span's end saturates, nothing is sized from
  // it, and the record is not there.
  TrialWriter writer = WriteTrial("offset");
  WriteIndex(writer, UINT64_MAX - 100, 200);
  TrialReader reader(Local(writer.dir()));
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(All);
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->size(), 1u);
  EXPECT_TRUE(steps->at(0).tensors.empty());
  EXPECT_EQ(reader.summary().records_skipped, 1);
}

}  // namespace
}  // namespace debugplane::rules_engine
