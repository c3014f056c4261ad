// The dashboard's server side on a real in-process server (ServerApp with
// --http-listen) over HTTP: sign-in and sessions, roles and cross-site
// checks, security headers, the jobs API, the profiling controls, live
// events and the embedded page.

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "re2/re2.h"
#include "service/server_app.h"
#include "tests/rules_engine/trial_writer.h"
#include "tests/service/agent_process.h"
#include "tests/service/dashboard/dashboard_client.h"
#include "tests/service/http/stream_client.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/support/wait_until.h"

namespace debugplane::service {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::CallDashboard;
using ::debugplane::testing::DashboardReply;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::StreamClient;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

constexpr char kCredentials[] =
    "admin ADMIN admin-secret\n"
    "operator OPER oper-secret\n"
    "reader READ read-secret\n"
    "agent AGENT agent-secret\n";

v1::CreateTrainingJobRequest SmallJob(const std::string& name) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
  return request;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

class DashboardApiTest : public ::testing::Test {
 protected:
  void StartServer(bool with_credentials = true) {
    ServerConfig config;
    config.grpc.listen_address = "127.0.0.1:0";
    config.http_listen_address = "127.0.0.1:0";
    config.data_dir = (dir_.path() / "data").string();
    config.shutdown_grace = absl::ZeroDuration();
    if (with_credentials) {
      config.credentials_file = (dir_.path() / "credentials").string();
      std::ofstream(config.credentials_file) << kCredentials;
      fs::permissions(config.credentials_file, fs::perms::owner_read | fs::perms::owner_write);
    }
    auto app = ServerApp::Start(config);
    ASSERT_TRUE(app.ok()) << app.status();
    app_ = *std::move(app);
  }

  std::string Url(absl::string_view path) const {
    return absl::StrCat("http://127.0.0.1:", app_->http_port(), path);
  }
  std::string Origin() const { return absl::StrCat("http://127.0.0.1:", app_->http_port()); }

  DashboardReply Call(const std::string& method, absl::string_view path,
                      const std::vector<std::string>& headers = {},
                      const std::string& body = "") const {
    return CallDashboard(method, Url(path), headers, body);
  }

  struct SignedIn {
    std::string cookie;  // "Cookie: dp_session=..."
    std::string csrf;    // "X-CSRF-Token: ..."
    DashboardReply reply;
  };
  SignedIn SignIn(const std::string& token) const {
    SignedIn in;
    in.reply = Call("POST", "/api/session", {"Content-Type: application/json"},
                    json{{"token", token}}.dump());
    std::string id;
    RE2::PartialMatch(in.reply.Header("Set-Cookie"), "dp_session=([A-Za-z0-9_-]+)", &id);
    in.cookie = absl::StrCat("Cookie: dp_session=", id);
    in.csrf = absl::StrCat("X-CSRF-Token: ", in.reply.Json().value("csrfToken", ""));
    return in;
  }

