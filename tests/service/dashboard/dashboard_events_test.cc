// DashboardEvents on a real job manager (SQLite) and a real HTTP listener:
// data reads throttled per job without losing the last, keep-alives, and a
// subscriber whose credentials stop working is signed out.

#include "service/dashboard/dashboard_events.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/service/http/stream_client.h"

namespace debugplane::service::dashboard {
namespace {

using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::StreamClient;
using ::testing::HasSubstr;

class DashboardEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto storage = persistence::SqliteStorage::Open((dir_.path() / "jobs.db").string());
    ASSERT_TRUE(storage.ok()) << storage.status();
    auto manager = core::TrainingJobManager::Create(*std::move(storage), {});
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    events_ = std::make_unique<DashboardEvents>(
        manager_.get(), DashboardEventsOptions{.keep_alive = absl::Milliseconds(200),
                                               .data_interval = absl::Milliseconds(250)});
    events_->Start();
    http::HttpRoute route{
        .method = "GET",
        .path = "/events",
        .handler = [this](http::HttpRequest, std::unique_ptr<http::HttpResponder> responder) {
          events_->Subscribe(responder->StartStream(200, {{"Content-Type", "text/event-stream"}}),
                             "", auth::Principal{.role = auth::Role::kReader, .access_key_id = "R"},
                             [this]() -> absl::StatusOr<auth::Principal> {
                               if (!still_valid_)
                                 return absl::UnauthenticatedError("access key 'R' was removed");
                               return auth::Principal{.role = auth::Role::kReader,
                                                      .access_key_id = "R"};
                             });
        }};
    auto server = http::HttpServer::Start({.listen_address = "127.0.0.1:0"}, {route});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  void TearDown() override {
    if (events_ != nullptr) events_->Shutdown();
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(1));
  }

  std::string Url() const { return absl::StrCat("http://127.0.0.1:", server_->port(), "/events"); }

  // The `event: data` lines of `body` for `job`.
  static std::vector<std::string> DataEvents(const std::string& body, const std::string& job) {
    std::vector<std::string> found;
    bool data_event = false;
    for (absl::string_view line : absl::StrSplit(body, '\n')) {
      if (data_event && absl::StrContains(line, absl::StrCat("\"name\":\"", job, "\""))) {
        found.emplace_back(line);
      }
      data_event = line == "event: data";
    }
    return found;
  }

  ScopedTempDir dir_;
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<DashboardEvents> events_;
  std::unique_ptr<http::HttpServer> server_;
  std::atomic<bool> still_valid_{true};
};

TEST_F(DashboardEventsTest, DataReadsAreThrottledPerJobAndTheLastOneIsNeverDropped) {
  StreamClient client(Url());
  ASSERT_TRUE(client.WaitFor("retry: 2000"));
  while (events_->subscribers() == 0) absl::SleepFor(absl::Milliseconds(5));
  const absl::Time start = absl::Now();
  for (int step = 0; step <= 49; ++step) {
    events_->OnDataRead("job-a", step);
    if (step % 10 == 0) events_->OnDataRead("job-b", step);
    absl::SleepFor(absl::Milliseconds(10));
  }
  const absl::Duration burst = absl::Now() - start;
  ASSERT_TRUE(client.WaitFor("\"lastStep\":49,\"name\":\"job-a\"", absl::Seconds(2)))
      << client.body();
  ASSERT_TRUE(client.WaitFor("\"lastStep\":40,\"name\":\"job-b\"", absl::Seconds(2)))
      << client.body();
  const std::vector<std::string> a = DataEvents(client.body(), "job-a");
  // The first at once, then at most one per 250 ms, and the trailing one.
  EXPECT_GE(a.size(), 2u);
  EXPECT_LE(a.size(), static_cast<size_t>(burst / absl::Milliseconds(250)) + 2) << client.body();
  EXPECT_THAT(a.front(), HasSubstr("\"lastStep\":0,"));
  EXPECT_TRUE(events_->LastDataTime("job-a").has_value());
  EXPECT_FALSE(events_->LastDataTime("job-c").has_value());
}

TEST_F(DashboardEventsTest, KeepAlivesFlowAndASubscriberWhoseKeyWentAwayIsSignedOut) {
  StreamClient client(Url());
  ASSERT_TRUE(client.WaitFor(": keep-alive\n\n", absl::Seconds(2))) << client.body();
  still_valid_ = false;
  ASSERT_TRUE(client.WaitFor("event: signed-out", absl::Seconds(2))) << client.body();
  EXPECT_THAT(client.body(), HasSubstr("access key 'R' was removed"));
  EXPECT_TRUE(client.WaitForEnd());
  EXPECT_EQ(client.result(), CURLE_OK);
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  while (events_->subscribers() != 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(events_->subscribers(), 0u);
}

TEST_F(DashboardEventsTest, ShutdownEndsEveryStream) {
  StreamClient first(Url()), second(Url());
  ASSERT_TRUE(first.WaitFor("retry:"));
  ASSERT_TRUE(second.WaitFor("retry:"));
  events_->Shutdown();
  EXPECT_TRUE(first.WaitForEnd());
  EXPECT_TRUE(second.WaitForEnd());
  EXPECT_EQ(first.result(), CURLE_OK);
}

}  // namespace
}  // namespace debugplane::service::dashboard
