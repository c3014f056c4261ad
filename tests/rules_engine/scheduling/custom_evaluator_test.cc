#include "rules_engine/scheduling/custom_evaluator.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/support/wait_until.h"

namespace debugplane::rules_engine {
namespace {

using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::WaitUntil;
using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Kind = RuleVerdict::Kind;

// Generous: the machine may be loaded; a correct runner answers in
// milliseconds, a broken one never.
constexpr absl::Duration kPatience = absl::Seconds(60);

// Collects the results of one or more evaluations' `done` callbacks. The
// callbacks share its state, so that a failing test that leaves the scope
// early cannot make a late callback touch freed memory.
class Results {
 public:
  absl::AnyInvocable<void(CustomEvaluationResult) &&> Callback() {
    return [state = state_](CustomEvaluationResult result) {
      absl::MutexLock lock(&state->mu);
      state->results.push_back(std::move(result));
      state->cv.SignalAll();
    };
  }

  // Blocks until `count` callbacks have run (each signals; no polling);
  // false on timeout.
  bool WaitForCallbacks(size_t count, absl::Duration timeout = kPatience) {
    const absl::Time deadline = absl::Now() + timeout;
    absl::MutexLock lock(&state_->mu);
    while (state_->results.size() < count) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      state_->cv.WaitWithTimeout(&state_->mu, left);
    }
    return true;
  }

  std::vector<CustomEvaluationResult> Get() {
    absl::MutexLock lock(&state_->mu);
    return state_->results;
  }

  size_t size() {
    absl::MutexLock lock(&state_->mu);
    return state_->results.size();
  }

 private:
  struct State {
    absl::Mutex mu;
    absl::CondVar cv;
    std::vector<CustomEvaluationResult> results ABSL_GUARDED_BY(mu);
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

class CustomEvaluatorTest : public ::testing::Test {
 protected:
  // Writes an executable /bin/sh script; returns its path. O_CLOEXEC: a
  // process spawned meanwhile must not hold it open for writing (the exec of
  // the script would fail with ETXTBSY).
  std::string Script(const std::string& name, const std::string& body, mode_t mode = 0755) {
    const std::string path = (dir_.path() / name).string();
    const std::string text = "#!/bin/sh\n" + body + "\n";
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    EXPECT_GE(fd, 0) << path;
    EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
    chmod(path.c_str(), mode);
    return path;
  }

  std::string Path(const std::string& name) const { return (dir_.path() / name).string(); }

  static CustomEvaluation Evaluation(const std::string& path) {
    CustomEvaluation evaluation;
    evaluation.argv = {path};
    evaluation.description = "rule 'Test' of job 'j1'";
    return evaluation;
  }

  // Runs `evaluation` to its end on `runner`.
  static CustomEvaluationResult Run(CustomEvaluatorRunner& runner, CustomEvaluation evaluation) {
    Results results;
    EXPECT_GT(runner.Start(std::move(evaluation), results.Callback()), 0u);
    EXPECT_TRUE(results.WaitForCallbacks(1));
    auto all = results.Get();
    if (all.empty()) return {};
    EXPECT_EQ(all.size(), 1u);
    return all[0];
  }

  CustomEvaluationResult Run(const std::string& path) {
    CustomEvaluatorRunner runner(CustomEvaluatorRunner::Options{});
    return Run(runner, Evaluation(path));
  }

  // Waits until `path` exists and is not empty; returns its content.
  static std::string WaitForFile(const std::string& path) {
    std::string text;
    if (WaitUntil(
            [&] {
              std::ifstream in(path);
              std::stringstream content;
              content << in.rdbuf();
              text = content.str();
              return in && !text.empty();
            },
            kPatience)) {
      return text;
    }
    ADD_FAILURE() << path << " never appeared";
    return "";
  }

  static bool FileExists(const std::string& path) { return std::filesystem::exists(path); }

  // Whether process `pid` is gone: no longer exists, or a zombie waiting for
  // whoever adopted it (init in a container may not reap it).
  static bool ProcessGone(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) return true;
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');
    return paren == std::string::npos || (paren + 2 < text.size() && text[paren + 2] == 'Z');
  }

  static bool WaitUntilGone(pid_t pid) {
    return WaitUntil([pid] { return ProcessGone(pid); }, kPatience);
  }

