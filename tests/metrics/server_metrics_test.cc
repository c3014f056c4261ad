// The exposition of every metric family: names, types, HELP, label values
// and histogram buckets, as Prometheus reads them from GET /metrics.

#include "metrics/server_metrics.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The text exposition's header lines for a family.
std::string Header(const std::string& name, const std::string& type) {
  return absl::StrCat("# TYPE ", name, " ", type, "\n");
}

TEST(ServerMetricsTest, EveryFamilyHasHelpAndType) {
  ServerMetrics metrics;
  // Families with a child before any recording (unlabelled, or with fixed
  // labels made up front) appear at once.
  const std::string text = metrics.registry.Scrape();
  const struct {
    const char* name;
    const char* type;
  } kFamilies[] = {
      {"debugplane_detection_latency_seconds", "histogram"},
      {"debugplane_evaluation_lag_steps", "histogram"},
      {"debugplane_read_bytes_total", "counter"},
      {"debugplane_steps_read_total", "counter"},
      {"debugplane_database_duration_seconds", "histogram"},
      {"debugplane_database_errors_total", "counter"},
      {"debugplane_outbox_pending_actions", "gauge"},
      {"debugplane_leases_owned", "gauge"},
      {"debugplane_lease_takeovers_total", "counter"},
  };
  for (const auto& family : kFamilies) {
    EXPECT_THAT(text, HasSubstr(Header(family.name, family.type))) << family.name;
    EXPECT_THAT(text, HasSubstr(absl::StrCat("# HELP ", family.name, " "))) << family.name;
  }
}

