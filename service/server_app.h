// ServerApp: the whole debugplane server as one object, so that the binary's
// main() only parses flags and waits for a signal, and tests run a complete
// server in-process.
//
// It owns, in start order: the data directory's lock, the database, the job
// manager, the rules engine (evaluation scheduler, action dispatcher), the
// agent and report handlers, the gRPC server and the HTTP listener (the
// SageMaker API and GET /metrics, service/http/metrics_route.h). Shutdown() stops them
// in the reverse order that keeps every acknowledged write: evaluation and actions first, then
// queued changes are committed and new ones refused, calls in flight finish, and the database
// closes.

#ifndef DEBUGPLANE_SERVICE_SERVER_APP_H_
#define DEBUGPLANE_SERVICE_SERVER_APP_H_

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/handlers/profiler_report_handler.h"
#include "core/handlers/training_agent_handler.h"
#include "core/manager/training_job_manager.h"
#include "core/replication/change_feed_pruner.h"
#include "metrics/server_metrics.h"
#include "persistence/data_directory.h"
#include "rules_engine/actions/action_dispatcher.h"
#include "rules_engine/insights/insights_store.h"
#include "rules_engine/query_handler/tensor_query_handler.h"
#include "rules_engine/scheduling/evaluation_scheduler.h"
#include "service/auth/auth.h"
#include "service/auth/credential_store.h"
#include "service/dashboard/dashboard_events.h"
#include "service/dashboard/dashboard_http.h"
#include "service/dashboard/dashboard_routes.h"
#include "service/http/http_server.h"
#include "service/http/metrics_route.h"
#include "service/http/sagemaker_protocol.h"
#include "service/server.h"
#include "service/server_flags.h"
#include "service/server_leases.h"

namespace debugplane::service {

// The custom evaluators' commands by RuleEvaluatorImage (--allow-evaluator).
using EvaluatorCommands = std::map<std::string, std::vector<std::string>>;

class ServerApp {
 public:
  // Checks `config` and starts serving. Errors name the flag, file or
  // address and what to do: INVALID_ARGUMENT for a flag value that cannot
  // work (a data root that is not a directory, an evaluator that is not an
  // absolute executable, a webhook that is not http(s), SMTP without a
  // sender or with an unreadable password file); the data directory's,
  // database's and gRPC server's own errors otherwise; the credentials file's
  // errors (service/auth/credentials_file.h); FAILED_PRECONDITION for a
  // non-loopback --listen without --credentials or TLS and no --insecure
  // (service/auth/listen_exposure.h) (another server holds
  // the directory, the port is in use, ...). Nothing keeps running after an
  // error.
  static absl::StatusOr<std::unique_ptr<ServerApp>> Start(ServerConfig config);

  // Shuts down (see Shutdown) if still running.
  ~ServerApp();

  ServerApp(const ServerApp&) = delete;
  ServerApp& operator=(const ServerApp&) = delete;

  // The bound port (useful with port 0).
  int port() const { return grpc_->port(); }
  // http://HOST:PORT/dashboard/ (the listener's host, 127.0.0.1 for a
  // wildcard address); "" without --http-listen.
  std::string DashboardUrl() const;
  // The dashboard (on the HTTP listener); null without --http-listen.
  dashboard::Dashboard* dashboard() { return dashboard_.get(); }
  // The bound port of the SageMaker HTTP listener; 0 without --http-listen.
  int http_port() const { return http_ != nullptr ? http_->port() : 0; }
  // The SQLite file, or the PostgreSQL database as
  // postgresql://USER@HOST:PORT/DATABASE (never with the password).
  const std::string& database_path() const { return database_path_; }
  core::TrainingJobManager& manager() { return *manager_; }
  // The server's metrics, served as GET /metrics on --http-listen. Valid as
  // long as the app lives; record into its parts from any thread.
  metrics::ServerMetrics& metrics() { return *metrics_; }
  // Who may call, for every listener (enabled() false without --credentials).
  std::shared_ptr<const auth::Authenticator> authenticator() const { return authenticator_; }

  // Re-reads --credentials (SIGHUP): calls that start afterwards use the new
  // keys. On error the old credentials stay in force and the error (the
  // file's, never a secret) is logged and returned; on success how many
  // credentials each role has is logged. FAILED_PRECONDITION without
  // --credentials. Thread-safe.
  absl::Status ReloadCredentials();

  // Graceful shutdown: the HTTP listener stops accepting and answers the
  // requests it holds (up to the grace), health NOT_SERVING, evaluation and actions stop,
  // queued changes commit, calls in flight get the configured grace, watch
  // streams end with UNAVAILABLE, the database closes. Blocks until done.
  // Idempotent.
  void Shutdown();