  ScopedTempDir dir_;
};

TEST_F(CustomEvaluatorTest, ExitZeroIsNoIssuesFoundWithLastLine) {
  auto result = Run(Script("ok.sh", "echo first\necho 'all good'\necho '   '\nexit 0"));
  EXPECT_EQ(result.verdict.kind, Kind::kNoIssuesFound);
  EXPECT_EQ(result.verdict.details, "all good");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.term_signal, 0);
  EXPECT_FALSE(result.cancelled);
}

TEST_F(CustomEvaluatorTest, ExitZeroWithoutOutput) {
  auto result = Run(Script("quiet.sh", "exit 0"));
  EXPECT_EQ(result.verdict.kind, Kind::kNoIssuesFound);
  EXPECT_EQ(result.verdict.details, "evaluator exited 0");
}

TEST_F(CustomEvaluatorTest, ExitTenIsIssuesFoundWithTheLastLines) {
  // 30 lines, half of them on stderr; the default tail is 20 lines.
  auto result = Run(Script("issues.sh",
                           "i=1\n"
                           "while [ $i -le 30 ]; do\n"
                           "  if [ $((i % 2)) -eq 0 ]; then echo \"line $i\" >&2; "
                           "else echo \"line $i\"; fi\n"
                           "  i=$((i + 1))\n"
                           "done\n"
                           "exit 10"));
  EXPECT_EQ(result.verdict.kind, Kind::kIssuesFound);
  EXPECT_EQ(result.exit_code, kEvaluatorExitIssuesFound);
  std::vector<std::string> expected;
  for (int i = 11; i <= 30; ++i) expected.push_back(absl::StrCat("line ", i));
  EXPECT_EQ(result.verdict.details, absl::StrJoin(expected, "\n"));
}

TEST_F(CustomEvaluatorTest, ExitTenWithoutOutput) {
  auto result = Run(Script("silent_issues.sh", "exit 10"));
  EXPECT_EQ(result.verdict.kind, Kind::kIssuesFound);
  EXPECT_THAT(result.verdict.details, HasSubstr("without output"));
}

TEST_F(CustomEvaluatorTest, OtherExitCodeIsErrorWithCodeAndLines) {
  auto result =
      Run(Script("broken.sh", "echo 'loading trial'\necho 'KeyError: gradients' >&2\nexit 3"));
  EXPECT_EQ(result.verdict.kind, Kind::kError);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.verdict.details,
            "evaluator exited with code 3:\nloading trial\nKeyError: gradients");
}

TEST_F(CustomEvaluatorTest, ErrorWithoutOutputSaysSo) {
  auto result = Run(Script("one.sh", "exit 1"));
  EXPECT_EQ(result.verdict.kind, Kind::kError);
  EXPECT_EQ(result.verdict.details, "evaluator exited with code 1 (no output)");
}

TEST_F(CustomEvaluatorTest, DeathBySignalIsErrorNamingTheSignal) {
  auto result = Run(Script("crash.sh", "echo 'about to crash'\nkill -SEGV $$"));
  EXPECT_EQ(result.verdict.kind, Kind::kError);
  EXPECT_EQ(result.exit_code, -1);
  EXPECT_EQ(result.term_signal, SIGSEGV);
  EXPECT_THAT(result.verdict.details,
              AllOf(HasSubstr("signal 11 (SIGSEGV)"), HasSubstr("about to crash")));
}

TEST_F(CustomEvaluatorTest, MissingExecutableIsErrorNamingPathAndErrno) {
  const std::string path = Path("does-not-exist");
  auto result = Run(path);
  EXPECT_EQ(result.verdict.kind, Kind::kError);
  EXPECT_EQ(result.exit_code, -1);
  EXPECT_THAT(result.verdict.details,
              AllOf(HasSubstr(path), HasSubstr("No such file or directory")));
}

TEST_F(CustomEvaluatorTest, NonExecutableFileIsErrorNamingPathAndErrno) {
  const std::string path = Script("not-executable.sh", "exit 0", 0644);
  auto result = Run(path);
  EXPECT_EQ(result.verdict.kind, Kind::kError);
  EXPECT_THAT(result.verdict.details, AllOf(HasSubstr(path), HasSubstr("Permission denied")));
}

