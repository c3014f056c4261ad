// The ProfilerReport page in a real browser: headless Chromium (Debian's
// `chromium`, installed by scripts/install-deps.sh) loads the page rendered
// from the fixtures, and the test checks that it exits cleanly, that the
// dumped DOM holds the chart SVGs, that nothing reached the console (the page
// has no script, so any console message is an error, e.g. a blocked resource
// or a CSP violation) and that the screenshot is not a blank page. The
// screenshot and the HTML are kept as test artifacts outside the repository:
// $DP_TEST_ARTIFACTS_DIR if set, else <directory of this test binary>/test-artifacts.
//
// A missing chromium fails the test (with what to run), never skips it: CI
// installs it, and a silently skipped browser test would prove nothing.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/profiler/framework_timeline_reader.h"
#include "rules_engine/profiler/system_metrics_reader.h"
#include "rules_engine/profiler_rules/profiler_rules.h"
#include "rules_engine/report/profiler_report.h"
#include "tests/support/wait_until.h"

namespace debugplane::rules_engine {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kSystem = DP_TEST_DATA_DIR "/profiler/system/cpu_bottleneck";
const std::string kFramework = DP_TEST_DATA_DIR "/profiler/framework/pytorch-step-outlier";
// Tall enough for the whole page at desktop width.
constexpr char kWindowSize[] = "--window-size=1280,4400";

std::string FindChromium() {
  if (const char* env = std::getenv("DP_CHROMIUM"); env != nullptr && *env != '\0') return env;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    for (const char* name : {"chromium", "chromium-browser"}) {
      fs::path candidate = fs::path(std::string(dir)) / name;
      if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
  }
  return "";
}

fs::path ArtifactsDir() {
  if (const char* env = std::getenv("DP_TEST_ARTIFACTS_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return fs::read_symlink("/proc/self/exe").parent_path() / "test-artifacts";
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const fs::path& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  ASSERT_TRUE(out.good()) << path;
}

struct RunResult {
  int exit_code = -1;  // -1: killed (timeout) or did not start.
  std::string out, err;
};

// Runs `argv` in its own process group with stdout and stderr to files, so a
// browser that hangs is killed with all its helper processes.
RunResult RunCommand(const std::vector<std::string>& argv, const fs::path& work,
                     absl::Duration timeout = absl::Seconds(120)) {
  RunResult r;
  fs::path out = work / "stdout.txt", err = work / "stderr.txt";
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  if (pid < 0) return r;
  setpgid(pid, pid);
  int status = 0;
  if (!::debugplane::testing::WaitUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; },
                                        timeout)) {
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    ADD_FAILURE() << "timed out after " << timeout << ": " << argv[0];
    status = -1;
  }
  // Helpers that outlived the browser (they should not) go too.
  kill(-pid, SIGKILL);
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.out = ReadAll(out);
  r.err = ReadAll(err);
  return r;
}

// Chromium flags for a deterministic, self-contained headless run.
std::vector<std::string> ChromiumArgs(const std::string& chromium, const fs::path& profile) {
  return {chromium, "--headless",
          "--no-sandbox",  // Root in CI containers.
          "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
          "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
          "--user-data-dir=" + profile.string(),
          // Console messages go to stderr as "...:INFO:CONSOLE:<line>] "<message>", source: ...".
          "--enable-logging=stderr", "--v=0", kWindowSize};
}

std::vector<std::string> ConsoleLines(const std::string& stderr_text) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(stderr_text, '\n')) {
    if (line.find(":CONSOLE") != absl::string_view::npos) lines.emplace_back(line);
  }
  return lines;
}

std::string Url(const fs::path& file) { return "file://" + fs::absolute(file).string(); }

class ProfilerReportBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = FindChromium();
    ASSERT_FALSE(chromium_.empty())
        << "chromium is not installed: run scripts/install-deps.sh (it installs Debian's "
           "chromium and fonts-dejavu-core), or set DP_CHROMIUM to a Chromium binary";
    work_ = fs::temp_directory_path() / absl::StrCat("dp-report-browser-", getpid());
    fs::remove_all(work_);
    fs::create_directories(work_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(work_, ec);
  }

  // Chromium on `url`, with `extra` flags; fails the test on a bad exit.
  RunResult Browse(const std::string& url, const std::vector<std::string>& extra) {
    std::vector<std::string> args = ChromiumArgs(chromium_, work_ / "profile");
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(url);
    RunResult r = RunCommand(args, work_);
    EXPECT_EQ(r.exit_code, 0) << "chromium failed; stderr:\n" << r.err;
    return r;
  }

  std::string chromium_;
  fs::path work_;
};