 private:
  struct Prerequisites;

  explicit ServerApp(ServerConfig config) : config_(std::move(config)) {}

  // The start-up, in order. What the flags name is checked first (the
  // credentials, the data directory's lock, data roots, evaluators, action
  // sinks), so that a bad flag leaves nothing started; then each step
  // starts its parts, which Shutdown stops if a later step fails.
  static absl::StatusOr<Prerequisites> CheckPrerequisites(const ServerConfig& config);
  // Keeps the credentials and makes the authenticator every listener uses.
  void UseCredentials(std::shared_ptr<auth::CredentialStore> credentials);
  // Opens the database (SQLite or --database) and the job manager over it,
  // and starts the change feed's pruner.
  absl::Status OpenManager(core::TrainingJobManagerOptions options);
  // The report store, the evaluation leases, the scheduler and the action
  // dispatcher (and the dashboard's live events, which hear of the rules'
  // reads); the metrics' scrape hooks.
  absl::Status StartRulesEngine(EvaluatorCommands evaluators,
                                rules_engine::ActionDispatcherOptions action_options);
  // The scheduler's options from the flags; makes dashboard_events_ with
  // --http-listen.
  rules_engine::EvaluationSchedulerOptions SchedulerOptions(EvaluatorCommands evaluators);
  // Where ProfilerReport rules' reports are written: DATA_DIR/reports.
  std::filesystem::path ReportDirectory() const;
  // The handlers the listeners serve: agents, reports, tensor queries and,
  // with --http-listen, the dashboard's insights.
  void MakeHandlers();
  // Starts the gRPC server; its health follows the database's reachability.
  absl::Status StartGrpc();
  // One line per listener saying where the server serves.
  void LogServing() const;
  // --- Dashboard data (issue 13, insights) ---
  // The dashboard's /api/jobs/NAME/{overview, system, framework, tensors,
  // tensor} resources (service/dashboard/insights_routes.h), over the
  // InsightsStore made with the HTTP listener (none without --http-listen),
  // and report (report_routes.h: the rules' reports as pages).
  // For DashboardRoutes(...) where the listener's routes are built.
  std::vector<dashboard::JobResource> InsightsJobResources();

  // Starts the HTTP listener (SageMaker API, dashboard, GET /metrics) if
  // --http-listen was given.
  absl::Status StartHttp();

  const ServerConfig config_;
  std::string database_path_;
  bool shut_down_ = false;
  // Declared in start order: destroyed in reverse, the gRPC server first and
  // the data directory's lock last; the metrics, which every part records
  // into, after all of them.
  std::unique_ptr<metrics::ServerMetrics> metrics_ = std::make_unique<metrics::ServerMetrics>();
  std::shared_ptr<auth::CredentialStore> credentials_;  // Null without --credentials.
  std::shared_ptr<const auth::Authenticator> authenticator_;
  std::unique_ptr<persistence::DataDirectory> data_directory_;
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<core::ChangeFeedPruner> feed_pruner_;  // Over the manager's storage.
  std::unique_ptr<ServerLeases> leases_;                 // Shut down before the scheduler.
  // ProfilerReport rules' reports in the database (every replica serves
  // them): written by the scheduler, read by reports_.
  std::unique_ptr<persistence::ReportStore> report_store_;
  int64_t report_observer_ = 0;  // Forgets the reports of deleted jobs.
  // The dashboard's live updates (with --http-listen): told of the rules
  // engine's reads, so made before the scheduler.
  std::shared_ptr<dashboard::DashboardEvents> dashboard_events_;
  std::unique_ptr<rules_engine::EvaluationScheduler> scheduler_;
  std::unique_ptr<rules_engine::ActionDispatcher> actions_;
  std::unique_ptr<core::TrainingAgentManager> agents_;
  std::unique_ptr<core::ProfilerReportHandler> reports_;
  std::unique_ptr<rules_engine::TensorQueryHandler> tensors_;
  // The dashboard's per-job series (with --http-listen only).
  std::unique_ptr<rules_engine::insights::InsightsStore> insights_;
  std::unique_ptr<GrpcServer> grpc_;
  std::unique_ptr<http::SageMakerProtocol> sagemaker_;
  std::unique_ptr<http::MetricsRoute> metrics_route_;
  std::unique_ptr<dashboard::Dashboard> dashboard_;
  std::unique_ptr<http::HttpServer> http_;
};

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_SERVER_APP_H_