TEST_F(CustomEvaluatorTest, RelativePathAndEmptyArgvAreErrors) {
  CustomEvaluatorRunner runner(CustomEvaluatorRunner::Options{});
  auto relative = Run(runner, Evaluation("bin/evaluator"));
  EXPECT_EQ(relative.verdict.kind, Kind::kError);
  EXPECT_THAT(relative.verdict.details, HasSubstr("bin/evaluator: not an absolute path"));
  auto empty = Run(runner, CustomEvaluation{});
  EXPECT_EQ(empty.verdict.kind, Kind::kError);
  EXPECT_THAT(empty.verdict.details, HasSubstr("no command"));
  CustomEvaluation bad_environment = Evaluation(Script("ok.sh", "exit 0"));
  bad_environment.environment["A=B"] = "x";
  auto bad = Run(runner, std::move(bad_environment));
  EXPECT_EQ(bad.verdict.kind, Kind::kError);
  EXPECT_THAT(bad.verdict.details, HasSubstr("invalid environment variable name 'A=B'"));
}

TEST_F(CustomEvaluatorTest, ArgumentsAndEnvironmentReachTheChildAndNothingElse) {
  // Set before the runner exists (it reads the server's environment once).
  setenv("DP_CUSTOM_EVALUATOR_TEST_SECRET", "leaked", 1);
  const char* old_home = getenv("HOME");
  const std::optional<std::string> saved_home =
      old_home != nullptr ? std::optional<std::string>(old_home) : std::nullopt;
  setenv("HOME", "/home/for-test", 1);
  CustomEvaluatorRunner runner(CustomEvaluatorRunner::Options{});
  CustomEvaluation evaluation =
      Evaluation(Script("env.sh",
                        "echo \"arg=$1\"\n"
                        "echo \"trial=$DP_TRIAL_PATH\"\n"
                        "echo \"param=$DP_RULE_PARAM_threshold\"\n"
                        "echo \"odd=$DP_RULE_PARAM_odd_name\"\n"
                        "echo \"json=$DP_RULE_PARAMETERS\"\n"
                        "echo \"code=$DP_ISSUES_FOUND_EXIT_CODE\"\n"
                        "echo \"extra=$EXTRA\"\n"
                        "echo \"secret=${DP_CUSTOM_EVALUATOR_TEST_SECRET:-unset}\"\n"
                        "echo \"home=$HOME\"\n"
                        "echo \"path_set=${PATH:+yes}\"\n"
                        "echo \"cwd=$(pwd)\"\n"
                        "exit 10"));
  evaluation.argv.push_back("first argument");
  evaluation.environment = CustomEvaluatorEnvironment("j1", "MyRule", "/data/trials/j1",
                                                      {{"threshold", "20.0"}, {"odd-name", "v w"}});
  evaluation.environment["EXTRA"] = "a b=c";
  evaluation.working_directory = dir_.path().string();
  auto result = Run(runner, std::move(evaluation));
  unsetenv("DP_CUSTOM_EVALUATOR_TEST_SECRET");
  if (saved_home) {
    setenv("HOME", saved_home->c_str(), 1);
  } else {
    unsetenv("HOME");
  }
  EXPECT_EQ(result.verdict.kind, Kind::kIssuesFound);
  EXPECT_EQ(result.verdict.details,
            absl::StrCat("arg=first argument\n"
                         "trial=/data/trials/j1\n"
                         "param=20.0\n"
                         "odd=v w\n"
                         "json={\"odd-name\":\"v w\",\"threshold\":\"20.0\"}\n"
                         "code=10\n"
                         "extra=a b=c\n"
                         "secret=unset\n"
                         "home=/home/for-test\n"
                         "path_set=yes\n"
                         "cwd=",
                         dir_.path().string()));
}

TEST_F(CustomEvaluatorTest, ChildGetsNoServerDescriptorsAndEmptyStdin) {
  // Without O_CLOEXEC, as a careless library in the server might open it.
  const int leaked = open("/dev/null", O_RDONLY);
  ASSERT_GE(leaked, 3);
  CustomEvaluatorRunner runner(CustomEvaluatorRunner::Options{});
  CustomEvaluation evaluation =
      Evaluation(Script("fds.sh",
                        "if [ -e /proc/$$/fd/$FD ]; then echo \"fd $FD leaked\"; fi\n"
                        "if read line; then echo \"stdin: $line\"; fi\n"
                        "echo checked\n"
                        "exit 10"));
  evaluation.environment["FD"] = std::to_string(leaked);
  auto result = Run(runner, std::move(evaluation));
  close(leaked);
  EXPECT_EQ(result.verdict.kind, Kind::kIssuesFound);
  EXPECT_EQ(result.verdict.details, "checked");
}

