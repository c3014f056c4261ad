// Where the agent may write: the decision on a job's output paths
// (WriteConfinement::Confine), the directories it creates without
// following symbolic links, and the roots its flags give
// (AgentWritableRoots), on a real file system in a temporary directory.

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "client/agent/agent.h"
#include "client/agent/write_confinement.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::client {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class WriteConfinementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(allowed());
    fs::create_directories(outside());
  }
  fs::path allowed() const { return dir_.path() / "allowed"; }
  fs::path outside() const { return dir_.path() / "outside"; }

  WriteConfinement Confinement() const {
    absl::StatusOr<WriteConfinement> confinement =
        WriteConfinement::Create({{allowed().string(), "--allow-write"}});
    EXPECT_TRUE(confinement.ok()) << confinement.status();
    return *confinement;
  }

  ScopedTempDir dir_;
};

TEST_F(WriteConfinementTest, APathInsideARootIsAllowedAsItsRealPath) {
  const WriteConfinement confinement = Confinement();
  // Not there yet: the training creates it.
  const std::string tensors = (allowed() / "job" / "tensors").string();
  absl::StatusOr<std::string> real =
      confinement.Confine("DebugHookConfig.LocalPath", tensors, "--tensor-dir DIR");
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(*real, tensors);
  // The root itself, written with a trailing slash and a "." component.
  real = confinement.Confine("DebugHookConfig.LocalPath", allowed().string() + "/./",
                             "--tensor-dir DIR");
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(*real, allowed().string());
  // A symbolic link inside the root to another place inside it.
  fs::create_directories(allowed() / "real");
  fs::create_directory_symlink(allowed() / "real", allowed() / "link");
  real = confinement.Confine("ProfilerConfig.S3OutputPath", (allowed() / "link" / "p").string(),
                             "--profiler-dir DIR");
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(*real, (allowed() / "real" / "p").string());
}

