// DescribeJsonCache: one printing per version of a record, a new version
// printed anew, entries dropped on Forget and when full.

#include "service/http/describe_json_cache.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "debugplane/v1/training_job.pb.h"

namespace debugplane::service::http {
namespace {

using Json = nlohmann::json;

std::shared_ptr<const std::string> Version(const std::string& name, v1::TrainingJobStatus::Value status) {
  v1::DescribeTrainingJobResponse record;
  record.set_training_job_name(name);
  record.set_training_job_status(status);
  return std::make_shared<const std::string>(record.SerializeAsString());
}

TEST(DescribeJsonCacheTest, PrintsEachVersionOnceAndANewVersionAnew) {
  DescribeJsonCache cache;
  auto v1 = Version("job-a", v1::TrainingJobStatus::InProgress);
  auto first = cache.Json("job-a", v1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(Json::parse(**first)["TrainingJobStatus"], "InProgress");
  auto again = cache.Json("job-a", v1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);  // The same bytes, not printed again.
  EXPECT_EQ(cache.printed(), 1);

  // A new version, even with the same bytes, is printed anew; with other
  // bytes its JSON shows them.
  auto same_bytes = std::make_shared<const std::string>(*v1);
  ASSERT_TRUE(cache.Json("job-a", same_bytes).ok());
  EXPECT_EQ(cache.printed(), 2);
  auto stopped = cache.Json("job-a", Version("job-a", v1::TrainingJobStatus::Stopped));
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(Json::parse(**stopped)["TrainingJobStatus"], "Stopped");
  // The older version is not served for the newer one, nor the reverse.
  auto old_again = cache.Json("job-a", v1);
  ASSERT_TRUE(old_again.ok());
  EXPECT_EQ(Json::parse(**old_again)["TrainingJobStatus"], "InProgress");
  EXPECT_EQ(cache.printed(), 4);
}

TEST(DescribeJsonCacheTest, ForgetsOnRequestAndStaysWithinItsCapacity) {
  DescribeJsonCache cache(/*capacity=*/2);
  auto a = Version("a", v1::TrainingJobStatus::InProgress);
  ASSERT_TRUE(cache.Json("a", a).ok());
  ASSERT_TRUE(cache.Json("b", Version("b", v1::TrainingJobStatus::InProgress)).ok());
  EXPECT_EQ(cache.size(), 2u);
  cache.Forget("b");
  EXPECT_EQ(cache.size(), 1u);
  ASSERT_TRUE(cache.Json("b", Version("b", v1::TrainingJobStatus::InProgress)).ok());
  ASSERT_TRUE(cache.Json("c", Version("c", v1::TrainingJobStatus::InProgress)).ok());
  EXPECT_LE(cache.size(), 2u);
  const int64_t printed = cache.printed();
  ASSERT_TRUE(cache.Json("a", a).ok());  // Dropped when full: printed again.
  EXPECT_EQ(cache.printed(), printed + 1);
}

TEST(DescribeJsonCacheTest, StaysWithinItsBytesAndServesWhatItCannotKeep) {
  auto a = Version("job-a", v1::TrainingJobStatus::InProgress);
  DescribeJsonCache probe;
  ASSERT_TRUE(probe.Json("job-a", a).ok());
  const size_t one = probe.bytes();
  ASSERT_GT(one, a->size());  // The encoded record and its JSON.

  DescribeJsonCache cache(/*capacity=*/100, /*capacity_bytes=*/one * 2 + one / 2);
  ASSERT_TRUE(cache.Json("job-a", a).ok());
  ASSERT_TRUE(cache.Json("job-b", Version("job-b", v1::TrainingJobStatus::InProgress)).ok());
  EXPECT_EQ(cache.size(), 2u);
  ASSERT_TRUE(cache.Json("job-c", Version("job-c", v1::TrainingJobStatus::InProgress)).ok());
  EXPECT_LE(cache.bytes(), one * 2 + one / 2);
  EXPECT_LE(cache.size(), 2u);
  // A new version replaces the old one's bytes rather than adding to them.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(cache.Json("job-c", Version("job-c", v1::TrainingJobStatus::Stopped)).ok());
  }
  EXPECT_LE(cache.bytes(), one * 2 + one / 2);
  cache.Forget("job-c");
  cache.Forget("job-a");
  cache.Forget("job-b");
  EXPECT_EQ(cache.bytes(), 0u);

  DescribeJsonCache tiny(/*capacity=*/100, /*capacity_bytes=*/1);
  auto served = tiny.Json("job-a", a);
  ASSERT_TRUE(served.ok());
  EXPECT_EQ(Json::parse(**served)["TrainingJobName"], "job-a");
  EXPECT_EQ(tiny.size(), 0u);
}

TEST(DescribeJsonCacheTest, BytesThatDoNotParseAreAnInternalError) {
  DescribeJsonCache cache;
  auto broken = cache.Json("a", std::make_shared<const std::string>("\xff\xff\xff"));
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace debugplane::service::http
