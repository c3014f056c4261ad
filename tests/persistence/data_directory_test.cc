// DataDirectory: one data directory, one server; start-up errors that say
// what is wrong with the directory.

#include "persistence/data_directory.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::persistence {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(DataDirectoryTest, CreatesTheDirectoryAndRecordsThisProcessInLock) {
  ScopedTempDir temp;
  const std::string path = (temp.path() / "a" / "b").string();
  auto directory = DataDirectory::Open(path);
  ASSERT_TRUE(directory.ok()) << directory.status();
  EXPECT_TRUE(fs::is_directory(path));
  std::ifstream lock(path + "/LOCK");
  long pid = 0;
  lock >> pid;
  EXPECT_EQ(pid, getpid());
}

TEST(DataDirectoryTest, ASecondOpenIsRefusedNamingTheHolderUntilTheFirstIsReleased) {
  ScopedTempDir temp;
  const std::string path = temp.path().string();
  auto first = DataDirectory::Open(path);
  ASSERT_TRUE(first.ok()) << first.status();

  auto second = DataDirectory::Open(path);
  ASSERT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  EXPECT_THAT(second.status().message(),
              AllOf(HasSubstr(path), HasSubstr(absl::StrCat("PID ", getpid())),
                    HasSubstr("another --data-dir")));

  first->reset();
  EXPECT_TRUE(DataDirectory::Open(path).ok());
}

TEST(DataDirectoryTest, AHolderKilledWithSigkillLeavesNoStaleLock) {
  ScopedTempDir temp;
  const std::string path = temp.path().string();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto held = DataDirectory::Open(path);
    const char byte = held.ok() ? 'y' : 'n';
    (void)!write(ready[1], &byte, 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  ASSERT_EQ(byte, 'y');

  auto refused = DataDirectory::Open(path);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr(absl::StrCat("PID ", child)));

  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(DataDirectory::Open(path).ok());
}

TEST(DataDirectoryTest, AFileIsNotADirectory) {
  ScopedTempDir temp;
  const std::string path = (temp.path() / "file").string();
  { std::ofstream(path) << "x"; }
  auto directory = DataDirectory::Open(path);
  ASSERT_EQ(directory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(directory.status().message(), AllOf(HasSubstr(path), HasSubstr("not a directory")));
}

// The tests run as root, whom permissions do not stop: the check runs in a
// child that drops to an unprivileged user, as a server started by one would.
TEST(DataDirectoryTest, ADirectoryThisUserMayNotWriteSaysPermissionDenied) {
  ScopedTempDir temp;
  const std::string path = (temp.path() / "read-only").string();
  ASSERT_TRUE(fs::create_directory(path));
  ASSERT_EQ(chmod(path.c_str(), 0555), 0);
  ASSERT_EQ(chmod(temp.path().c_str(), 0755), 0);
  int result[2];
  ASSERT_EQ(pipe(result), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(result[0]);
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(2);
    auto directory = DataDirectory::Open(path);
    const std::string message(directory.status().message());
    (void)!write(result[1], message.data(), message.size());
    _exit(directory.status().code() == absl::StatusCode::kFailedPrecondition ? 0 : 1);
  }
  close(result[1]);
  std::string message;
  char buffer[512];
  for (ssize_t n; (n = read(result[0], buffer, sizeof(buffer))) > 0;) message.append(buffer, n);
  close(result[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << message;
  EXPECT_THAT(message, AllOf(HasSubstr(path), HasSubstr("permission denied for user id")));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("No such file")));
}

}  // namespace
}  // namespace debugplane::persistence
