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
#include "service/dashboard/report_routes.h"
#include "service/http/client_rate_limiter.h"
#include "service/http/request_counting.h"
#include "service/server_leases.h"
#include "spdlog/spdlog.h"

namespace debugplane::service {
namespace {

namespace fs = std::filesystem;

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
// Calls `set(status, count)` for every valid value of a proto status enum
// (values above `min`, the UNSPECIFIED one, up to `max`), with 0 for those
// missing from `counts`.
template <typename Status, typename Set>
void SetEveryStatus(int min, int max, bool (*is_valid)(int),
                    const std::map<Status, int64_t>& counts, Set set) {
  for (int value = min + 1; value <= max; ++value) {
    if (!is_valid(value)) continue;
    const auto status = static_cast<Status>(value);
    auto found = counts.find(status);
    set(status, found == counts.end() ? 0 : found->second);
  }
}

// Gauges whose truth the manager and the dispatcher hold, read at each
// scrape. Every status is set, 0 included, so that a query for one returns
// 0 rather than nothing. REQUIRES: `manager` and `actions` outlive the
// scrapes (the HTTP listener stops before they go).
void AddScrapeHooks(metrics::ServerMetrics& metrics, const core::TrainingJobManager* manager,
                    const rules_engine::ActionDispatcher* actions) {
  metrics.registry.AddScrapeHook([&metrics, manager] {
    const core::TrainingJobManager::StatusCounts counts = manager->CountStatuses();
    SetEveryStatus(v1::TrainingJobStatus::Value_MIN, v1::TrainingJobStatus::Value_MAX,
                   &v1::TrainingJobStatus::Value_IsValid, counts.jobs,
                   [&metrics](core::JobStatus status, int64_t jobs) {
                     metrics.jobs.SetJobs(core::JobStatusName(status), jobs);
                   });
    SetEveryStatus(v1::RuleEvaluationStatus::Value_MIN, v1::RuleEvaluationStatus::Value_MAX,
                   &v1::RuleEvaluationStatus::Value_IsValid, counts.rule_evaluations,
                   [&metrics](core::RuleStatus status, int64_t evaluations) {
                     metrics.jobs.SetRuleEvaluations(core::RuleStatusName(status), evaluations);
                   });
    metrics.jobs.SetWatchStreams("client", counts.client_watches);
    metrics.jobs.SetWatchStreams("agent", counts.agent_watches);
  });
  metrics.registry.AddScrapeHook([&metrics, actions] {
    metrics.actions.SetPending(static_cast<int64_t>(actions->pending_actions()));
  });
}

}  // namespace

// What Start resolves and checks from the flags before anything starts.
struct ServerApp::Prerequisites {
  std::shared_ptr<auth::CredentialStore> credentials;  // Null without --credentials.
  std::unique_ptr<persistence::DataDirectory> data_directory;
  core::TrainingJobManagerOptions manager_options;
  EvaluatorCommands evaluators;
  rules_engine::ActionDispatcherOptions action_options;
};

absl::StatusOr<ServerApp::Prerequisites> ServerApp::CheckPrerequisites(const ServerConfig& config) {
  Prerequisites checked;
  auto credentials = OpenCredentials(config);
  if (!credentials.ok()) return credentials.status();
  checked.credentials = *std::move(credentials);
  auto data_directory = persistence::DataDirectory::Open(config.data_dir);
  if (!data_directory.ok()) return data_directory.status();
  checked.data_directory = *std::move(data_directory);
  checked.manager_options = config.manager;
  if (absl::Status roots = ResolveDataRoots(config, &checked.manager_options.validation.data_roots);
      !roots.ok()) {
    return roots;
  }
  if (absl::Status resolved = ResolveEvaluators(config, &checked.evaluators); !resolved.ok()) {
    return resolved;
  }
  for (const auto& [image, command] : checked.evaluators) {
    checked.manager_options.validation.allowed_custom_evaluators.push_back(image);
  }
  rules_engine::InstallRuleValidation(&checked.manager_options.validation);
  if (absl::Status sinks = ResolveActionSinks(config, &checked.action_options); !sinks.ok()) {
    return sinks;
  }
  return checked;
}

absl::StatusOr<std::unique_ptr<ServerApp>> ServerApp::Start(ServerConfig config) {
  // Checked before anything starts, so a bad flag leaves nothing behind.
  auto checked = CheckPrerequisites(config);
  if (!checked.ok()) return checked.status();
  std::unique_ptr<ServerApp> app(new ServerApp(std::move(config)));
  // On an error, ~ServerApp stops what started.
  app->UseCredentials(std::move(checked->credentials));
  app->data_directory_ = std::move(checked->data_directory);
  if (absl::Status opened = app->OpenManager(std::move(checked->manager_options)); !opened.ok()) {
    return opened;
  }
  if (absl::Status started =
          app->StartRulesEngine(std::move(checked->evaluators), std::move(checked->action_options));
      !started.ok()) {
    return started;
  }
  app->MakeHandlers();
  if (absl::Status grpc = app->StartGrpc(); !grpc.ok()) return grpc;
  if (absl::Status http = app->StartHttp(); !http.ok()) return http;
  app->LogServing();
  return app;
}

void ServerApp::UseCredentials(std::shared_ptr<auth::CredentialStore> credentials) {
  credentials_ = std::move(credentials);
  // SageMaker HTTP requests are signed for the server's region (--region,
  // as ARNs name it); "local", the default, is no AWS region: clients sign
  // for theirs, and any is accepted.
  auth::SigV4Options sigv4;
  const std::string& region = config_.manager.arn_scope.region;
  sigv4.region = region == core::ArnScope().region ? "" : region;
  authenticator_ = auth::NewAuthenticator(credentials_, std::move(sigv4));
}

absl::Status ServerApp::OpenManager(core::TrainingJobManagerOptions options) {
  auto storage = OpenStorage(config_, &database_path_);
  if (!storage.ok()) return storage.status();
  spdlog::info("database: {}", database_path_);
  // PostgreSQL may be shared by several servers (replicas): follow the
  // others' changes. SQLite has one server per file.
  options.follow_changes = !config_.database_url.empty();
  spdlog::info("replica id: {}{}", options.replica_id,
               options.follow_changes ? "" : " (one server: not following a change feed)");
  auto manager = core::TrainingJobManager::Create(
      persistence::Metered(*std::move(storage), &metrics_->database), std::move(options));
  if (!manager.ok()) return manager.status();
  manager_ = *std::move(manager);
  feed_pruner_ = std::make_unique<core::ChangeFeedPruner>(
      &manager_->storage(),
      core::ChangeFeedPrunerOptions{.retention = config_.change_feed_retention});
  feed_pruner_->Start();
  return absl::OkStatus();
}

absl::Status ServerApp::StartRulesEngine(EvaluatorCommands evaluators,
                                         rules_engine::ActionDispatcherOptions action_options) {
  rules_engine::EvaluationSchedulerOptions scheduler_options =
      SchedulerOptions(std::move(evaluators));
  auto report_store = OpenReportStore(config_, database_path_);
  if (!report_store.ok()) return report_store.status();
  report_store_ = *std::move(report_store);
  scheduler_options.report_store = report_store_.get();
  // Which jobs this replica evaluates and whose actions it carries out (all
  // of them with SQLite, one server).
  auto leases = OpenServerLeases(config_, database_path_, manager_.get(), &metrics_->leases);
  if (!leases.ok()) return leases.status();
  leases_ = std::make_unique<ServerLeases>(*std::move(leases));
  scheduler_options.leases = leases_->keeper.get();
  action_options.leases = leases_->keeper.get();
  action_options.outbox = leases_->outbox;
  action_options.claim_duration = config_.action_claim_duration;
  scheduler_ =
      std::make_unique<rules_engine::EvaluationScheduler>(manager_.get(), scheduler_options);
  scheduler_->Start();
  action_options.metrics = &metrics_->actions;
  actions_ =
      std::make_unique<rules_engine::ActionDispatcher>(manager_.get(), std::move(action_options));
  actions_->Start();
  leases_->keeper->Start();  // After its listeners are in.
  AddScrapeHooks(*metrics_, manager_.get(), actions_.get());
  return absl::OkStatus();
}

rules_engine::EvaluationSchedulerOptions ServerApp::SchedulerOptions(EvaluatorCommands evaluators) {
  rules_engine::EvaluationSchedulerOptions options;
  if (!config_.http_listen_address.empty()) {
    dashboard_events_ = std::make_shared<dashboard::DashboardEvents>(
        manager_.get(), dashboard::DashboardEventsOptions{.clock = manager_->options().clock});
    dashboard_events_->Start();
    options.on_data_read = [events = dashboard_events_](const std::string& job_name,
                                                        int64_t last_step) {
      events->OnDataRead(job_name, last_step);
    };
  }
  options.worker_threads = config_.rule_workers;
  options.custom_evaluators = std::move(evaluators);
  options.custom_evaluator_time_limit = config_.evaluator_time_limit;
  options.evaluation_metrics = &metrics_->evaluation;
  options.object_store_metrics = &metrics_->object_store;
  options.data_roots = manager_->options().validation.data_roots;
  options.bucket_stores =
      objectstore::MakeS3BucketStoreFactory(config_.s3, objectstore::ProcessEnvironment());
  LogObjectStorage(config_.s3);
  // ProfilerReport rules' reports live with the database: the server owns
  // that directory, whereas output paths may be read-only to it.
  options.report_dir = ReportDirectory();
  return options;
}

std::filesystem::path ServerApp::ReportDirectory() const {
  return fs::path(config_.data_dir) / "reports";
}

void ServerApp::MakeHandlers() {
  agents_ = std::make_unique<core::TrainingAgentManager>(manager_.get());
  reports_ = std::make_unique<core::ProfilerReportHandler>(manager_.get(), ReportDirectory(),
                                                           report_store_.get());
  report_observer_ = manager_
                         ->AddCommitObserver([reports = reports_.get()](
                                                 const std::string& job_name,
                                                 std::shared_ptr<const core::JobRecord> job) {
                           if (job == nullptr) reports->ForgetJob(job_name, absl::Now());
                         })
                         .id;
  // Tensor queries read the trials the rules read, through the same roots
  // and bucket configuration, on two threads of their own.
  rules_engine::TensorQueryOptions tensor_options;
  tensor_options.data_roots = manager_->options().validation.data_roots;
  tensor_options.bucket_stores =
      objectstore::MakeS3BucketStoreFactory(config_.s3, objectstore::ProcessEnvironment());
  tensors_ = std::make_unique<rules_engine::TensorQueryHandler>(manager_.get(), tensor_options);
  // --- Dashboard data (issue 13, insights) ---
  // The dashboard's series of each job's profiler output, read through the
  // same roots and buckets as the rules, on two threads of its own; live
  // profiled jobs are followed from now on, so opening one is instant.
  if (!config_.http_listen_address.empty()) {
    rules_engine::insights::InsightsStoreOptions insights_options;
    insights_options.data_roots = manager_->options().validation.data_roots;
    insights_options.bucket_stores =
        objectstore::MakeS3BucketStoreFactory(config_.s3, objectstore::ProcessEnvironment());
    insights_options.clock = manager_->options().clock;
    // A page told of new data asks again once this store has it.
    insights_options.on_new_data = [events = dashboard_events_](const std::string& job_name) {
      events->OnDataRead(job_name, /*last_step=*/-1);
    };
    insights_ = std::make_unique<rules_engine::insights::InsightsStore>(
        manager_.get(), std::move(insights_options));
  }
}

absl::Status ServerApp::StartGrpc() {
  GrpcServerOptions grpc_options = config_.grpc;
  grpc_options.authenticator = authenticator_;
  grpc_options.request_metrics = &metrics_->requests;
  auto grpc = GrpcServer::Start(grpc_options, manager_.get(), agents_.get(), reports_.get(),
                                tensors_.get());
  if (!grpc.ok()) return grpc.status();
  grpc_ = *std::move(grpc);
  // Replicas: health checks say NOT_SERVING while the database (and so the
  // other servers' changes) cannot be read; reads fail then too.
  manager_->SetFeedReachabilityObserver([grpc = grpc_.get()](bool reachable) {
    spdlog::log(reachable ? spdlog::level::info : spdlog::level::warn,
                "health: {} (the database is {})", reachable ? "SERVING" : "NOT_SERVING",
                reachable ? "reachable again" : "unreachable");
    grpc->SetServing(reachable);
  });
  return absl::OkStatus();
}

void ServerApp::LogServing() const {
  std::vector<std::string> root_names;
  for (const auto& root : manager_->options().validation.data_roots) {
    root_names.push_back(root.string());
  }
  spdlog::info("serving: listen={} port={} database={} data_roots=[{}] jobs={}",
               config_.grpc.listen_address, port(), database_path_, absl::StrJoin(root_names, ","),
               manager_->job_count());
  if (http_ != nullptr) {
    spdlog::info(
        "serving the SageMaker API over HTTP: listen={} port={} {} (aws sagemaker ... "
        "--endpoint-url {}://HOST:{})",
        config_.http_listen_address, http_port(), http_->tls() ? "https" : "http",
        http_->tls() ? "https" : "http", http_port());
    spdlog::info("dashboard: {}", DashboardUrl());
  }
}

std::vector<dashboard::JobResource> ServerApp::InsightsJobResources() {
  std::vector<dashboard::JobResource> resources;
  if (insights_ != nullptr) {
    resources = dashboard::InsightsResources({insights_.get(), tensors_.get()});
  }
  // The reports (ProfilerReport's, CreateXgboostReport's) as pages.
  if (reports_ != nullptr) resources.push_back(dashboard::ReportResource(reports_.get()));
  return resources;
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
      // (overview, system, framework, tensors, tensor, report) join here.
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
