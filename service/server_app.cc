#include "service/server_app.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "objectstore/s3_object_store.h"
#include "persistence/metered_storage.h"
#include "persistence/postgres/postgres_report_store.h"
#include "persistence/postgres/postgres_storage.h"
#include "persistence/sqlite/sqlite_report_store.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "rules_engine/scheduling/validation_hooks.h"
#include "service/auth/credential_authenticator.h"
#include "service/auth/listen_exposure.h"
#include "service/dashboard/insights_routes.h"
#include "service/http/client_rate_limiter.h"
#include "service/http/request_counting.h"
#include "service/server_leases.h"
#include "spdlog/spdlog.h"

namespace debugplane::service {
namespace {

namespace fs = std::filesystem;

using EvaluatorCommands = std::map<std::string, std::vector<std::string>>;

absl::Status ResolveDataRoots(const ServerConfig& config, std::vector<fs::path>* roots) {
  std::vector<std::string> given = config.data_roots;
  if (given.empty()) given.push_back(config.data_dir);
  for (const std::string& root : given) {
    std::error_code error;
    fs::path canonical = fs::canonical(root, error);
    if (error || !fs::is_directory(canonical)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data-root ", root, " is not an existing directory"));
    }
    roots->push_back(std::move(canonical));
  }
  return absl::OkStatus();
}

// --allow-evaluator: "/abs/rule" runs that file for the image "/abs/rule";
// "IMAGE=/abs/command ARGS" maps an image name to a command.
absl::Status ResolveEvaluators(const ServerConfig& config, EvaluatorCommands* commands) {
  for (const std::string& allowed : config.allowed_evaluators) {
    const size_t equals = allowed.find('=');
    std::string image = allowed.substr(0, equals);
    std::vector<std::string> command =
        equals == std::string::npos
            ? std::vector<std::string>{image}
            : absl::StrSplit(allowed.substr(equals + 1), ' ', absl::SkipWhitespace());
    if (image.empty() || command.empty() || !fs::path(command[0]).is_absolute()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--allow-evaluator ", allowed,
                       ": give an absolute executable path, or IMAGE=/abs/command [ARGS]"));
    }
    if (access(command[0].c_str(), X_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--allow-evaluator ", allowed, ": ",
                                                     command[0], " is not an executable file"));
    }
    (*commands)[image] = std::move(command);
  }
  return absl::OkStatus();
}

absl::Status ResolveActionSinks(const ServerConfig& config,
                                rules_engine::ActionDispatcherOptions* options) {
  options->max_attempts = config.action_attempts;
  for (const std::string& url : config.notify_webhooks) {
    if (!absl::StartsWith(url, "http://") && !absl::StartsWith(url, "https://")) {
      return absl::InvalidArgumentError(absl::StrCat("--notify-webhook ",
                                                     rules_engine::UrlForDisplay(url),
                                                     " is not an http:// or https:// URL"));
    }
    options->sinks.push_back(rules_engine::MakeWebhookSink({.url = url}));
    spdlog::info("rule actions: Email and SMS notifications go to {}",
                 options->sinks.back()->Describe());
  }
  if (config.smtp.url.empty()) return absl::OkStatus();
  rules_engine::SmtpSinkOptions smtp = config.smtp;
  if (!absl::StartsWith(smtp.url, "smtp://") && !absl::StartsWith(smtp.url, "smtps://")) {
    return absl::InvalidArgumentError(absl::StrCat("--smtp-url ",
                                                   rules_engine::UrlForDisplay(smtp.url),
                                                   " is not an smtp:// or smtps:// URL"));
  }
  if (smtp.from.empty()) {
    return absl::InvalidArgumentError("--smtp-url needs --smtp-from (the sender address)");
  }
  if (!config.smtp_password_file.empty()) {
    std::ifstream in(config.smtp_password_file);
    if (!in || !std::getline(in, smtp.password)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--smtp-password-file ", config.smtp_password_file, " cannot be read"));
    }
  }
  const bool with_credentials = !smtp.username.empty();
  options->sinks.push_back(rules_engine::MakeSmtpSink(std::move(smtp)));
  spdlog::info("rule actions: Email notifications go to {}{}", options->sinks.back()->Describe(),
               with_credentials ? " (TLS required: --smtp-user is set)" : "");
  return absl::OkStatus();
}