TEST(ServerMetricsTest, JobGaugesCarryTheirStatus) {
  ServerMetrics metrics;
  metrics.jobs.SetJobs("InProgress", 3);
  metrics.jobs.SetJobs("Completed", 0);
  metrics.jobs.SetRuleEvaluations("IssuesFound", 2);
  metrics.jobs.SetWatchStreams("client", 4);
  metrics.jobs.SetWatchStreams("agent", 1);
  metrics.jobs.SetJobs("InProgress", 5);  // Set, not added.
  const std::string text = metrics.registry.Scrape();
  EXPECT_THAT(text, HasSubstr(Header("debugplane_jobs", "gauge")));
  EXPECT_THAT(text, HasSubstr("debugplane_jobs{status=\"InProgress\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_jobs{status=\"Completed\"} 0\n"));
  EXPECT_THAT(text, HasSubstr(Header("debugplane_rule_evaluations", "gauge")));
  EXPECT_THAT(text, HasSubstr("debugplane_rule_evaluations{status=\"IssuesFound\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(Header("debugplane_watch_streams_open", "gauge")));
  EXPECT_THAT(text, HasSubstr("debugplane_watch_streams_open{kind=\"client\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_watch_streams_open{kind=\"agent\"} 1\n"));
}

TEST(ServerMetricsTest, DetectionLatencyBucketsInSeconds) {
  ServerMetrics metrics;
  metrics.evaluation.ObserveDetectionLatency(absl::Milliseconds(30));
  metrics.evaluation.ObserveDetectionLatency(absl::Seconds(3));
  metrics.evaluation.ObserveDetectionLatency(absl::Seconds(-1));  // Clock skew: 0.
  const std::string text = metrics.registry.Scrape();
  const std::string name = "debugplane_detection_latency_seconds";
  EXPECT_THAT(text, HasSubstr(name + "_count 3\n"));
  EXPECT_THAT(text, HasSubstr(name + "_sum 3.03"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{le=\"0.005\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{le=\"0.025\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{le=\"0.05\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{le=\"2.5\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{le=\"5\"} 3\n"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{le=\"+Inf\"} 3\n"));
}

TEST(ServerMetricsTest, EvaluationLagAndReads) {
  ServerMetrics metrics;
  metrics.evaluation.ObserveEvaluationLag(0);
  metrics.evaluation.ObserveEvaluationLag(7);
  metrics.evaluation.AddBytesRead(ReadSource::kTensors, 1000);
  metrics.evaluation.AddBytesRead(ReadSource::kTensors, 24);
  metrics.evaluation.AddBytesRead(ReadSource::kProfiler, 5);
  metrics.evaluation.AddBytesRead(ReadSource::kProfiler, -5);  // Ignored.
  metrics.evaluation.AddStepsRead(12);
  const std::string text = metrics.registry.Scrape();
  EXPECT_THAT(text, HasSubstr("debugplane_evaluation_lag_steps_bucket{le=\"0\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_evaluation_lag_steps_bucket{le=\"5\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_evaluation_lag_steps_bucket{le=\"10\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_evaluation_lag_steps_sum 7\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_read_bytes_total{source=\"tensors\"} 1024\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_read_bytes_total{source=\"profiler\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_steps_read_total 12\n"));
}

TEST(ServerMetricsTest, ObjectStoreRequestsAndErrorsByOperation) {
  ServerMetrics metrics;
  metrics.object_store.CountRequest("s3", StoreOperation::kList, absl::OkStatus());
  metrics.object_store.CountRequest("s3", StoreOperation::kList, absl::NotFoundError("none"));
  metrics.object_store.CountRequest("s3", StoreOperation::kRead, absl::UnavailableError("down"));
  metrics.object_store.CountRequest("local", StoreOperation::kStat, absl::OkStatus());
  const std::string text = metrics.registry.Scrape();
  EXPECT_THAT(text, HasSubstr(Header("debugplane_object_store_requests_total", "counter")));
  EXPECT_THAT(text, HasSubstr("debugplane_object_store_requests_total{operation=\"list\","
                              "store=\"s3\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_object_store_requests_total{operation=\"read\","
                              "store=\"s3\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_object_store_requests_total{operation=\"stat\","
                              "store=\"local\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_object_store_errors_total{code=\"UNAVAILABLE\","
                              "operation=\"read\",store=\"s3\"} 1\n"));
  // NOT_FOUND is no error (nothing written yet).
  EXPECT_THAT(text, Not(HasSubstr("code=\"NOT_FOUND\"")));
}

TEST(ServerMetricsTest, DatabaseDurationsAndErrors) {
  ServerMetrics metrics;
  metrics.database.Observe(DatabaseOperation::kWrite, absl::Microseconds(300), true);
  metrics.database.Observe(DatabaseOperation::kWrite, absl::Milliseconds(20), false);
  metrics.database.Observe(DatabaseOperation::kRead, absl::Milliseconds(2), true);
  const std::string text = metrics.registry.Scrape();
  const std::string name = "debugplane_database_duration_seconds";
  EXPECT_THAT(text, HasSubstr(name + "_count{operation=\"write\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{operation=\"write\",le=\"0.0005\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{operation=\"write\",le=\"0.025\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(name + "_count{operation=\"read\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_database_errors_total{operation=\"write\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_database_errors_total{operation=\"read\"} 0\n"));
}

TEST(ServerMetricsTest, ActionsRequestsAndLeases) {
  ServerMetrics metrics;
  metrics.actions.SetPending(2);
  metrics.actions.CountOutcome("Email", "Retried");
  metrics.actions.CountOutcome("Email", "Succeeded");
  metrics.actions.CountOutcome("StopTraining", "Succeeded");
  metrics.requests.CountGrpc("/debugplane.v1.TrainingJobService/CreateTrainingJob", "OK");
  metrics.requests.CountHttp("/metrics", 401);
  metrics.leases.SetOwned(3);
  metrics.leases.CountTakeover();
  const std::string text = metrics.registry.Scrape();
  EXPECT_THAT(text, HasSubstr("debugplane_outbox_pending_actions 2\n"));
  EXPECT_THAT(text,
              HasSubstr("debugplane_rule_actions_total{outcome=\"Retried\",type=\"Email\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_rule_actions_total{outcome=\"Succeeded\","
                              "type=\"StopTraining\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_grpc_requests_total{code=\"OK\",method=\"/"
                              "debugplane.v1.TrainingJobService/CreateTrainingJob\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("debugplane_http_requests_total{code=\"401\",route=\"/metrics\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_leases_owned 3\n"));
  EXPECT_THAT(text, HasSubstr("debugplane_lease_takeovers_total 1\n"));
}

TEST(MetricsRegistryTest, ScrapeHooksRunBeforeEveryScrape) {
  ServerMetrics metrics;
  int scrapes = 0;
  metrics.registry.AddScrapeHook([&] { metrics.actions.SetPending(++scrapes * 10); });
  EXPECT_THAT(metrics.registry.Scrape(), HasSubstr("debugplane_outbox_pending_actions 10\n"));
  EXPECT_THAT(metrics.registry.Scrape(), HasSubstr("debugplane_outbox_pending_actions 20\n"));
}

TEST(MetricsRegistryTest, AFamilyRegisteredTwiceThrows) {
  MetricsRegistry registry;
  JobMetrics first(registry.registry());
  EXPECT_ANY_THROW(JobMetrics second(registry.registry()));
}

}  // namespace
}  // namespace debugplane::metrics