  absl::Status CreateJob(const v1::CreateTrainingJobRequest& request) {
    v1::CreateTrainingJobResponse response;
    absl::Notification done;
    absl::Status result;
    app_->manager().CreateTrainingJob(request, &response, [&](absl::Status status) {
      result = status;
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  }

  absl::Status StopJob(const std::string& name) {
    v1::StopTrainingJobRequest request;
    request.set_training_job_name(name);
    v1::StopTrainingJobResponse response;
    absl::Notification done;
    absl::Status result;
    app_->manager().StopTrainingJob(request, &response, [&](absl::Status status) {
      result = status;
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  }

  ScopedTempDir dir_;
  std::unique_ptr<ServerApp> app_;
};

TEST_F(DashboardApiTest, SignInWithAGoodTokenGivesAStrictHttpOnlySessionCookie) {
  StartServer();
  const SignedIn reader = SignIn("READ:read-secret");
  ASSERT_EQ(reader.reply.status, 200) << reader.reply.body;
  const json body = reader.reply.Json();
  EXPECT_EQ(body["role"], "reader");
  EXPECT_EQ(body["principal"], "READ");
  EXPECT_TRUE(RE2::FullMatch(body["csrfToken"].get<std::string>(), "[A-Za-z0-9_-]{43}"));
  const std::string cookie = reader.reply.Header("Set-Cookie");
  EXPECT_TRUE(
      RE2::FullMatch(cookie, "dp_session=[A-Za-z0-9_-]{43}; Path=/; HttpOnly; SameSite=Strict"))
      << cookie;

  const DashboardReply session = Call("GET", "/api/session", {reader.cookie});
  ASSERT_EQ(session.status, 200) << session.body;
  EXPECT_EQ(session.Json()["role"], "reader");
  EXPECT_EQ(session.Json()["csrfToken"], body["csrfToken"]);
  EXPECT_EQ(session.Json()["authRequired"], true);

  const DashboardReply wrong = Call("POST", "/api/session", {}, R"({"token": "READ:guess"})");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(wrong.Header("Set-Cookie"), "");
  EXPECT_THAT(wrong.Json().value("error", ""), HasSubstr("wrong secret for access key 'READ'"));
  EXPECT_THAT(wrong.body, Not(HasSubstr("guess")));
  EXPECT_EQ(Call("POST", "/api/session", {}, R"({"token": "NOBODY:x"})").status, 401);
  const DashboardReply malformed = Call("POST", "/api/session", {}, "token=READ:read-secret");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_EQ(malformed.Json()["field"], "token");

  EXPECT_EQ(Call("GET", "/api/session").status, 401);
  EXPECT_EQ(Call("GET", "/api/session", {"Cookie: dp_session=forged"}).status, 401);
  EXPECT_EQ(Call("GET", "/api/jobs").status, 401);
}

TEST_F(DashboardApiTest, AgentsAreRefusedTheDashboard) {
  StartServer();
  const DashboardReply sign_in =
      Call("POST", "/api/session", {}, R"({"token": "AGENT:agent-secret"})");
  EXPECT_EQ(sign_in.status, 403);
  EXPECT_THAT(sign_in.Json().value("error", ""), HasSubstr("role agent"));
  const DashboardReply bearer =
      Call("GET", "/api/jobs", {"Authorization: Bearer AGENT:agent-secret"});
  EXPECT_EQ(bearer.status, 403);
  EXPECT_THAT(bearer.Json().value("error", ""), HasSubstr("role agent"));
}

TEST_F(DashboardApiTest, SignOutNeedsTheCsrfTokenAndEndsTheSession) {
  StartServer();
  const SignedIn admin = SignIn("ADMIN:admin-secret");
  ASSERT_EQ(admin.reply.status, 200);
  EXPECT_EQ(Call("DELETE", "/api/session", {admin.cookie}).status, 403);
  const DashboardReply out = Call("DELETE", "/api/session", {admin.cookie, admin.csrf});
  EXPECT_EQ(out.status, 200) << out.body;
  EXPECT_THAT(out.Header("Set-Cookie"), HasSubstr("Max-Age=0"));
  EXPECT_EQ(Call("GET", "/api/session", {admin.cookie}).status, 401);
}

TEST_F(DashboardApiTest, ARemovedKeyEndsItsSessionsAndARoleChangeTakesEffectAtOnce) {
  StartServer();
  const SignedIn reader = SignIn("READ:read-secret");
  const SignedIn oper = SignIn("OPER:oper-secret");
  ASSERT_EQ(Call("GET", "/api/jobs", {reader.cookie}).status, 200);
  std::ofstream(dir_.path() / "credentials") << "admin ADMIN admin-secret\n"
                                             << "admin OPER oper-secret\n";
  ASSERT_TRUE(app_->ReloadCredentials().ok());
  const DashboardReply gone = Call("GET", "/api/jobs", {reader.cookie});
  EXPECT_EQ(gone.status, 401);
  EXPECT_THAT(gone.Json().value("error", ""), HasSubstr("'READ' was removed"));
  EXPECT_EQ(Call("GET", "/api/session", {oper.cookie}).Json()["role"], "admin");
}

TEST_F(DashboardApiTest, EveryApiAndDashboardReplyCarriesTheSecurityHeaders) {
  StartServer();
  ASSERT_TRUE(CreateJob(SmallJob("headers-job")).ok());
  const std::string bearer = "Authorization: Bearer READ:read-secret";
  struct Probe {
    std::string method, path;
    std::vector<std::string> headers;
    long status;
  };
  const std::vector<Probe> probes = {
      {"GET", "/api/session", {}, 401},
      {"GET", "/api/session", {bearer}, 200},
      {"GET", "/api/jobs", {bearer}, 200},
      {"GET", "/api/jobs/headers-job", {bearer}, 200},
      {"GET", "/api/jobs/no-such-job", {bearer}, 404},
      {"GET", "/api/jobs/headers-job/nonsense", {bearer}, 404},
      {"GET", "/api/nonsense", {bearer}, 404},
      {"POST", "/api/jobs/headers-job/profiling", {bearer}, 403},
      {"GET",
       "/dashboard/",
       {},
       fs::exists(fs::path(DP_SOURCE_DIR) / "web/index.html") ? 200 : 404},
      {"GET", "/dashboard/uPlot.min.css", {}, 200},
      {"GET", "/dashboard/uPlot.iife.min.js", {}, 200},
      {"GET", "/dashboard/no-such-file.js", {}, 404},
      {"PUT", "/api/jobs", {bearer}, 405},
  };
  for (const Probe& probe : probes) {
    SCOPED_TRACE(probe.method + " " + probe.path);
    const DashboardReply reply = Call(probe.method, probe.path, probe.headers, "");
    EXPECT_EQ(reply.status, probe.status) << reply.body;
    EXPECT_EQ(reply.Header("Content-Security-Policy"),
              "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
              "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
              "frame-ancestors 'none'");
    EXPECT_EQ(reply.Header("X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(reply.Header("Referrer-Policy"), "no-referrer");
    if (absl::StartsWith(probe.path, "/api/")) {
      EXPECT_EQ(reply.Header("Cache-Control"), "no-store");
      EXPECT_THAT(reply.Header("Content-Type"), HasSubstr("application/json"));
      EXPECT_FALSE(reply.Json().is_discarded()) << reply.body;
    }
  }
}

TEST_F(DashboardApiTest, AnUnknownJobIs404WithTheJobNamed) {
  StartServer();
  const std::string bearer = "Authorization: Bearer OPER:oper-secret";
  const DashboardReply describe = Call("GET", "/api/jobs/no-such-job", {bearer});
  EXPECT_EQ(describe.status, 404);
  EXPECT_EQ(describe.Json()["error"], "training job 'no-such-job' does not exist");
  const DashboardReply profiling = Call("POST", "/api/jobs/no-such-job/profiling", {bearer},
                                        R"({"monitoringIntervalMillis": 1000})");
  EXPECT_EQ(profiling.status, 404);
  EXPECT_EQ(profiling.Json()["error"], "training job 'no-such-job' does not exist");
  EXPECT_EQ(Call("GET", "/api/jobs/bad_name!", {bearer}).status, 404);
  const DashboardReply events = Call("GET", "/api/events?job=no-such-job", {bearer});
  EXPECT_EQ(events.status, 404);
}

TEST_F(DashboardApiTest, JobsAreListedNewestFirstAndFilteredByStatusAndName) {
  StartServer();
  ASSERT_TRUE(CreateJob(SmallJob("alpha-one")).ok());
  ASSERT_TRUE(CreateJob(SmallJob("beta-two")).ok());
  ASSERT_TRUE(CreateJob(SmallJob("alpha-three")).ok());
  ASSERT_TRUE(StopJob("alpha-three").ok());
  const std::string bearer = "Authorization: Bearer READ:read-secret";
  auto names = [&](const std::string& query) {
    std::vector<std::string> out;
    const DashboardReply reply = Call("GET", "/api/jobs" + query, {bearer});
    EXPECT_EQ(reply.status, 200) << reply.body;
    const json body = reply.Json();
    for (const json& job : body["jobs"]) out.push_back(job["name"]);
    return out;
  };
  EXPECT_EQ(names(""), (std::vector<std::string>{"alpha-three", "beta-two", "alpha-one"}));
  EXPECT_EQ(names("?name=ALPHA"), (std::vector<std::string>{"alpha-three", "alpha-one"}));
  EXPECT_EQ(names("?status=InProgress"), (std::vector<std::string>{"beta-two", "alpha-one"}));
  EXPECT_EQ(names("?status=InProgress&name=alpha"), (std::vector<std::string>{"alpha-one"}));
  const DashboardReply bad = Call("GET", "/api/jobs?status=Sleeping", {bearer});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.Json()["field"], "status");

  const json job = Call("GET", "/api/jobs?name=beta", {bearer}).Json()["jobs"][0];
  EXPECT_EQ(job["status"], "InProgress");
  EXPECT_EQ(job["secondaryStatus"], "Starting");
  EXPECT_TRUE(job["creationTime"].is_number());
  EXPECT_TRUE(job["trainingEndTime"].is_null());
  EXPECT_TRUE(job["lastDataTime"].is_null());
  EXPECT_TRUE(job["currentStep"].is_null());
  EXPECT_EQ(job["verdicts"], json::parse(R"({"InProgress": 0, "NoIssuesFound": 0,
      "IssuesFound": 0, "Error": 0, "Stopping": 0, "Stopped": 0})"));

  const DashboardReply describe = Call("GET", "/api/jobs/beta-two", {bearer});
  ASSERT_EQ(describe.status, 200);
  EXPECT_EQ(describe.Json()["TrainingJobName"], "beta-two");
  EXPECT_EQ(describe.Json()["TrainingJobStatus"], "InProgress");
  EXPECT_TRUE(describe.Json().contains("lastDataTime"));
}

TEST_F(DashboardApiTest, AReaderIsRefusedProfilingNamingItsRole) {
  StartServer();
  ASSERT_TRUE(CreateJob(SmallJob("job-r")).ok());
  const SignedIn reader = SignIn("READ:read-secret");
  const DashboardReply refused =
      Call("POST", "/api/jobs/job-r/profiling", {reader.cookie, reader.csrf},
           R"({"monitoringIntervalMillis": 1000})");
  EXPECT_EQ(refused.status, 403);
  EXPECT_THAT(refused.Json().value("error", ""), HasSubstr("role reader"));
  EXPECT_THAT(refused.Json().value("error", ""), HasSubstr("UpdateTrainingJob"));
}

TEST_F(DashboardApiTest, ChangesNeedTheCsrfTokenAndTheOwnOriginUnlessBearer) {
  StartServer();
  ASSERT_TRUE(CreateJob(SmallJob("job-c")).ok());
  const SignedIn oper = SignIn("OPER:oper-secret");
  const std::string form = R"({"monitoringIntervalMillis": 1000})";
  const std::string path = "/api/jobs/job-c/profiling";

  const DashboardReply missing = Call("POST", path, {oper.cookie}, form);
  EXPECT_EQ(missing.status, 403);
  EXPECT_THAT(missing.Json().value("error", ""), HasSubstr("X-CSRF-Token"));
  EXPECT_EQ(Call("POST", path, {oper.cookie, "X-CSRF-Token: not-it"}, form).status, 403);
  const DashboardReply foreign =
      Call("POST", path, {oper.cookie, oper.csrf, "Origin: https://evil.example"}, form);
  EXPECT_EQ(foreign.status, 403);
  EXPECT_THAT(foreign.Json().value("error", ""), HasSubstr("evil.example"));
  // Another session's token is not this one's.
  const SignedIn other = SignIn("OPER:oper-secret");
  EXPECT_EQ(Call("POST", path, {oper.cookie, other.csrf}, form).status, 403);

  EXPECT_EQ(Call("POST", path, {oper.cookie, oper.csrf, "Origin: " + Origin()}, form).status, 200);
  EXPECT_EQ(Call("POST", path, {oper.cookie, oper.csrf}, form).status, 200);
  EXPECT_EQ(Call("POST", path, {"Authorization: Bearer OPER:oper-secret"}, form).status, 200);
  // Signing in from another site is refused too.
  EXPECT_EQ(Call("POST", "/api/session", {"Origin: https://evil.example"},
                 R"({"token": "OPER:oper-secret"})")
                .status,
            403);
}

TEST_F(DashboardApiTest, TheProfilingFormChangesTheJobsProfilerConfig) {
  StartServer();
  ASSERT_TRUE(CreateJob(SmallJob("job-p")).ok());
  const SignedIn oper = SignIn("OPER:oper-secret");
  const std::string path = "/api/jobs/job-p/profiling";
  const DashboardReply changed =
      Call("POST", path, {oper.cookie, oper.csrf},
           R"({"profilingEnabled": true, "monitoringIntervalMillis": 1000,
          "detailedProfiling": {"startStep": 5, "numSteps": 3}, "pythonProfiling": null})");
  ASSERT_EQ(changed.status, 200) << changed.body;
  EXPECT_EQ(changed.Json()["name"], "job-p");
  EXPECT_EQ(changed.Json()["profilingStatus"], "Enabled");
  EXPECT_EQ(changed.Json()["configVersion"], 2);

  const json job = Call("GET", "/api/jobs/job-p", {oper.cookie}).Json();
  EXPECT_EQ(job["ProfilerConfig"]["ProfilingIntervalInMilliseconds"], 1000);
  EXPECT_EQ(json::parse(job["ProfilerConfig"]["ProfilingParameters"]["DetailedProfilingConfig"]
                            .get<std::string>()),
            json::parse(R"({"StartStep": 5, "NumSteps": 3})"));

  const DashboardReply bad_interval =
      Call("POST", path, {oper.cookie, oper.csrf}, R"({"monitoringIntervalMillis": 300})");
  EXPECT_EQ(bad_interval.status, 400);
  EXPECT_EQ(bad_interval.Json()["field"], "monitoringIntervalMillis");
  EXPECT_THAT(bad_interval.Json().value("error", ""), HasSubstr("300 is not allowed"));
  const DashboardReply bad_steps =
      Call("POST", path, {oper.cookie, oper.csrf},
           R"({"detailedProfiling": {"startStep": 5, "numSteps": 0}})");
  EXPECT_EQ(bad_steps.status, 400);
  EXPECT_EQ(bad_steps.Json()["field"], "detailedProfiling.numSteps");

  const DashboardReply off =
      Call("POST", path, {oper.cookie, oper.csrf}, R"({"profilingEnabled": false})");
  ASSERT_EQ(off.status, 200) << off.body;
  EXPECT_EQ(off.Json()["profilingStatus"], "Disabled");
  EXPECT_EQ(Call("GET", "/api/jobs/job-p", {oper.cookie}).Json()["ProfilingStatus"], "Disabled");
}

TEST_F(DashboardApiTest, TheSummarySaysWhenTheAgentAppliedTheProfilingChange) {
  // The real agent around a stand-in training: after a change of the
  // monitoring interval, the agent writes profilerconfig.json and reports
  // it (EVENT_CONFIG_APPLIED); the summary's profilerConfigAppliedTime and
  // the job's ProfilerConfigAppliedTime / Version follow, not before the
  // change.
  StartServer(/*with_credentials=*/false);
  const fs::path data = dir_.path() / "data" / "job";  // Under the data root.
  v1::CreateTrainingJobRequest request = SmallJob("job-a");
  request.mutable_debug_hook_config()->set_s3_output_path((data / "tensors").string());
  request.mutable_profiler_config()->set_s3_output_path((data / "profiler").string());
  const absl::Status created = CreateJob(request);
  ASSERT_TRUE(created.ok()) << created;
  auto summary = [&] { return Call("GET", "/api/jobs?name=job-a").Json()["jobs"][0]; };
  EXPECT_TRUE(summary()["profilerConfigAppliedTime"].is_null());

  const fs::path config_dir = data / "config";
  testing::AgentProcess agent(
      {"--server", absl::StrCat("127.0.0.1:", app_->port()), "--job", "job-a", "--config-dir",
       config_dir.string(), "--allow-write", dir_.path().string(), "--stop-grace", "1"},
      {DP_FAKE_TRAINING_BINARY, "--steps", "300", "--step-ms", "20"}, dir_.path() / "agent.log");
  // The first configuration, written before the training started.
  ASSERT_TRUE(testing::WaitUntil([&] {
    return summary()["profilerConfigAppliedTime"].is_number();
  })) << agent.log();
  EXPECT_EQ(Call("GET", "/api/jobs/job-a").Json()["ProfilerConfigAppliedVersion"], 1);

  const double before_change = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  // Without credentials everyone is an admin; a change needs the CSRF token.
  const std::string csrf = Call("GET", "/api/session").Json()["csrfToken"];
  const DashboardReply changed =
      Call("POST", "/api/jobs/job-a/profiling", {"X-CSRF-Token: " + csrf},
           R"({"monitoringIntervalMillis": 1000})");
  ASSERT_EQ(changed.status, 200) << changed.body;
  ASSERT_EQ(changed.Json()["configVersion"], 2);
  ASSERT_TRUE(testing::WaitUntil([&] {
    return Call("GET", "/api/jobs/job-a").Json()["ProfilerConfigAppliedVersion"] == 2;
  })) << agent.log();
  const json job = Call("GET", "/api/jobs/job-a").Json();
  EXPECT_TRUE(job.contains("ProfilerConfigAppliedTime")) << job.dump();
  const json applied = summary()["profilerConfigAppliedTime"];
  ASSERT_TRUE(applied.is_number()) << summary().dump();
  EXPECT_GE(applied.get<double>(), before_change);
  EXPECT_LE(applied.get<double>(), absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  // What the agent reported is in the file the training reads.
  const json written = json::parse(ReadFile(config_dir / "profilerconfig.json"), nullptr, false);
  EXPECT_EQ(written["ProfilingParameters"]["ProfilingIntervalInMilliseconds"], 1000)
      << written.dump();

  EXPECT_EQ(agent.Wait(absl::Seconds(60)), 0) << agent.log();
}

TEST_F(DashboardApiTest, EventsStartWithEveryJobThenCarryNewJobsAndChangesWithinASecond) {
  StartServer();
  ASSERT_TRUE(CreateJob(SmallJob("before-subscribing")).ok());
  const SignedIn reader = SignIn("READ:read-secret");
  StreamClient events(Url("/api/events"), {reader.cookie, "Accept: text/event-stream"});
  ASSERT_TRUE(events.WaitFor("\"name\":\"before-subscribing\"")) << events.body();
  EXPECT_THAT(events.header_text(), HasSubstr("text/event-stream"));
  EXPECT_THAT(events.header_text(), HasSubstr("Content-Security-Policy"));
  EXPECT_THAT(events.body(), HasSubstr("event: job\ndata: {"));

  const absl::Time created = absl::Now();
  ASSERT_TRUE(CreateJob(SmallJob("after-subscribing")).ok());
  ASSERT_TRUE(events.WaitFor("\"name\":\"after-subscribing\"", absl::Seconds(1))) << events.body();
  EXPECT_LT(absl::Now() - created, absl::Seconds(1));

  ASSERT_TRUE(StopJob("after-subscribing").ok());
  EXPECT_TRUE(events.WaitForLine(R"(data: \{.*"name":"after-subscribing".*"status":"Stopping".*)",
                                 absl::Seconds(1)))
      << events.body();

  // One job only.
  StreamClient one(Url("/api/events?job=after-subscribing"), {reader.cookie});
  ASSERT_TRUE(one.WaitFor("after-subscribing"));
  ASSERT_TRUE(CreateJob(SmallJob("third-job")).ok());
  ASSERT_TRUE(events.WaitFor("third-job"));
  EXPECT_THAT(one.body(), Not(HasSubstr("before-subscribing")));
  EXPECT_THAT(one.body(), Not(HasSubstr("third-job")));

  // Not signed in: no stream.
  StreamClient stranger(Url("/api/events"));
  ASSERT_TRUE(stranger.WaitForEnd());
  EXPECT_EQ(stranger.status(), 401);
}

TEST_F(DashboardApiTest, EventsSayWhenTheRulesEngineReadNewData) {
  StartServer();
  const fs::path trial = fs::canonical(dir_.path() / "data") / "trials" / "data-job";
  fs::create_directories(trial);
  v1::CreateTrainingJobRequest request = SmallJob("data-job");
  request.mutable_debug_hook_config()->set_s3_output_path("file://" + trial.string());
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("LossNotDecreasing");
  rule->set_rule_evaluator_image(
      "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "LossNotDecreasing";
  ASSERT_TRUE(CreateJob(request).ok());
  StreamClient events(Url("/api/events?job=data-job"), {"Authorization: Bearer READ:read-secret"});
  ASSERT_TRUE(events.WaitFor("data-job"));

  rules_engine::testing::TrialWriter writer(trial.string());
  for (int step = 0; step < 3; ++step) {
    writer.AddStep(step, rules_engine::Mode::kTrain, step,
                   {{"CrossEntropyLoss_output_0", {}, {1.0 - 0.1 * step}}});
  }
  EXPECT_TRUE(events.WaitFor("event: data\ndata: {\"lastDataTime\":", absl::Seconds(10)))
      << events.body();
  EXPECT_TRUE(events.WaitFor("\"lastStep\":2", absl::Seconds(10))) << events.body();
  const json job = CallDashboard("GET", Url("/api/jobs?name=data-job"),
                                 {"Authorization: Bearer READ:read-secret"})
                       .Json()["jobs"][0];
  EXPECT_TRUE(job["lastDataTime"].is_number()) << job;
}

TEST_F(DashboardApiTest, WithoutCredentialsEveryoneIsAnAdminYetChangesNeedTheCsrfToken) {
  StartServer(/*with_credentials=*/false);
  ASSERT_TRUE(CreateJob(SmallJob("job-a")).ok());
  const DashboardReply session = Call("GET", "/api/session");
  ASSERT_EQ(session.status, 200);
  EXPECT_EQ(session.Json()["role"], "admin");
  EXPECT_EQ(session.Json()["authRequired"], false);
  const std::string csrf = session.Json()["csrfToken"];
  const std::string form = R"({"monitoringIntervalMillis": 200})";
  EXPECT_EQ(Call("POST", "/api/jobs/job-a/profiling", {}, form).status, 403);
  EXPECT_EQ(Call("POST", "/api/jobs/job-a/profiling", {"X-CSRF-Token: " + csrf}, form).status, 200);
  EXPECT_EQ(Call("GET", "/api/jobs").Json()["jobs"].size(), 1u);
  EXPECT_EQ(app_->DashboardUrl(), Url("/dashboard/"));
}

// DNS rebinding: a page at evil.test, its name resolved to 127.0.0.1, is
// the browser's own origin for the server. Every route family refuses its
// Host before running.
TEST_F(DashboardApiTest, ARebindingPagesHostIsRefusedByEveryRouteFamily) {
  StartServer(/*with_credentials=*/false);
  ASSERT_TRUE(CreateJob(SmallJob("job-a")).ok());
  const std::string csrf = Call("GET", "/api/session").Json().value("csrfToken", "");
  ASSERT_FALSE(csrf.empty());
  const std::string evil = absl::StrCat("evil.test:", app_->http_port());
  const std::string form = R"({"monitoringIntervalMillis": 200})";
  struct Attempt {
    std::string method;
    std::string path;
    std::vector<std::string> headers;
    std::string body;
  };
  const std::vector<Attempt> attempts = {
      {"GET", "/dashboard/", {}, ""},
      {"GET", "/api/session", {}, ""},
      {"POST", "/api/session", {"Content-Type: application/json"}, "{}"},
      {"GET", "/api/jobs", {}, ""},
      {"GET", "/api/jobs/job-a", {}, ""},
      {"GET", "/api/jobs/job-a/overview", {}, ""},
      {"GET", "/api/events", {}, ""},
      {"POST", "/api/jobs/job-a/profiling", {"X-CSRF-Token: " + csrf}, form},
      {"POST",
       "/",
       {"X-Amz-Target: SageMaker.StopTrainingJob", "Content-Type: application/x-amz-json-1.1"},
       R"({"TrainingJobName": "job-a"})"},
      {"GET", "/metrics", {}, ""},
  };
  for (const Attempt& attempt : attempts) {
    std::vector<std::string> headers = attempt.headers;
    headers.push_back("Host: " + evil);
    headers.push_back("Origin: http://" + evil);
    const DashboardReply refused = Call(attempt.method, attempt.path, headers, attempt.body);
    EXPECT_EQ(refused.status, 421) << attempt.method << " " << attempt.path;
    EXPECT_THAT(refused.body, HasSubstr("--http-allowed-host")) << attempt.path;
  }
  // Nothing changed, and the same calls by the server's own names work.
  EXPECT_EQ(Call("GET", "/api/jobs").Json()["jobs"][0].value("status", ""), "InProgress");
  for (const std::string& host : {absl::StrCat("localhost:", app_->http_port()),
                                  absl::StrCat("127.0.0.1:", app_->http_port())}) {
    EXPECT_EQ(Call("GET", "/api/session", {"Host: " + host}).status, 200) << host;
    EXPECT_EQ(Call("GET", "/metrics", {"Host: " + host}).status, 200) << host;
  }
}

TEST_F(DashboardApiTest, AnAllowedHostFlagAdmitsThatName) {
  ServerConfig config;
  config.grpc.listen_address = "127.0.0.1:0";
  config.http_listen_address = "127.0.0.1:0";
  config.http_allowed_hosts = {"debugplane.internal"};
  config.data_dir = (dir_.path() / "data").string();
  config.shutdown_grace = absl::ZeroDuration();
  auto app = ServerApp::Start(config);
  ASSERT_TRUE(app.ok()) << app.status();
  app_ = *std::move(app);
  EXPECT_EQ(Call("GET", "/api/session", {"Host: debugplane.internal"}).status, 200);
  EXPECT_EQ(Call("GET", "/api/session", {"Host: other.internal"}).status, 421);
}

TEST_F(DashboardApiTest, SignInAndTheSageMakerProtocolRefuseBigBodiesWith413) {
  StartServer();
  const std::string big_token = json{{"token", "READ:" + std::string(20 * 1024, 'x')}}.dump();
  const DashboardReply sign_in =
      Call("POST", "/api/session", {"Content-Type: application/json"}, big_token);
  EXPECT_EQ(sign_in.status, 413);
  EXPECT_THAT(sign_in.body, HasSubstr("16384 bytes"));
  const DashboardReply sagemaker = Call(
      "POST", "/",
      {"X-Amz-Target: SageMaker.CreateTrainingJob", "Content-Type: application/x-amz-json-1.1"},
      std::string(2 * 1024 * 1024, ' '));
  EXPECT_EQ(sagemaker.status, 413);
  EXPECT_THAT(sagemaker.body, HasSubstr("1048576 bytes"));
  EXPECT_EQ(SignIn("READ:read-secret").reply.status, 200);
}

TEST_F(DashboardApiTest, FailedSignInsAreLimitedPerAddressAndSuccessesAreNot) {
  StartServer();
  for (int i = 0; i < 5; ++i) ASSERT_EQ(SignIn("READ:read-secret").reply.status, 200);
  ASSERT_EQ(Call("GET", "/api/session").status, 401);  // No credential: not a failed guess.
  // A burst of 20 wrong guesses (sign-in or bearer), then 429 for everything.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(Call("POST", "/api/session", {}, R"({"token": "READ:guess"})").status, 401);
    EXPECT_EQ(Call("GET", "/api/jobs", {"Authorization: Bearer READ:guess"}).status, 401);
  }
  const DashboardReply limited =
      Call("POST", "/api/session", {}, R"({"token": "READ:read-secret"})");
  EXPECT_EQ(limited.status, 429);
  int retry_after = 0;
  EXPECT_TRUE(absl::SimpleAtoi(limited.Header("Retry-After"), &retry_after));
  EXPECT_GE(retry_after, 1);
  EXPECT_LE(retry_after, 6);
  EXPECT_EQ(Call("GET", "/metrics", {"Authorization: Bearer READ:read-secret"}).status, 429);
}

TEST_F(DashboardApiTest, ServesTheEmbeddedPageAndUplotByteForByte) {
  StartServer();
  const DashboardReply root = Call("GET", "/");
  EXPECT_EQ(root.status, 302);
  EXPECT_EQ(root.Header("Location"), "/dashboard/");

  const fs::path uplot = fs::path(DP_SOURCE_DIR) / "web/node_modules/uplot/dist";
  std::vector<std::pair<std::string, fs::path>> files = {
      {"uPlot.iife.min.js", uplot / "uPlot.iife.min.js"},
      {"uPlot.min.css", uplot / "uPlot.min.css"}};
  for (const auto& entry : fs::directory_iterator(fs::path(DP_SOURCE_DIR) / "web")) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && RE2::FullMatch(name, R"(.*\.(html|js|css))") &&
        !RE2::FullMatch(name, R"(.*\.(config|test|spec)\.[a-z]+)")) {
      files.emplace_back(name, entry.path());
    }
  }
  for (const auto& [name, path] : files) {
    SCOPED_TRACE(name);
    const DashboardReply reply = Call("GET", "/dashboard/" + name);
    ASSERT_EQ(reply.status, 200);
    EXPECT_EQ(reply.body, ReadFile(path));
    const std::string type = reply.Header("Content-Type");
    if (absl::EndsWith(name, ".js")) {
      EXPECT_EQ(type, "text/javascript; charset=utf-8");
    }
    if (absl::EndsWith(name, ".css")) {
      EXPECT_EQ(type, "text/css; charset=utf-8");
    }
    if (absl::EndsWith(name, ".html")) {
      EXPECT_EQ(type, "text/html; charset=utf-8");
    }
    const std::string etag = reply.Header("ETag");
    EXPECT_TRUE(RE2::FullMatch(etag, "\"[0-9a-f]{32}\"")) << etag;
    const DashboardReply again = Call("GET", "/dashboard/" + name, {"If-None-Match: " + etag});
    EXPECT_EQ(again.status, 304);
    EXPECT_EQ(again.body, "");
  }
  if (fs::exists(fs::path(DP_SOURCE_DIR) / "web/index.html")) {
    EXPECT_EQ(Call("GET", "/dashboard/").body,
              ReadFile(fs::path(DP_SOURCE_DIR) / "web/index.html"));
  }
}

}  // namespace
}  // namespace debugplane::service
