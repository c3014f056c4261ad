// client/python/debugplane_example.py, on stubs generated from proto/ by
// client/python/generate_stubs.sh, against the real server: what an
// orchestration script does (create, poll, watch, stop) works as shown.

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/service/run_command.h"
#include "tests/service/server_process.h"

namespace debugplane {
namespace {

using ::debugplane::testing::CommandResult;
using ::debugplane::testing::RunCommand;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::testing::HasSubstr;
using ::testing::Not;

// Debian's python3 (its python3-grpcio and python3-protobuf live there),
// whatever python3 comes first on PATH.
const char kPython[] = "/usr/bin/python3";

class PythonExampleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stubs_ = dir_.path() / "stubs";
    const CommandResult generated = RunCommand(
        absl::StrCat(DP_SOURCE_DIR, "/client/python/generate_stubs.sh ", stubs_.string()));
    ASSERT_EQ(generated.exit_code, 0) << generated.out;
  }

  CommandResult RunExample(const ServerProcess& server, const std::string& job,
                           const std::string& extra = "") {
    return RunCommand(absl::StrCat("env -u DEBUGPLANE_TOKEN ", kPython, " ", DP_SOURCE_DIR,
                                   "/client/python/debugplane_example.py --server ",
                                   server.address(), " --stubs ", stubs_.string(), " --job-name ",
                                   job, " --output-path ", (dir_.path() / "data" / job).string(),
                                   " --timeout 20 ", extra));
  }

  ScopedTempDir dir_;
  std::filesystem::path stubs_;
};

TEST_F(PythonExampleTest, CreatesPollsWatchesAndStopsAJob) {
  ServerProcess server(dir_.path() / "data");
  const CommandResult result = RunExample(server, "py-example");
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_THAT(result.out, HasSubstr("created arn:aws:sagemaker:"));
  EXPECT_THAT(result.out,
              HasSubstr("described InProgress rules {'ExplodingTensor': 'InProgress'}"));
  EXPECT_THAT(result.out, HasSubstr("watching from InProgress"));
  EXPECT_THAT(result.out, HasSubstr("changed job: InProgress/Starting -> Stopping/Stopping"));
  EXPECT_THAT(result.out, HasSubstr("changed ExplodingTensor: Stopping -> Stopped"));
  EXPECT_THAT(result.out, HasSubstr("watch ended: Stopped"));
}

TEST_F(PythonExampleTest, ARefusedRequestExitsWithTheServersReason) {
  ServerProcess server(dir_.path() / "data");
  ASSERT_EQ(RunExample(server, "py-twice").exit_code, 0);
  const CommandResult again = RunExample(server, "py-twice");
  EXPECT_EQ(again.exit_code, 3) << again.out;
  EXPECT_THAT(again.out, HasSubstr("ALREADY_EXISTS"));
  EXPECT_THAT(again.out, HasSubstr("py-twice"));
}

TEST_F(PythonExampleTest, SendsItsTokenAndARefusalNamesTheRole) {
  const std::filesystem::path credentials = dir_.path() / "credentials";
  {
    std::ofstream out(credentials);
    out << "operator PYOPERATOR operator-secret\nreader PYREADER reader-secret\n";
  }
  std::filesystem::permissions(
      credentials, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  ServerProcess server(dir_.path() / "data", {"--credentials", credentials.string()});
  const CommandResult allowed =
      RunExample(server, "py-token", "--token PYOPERATOR:operator-secret");
  EXPECT_EQ(allowed.exit_code, 0) << allowed.out;
  EXPECT_THAT(allowed.out, HasSubstr("watch ended: Stopped"));

  const CommandResult reader = RunExample(server, "py-reader", "--token PYREADER:reader-secret");
  EXPECT_EQ(reader.exit_code, 8) << reader.out;
  EXPECT_THAT(reader.out, HasSubstr("PERMISSION_DENIED"));
  EXPECT_THAT(reader.out, HasSubstr("role reader"));
  EXPECT_THAT(reader.out, Not(HasSubstr("reader-secret")));

  const CommandResult anonymous = RunExample(server, "py-anonymous");
  EXPECT_EQ(anonymous.exit_code, 8) << anonymous.out;
  EXPECT_THAT(anonymous.out, HasSubstr("UNAUTHENTICATED"));
}

TEST_F(PythonExampleTest, AnUnreachableServerExitsSeven) {
  ServerProcess server(dir_.path() / "data");
  const std::string address = server.address();
  server.Kill(SIGKILL);
  const CommandResult result = RunCommand(absl::StrCat(
      kPython, " ", DP_SOURCE_DIR, "/client/python/debugplane_example.py", " --server ", address,
      " --stubs ", stubs_.string(), " --job-name x --output-path /tmp/x --timeout 2"));
  EXPECT_EQ(result.exit_code, 7) << result.out;
  EXPECT_THAT(result.out, HasSubstr("UNAVAILABLE"));
}

}  // namespace
}  // namespace debugplane