// One warning per agent credential bound to no job: it may report, fail or
// complete every job (and connect as any job's agent).
void WarnOfUnboundAgentKeys(const auth::CredentialSet& credentials, const std::string& file) {
  std::vector<std::string> unbound;
  for (const auto* map : {&credentials.keys, &credentials.common_names}) {
    for (const auto& [name, credential] : *map) {
      if (credential.role == auth::Role::kAgent && credential.job_name.empty()) {
        unbound.push_back(credential.access_key_id);
      }
    }
  }
  std::sort(unbound.begin(), unbound.end());
  for (const std::string& key : unbound) {
    spdlog::warn(
        "{}: agent credential '{}' names no job, so it can act for every job (report, fail or "
        "complete any of them); give each agent a key bound to its job (4th field JOB_NAME)",
        file, key);
  }
}

// Loads --credentials (if given) and checks that --listen is not exposed
// without them or without TLS.
absl::StatusOr<std::shared_ptr<auth::CredentialStore>> OpenCredentials(const ServerConfig& config) {
  std::shared_ptr<auth::CredentialStore> store;
  if (!config.credentials_file.empty()) {
    auto opened = auth::CredentialStore::Open(config.credentials_file);
    if (!opened.ok()) return opened.status();
    store = *std::move(opened);
    spdlog::info("authentication on: {} from {}", store->Snapshot()->Summary(),
                 config.credentials_file);
    WarnOfUnboundAgentKeys(*store->Snapshot(), config.credentials_file);
  }
  const bool has_tls = !config.grpc.tls_cert_file.empty();
  const std::string& address = config.grpc.listen_address;
  if (absl::Status exposure =
          auth::CheckListenExposure(address, store != nullptr, has_tls, /*insecure=*/false);
      !exposure.ok()) {
    if (!config.insecure) return exposure;
    spdlog::warn("--insecure: {}", std::string(exposure.message()));
  }
  // The HTTP listener carries the same API: the same rule.
  if (!config.http_listen_address.empty()) {
    if (absl::Status exposure =
            auth::CheckListenExposure(config.http_listen_address, store != nullptr, has_tls,
                                      /*insecure=*/false, "--http-listen");
        !exposure.ok()) {
      if (!config.insecure) return exposure;
      spdlog::warn("--insecure: {}", std::string(exposure.message()));
    }
  }
  if (store == nullptr) {
    spdlog::info("authentication off (no --credentials): every caller is an admin");
  }
  return store;
}

// One line at the start saying where s3:// paths will be read, or why they
// cannot be yet (the rules that need them say so too).
void LogObjectStorage(const objectstore::S3ConfigOverrides& overrides) {
  absl::StatusOr<objectstore::S3Config> config =
      objectstore::LoadS3Config(overrides, objectstore::ProcessEnvironment());
  if (!config.ok()) {
    spdlog::info("object storage: s3:// output paths cannot be read until configured: {}",
                 std::string(config.status().message()));
    return;
  }
  spdlog::info(
      "object storage: s3:// output paths are read from {} (region {}, {}-style, "
      "access key {} from {})",
      config->endpoint, config->region, config->path_style ? "path" : "virtual-hosted",
      config->access_key_id, config->credentials_source);
}

// --database's PostgreSQL, or SQLite in the data directory. `*description`
// names it for logs (never with a password).
absl::StatusOr<std::unique_ptr<persistence::Storage>> OpenStorage(const ServerConfig& config,
                                                                  std::string* description) {
  const std::string& url = config.database_url;
  if (url.empty()) {
    *description = (fs::path(config.data_dir) / "debugplane.db").string();
    return persistence::SqliteStorage::Open(*description);
  }
  if (!absl::StartsWith(url, "postgresql://") && !absl::StartsWith(url, "postgres://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--database ", persistence::RedactConnectionString(url),
                     " is not a postgresql:// or postgres:// URI (leave it out for SQLite in the "
                     "data directory)"));
  }
  // Bounded waits below the evaluation lease (service/server_leases.h).
  auto storage = persistence::PostgresStorage::Open(
      url, persistence::PostgresStorageOptions{.io_timeout = config.lease_duration / 3});
  if (!storage.ok()) {
    return absl::Status(storage.status().code(),
                        absl::StrCat("--database: ", storage.status().message()));
  }
  *description = (*storage)->Describe();
  return storage;
}

