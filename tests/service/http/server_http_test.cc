// --http-listen: the flag and config-file key, and the SageMaker listener
// that ServerApp starts, exposes and shuts down.

#include <curl/curl.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/server_app.h"
#include "service/server_flags.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::service {
namespace {

using ::debugplane::testing::ScopedTempDir;
using ::testing::HasSubstr;

ParsedServerFlags Parse(std::vector<std::string> args) {
  std::vector<const char*> argv = {"debugplane-server"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out, err;
  return ParseServerFlags(static_cast<int>(argv.size()), argv.data(), out, err);
}

TEST(ServerHttpFlagsTest, OffUnlessGivenOnTheCommandLineOrInTheConfigFile) {
  ParsedServerFlags none = Parse({});
  ASSERT_TRUE(none.config.has_value());
  EXPECT_EQ(none.config->http_listen_address, "");

  ScopedTempDir dir;
  const std::string file = (dir.path() / "server.toml").string();
  std::ofstream(file) << "http-listen = \"127.0.0.1:8080\"\nhttp-threads = 4\n";
  ParsedServerFlags from_file = Parse({"--config", file});
  ASSERT_TRUE(from_file.config.has_value());
  EXPECT_EQ(from_file.config->http_listen_address, "127.0.0.1:8080");
  EXPECT_EQ(from_file.config->http_threads, 4);

  ParsedServerFlags flag = Parse({"--http-listen", "[::1]:0"});
  ASSERT_TRUE(flag.config.has_value());
  EXPECT_EQ(flag.config->http_listen_address, "[::1]:0");
  EXPECT_NE(Parse({"--http-threads", "0"}).exit_code, 0);
}

TEST(ServerHttpFlagsTest, AllowedHostsAreRepeatableAndReadFromTheConfigFile) {
  EXPECT_TRUE(Parse({}).config->http_allowed_hosts.empty());
  ParsedServerFlags flags =
      Parse({"--http-allowed-host", "a.example", "--http-allowed-host", "b.example:8080"});
  ASSERT_TRUE(flags.config.has_value());
  EXPECT_THAT(flags.config->http_allowed_hosts,
              ::testing::ElementsAre("a.example", "b.example:8080"));
  ScopedTempDir dir;
  const std::string file = (dir.path() / "server.toml").string();
  std::ofstream(file) << "http-allowed-host = [\"c.example\", \"d.example\"]\n";
  ParsedServerFlags from_file = Parse({"--config", file});
  ASSERT_TRUE(from_file.config.has_value());
  EXPECT_THAT(from_file.config->http_allowed_hosts,
              ::testing::ElementsAre("c.example", "d.example"));
}

ServerConfig LoopbackConfig(const std::filesystem::path& data_dir) {
  ServerConfig config;
  config.grpc.listen_address = "127.0.0.1:0";
  config.http_listen_address = "127.0.0.1:0";
  config.data_dir = data_dir.string();
  config.shutdown_grace = absl::ZeroDuration();
  return config;
}

size_t Append(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

TEST(ServerHttpTest, ServesTheSageMakerApiOnAFreePortAndStopsOnShutdown) {
  ScopedTempDir dir;
  auto app = ServerApp::Start(LoopbackConfig(dir.path()));
  ASSERT_TRUE(app.ok()) << app.status();
  const int port = (*app)->http_port();
  ASSERT_GT(port, 0);
  EXPECT_NE(port, (*app)->port());

  CURL* curl = curl_easy_init();
  std::string body;
  curl_slist* headers = curl_slist_append(nullptr, "X-Amz-Target: SageMaker.ListTrainingJobs");
  headers = curl_slist_append(headers, "Content-Type: application/x-amz-json-1.1");
  const std::string url = absl::StrCat("http://127.0.0.1:", port, "/");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "{}");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 20L);
  ASSERT_EQ(curl_easy_perform(curl), CURLE_OK);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body, R"({"TrainingJobSummaries":[]})");

  (*app)->Shutdown();
  body.clear();
  EXPECT_NE(curl_easy_perform(curl), CURLE_OK) << "still answering after Shutdown: " << body;
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
}

TEST(ServerHttpTest, ANonLoopbackHttpAddressNeedsCredentialsAndTls) {
  ScopedTempDir dir;
  ServerConfig config = LoopbackConfig(dir.path());
  config.http_listen_address = "0.0.0.0:0";
  auto app = ServerApp::Start(config);
  ASSERT_FALSE(app.ok());
  EXPECT_EQ(app.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(app.status().message(), HasSubstr("--http-listen"));
}

TEST(ServerHttpTest, AnAddressInUseIsAStartError) {
  ScopedTempDir dir;
  auto first = ServerApp::Start(LoopbackConfig(dir.path() / "a"));
  ASSERT_TRUE(first.ok()) << first.status();
  ServerConfig config = LoopbackConfig(dir.path() / "b");
  config.http_listen_address = absl::StrCat("127.0.0.1:", (*first)->http_port());
  auto second = ServerApp::Start(config);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr(config.http_listen_address));
}

}  // namespace
}  // namespace debugplane::service
