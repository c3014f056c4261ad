// The real debugplane-server binary on PostgreSQL (--database), end to end:
// a job created through gRPC survives kill -9 of the server; the server logs
// which database it uses, and refuses one it cannot use, never showing the
// password.

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "service/server_flags.h"
#include "tests/core/test_util.h"
#include "tests/persistence/postgres_test_server.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"

namespace debugplane {
namespace {

using ::debugplane::testing::PostgresTestServer;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// The Debugger guide's CreateTrainingJob template (tests/data/README.md),
// its `//` comment lines removed, under another name.
v1::CreateTrainingJobRequest TemplateRequest(const std::string& name) {
  std::ifstream in(std::filesystem::path(DP_TEST_DATA_DIR) /
                   "sagemaker/create-training-job-template.jsonc");
  std::string json, line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "//")) continue;
    absl::StrAppend(&json, line, "\n");
  }
  v1::CreateTrainingJobRequest request;
  auto parsed = google::protobuf::util::JsonStringToMessage(json, &request);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString();
  request.set_training_job_name(name);
  return request;
}

// Runs the server to its exit (it is expected to refuse to start) and
// returns its exit code and everything it printed.
std::pair<int, std::string> RunRefusedServer(const std::string& args) {
  const std::string command = absl::StrCat(DP_SERVER_BINARY, " ", args, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  return {WEXITSTATUS(status), output};
}

TEST(DatabaseFlagTest, TheFlagAndTheConfigFileKeyGiveTheDatabaseUrl) {
  std::ostringstream out, err;
  const char* argv[] = {"debugplane-server", "--database", "postgresql://dp@db:5432/jobs"};
  service::ParsedServerFlags parsed = service::ParseServerFlags(3, argv, out, err);
  ASSERT_TRUE(parsed.config.has_value()) << err.str();
  EXPECT_EQ(parsed.config->database_url, "postgresql://dp@db:5432/jobs");

  ScopedTempDir dir;
  const std::filesystem::path config = dir.path() / "server.toml";
  std::ofstream(config) << "database = \"postgres://dp@db/other?sslmode=verify-full\"\n";
  const std::string config_path = config.string();
  const char* with_file[] = {"debugplane-server", "--config", config_path.c_str()};
  parsed = service::ParseServerFlags(3, with_file, out, err);
  ASSERT_TRUE(parsed.config.has_value()) << err.str();
  EXPECT_EQ(parsed.config->database_url, "postgres://dp@db/other?sslmode=verify-full");

  const char* without[] = {"debugplane-server"};
  parsed = service::ParseServerFlags(1, without, out, err);
  ASSERT_TRUE(parsed.config.has_value()) << err.str();
  EXPECT_EQ(parsed.config->database_url, "");  // SQLite in the data directory.
}

class PostgresServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = PostgresTestServer::Start();
    // A PostgreSQL that cannot start fails the test: it never skips.
    ASSERT_TRUE(server.ok()) << server.status();
    postgres_ = *std::move(server);
    auto database = postgres_->CreateDatabase();
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = *database;
  }

  std::unique_ptr<PostgresTestServer> postgres_;
  std::string database_;
  ScopedTempDir dir_;
};

TEST_F(PostgresServerTest, AJobCreatedThroughGrpcSurvivesSigkillOfTheServer) {
  ServerProcess server(dir_.path() / "data", {"--database", postgres_->Uri(database_)});
  ASSERT_TRUE(server.running());
  auto stub = server.Stub();
  grpc::Status created = testing::CreateJob(*stub, TemplateRequest("pg-job"));
  ASSERT_TRUE(created.ok()) << created.error_message();

  server.Restart();  // SIGKILL, then start again.
  stub = server.Stub();
  const v1::DescribeTrainingJobResponse job = testing::DescribeJob(*stub, "pg-job");
  EXPECT_EQ(job.training_job_name(), "pg-job");
  // The job is in PostgreSQL, not in a SQLite file in the data directory.
  auto stored = postgres_->Query(database_, "SELECT count(*) FROM training_jobs");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, "1");
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "data" / "debugplane.db"));
}

TEST_F(PostgresServerTest, TheServerLogsTheDatabaseWithoutThePassword) {
  // A second server on the first one's port opens the database, logs it,
  // then fails to listen and exits: its whole output can be read.
  ServerProcess first(dir_.path() / "first");
  auto [code, output] = RunRefusedServer(absl::StrCat("--listen ", first.address(), " --data-dir ",
                                                      (dir_.path() / "second").string(),
                                                      " --database ", postgres_->Uri(database_)));
  EXPECT_NE(code, 0);
  EXPECT_THAT(output, AllOf(HasSubstr(absl::StrCat("database: postgresql://debugplane@",
                                                   postgres_->address(), "/", database_)),
                            Not(HasSubstr(postgres_->password()))));
}

TEST_F(PostgresServerTest, AnUnusableDatabaseIsRefusedNamingTheCause) {
  const std::string data = absl::StrCat("--listen 127.0.0.1:0 --data-dir ", dir_.path().string());
  auto [code, output] =
      RunRefusedServer(absl::StrCat(data, " --database postgresql://debugplane:not-", "the-pw@",
                                    postgres_->address(), "/", database_));
  EXPECT_NE(code, 0);
  EXPECT_THAT(output, AllOf(HasSubstr("--database"), HasSubstr("refused user 'debugplane'"),
                            Not(HasSubstr("not-the-pw"))));

  std::tie(code, output) =
      RunRefusedServer(absl::StrCat(data, " --database mysql://root:pw-1234@db/jobs"));
  EXPECT_NE(code, 0);
  EXPECT_THAT(output, AllOf(HasSubstr("is not a postgresql:// or postgres:// URI"),
                            Not(HasSubstr("pw-1234"))));
}

}  // namespace
}  // namespace debugplane