TEST_F(CustomEvaluatorTest, ClosingOutputEarlyStillWaitsForTheExit) {
  auto result = Run(Script("closes.sh", "echo bye\nexec >&- 2>&-\nsleep 0.2\nexit 10"));
  EXPECT_EQ(result.verdict.kind, Kind::kIssuesFound);
  EXPECT_EQ(result.verdict.details, "bye");
}

TEST_F(CustomEvaluatorTest, EnvironmentConventionNeverSetsParametersUnderTheirOwnNames) {
  auto environment = CustomEvaluatorEnvironment("job", "Rule", "/t", {{"LD_PRELOAD", "/evil.so"}});
  EXPECT_EQ(environment.count("LD_PRELOAD"), 0u);
  EXPECT_EQ(environment["DP_RULE_PARAM_LD_PRELOAD"], "/evil.so");
  EXPECT_EQ(environment["DP_TRAINING_JOB_NAME"], "job");
  EXPECT_EQ(environment["DP_RULE_CONFIGURATION_NAME"], "Rule");
  EXPECT_EQ(environment["DP_RULE_PARAMETERS"], "{\"LD_PRELOAD\":\"/evil.so\"}");
}

TEST_F(CustomEvaluatorTest, TimeLimitKillsTheProcess) {
  CustomEvaluatorRunner::Options options;
  options.kill_grace = absl::Milliseconds(200);
  CustomEvaluatorRunner runner(options);
  CustomEvaluation evaluation = Evaluation(Script("slow.sh", "echo 'reading steps'\nsleep 1000"));
  evaluation.time_limit = absl::Milliseconds(200);
  const absl::Time start = absl::Now();
  auto result = Run(runner, std::move(evaluation));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(result.verdict.kind, Kind::kError);
  EXPECT_FALSE(result.cancelled);
  EXPECT_THAT(result.verdict.details,
              AllOf(StartsWith("evaluator killed after 200ms"), HasSubstr("reading steps")));
}

TEST_F(CustomEvaluatorTest, TimeLimitEscalatesToSigkillWhenTermIsIgnored) {
  CustomEvaluatorRunner::Options options;
  options.kill_grace = absl::Milliseconds(300);
  CustomEvaluatorRunner runner(options);
  // An ignored signal stays ignored across exec: the sleeps ignore TERM too.
  CustomEvaluation evaluation = Evaluation(
      Script("stubborn.sh", "trap '' TERM\necho stubborn\nwhile :; do sleep 0.05; done"));
  evaluation.time_limit = absl::Milliseconds(200);
  auto result = Run(runner, std::move(evaluation));
  EXPECT_EQ(result.verdict.kind, Kind::kError);
  EXPECT_EQ(result.term_signal, SIGKILL);
  EXPECT_THAT(result.verdict.details,
              AllOf(HasSubstr("killed after 200ms"), HasSubstr("stubborn")));
}

TEST_F(CustomEvaluatorTest, CancelKillsTheProcessAndItsChildren) {
  CustomEvaluatorRunner::Options options;
  options.kill_grace = absl::Milliseconds(500);
  CustomEvaluatorRunner runner(options);
  const std::string pid_file = Path("grandchild.pid");
  CustomEvaluation evaluation =
      Evaluation(Script("parent.sh", "sleep 1000 &\necho $! > \"$PID_FILE\"\necho waiting\nwait"));
  evaluation.environment["PID_FILE"] = pid_file;
  Results results;
  const uint64_t id = runner.Start(std::move(evaluation), results.Callback());
  ASSERT_GT(id, 0u);
  const pid_t grandchild = std::atoi(WaitForFile(pid_file).c_str());
  ASSERT_GT(grandchild, 0);
  EXPECT_FALSE(ProcessGone(grandchild));
  EXPECT_EQ(results.size(), 0u);

  runner.Cancel(id);
  ASSERT_TRUE(results.WaitForCallbacks(1));
  auto result = results.Get()[0];
  EXPECT_TRUE(result.cancelled);
  EXPECT_EQ(result.verdict.kind, Kind::kError);
  EXPECT_THAT(result.verdict.details, StartsWith("evaluator stopped"));
  EXPECT_TRUE(WaitUntilGone(grandchild)) << "pid " << grandchild;
  // A second Cancel of a finished evaluation is a no-op.
  runner.Cancel(id);
  EXPECT_EQ(results.size(), 1u);
}