// The report of the fixtures as the scheduler would produce it: every
// profiler rule with its defaults over CPU-bottleneck metrics and the
// step-outlier timeline.
std::string FixtureReport() {
  SystemMetricsReader system(objectstore::OpenLocalPath(kSystem).value());
  std::vector<SystemMetricPoint> points = system.ReadNew();
  FrameworkTimelineReader framework(objectstore::OpenLocalPath(kFramework).value());
  std::vector<FrameworkEvent> events = framework.ReadNew();
  EXPECT_GT(points.size(), 1000u) << system.Summary();
  EXPECT_GT(events.size(), 640u) << framework.Summary();
  ProfilerReportData data;
  data.AddMetrics(points);
  data.AddFrameworkEvents(events);
  std::vector<ProfilerRuleFinding> findings;
  for (const std::string& name : ProfilerRuleNames()) {
    auto rule = CreateProfilerRule(name, {});
    EXPECT_TRUE(rule.ok()) << rule.status();
    if (!rule.ok()) continue;
    if ((*rule)->WantsSystemMetrics()) (*rule)->OnMetrics(points);
    if ((*rule)->WantsFrameworkEvents()) (*rule)->OnFrameworkEvents(events);
    (*rule)->OnEnd();
    findings.push_back((*rule)->Finding());
  }
  ProfilerReportContext ctx;
  ctx.training_job_name = "pytorch-mnist-cpu-bottleneck-2026-11-22";
  ctx.rule_configuration_name = "ProfilerReport";
  ctx.training_job_status = "InProgress";
  ctx.generated_at = absl::Now();
  ctx.data_summary =
      absl::StrCat("system: ", system.Summary(), "; framework: ", framework.Summary());
  return RenderProfilerReportHtml(data, findings, ctx);
}

TEST_F(ProfilerReportBrowserTest, RendersWithChartsAndNoConsoleErrors) {
  fs::path artifacts = ArtifactsDir();
  fs::create_directories(artifacts);
  fs::path html = artifacts / "profiler-report.html";
  fs::path png = artifacts / "profiler-report.png";
  fs::remove(png);
  WriteAll(html, FixtureReport());

  // The DOM as the browser built it holds every chart.
  RunResult dom = Browse(Url(html), {"--dump-dom"});
  for (const char* id : {"chart-cpu", "chart-gpu", "chart-heatmap", "chart-step-histogram",
                         "chart-step-timeline", "chart-gpu-memory", "chart-host"}) {
    EXPECT_THAT(dom.out, HasSubstr(absl::StrCat("<svg class=\"chart\" id=\"", id, "\"")))
        << id << " missing from the rendered DOM";
  }
  EXPECT_THAT(dom.out, HasSubstr("id=\"findings-table\""));
  EXPECT_THAT(dom.out, HasSubstr("id=\"outlier-steps\""));
  EXPECT_THAT(ConsoleLines(dom.err), ::testing::IsEmpty());

  // The screenshot: written, and far from a blank page of the same size.
  RunResult shot = Browse(Url(html), {"--screenshot=" + png.string()});
  EXPECT_THAT(ConsoleLines(shot.err), ::testing::IsEmpty());
  ASSERT_TRUE(fs::exists(png)) << "no screenshot; stderr:\n" << shot.err;
  std::string bytes = ReadAll(png);
  ASSERT_GE(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  fs::path blank_html = work_ / "blank.html", blank_png = work_ / "blank.png";
  WriteAll(blank_html,
           "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body></body></html>");
  Browse(Url(blank_html), {"--screenshot=" + blank_png.string()});
  ASSERT_TRUE(fs::exists(blank_png));
  uintmax_t blank_size = fs::file_size(blank_png);
  EXPECT_GT(fs::file_size(png), std::max<uintmax_t>(50 * 1024, 5 * blank_size))
      << "the screenshot is about as small as a blank page (" << blank_size << " bytes)";
  std::cout << "profiler report screenshot: " << png.string() << "\n"
            << "profiler report HTML: " << html.string() << std::endl;
  RecordProperty("screenshot", png.string());
}

// The console check can fail: a deliberate console.error and a script error
// are both seen.
TEST_F(ProfilerReportBrowserTest, ConsoleErrorsAreDetected) {
  fs::path page = work_ / "broken.html";
  WriteAll(page,
           "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body><p>broken</p>"
           "<script>console.error('deliberate report error');"
           "undefinedReportFunction();</script></body></html>");
  RunResult r = Browse(Url(page), {"--dump-dom"});
  std::vector<std::string> lines = ConsoleLines(r.err);
  ASSERT_EQ(lines.size(), 2u) << r.err;
  EXPECT_THAT(lines[0], HasSubstr("deliberate report error"));
  EXPECT_THAT(lines[1], HasSubstr("undefinedReportFunction is not defined"));
}

}  // namespace
}  // namespace debugplane::rules_engine
