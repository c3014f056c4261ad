// ReportWriter: the report throttle by a FakeClock (no sleeping), the files,
// the database's copy under a lease fence, and write errors naming the file.

#include "rules_engine/scheduling/report_writer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "persistence/sqlite/sqlite_lease_table.h"
#include "persistence/sqlite/sqlite_report_store.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::rules_engine {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;
using ::testing::HasSubstr;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class ReportWriterTest : public ::testing::Test {
 protected:
  ReportContent Content() {
    ReportContent content;
    content.data = &data_;
    content.context.training_job_name = "job";
    content.context.rule_configuration_name = "ProfilerReport";
    content.context.training_job_status = "InProgress";
    return content;
  }

  ScopedTempDir dir_;
  std::shared_ptr<base::FakeClock> clock_ = std::make_shared<base::FakeClock>();
  ReportWriter writer_{ReportWriterOptions{
      .report_dir = dir_.path() / "reports", .report_interval = absl::Seconds(2), .clock = clock_}};
  ProfilerReportData data_;
};

TEST_F(ReportWriterTest, RegeneratedAtMostOncePerInterval) {
  ReportSchedule schedule;
  ASSERT_TRUE(writer_.Due(schedule));  // Never written: at once.
  ASSERT_TRUE(writer_
                  .Write("job", "ProfilerReport", Content(), /*final=*/false,
                         v1::TrainingJobStatus::InProgress, std::nullopt, schedule)
                  .ok());
  EXPECT_EQ(schedule.written, clock_->Now());
  EXPECT_FALSE(writer_.Due(schedule));  // Up to date.

  schedule.stale = true;  // New data.
  clock_->Advance(absl::Seconds(2) - absl::Milliseconds(1));
  EXPECT_FALSE(writer_.Due(schedule));
  clock_->Advance(absl::Milliseconds(1));
  EXPECT_TRUE(writer_.Due(schedule));
}

TEST_F(ReportWriterTest, WritesJsonAndPageWithTheClocksTime) {
  ReportSchedule schedule;
  ASSERT_TRUE(writer_
                  .Write("job", "ProfilerReport", Content(), /*final=*/true,
                         v1::TrainingJobStatus::Completed, std::nullopt, schedule)
                  .ok());
  EXPECT_TRUE(schedule.final_written);
  EXPECT_EQ(schedule.final_job_status, v1::TrainingJobStatus::Completed);
  const core::ProfilerReportFiles files = writer_.FilesFor("job", "ProfilerReport");
  const nlohmann::json json = nlohmann::json::parse(ReadAll(files.json));
  EXPECT_NE(json.dump().find("2023-11-14"), std::string::npos) << json.dump();  // FakeClock's date.
  EXPECT_THAT(ReadAll(files.html), HasSubstr("<html"));
  // No temporary is left behind.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(files.json.parent_path())) {
    ++entries;
  }
  EXPECT_EQ(entries, 2u);
}

TEST_F(ReportWriterTest, WriteErrorNamesTheDirectory) {
  // The report directory is a file: nothing can be created under it.
  std::ofstream(dir_.path() / "reports") << "not a directory";
  ReportSchedule schedule;
  const absl::Status written =
      writer_.Write("job", "ProfilerReport", Content(), false, v1::TrainingJobStatus::InProgress,
                    std::nullopt, schedule);
  EXPECT_EQ(written.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(written.message(), HasSubstr((dir_.path() / "reports").string()));
}

// With a store (the database every replica reads), the report lands there
// with the files; under a stale lease fence it lands nowhere.
TEST_F(ReportWriterTest, WritesTheStoreThatReplicasServeAndNothingUnderAStaleFence) {
  const std::string db = (dir_.path() / "jobs.db").string();
  auto storage = persistence::SqliteStorage::Open(db);
  ASSERT_TRUE(storage.ok()) << storage.status();
  auto store = persistence::SqliteReportStore::Open(db);
  ASSERT_TRUE(store.ok()) << store.status();
  auto leases = persistence::SqliteLeaseTable::Open(db);
  ASSERT_TRUE(leases.ok()) << leases.status();
  auto held = (*leases)->TryAcquire("job", "this-replica", absl::Minutes(1));
  ASSERT_TRUE(held.ok() && held->has_value()) << held.status();
  ReportWriter writer(ReportWriterOptions{
      .report_dir = dir_.path() / "reports", .clock = clock_, .store = store->get()});

  ReportSchedule schedule;
  ASSERT_TRUE(writer
                  .Write("job", "ProfilerReport", Content(), /*final=*/true,
                         v1::TrainingJobStatus::Completed, *held, schedule)
                  .ok());
  auto stored = (*store)->Read("job", "ProfilerReport");
  ASSERT_TRUE(stored.ok() && stored->has_value()) << stored.status();
  EXPECT_EQ((*stored)->generated_at_us, absl::ToUnixMicros(clock_->Now()));
  EXPECT_TRUE((*stored)->final);
  const core::ProfilerReportFiles files = writer.FilesFor("job", "ProfilerReport");
  EXPECT_EQ(ReadAll(files.html), (*stored)->html);
  EXPECT_EQ(ReadAll(files.json), (*stored)->json);

  persistence::CheckLease stale = **held;
  stale.token += 1;
  clock_->Advance(absl::Seconds(5));
  ASSERT_TRUE(writer
                  .Write("job", "ProfilerReport", Content(), /*final=*/true,
                         v1::TrainingJobStatus::Completed, stale, schedule)
                  .ok());
  stored = (*store)->Read("job", "ProfilerReport");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->generated_at_us, absl::ToUnixMicros(clock_->Now() - absl::Seconds(5)));
  EXPECT_EQ(ReadAll(files.json), (*stored)->json);  // The files are untouched too.
}

// A database that cannot be reached: the write fails with its error (the
// scheduler logs it; the next due write is the retry).
TEST_F(ReportWriterTest, AnUnreachableStoreFailsTheWriteWithItsError) {
  class DownStore final : public persistence::ReportStore {
   public:
    absl::Status Put(const persistence::StoredReport&,
                     const std::optional<persistence::CheckLease>&) override {
      return absl::UnavailableError("PostgreSQL at db:5432: connection refused");
    }
    absl::StatusOr<std::optional<persistence::StoredReport>> Read(const std::string&,
                                                                  const std::string&) override {
      return std::nullopt;
    }
    absl::Status DeleteJob(const std::string&, int64_t) override { return absl::OkStatus(); }
  } down;
  ReportWriter writer(
      ReportWriterOptions{.report_dir = dir_.path() / "reports", .clock = clock_, .store = &down});
  ReportSchedule schedule;
  const absl::Status written =
      writer.Write("job", "ProfilerReport", Content(), false, v1::TrainingJobStatus::InProgress,
                   std::nullopt, schedule);
  EXPECT_EQ(written.code(), absl::StatusCode::kUnavailable) << written;
  EXPECT_THAT(written.message(), HasSubstr("db:5432"));
  EXPECT_EQ(schedule.written, clock_->Now());  // Not retried in a loop.
}

TEST(ReportWriterDisabledTest, NothingIsDueWithoutAReportDirectory) {
  ReportWriter writer(ReportWriterOptions{});
  EXPECT_FALSE(writer.enabled());
  EXPECT_FALSE(writer.Due(ReportSchedule{}));
}

}  // namespace
}  // namespace debugplane::rules_engine