TEST_F(CustomEvaluatorTest, LeftoverChildrenAreKilledWhenTheEvaluatorExits) {
  CustomEvaluatorRunner runner(CustomEvaluatorRunner::Options{});
  const std::string pid_file = Path("leftover.pid");
  // The background sleep keeps the output pipe open: the runner must not wait
  // for EOF, and must not leave the sleep running.
  CustomEvaluation evaluation =
      Evaluation(Script("leaves.sh", "sleep 1000 &\necho $! > \"$PID_FILE\"\necho done\nexit 0"));
  evaluation.environment["PID_FILE"] = pid_file;
  auto result = Run(runner, std::move(evaluation));
  EXPECT_EQ(result.verdict.kind, Kind::kNoIssuesFound);
  EXPECT_EQ(result.verdict.details, "done");
  const pid_t leftover = std::atoi(WaitForFile(pid_file).c_str());
  ASSERT_GT(leftover, 0);
  EXPECT_TRUE(WaitUntilGone(leftover)) << "pid " << leftover;
}

TEST_F(CustomEvaluatorTest, CancelOfQueuedEvaluationNeverStartsIt) {
  CustomEvaluatorRunner::Options options;
  options.max_concurrent = 1;
  options.kill_grace = absl::Milliseconds(200);
  CustomEvaluatorRunner runner(options);
  Results first;
  Results second;
  const std::string marker = Path("second-ran");
  const uint64_t first_id =
      runner.Start(Evaluation(Script("block.sh", "sleep 1000")), first.Callback());
  CustomEvaluation queued = Evaluation(Script("mark.sh", "touch \"$MARKER\""));
  queued.environment["MARKER"] = marker;
  const uint64_t second_id = runner.Start(std::move(queued), second.Callback());
  EXPECT_NE(first_id, second_id);
  runner.Cancel(second_id);
  ASSERT_TRUE(second.WaitForCallbacks(1));
  EXPECT_TRUE(second.Get()[0].cancelled);
  EXPECT_EQ(second.Get()[0].exit_code, -1);
  EXPECT_EQ(first.size(), 0u);
  runner.Cancel(first_id);
  ASSERT_TRUE(first.WaitForCallbacks(1));
  EXPECT_TRUE(first.Get()[0].cancelled);
  EXPECT_FALSE(FileExists(marker));
}

TEST_F(CustomEvaluatorTest, CancelOfUnknownIdIsANoOp) {
  CustomEvaluatorRunner runner(CustomEvaluatorRunner::Options{});
  runner.Cancel(0);
  runner.Cancel(987654321);
  auto result = Run(runner, Evaluation(Script("ok.sh", "echo fine")));
  EXPECT_EQ(result.verdict.kind, Kind::kNoIssuesFound);
  EXPECT_FALSE(result.cancelled);
}

TEST_F(CustomEvaluatorTest, MaxConcurrentQueuesTheRest) {
  CustomEvaluatorRunner::Options options;
  options.max_concurrent = 1;
  CustomEvaluatorRunner runner(options);
  const std::string log = Path("log");
  const std::string release = Path("release");
  // A holds its slot until the test creates `release`.
  CustomEvaluation a = Evaluation(Script("a.sh",
                                         "echo 'A start' >> \"$LOG\"\n"
                                         "n=0\n"
                                         "while [ ! -e \"$RELEASE\" ] && [ $n -lt 6000 ]; do\n"
                                         "  sleep 0.01; n=$((n + 1))\n"
                                         "done\n"
                                         "echo 'A end' >> \"$LOG\""));
  a.environment = {{"LOG", log}, {"RELEASE", release}};
  CustomEvaluation b = Evaluation(Script("b.sh", "echo 'B start' >> \"$LOG\""));
  b.environment = {{"LOG", log}};
  Results results;
  runner.Start(std::move(a), results.Callback());
  runner.Start(std::move(b), results.Callback());
  EXPECT_EQ(WaitForFile(log), "A start\n");
  // B must not start while A runs (a correct runner never starts it, however
  // long this waits, so the check cannot fail spuriously).
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(WaitForFile(log), "A start\n");
  EXPECT_EQ(results.size(), 0u);
  { std::ofstream(release) << "go"; }
  ASSERT_TRUE(results.WaitForCallbacks(2));
  EXPECT_EQ(WaitForFile(log), "A start\nA end\nB start\n");
  for (const auto& result : results.Get()) EXPECT_EQ(result.verdict.kind, Kind::kNoIssuesFound);
}

