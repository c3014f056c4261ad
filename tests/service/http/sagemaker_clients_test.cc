// The SageMaker API over HTTP driven by the real clients (boto3, the AWS CLI)
// against the real server binary: runs sagemaker_clients_test.py, which checks
// every reply against botocore's service model. boto3 and the AWS CLI are
// installed by scripts/install-deps.sh; their absence fails the test.

#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/service/server_process.h"

namespace debugplane {
namespace {

using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WithHttp;

struct ScriptResult {
  int exit_code = -1;
  std::string output;
};

// Runs the client script against `endpoint` with `extra` arguments.
ScriptResult RunClientScript(const std::string& endpoint, const std::string& extra = "") {
  // The python3 on PATH if it has boto3, else Debian's (python3-boto3).
  const std::string command = absl::StrCat(
      "$(python3 -c 'import boto3' 2>/dev/null && echo python3 || echo "
      "/usr/bin/python3) " DP_SOURCE_DIR
      "/tests/service/http/sagemaker_clients_test.py --endpoint ",
      endpoint, " --template " DP_TEST_DATA_DIR "/sagemaker/create-training-job-template.jsonc ",
      extra, " 2>&1");
  ScriptResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t read = 0;
  while ((read = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, read);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TEST(SageMakerClientsTest, Boto3AndAwsCliWithAuthenticationOff) {
  ScopedTempDir dir;
  ServerProcess server(dir.path() / "data", WithHttp());
  ASSERT_GT(server.http_port(), 0) << "the server did not report its HTTP port";
  const ScriptResult result = RunClientScript(server.http_endpoint());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("replies checked against botocore's model; 0 failures"),
            std::string::npos)
      << result.output;
}

TEST(SageMakerClientsTest, SignedRequestsWithCredentials) {
  ScopedTempDir dir;
  const std::string credentials = (dir.path() / "credentials").string();
  std::ofstream(credentials) << "admin AKIDHTTPADMIN admin-secret/with+chars\n"
                             << "reader AKIDHTTPREADER reader-secret\n";
  ASSERT_EQ(chmod(credentials.c_str(), 0600), 0);
  ServerProcess server(dir.path() / "data", WithHttp({"--credentials", credentials}));
  ASSERT_GT(server.http_port(), 0) << "the server did not report its HTTP port";
  const ScriptResult result =
      RunClientScript(server.http_endpoint(),
                      "--auth --access-key AKIDHTTPADMIN --secret-key admin-secret/with+chars "
                      "--reader-key AKIDHTTPREADER --reader-secret reader-secret");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("== test_signatures"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("replies checked against botocore's model; 0 failures"),
            std::string::npos)
      << result.output;
}

}  // namespace
}  // namespace debugplane