// The reports' table on the same database: SQLite's file `sqlite_path`
// (created by OpenStorage) or --database's PostgreSQL.
absl::StatusOr<std::unique_ptr<persistence::ReportStore>> OpenReportStore(
    const ServerConfig& config, const std::string& sqlite_path) {
  if (config.database_url.empty()) {
    auto sqlite = persistence::SqliteReportStore::Open(sqlite_path);
    if (!sqlite.ok()) return sqlite.status();
    return std::unique_ptr<persistence::ReportStore>(*std::move(sqlite));
  }
  auto postgres =
      persistence::PostgresReportStore::Open(config.database_url, config.lease_duration / 3);
  if (!postgres.ok()) {
    return absl::Status(postgres.status().code(),
                        absl::StrCat("--database (reports): ", postgres.status().message()));
  }
  return std::unique_ptr<persistence::ReportStore>(*std::move(postgres));
}

// Gauges whose truth the manager and the dispatcher hold, read at each
// scrape. Every status is set, 0 included, so that a query for one returns
// 0 rather than nothing. REQUIRES: `manager` and `actions` outlive the
// scrapes (the HTTP listener stops before they go).
void AddScrapeHooks(metrics::ServerMetrics& metrics, const core::TrainingJobManager* manager,
                    const rules_engine::ActionDispatcher* actions) {
  metrics.registry.AddScrapeHook([&metrics, manager] {
    const core::TrainingJobManager::StatusCounts counts = manager->CountStatuses();
    for (int value = v1::TrainingJobStatus::Value_MIN + 1;
         value <= v1::TrainingJobStatus::Value_MAX; ++value) {
      if (!v1::TrainingJobStatus::Value_IsValid(value)) continue;
      const auto status = static_cast<core::JobStatus>(value);
      auto found = counts.jobs.find(status);
      metrics.jobs.SetJobs(core::JobStatusName(status),
                           found == counts.jobs.end() ? 0 : found->second);
    }
    for (int value = v1::RuleEvaluationStatus::Value_MIN + 1;
         value <= v1::RuleEvaluationStatus::Value_MAX; ++value) {
      if (!v1::RuleEvaluationStatus::Value_IsValid(value)) continue;
      const auto status = static_cast<core::RuleStatus>(value);
      auto found = counts.rule_evaluations.find(status);
      metrics.jobs.SetRuleEvaluations(core::RuleStatusName(status),
                                      found == counts.rule_evaluations.end() ? 0 : found->second);
    }
    metrics.jobs.SetWatchStreams("client", counts.client_watches);
    metrics.jobs.SetWatchStreams("agent", counts.agent_watches);
  });
  metrics.registry.AddScrapeHook([&metrics, actions] {
    metrics.actions.SetPending(static_cast<int64_t>(actions->pending_actions()));
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerApp>> ServerApp::Start(ServerConfig config) {
  // Checked before anything starts, so a bad flag leaves nothing behind.
  auto credentials = OpenCredentials(config);
  if (!credentials.ok()) return credentials.status();
  auto data_directory = persistence::DataDirectory::Open(config.data_dir);
  if (!data_directory.ok()) return data_directory.status();
  core::TrainingJobManagerOptions manager_options = config.manager;
  if (absl::Status roots = ResolveDataRoots(config, &manager_options.validation.data_roots);
      !roots.ok()) {
    return roots;
  }
  EvaluatorCommands evaluators;
  if (absl::Status resolved = ResolveEvaluators(config, &evaluators); !resolved.ok()) {
    return resolved;
  }
  for (const auto& [image, command] : evaluators) {
    manager_options.validation.allowed_custom_evaluators.push_back(image);
  }
  rules_engine::InstallRuleValidation(&manager_options.validation);
  rules_engine::ActionDispatcherOptions action_options;
  if (absl::Status sinks = ResolveActionSinks(config, &action_options); !sinks.ok()) {
    return sinks;
  }

  std::unique_ptr<ServerApp> app(new ServerApp(std::move(config)));
  const ServerConfig& c = app->config_;
  app->credentials_ = *std::move(credentials);
  // SageMaker HTTP requests are signed for the server's region (--region,
  // as ARNs name it); "local", the default, is no AWS region: clients sign
  // for theirs, and any is accepted.
  auth::SigV4Options sigv4;
  const std::string& region = c.manager.arn_scope.region;
  sigv4.region = region == core::ArnScope().region ? "" : region;
  app->authenticator_ = auth::NewAuthenticator(app->credentials_, std::move(sigv4));
  app->data_directory_ = *std::move(data_directory);
  auto storage = OpenStorage(c, &app->database_path_);
  if (!storage.ok()) return storage.status();
  spdlog::info("database: {}", app->database_path_);
  // PostgreSQL may be shared by several servers (replicas): follow the
  // others' changes. SQLite has one server per file.
  manager_options.follow_changes = !c.database_url.empty();
  spdlog::info("replica id: {}{}", manager_options.replica_id,
               manager_options.follow_changes ? "" : " (one server: not following a change feed)");
  auto manager = core::TrainingJobManager::Create(
      persistence::Metered(*std::move(storage), &app->metrics_->database),
      std::move(manager_options));
  if (!manager.ok()) return manager.status();
  app->manager_ = *std::move(manager);
  app->feed_pruner_ = std::make_unique<core::ChangeFeedPruner>(
      &app->manager_->storage(),
      core::ChangeFeedPrunerOptions{.retention = c.change_feed_retention});
  app->feed_pruner_->Start();

  rules_engine::EvaluationSchedulerOptions scheduler_options;
  if (!c.http_listen_address.empty()) {
    app->dashboard_events_ = std::make_shared<dashboard::DashboardEvents>(
        app->manager_.get(),
        dashboard::DashboardEventsOptions{.clock = app->manager_->options().clock});
    app->dashboard_events_->Start();
    scheduler_options.on_data_read = [events = app->dashboard_events_](const std::string& job_name,
                                                                       int64_t last_step) {
      events->OnDataRead(job_name, last_step);
    };
  }
  scheduler_options.worker_threads = c.rule_workers;
  scheduler_options.custom_evaluators = std::move(evaluators);
  scheduler_options.custom_evaluator_time_limit = c.evaluator_time_limit;
  scheduler_options.evaluation_metrics = &app->metrics_->evaluation;
  scheduler_options.object_store_metrics = &app->metrics_->object_store;
  scheduler_options.data_roots = app->manager_->options().validation.data_roots;
  scheduler_options.bucket_stores =
      objectstore::MakeS3BucketStoreFactory(c.s3, objectstore::ProcessEnvironment());
  LogObjectStorage(c.s3);
  // ProfilerReport rules' reports live with the database: the server owns
  // that directory, whereas output paths may be read-only to it.
  const fs::path report_dir = fs::path(c.data_dir) / "reports";
  scheduler_options.report_dir = report_dir;
  auto report_store = OpenReportStore(c, app->database_path_);
  if (!report_store.ok()) return report_store.status();
  app->report_store_ = *std::move(report_store);
  scheduler_options.report_store = app->report_store_.get();
  // Which jobs this replica evaluates and whose actions it carries out (all
  // of them with SQLite, one server).
  auto leases =
      OpenServerLeases(c, app->database_path_, app->manager_.get(), &app->metrics_->leases);
  if (!leases.ok()) return leases.status();
  app->leases_ = std::make_unique<ServerLeases>(*std::move(leases));
  scheduler_options.leases = app->leases_->keeper.get();
  action_options.leases = app->leases_->keeper.get();
  action_options.outbox = app->leases_->outbox;
  action_options.claim_duration = c.action_claim_duration;
  app->scheduler_ =
      std::make_unique<rules_engine::EvaluationScheduler>(app->manager_.get(), scheduler_options);
  app->scheduler_->Start();
  action_options.metrics = &app->metrics_->actions;
  app->actions_ = std::make_unique<rules_engine::ActionDispatcher>(app->manager_.get(),
                                                                   std::move(action_options));
  app->actions_->Start();
  app->leases_->keeper->Start();  // After its listeners are in.
  AddScrapeHooks(*app->metrics_, app->manager_.get(), app->actions_.get());

  app->agents_ = std::make_unique<core::TrainingAgentManager>(app->manager_.get());
  app->reports_ = std::make_unique<core::ProfilerReportHandler>(app->manager_.get(), report_dir,
                                                                app->report_store_.get());
  app->report_observer_ =
      app->manager_
          ->AddCommitObserver([reports = app->reports_.get()](
                                  const std::string& job_name,
                                  std::shared_ptr<const core::JobRecord> job) {
            if (job == nullptr) reports->ForgetJob(job_name, absl::Now());
          })
          .id;
  // Tensor queries read the trials the rules read, through the same roots
  // and bucket configuration, on two threads of their own.
  rules_engine::TensorQueryOptions tensor_options;
  tensor_options.data_roots = app->manager_->options().validation.data_roots;
  tensor_options.bucket_stores =
      objectstore::MakeS3BucketStoreFactory(c.s3, objectstore::ProcessEnvironment());
  app->tensors_ =
      std::make_unique<rules_engine::TensorQueryHandler>(app->manager_.get(), tensor_options);
  // --- Dashboard data (issue 13, insights) ---
  // The dashboard's series of each job's profiler output, read through the
  // same roots and buckets as the rules, on two threads of its own; live
  // profiled jobs are followed from now on, so opening one is instant.
  if (!c.http_listen_address.empty()) {
    rules_engine::insights::InsightsStoreOptions insights_options;
    insights_options.data_roots = app->manager_->options().validation.data_roots;
    insights_options.bucket_stores =
        objectstore::MakeS3BucketStoreFactory(c.s3, objectstore::ProcessEnvironment());
    insights_options.clock = app->manager_->options().clock;
    app->insights_ = std::make_unique<rules_engine::insights::InsightsStore>(
        app->manager_.get(), std::move(insights_options));
  }
  GrpcServerOptions grpc_options = c.grpc;
  grpc_options.authenticator = app->authenticator_;
  grpc_options.request_metrics = &app->metrics_->requests;
  auto grpc = GrpcServer::Start(grpc_options, app->manager_.get(), app->agents_.get(),
                                app->reports_.get(), app->tensors_.get());
  if (!grpc.ok()) return grpc.status();  // ~ServerApp stops what started.
  app->grpc_ = *std::move(grpc);
  // Replicas: health checks say NOT_SERVING while the database (and so the
  // other servers' changes) cannot be read; reads fail then too.
  app->manager_->SetFeedReachabilityObserver([grpc = app->grpc_.get()](bool reachable) {
    spdlog::log(reachable ? spdlog::level::info : spdlog::level::warn,
                "health: {} (the database is {})", reachable ? "SERVING" : "NOT_SERVING",
                reachable ? "reachable again" : "unreachable");
    grpc->SetServing(reachable);
  });
  if (absl::Status http = app->StartHttp(); !http.ok()) return http;

  std::vector<std::string> root_names;
  for (const auto& root : app->manager_->options().validation.data_roots) {
    root_names.push_back(root.string());
  }
  spdlog::info("serving: listen={} port={} database={} data_roots=[{}] jobs={}",
               c.grpc.listen_address, app->port(), app->database_path_,
               absl::StrJoin(root_names, ","), app->manager_->job_count());
  if (app->http_ != nullptr) {
    spdlog::info(
        "serving the SageMaker API over HTTP: listen={} port={} {} (aws sagemaker ... "
        "--endpoint-url {}://HOST:{})",
        c.http_listen_address, app->http_port(), app->http_->tls() ? "https" : "http",
        app->http_->tls() ? "https" : "http", app->http_port());
    spdlog::info("dashboard: {}", app->DashboardUrl());
  }
  return app;
}

std::vector<dashboard::JobResource> ServerApp::InsightsJobResources() {
  if (insights_ == nullptr) return {};
  return dashboard::InsightsResources({insights_.get(), tensors_.get()});
}

absl::Status ServerApp::StartHttp() {
  if (config_.http_listen_address.empty()) return absl::OkStatus();
  sagemaker_ = std::make_unique<http::SageMakerProtocol>(manager_.get(), authenticator_.get());
  http::HttpServerOptions options{
      .listen_address = config_.http_listen_address,
      .tls_cert_file = config_.grpc.tls_cert_file,
      .tls_key_file = config_.grpc.tls_key_file,
      .threads = config_.http_threads,
      .max_body_bytes = static_cast<size_t>(config_.grpc.max_receive_message_bytes),
      .allowed_hosts = config_.http_allowed_hosts,
      .auth_failures = std::make_shared<http::ClientRateLimiter>(
          http::ClientRateLimiterOptions{.clock = manager_->options().clock})};
  metrics_route_ = std::make_unique<http::MetricsRoute>(&metrics_->registry, authenticator_.get());
  dashboard_ = std::make_unique<dashboard::Dashboard>(
      manager_.get(), authenticator_.get(), credentials_, dashboard_events_,
      // .resources: the /api/jobs/NAME/<resource> tables of other areas
      // (overview, system, framework, tensors, tensor) join here.
      dashboard::DashboardOptions{.tls = !config_.grpc.tls_cert_file.empty(),
                                  .resources = InsightsJobResources(),
                                  .sessions = {.clock = manager_->options().clock}});
  std::vector<http::HttpRoute> routes = {sagemaker_->Route(), metrics_route_->Route()};
  for (http::HttpRoute& route : dashboard_->Routes()) routes.push_back(std::move(route));
  auto server = http::HttpServer::Start(
      std::move(options), http::CountRequests(std::move(routes), &metrics_->requests));
  if (!server.ok()) return server.status();
  http_ = *std::move(server);
  return absl::OkStatus();
}

std::string ServerApp::DashboardUrl() const {
  if (http_ == nullptr) return "";
  // The listener's host as a browser on this machine reaches it.
  std::string host = config_.http_listen_address.substr(0, config_.http_listen_address.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") host = "127.0.0.1";
  return absl::StrCat(http_->tls() ? "https" : "http", "://", host, ":", http_port(),
                      "/dashboard/");
}

ServerApp::~ServerApp() { Shutdown(); }

absl::Status ServerApp::ReloadCredentials() {
  if (credentials_ == nullptr) {
    spdlog::warn("SIGHUP: no --credentials to reload (authentication is off)");
    return absl::FailedPreconditionError("no --credentials to reload (authentication is off)");
  }
  if (absl::Status reloaded = credentials_->Reload(); !reloaded.ok()) {
    spdlog::error("credentials not reloaded, the previous ones stay in force: {}",
                  std::string(reloaded.message()));
    return reloaded;
  }
  spdlog::info("credentials reloaded from {}: {}", credentials_->path(),
               credentials_->Snapshot()->Summary());
  WarnOfUnboundAgentKeys(*credentials_->Snapshot(), credentials_->path());
  return absl::OkStatus();
}

void ServerApp::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // Stop evaluating, commit what is queued and refuse new changes, so calls
  // in flight complete; then stop the transport, then close the database.
  // Leases first: evaluations and actions stop, and other replicas take the
  // jobs over at once.
  if (leases_ != nullptr) leases_->keeper->Shutdown();
  if (actions_ != nullptr) actions_->Shutdown();
  if (scheduler_ != nullptr) scheduler_->Shutdown();
  // Live dashboards end before the listener waits for its requests.
  if (dashboard_events_ != nullptr) dashboard_events_->Shutdown();
  // The HTTP listener first: its requests in flight complete while the
  // manager still accepts them.
  if (http_ != nullptr) http_->Shutdown(config_.shutdown_grace);
  // Before the manager: the store observes its commits.
  if (insights_ != nullptr) insights_->Shutdown();
  if (feed_pruner_ != nullptr) feed_pruner_->Shutdown();
  if (manager_ != nullptr) manager_->Shutdown();
  if (grpc_ != nullptr) {
    grpc_->Shutdown(config_.shutdown_grace);
    grpc_->Wait();
  }
  http_.reset();
  metrics_route_.reset();
  dashboard_.reset();
  sagemaker_.reset();
  grpc_.reset();
  insights_.reset();
  tensors_.reset();
  if (manager_ != nullptr) manager_->RemoveCommitObserver(report_observer_);
  reports_.reset();
  agents_.reset();
  actions_.reset();
  scheduler_.reset();
  leases_.reset();
  dashboard_events_.reset();
  feed_pruner_.reset();
  manager_.reset();  // Commits the last changes and closes the database.
  data_directory_.reset();
}

}  // namespace debugplane::service