TEST_F(CustomEvaluatorTest, ManyEvaluationsEachFinishOnce) {
  CustomEvaluatorRunner::Options options;
  options.max_concurrent = 3;
  CustomEvaluatorRunner runner(options);
  const std::string path = Script("code.sh", "echo \"job $1\"\nexit $2");
  constexpr int kJobs = 24;
  std::vector<std::unique_ptr<Results>> results;
  for (int i = 0; i < kJobs; ++i) {
    results.push_back(std::make_unique<Results>());
    CustomEvaluation evaluation = Evaluation(path);
    evaluation.argv.push_back(absl::StrCat(i));
    evaluation.argv.push_back(i % 3 == 0 ? "10" : "0");
    runner.Start(std::move(evaluation), results.back()->Callback());
  }
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_TRUE(results[i]->WaitForCallbacks(1)) << i;
    auto result = results[i]->Get()[0];
    EXPECT_EQ(result.verdict.kind, i % 3 == 0 ? Kind::kIssuesFound : Kind::kNoIssuesFound) << i;
    EXPECT_EQ(result.verdict.details, absl::StrCat("job ", i));
  }
  runner.Shutdown();
  for (int i = 0; i < kJobs; ++i) EXPECT_EQ(results[i]->size(), 1u) << i;
}

TEST_F(CustomEvaluatorTest, DoneMayStartAnotherEvaluation) {
  CustomEvaluatorRunner runner(CustomEvaluatorRunner::Options{});
  const std::string path = Script("echo.sh", "echo \"$1\"");
  Results second;
  std::atomic<uint64_t> second_id{0};
  Results first;
  CustomEvaluation evaluation = Evaluation(path);
  evaluation.argv.push_back("one");
  runner.Start(std::move(evaluation),
               [&, path, inner = first.Callback()](CustomEvaluationResult result) mutable {
                 CustomEvaluation next = Evaluation(path);
                 next.argv.push_back("two");
                 second_id = runner.Start(std::move(next), second.Callback());
                 std::move(inner)(std::move(result));
               });
  ASSERT_TRUE(first.WaitForCallbacks(1));
  ASSERT_TRUE(second.WaitForCallbacks(1));
  EXPECT_GT(second_id.load(), 0u);
  EXPECT_EQ(first.Get()[0].verdict.details, "one");
  EXPECT_EQ(second.Get()[0].verdict.details, "two");
}

TEST_F(CustomEvaluatorTest, HugeOutputStaysBounded) {
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  CustomEvaluatorRunner runner(CustomEvaluatorRunner::Options{});
  // 50 MB of "y" lines, then the finding.
  auto result = Run(runner, Evaluation(Script("chatty.sh",
                                              "yes | head -c 50000000\n"
                                              "echo 'tensor x exploded at step 7'\n"
                                              "exit 10")));
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  EXPECT_EQ(result.verdict.kind, Kind::kIssuesFound);
  EXPECT_LE(result.verdict.details.size(), kEvaluatorMaxDetails);
  EXPECT_THAT(result.verdict.details, EndsWith("y\ny\ntensor x exploded at step 7"));
  // Keeping the output would take far more than 50 MB (ru_maxrss is in KiB).
  // Under TSan every byte touched also costs shadow memory (5-10x, in
  // TSan's own words), so the bound scales, still far below what keeping
  // the output would take there.
#ifdef ABSL_HAVE_THREAD_SANITIZER
  constexpr long kMemoryScale = 5;
#else
  constexpr long kMemoryScale = 1;
#endif
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, kMemoryScale * 32 * 1024);
}

TEST_F(CustomEvaluatorTest, OneHugeLineIsCut) {
  auto result = Run(Script("long_line.sh", "head -c 5000000 /dev/zero | tr '\\0' x\nexit 3"));
  EXPECT_EQ(result.verdict.kind, Kind::kError);
  EXPECT_LE(result.verdict.details.size(), kEvaluatorMaxDetails);
  EXPECT_THAT(result.verdict.details,
              AllOf(StartsWith("evaluator exited with code 3:\nxxx"), EndsWith("xxx...")));
}