TEST_F(WriteConfinementTest, APathOutsideEveryRootIsRefusedNamingTheFieldPathAndFlag) {
  const WriteConfinement confinement = Confinement();
  const std::string path = (outside() / "tensors").string();
  absl::StatusOr<std::string> real =
      confinement.Confine("DebugHookConfig.LocalPath", path, "--tensor-dir DIR");
  ASSERT_FALSE(real.ok());
  EXPECT_EQ(real.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(real.status().message(),
            "DebugHookConfig.LocalPath " + path +
                " is outside the directories this agent may write (--allow-write " +
                allowed().string() + "); allow it with --allow-write " + path +
                ", or give --tensor-dir DIR");
  // A sibling whose name starts with the root's is not inside it.
  real = confinement.Confine("DebugHookConfig.LocalPath", allowed().string() + "-other/t",
                             "--tensor-dir DIR");
  EXPECT_EQ(real.status().code(), absl::StatusCode::kPermissionDenied) << real.status();
  // The parent of a root is not inside it either.
  real = confinement.Confine("DebugHookConfig.LocalPath", dir_.path().string(), "--tensor-dir DIR");
  EXPECT_EQ(real.status().code(), absl::StatusCode::kPermissionDenied) << real.status();
  // The file systems' root.
  real = confinement.Confine("DebugHookConfig.LocalPath", "/", "--tensor-dir DIR");
  EXPECT_EQ(real.status().code(), absl::StatusCode::kPermissionDenied) << real.status();
}

TEST_F(WriteConfinementTest, ASymbolicLinkCannotLeadOutOfARoot) {
  const WriteConfinement confinement = Confinement();
  fs::create_directory_symlink(outside(), allowed() / "escape");
  const std::string path = (allowed() / "escape" / "job" / "tensors").string();
  absl::StatusOr<std::string> real =
      confinement.Confine("DebugHookConfig.S3OutputPath", path, "--tensor-dir DIR");
  ASSERT_EQ(real.status().code(), absl::StatusCode::kPermissionDenied) << real.status();
  EXPECT_THAT(real.status().message(), AllOf(HasSubstr("DebugHookConfig.S3OutputPath " + path),
                                             HasSubstr("leads through a symbolic link to " +
                                                       (outside() / "job" / "tensors").string()),
                                             HasSubstr("--allow-write " + path)));
  // A dangling link (mkdir through it would create its target) is refused.
  fs::create_directory_symlink(outside() / "not-yet", allowed() / "dangling");
  real = confinement.Confine("DebugHookConfig.S3OutputPath",
                             (allowed() / "dangling" / "t").string(), "--tensor-dir DIR");
  EXPECT_EQ(real.status().code(), absl::StatusCode::kNotFound) << real.status();
  EXPECT_THAT(real.status().message(), HasSubstr("symbolic link to a path that does not exist"));
  EXPECT_FALSE(fs::exists(outside() / "not-yet"));
}

TEST_F(WriteConfinementTest, RelativePathsAndDotDotAreRefused) {
  const WriteConfinement confinement = Confinement();
  absl::StatusOr<std::string> real =
      confinement.Confine("DebugHookConfig.LocalPath", "tensors", "--tensor-dir DIR");
  EXPECT_EQ(real.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(real.status().message(), HasSubstr("DebugHookConfig.LocalPath \"tensors\" is not"));
  // allowed/../outside would look inside by prefix.
  real = confinement.Confine("DebugHookConfig.LocalPath", allowed().string() + "/../outside/t",
                             "--tensor-dir DIR");
  EXPECT_EQ(real.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(real.status().message(), HasSubstr("'..' is not allowed"));
}

TEST_F(WriteConfinementTest, WithoutRootsNothingIsAllowed) {
  absl::StatusOr<WriteConfinement> confinement = WriteConfinement::Create({});
  ASSERT_TRUE(confinement.ok());
  absl::StatusOr<std::string> real = confinement->Confine(
      "ProfilerConfig.S3OutputPath", (allowed() / "p").string(), "--profiler-dir DIR");
  EXPECT_EQ(real.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(real.status().message(), HasSubstr("it was given none"));
}

TEST_F(WriteConfinementTest, RootsMayBeSymbolicLinksAndNeedNotExist) {
  fs::create_directory_symlink(outside(), dir_.path() / "chosen");
  absl::StatusOr<WriteConfinement> confinement =
      WriteConfinement::Create({{(dir_.path() / "chosen").string(), "--allow-write"},
                                {(dir_.path() / "later" / "x").string(), "--tensor-dir"}});
  ASSERT_TRUE(confinement.ok()) << confinement.status();
  EXPECT_EQ(confinement->DescribeRoots(), "--allow-write " + outside().string() +
                                              ", --tensor-dir " +
                                              (dir_.path() / "later" / "x").string());
  EXPECT_TRUE(confinement->Confine("F", (outside() / "t").string(), "--tensor-dir DIR").ok());
  EXPECT_TRUE(confinement->Confine("F", (dir_.path() / "later" / "x" / "t").string(), "X").ok());
  // A root with ".." is refused, naming the flag.
  absl::StatusOr<WriteConfinement> bad =
      WriteConfinement::Create({{allowed().string() + "/../outside", "--allow-write"}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("--allow-write " + allowed().string()));
}

TEST_F(WriteConfinementTest, CreateDirectoriesMakesTheChainBelowTheRoot) {
  const WriteConfinement confinement = Confinement();
  absl::StatusOr<std::string> real =
      confinement.Confine("F", (allowed() / "a" / "b" / "c").string(), "X");
  ASSERT_TRUE(real.ok()) << real.status();
  ASSERT_TRUE(confinement.CreateDirectories(*real).ok());
  EXPECT_TRUE(fs::is_directory(allowed() / "a" / "b" / "c"));
  // Again: nothing to do.
  EXPECT_TRUE(confinement.CreateDirectories(*real).ok());
  EXPECT_EQ(confinement.CreateDirectories((outside() / "x").string()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(outside() / "x"));
}

TEST_F(WriteConfinementTest, CreateDirectoriesDoesNotFollowALinkPlantedAfterTheCheck) {
  const WriteConfinement confinement = Confinement();
  absl::StatusOr<std::string> real =
      confinement.Confine("F", (allowed() / "job" / "tensors").string(), "X");
  ASSERT_TRUE(real.ok()) << real.status();
  // Between the check and the mkdir, "job" becomes a link out of the root.
  fs::create_directory_symlink(outside(), allowed() / "job");
  const absl::Status made = confinement.CreateDirectories(*real);
  EXPECT_EQ(made.code(), absl::StatusCode::kFailedPrecondition) << made;
  EXPECT_THAT(made.message(), HasSubstr((allowed() / "job").string() + " is a symbolic link"));
  EXPECT_FALSE(fs::exists(outside() / "tensors"));
  // A file in the way is named too.
  std::ofstream(allowed() / "file") << "x";
  EXPECT_THAT(confinement.CreateDirectories((allowed() / "file" / "t").string()).message(),
              HasSubstr((allowed() / "file").string() + " is not a directory"));
}

TEST(AgentWritableRootsTest, TheFlagsAndTheWorkingDirectoryUnlessItIsTheRoot) {
  AgentOptions options;
  options.tensor_dir = "/data/t";
  options.config_dir = "/data/c";
  options.allow_write = {"/a", "/b"};
  std::vector<std::string> described;
  for (const WritableRoot& root : AgentWritableRoots(options, "/srv/run")) {
    described.push_back(root.origin + " " + root.path);
  }
  EXPECT_THAT(described,
              ElementsAre("the working directory /srv/run", "--tensor-dir /data/t",
                          "--config-dir /data/c", "--allow-write /a", "--allow-write /b"));
  // An agent started in / (a service manager's default) may not write
  // everywhere because of it.
  described.clear();
  for (const WritableRoot& root : AgentWritableRoots(AgentOptions{}, "/")) {
    described.push_back(root.origin + " " + root.path);
  }
  EXPECT_THAT(described, Not(::testing::Contains(HasSubstr("working directory"))));
  EXPECT_TRUE(described.empty());
}

TEST(AgentCommandLineTest, AllowWriteRepeatsAndTlsFlagsParse) {
  std::vector<const char*> argv = {"debugplane-agent", "run", "--job", "j",  "--allow-write", "/a",
                                   "--allow-write",    "/b",  "--tls", "--", "true"};
  AgentOptions options;
  bool run = false;
  std::ostringstream out, err;
  EXPECT_EQ(
      ParseAgentCommandLine(static_cast<int>(argv.size()), argv.data(), options, run, out, err), 0)
      << err.str();
  EXPECT_TRUE(run);
  EXPECT_THAT(options.allow_write, ElementsAre("/a", "/b"));
  EXPECT_TRUE(options.connection.tls);
  EXPECT_EQ(options.connection.user_agent, "debugplane-agent");

  // Right before "--", which still separates the command.
  argv = {"debugplane-agent", "run", "--job", "j", "--allow-write", "/a", "--", "sh", "-c", "x"};
  options = AgentOptions{};
  EXPECT_EQ(
      ParseAgentCommandLine(static_cast<int>(argv.size()), argv.data(), options, run, out, err), 0)
      << err.str();
  EXPECT_THAT(options.allow_write, ElementsAre("/a"));
  EXPECT_THAT(options.command, ElementsAre("sh", "-c", "x"));
}

}  // namespace
}  // namespace debugplane::client