TEST_F(CustomEvaluatorTest, ShutdownStopsEverythingPromptlyAndRunsEveryDoneOnce) {
  CustomEvaluatorRunner::Options options;
  options.max_concurrent = 2;
  options.kill_grace = absl::Milliseconds(300);
  auto runner = std::make_unique<CustomEvaluatorRunner>(options);
  const std::string plain = Script("sleeper.sh", "echo started > \"$MARK\"\nsleep 1000");
  const std::string stubborn =
      Script("stubborn.sh", "trap '' TERM\necho started > \"$MARK\"\nwhile :; do sleep 0.05; done");
  std::vector<std::unique_ptr<Results>> results;
  const std::vector<std::string> scripts = {plain, stubborn, plain};  // The third is queued.
  for (size_t i = 0; i < scripts.size(); ++i) {
    results.push_back(std::make_unique<Results>());
    CustomEvaluation evaluation = Evaluation(scripts[i]);
    evaluation.environment["MARK"] = Path(absl::StrCat("started-", i));
    ASSERT_GT(runner->Start(std::move(evaluation), results.back()->Callback()), 0u);
  }
  WaitForFile(Path("started-0"));
  WaitForFile(Path("started-1"));

  const absl::Time start = absl::Now();
  runner->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_EQ(results[i]->size(), 1u) << i;  // Already ran: Shutdown waited for it.
    EXPECT_TRUE(results[i]->Get()[0].cancelled) << i;
  }
  EXPECT_EQ(results[1]->Get()[0].term_signal, SIGKILL);
  EXPECT_FALSE(FileExists(Path("started-2")));

  // Idempotent; Start afterwards is refused without calling done.
  runner->Shutdown();
  Results late;
  EXPECT_EQ(runner->Start(Evaluation(plain), late.Callback()), 0u);
  runner.reset();
  EXPECT_EQ(late.size(), 0u);
  for (const auto& r : results) EXPECT_EQ(r->size(), 1u);
}

TEST_F(CustomEvaluatorTest, ConcurrentShutdownCallsAllReturnAfterTheProcessesAreGone) {
  CustomEvaluatorRunner::Options options;
  options.kill_grace = absl::Milliseconds(200);
  CustomEvaluatorRunner runner(options);
  Results results;
  runner.Start(Evaluation(Script("sleeper.sh", "sleep 1000")), results.Callback());
  std::vector<std::thread> threads;
  std::atomic<int> returned_early{0};
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&] {
      runner.Shutdown();
      if (results.size() != 1) ++returned_early;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(returned_early.load(), 0);
  EXPECT_EQ(results.size(), 1u);
}

// Kernels before 5.3 have no pidfd_open: exits are then found by polling.
TEST_F(CustomEvaluatorTest, WorksWithoutPidfds) {
  CustomEvaluatorRunner::Options options;
  options.use_pidfd = false;
  options.kill_grace = absl::Milliseconds(200);
  CustomEvaluatorRunner runner(options);
  auto issues = Run(runner, Evaluation(Script("issues.sh", "echo 'found it'\nexit 10")));
  EXPECT_EQ(issues.verdict.kind, Kind::kIssuesFound);
  EXPECT_EQ(issues.verdict.details, "found it");
  const std::string pid_file = Path("leftover.pid");
  CustomEvaluation evaluation =
      Evaluation(Script("leaves.sh", "sleep 1000 &\necho $! > \"$PID_FILE\"\nexit 0"));
  evaluation.environment["PID_FILE"] = pid_file;
  EXPECT_EQ(Run(runner, std::move(evaluation)).verdict.kind, Kind::kNoIssuesFound);
  EXPECT_TRUE(WaitUntilGone(std::atoi(WaitForFile(pid_file).c_str())));
  CustomEvaluation slow = Evaluation(Script("slow.sh", "sleep 1000"));
  slow.time_limit = absl::Milliseconds(100);
  auto timed_out = Run(runner, std::move(slow));
  EXPECT_EQ(timed_out.verdict.kind, Kind::kError);
  EXPECT_THAT(timed_out.verdict.details, StartsWith("evaluator killed after 100ms"));
}

// --- OutputTail and ComposeDetails ------------------------------------------

TEST(CustomEvaluatorOutputTailTest, KeepsTheLastNonBlankLines) {
  internal::OutputTail tail(3);
  tail.Append("one\n\n   \ntwo\nthr");
  tail.Append("ee\nfour\n  five  ");
  EXPECT_THAT(tail.Lines(), ::testing::ElementsAre("three", "four", "five"));
  EXPECT_EQ(tail.bytes_seen(), 32u);
}

TEST(CustomEvaluatorOutputTailTest, CarriageReturnStartsTheLineOverButCrlfEndsIt) {
  internal::OutputTail tail(5);
  tail.Append("progress 10%\rprogress 50%\r");
  tail.Append("progress 100%\r\ndone\r");
  tail.Append("\n");
  EXPECT_THAT(tail.Lines(), ::testing::ElementsAre("progress 100%", "done"));
}

TEST(CustomEvaluatorOutputTailTest, InvalidUtf8AndControlCharactersBecomeQuestionMarks) {
  internal::OutputTail tail(5);
  tail.Append("caf\xC3\xA9 \xFF\xC0\xAF ok\x1B[31m red\tx\n");
  tail.Append("\xE2\x82");  // A cut-off euro sign as the unterminated last line.
  EXPECT_THAT(tail.Lines(), ::testing::ElementsAre("caf\xC3\xA9 ??? ok?[31m red\tx", "??"));
}

TEST(CustomEvaluatorOutputTailTest, LongLinesAreCutOnACharacterBoundary) {
  internal::OutputTail tail(2);
  std::string line(internal::OutputTail::kMaxLineBytes - 1, 'a');
  line += "\xE2\x82\xAC";  // Crosses the limit: dropped whole, not as '?'.
  line += std::string(5000, 'b');
  tail.Append(line + "\nshort\n");
  auto lines = tail.Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], std::string(internal::OutputTail::kMaxLineBytes - 1, 'a') + "...");
  EXPECT_EQ(lines[1], "short");
}

// The fast path (skipping what cannot survive a chunk) must keep exactly what
// feeding the same bytes one at a time keeps.
TEST(CustomEvaluatorOutputTailTest, ChunkingDoesNotChangeTheResult) {
  std::mt19937 random(12345);
  const std::string alphabet = "ab \t\r\n\n\n\xC3\xA9\xFF";
  for (int round = 0; round < 200; ++round) {
    std::string data;
    const size_t size = random() % 3000;
    for (size_t i = 0; i < size; ++i) data.push_back(alphabet[random() % alphabet.size()]);
    const int max_lines = 1 + static_cast<int>(random() % 6);
    internal::OutputTail bytewise(max_lines);
    for (char c : data) bytewise.Append(absl::string_view(&c, 1));
    internal::OutputTail chunked(max_lines);
    for (size_t pos = 0; pos < data.size();) {
      const size_t chunk = std::min<size_t>(1 + random() % 400, data.size() - pos);
      chunked.Append(absl::string_view(data).substr(pos, chunk));
      pos += chunk;
    }
    ASSERT_EQ(bytewise.Lines(), chunked.Lines()) << "round " << round;
  }
}

TEST(CustomEvaluatorComposeDetailsTest, KeepsTheNewestLinesThatFit) {
  std::vector<std::string> lines;
  for (int i = 0; i < 40; ++i) lines.push_back(absl::StrCat("line ", i, " ", std::string(40, '.')));
  const std::string details = internal::ComposeDetails("evaluator exited with code 3", lines);
  EXPECT_LE(details.size(), kEvaluatorMaxDetails);
  EXPECT_GT(details.size(), kEvaluatorMaxDetails - 60);  // Filled, not just one line.
  EXPECT_THAT(details, AllOf(StartsWith("evaluator exited with code 3:\n...\nline "),
                             EndsWith(lines.back()), Not(HasSubstr("line 0 "))));
  // Everything fits: no marker.
  EXPECT_EQ(internal::ComposeDetails("head", {"a", "b"}), "head:\na\nb");
  EXPECT_EQ(internal::ComposeDetails("", {"a", "b"}), "a\nb");
}

TEST(CustomEvaluatorComposeDetailsTest, CutsAnOversizedLineAndHeadOnCharacterBoundaries) {
  std::string euros;
  for (int i = 0; i < 600; ++i) euros += "\xE2\x82\xAC";  // 1800 bytes.
  const std::string details = internal::ComposeDetails(euros, {"older", euros});
  EXPECT_LE(details.size(), kEvaluatorMaxDetails);
  EXPECT_EQ(internal::SanitizeUtf8(details), details);  // Still valid UTF-8.
  EXPECT_THAT(details, AllOf(HasSubstr("...:\n...\n"), EndsWith("\xE2\x82\xAC...")));
  EXPECT_EQ(internal::ComposeDetails(euros, {}).size() <= kEvaluatorMaxDetails, true);
}

}  // namespace
}  // namespace debugplane::rules_engine
