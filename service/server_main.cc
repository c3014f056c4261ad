// debugplane-server: the training-job debug control plane.
//
//   debugplane-server [--listen HOST:PORT] [--data-dir DIR] [--data-root DIR]...
//                     [--tls-cert PEM --tls-key PEM] [--log-level LEVEL] [--config FILE]
//
// Flags may also come from a config file (TOML or INI: `listen = "..."`,
// `data-root = ["/a", "/b"]`). SIGTERM or SIGINT shut down gracefully: the
// health service turns NOT_SERVING, queued changes are committed, calls in
// flight finish, watch streams end with UNAVAILABLE, the database closes.

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "core/profiler_report_handler.h"
#include "core/training_agent_handler.h"
#include "core/training_job_manager.h"
#include "persistence/data_directory.h"
#include "persistence/sqlite_storage.h"
#include "rules_engine/action_dispatcher.h"
#include "rules_engine/evaluation_scheduler.h"
#include "rules_engine/validation_hooks.h"
#include "service/logging.h"
#include "service/server.h"
#include "spdlog/spdlog.h"

namespace {

namespace fs = std::filesystem;
using debugplane::core::TrainingJobManager;
using debugplane::core::TrainingJobManagerOptions;

std::string DefaultDataDir() {
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && *xdg != '\0') {
    return (fs::path(xdg) / "debugplane").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return (fs::path(home) / ".local/share/debugplane").string();
  }
  return "debugplane-data";
}

int Fail(const std::string& message) {
  spdlog::critical("{}", message);
  std::cerr << "debugplane-server: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's abseil ships with absl::Mutex deadlock detection on: a global
  // graph update on every lock acquisition, ours and gRPC's. Tests keep it
  // on; the server does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"debugplane-server: the training-job debug control plane (gRPC)"};
  app.set_config("--config", "", "Read flags from this TOML/INI file");
  debugplane::service::GrpcServerOptions grpc_options;
  std::string data_dir = DefaultDataDir();
  std::vector<std::string> data_roots;
  std::vector<std::string> allowed_evaluators;
  double evaluator_time_limit_s = 86400;
  std::string log_level = "info";
  std::string log_format = "text";
  double shutdown_grace_s = 10;
  TrainingJobManagerOptions manager_options;
  int rule_workers = 2;
  std::vector<std::string> notify_webhooks;
  debugplane::rules_engine::SmtpSinkOptions smtp;
  std::string smtp_password_file;
  int action_attempts = 8;
  double stop_wait_without_agent_s =
      absl::ToDoubleSeconds(manager_options.stop_wait.without_agent);
  double stop_confirm_timeout_s = absl::ToDoubleSeconds(manager_options.stop_wait.for_agent);

  app.add_option("--listen", grpc_options.listen_address, "Address to serve on (HOST:PORT)")
      ->capture_default_str();
  app.add_option("--data-dir", data_dir, "Directory of the database")->capture_default_str();
  app.add_option("--data-root", data_roots,
                 "Directory that local output paths may point into (repeatable; default: the "
                 "data directory)");
  app.add_option("--tls-cert", grpc_options.tls_cert_file, "PEM certificate chain for TLS");
  app.add_option("--tls-key", grpc_options.tls_key_file, "PEM private key for TLS");
  app.add_option("--allow-evaluator", allowed_evaluators,
                 "Custom rule evaluator to accept (repeatable): an absolute executable path "
                 "used as RuleEvaluatorImage, or IMAGE=COMMAND [ARGS] mapping a "
                 "RuleEvaluatorImage to a local command");
  app.add_option("--evaluator-time-limit", evaluator_time_limit_s,
                 "Seconds a custom rule evaluator may run before it is killed")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 30.0 * 86400));
  app.add_option("--region", manager_options.arn_scope.region, "Region named in ARNs")
      ->capture_default_str();
  app.add_option("--account", manager_options.arn_scope.account, "Account named in ARNs")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or critical")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical"}));
  app.add_option("--log-format", log_format, "text or json (one JSON object per line)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--max-request-bytes", grpc_options.max_receive_message_bytes,
                 "Largest request accepted")
      ->capture_default_str()
      ->check(CLI::Range(1024, 64 * 1024 * 1024));
  app.add_option("--watch-buffer-bytes", grpc_options.watch_limits.max_pending_bytes,
                 "Changes a WatchTrainingJob client that does not read may fall behind by "
                 "before its stream ends with RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::Range(size_t{4096}, size_t{1} << 30));
  app.add_option("--rule-workers", rule_workers, "Threads that evaluate rules")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--shutdown-grace", shutdown_grace_s,
                 "Seconds calls in flight get to finish on SIGTERM")
      ->capture_default_str();
  app.add_option("--notify-webhook", notify_webhooks,
                 "URL that Email and SMS rule actions are POSTed to as JSON (repeatable)");
  app.add_option("--smtp-url", smtp.url,
                 "SMTP server for Email rule actions: smtp://host:port (STARTTLS when offered) "
                 "or smtps://host:port");
  app.add_option("--smtp-from", smtp.from, "Sender address of Email rule actions");
  app.add_option("--smtp-user", smtp.username, "SMTP user name (AUTH)");
  app.add_option("--smtp-password-file", smtp_password_file,
                 "File whose first line is the SMTP password");
  app.add_option("--action-attempts", action_attempts,
                 "Deliveries of a notification before its action ends Failed")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--stop-wait-without-agent", stop_wait_without_agent_s,
                 "Seconds a stopping job whose training started waits for an agent to "
                 "(re)connect and report the process gone, before it is Stopped without one")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--stop-confirm-timeout", stop_confirm_timeout_s,
                 "Seconds a stopping job waits for its connected agent to report the training "
                 "process gone, before it is Stopped without that report (more than the agents' "
                 "--stop-grace)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 7 * 86400.0));
  CLI11_PARSE(app, argc, argv);
  manager_options.stop_wait.without_agent = absl::Seconds(stop_wait_without_agent_s);
  manager_options.stop_wait.for_agent = absl::Seconds(stop_confirm_timeout_s);

  debugplane::service::ConfigureLogging(log_level, log_format);
  if (grpc_options.tls_cert_file.empty() &&
      !absl::StartsWith(grpc_options.listen_address, "127.") &&
      !absl::StartsWith(grpc_options.listen_address, "localhost:") &&
      !absl::StartsWith(grpc_options.listen_address, "[::1]:")) {
    spdlog::warn(
        "listening on {} in plaintext: anyone who can reach it can read, stop and delete every "
        "job; give --tls-cert and --tls-key, or listen on 127.0.0.1",
        grpc_options.listen_address);
  }

  // Block the shutdown signals in every thread; main waits for them below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Held until exit: one data directory, one server.
  auto data_directory = debugplane::persistence::DataDirectory::Open(data_dir);
  if (!data_directory.ok()) return Fail(std::string(data_directory.status().message()));
  std::error_code error;
  if (data_roots.empty()) data_roots.push_back(data_dir);
  for (const std::string& root : data_roots) {
    fs::path canonical = fs::canonical(root, error);
    if (error || !fs::is_directory(canonical)) {
      return Fail(absl::StrCat("--data-root ", root, " is not an existing directory"));
    }
    manager_options.validation.data_roots.push_back(canonical);
  }
  std::map<std::string, std::vector<std::string>> custom_evaluators;
  for (const std::string& allowed : allowed_evaluators) {
    const size_t equals = allowed.find('=');
    std::string image = allowed.substr(0, equals);
    std::vector<std::string> command =
        equals == std::string::npos
            ? std::vector<std::string>{image}
            : absl::StrSplit(allowed.substr(equals + 1), ' ', absl::SkipWhitespace());
    if (image.empty() || command.empty() || !fs::path(command[0]).is_absolute()) {
      return Fail(absl::StrCat("--allow-evaluator ", allowed,
                               ": give an absolute executable path, or IMAGE=/abs/command [ARGS]"));
    }
    if (access(command[0].c_str(), X_OK) != 0) {
      return Fail(absl::StrCat("--allow-evaluator ", allowed, ": ", command[0],
                               " is not an executable file"));
    }
    manager_options.validation.allowed_custom_evaluators.push_back(image);
    custom_evaluators[image] = std::move(command);
  }
  debugplane::rules_engine::InstallRuleValidation(&manager_options.validation);

  debugplane::rules_engine::ActionDispatcherOptions action_options;
  action_options.max_attempts = action_attempts;
  for (const std::string& url : notify_webhooks) {
    if (!absl::StartsWith(url, "http://") && !absl::StartsWith(url, "https://")) {
      return Fail(absl::StrCat("--notify-webhook ", url, " is not an http:// or https:// URL"));
    }
    action_options.sinks.push_back(debugplane::rules_engine::MakeWebhookSink({.url = url}));
  }
  if (!smtp.url.empty()) {
    if (!absl::StartsWith(smtp.url, "smtp://") && !absl::StartsWith(smtp.url, "smtps://")) {
      return Fail(absl::StrCat("--smtp-url ", smtp.url, " is not an smtp:// or smtps:// URL"));
    }
    if (smtp.from.empty()) return Fail("--smtp-url needs --smtp-from (the sender address)");
    if (!smtp_password_file.empty()) {
      std::ifstream in(smtp_password_file);
      if (!in || !std::getline(in, smtp.password)) {
        return Fail(absl::StrCat("--smtp-password-file ", smtp_password_file, " cannot be read"));
      }
    }
    action_options.sinks.push_back(debugplane::rules_engine::MakeSmtpSink(smtp));
  }

  const std::string db_path = (fs::path(data_dir) / "debugplane.db").string();
  auto storage = debugplane::persistence::SqliteStorage::Open(db_path);
  if (!storage.ok()) return Fail(storage.status().ToString());
  auto manager = TrainingJobManager::Create(*std::move(storage), std::move(manager_options));
  if (!manager.ok()) return Fail(manager.status().ToString());

  debugplane::rules_engine::EvaluationSchedulerOptions scheduler_options;
  scheduler_options.worker_threads = rule_workers;
  scheduler_options.custom_evaluators = std::move(custom_evaluators);
  scheduler_options.custom_evaluator_time_limit = absl::Seconds(evaluator_time_limit_s);
  scheduler_options.data_roots = (*manager)->options().validation.data_roots;
  // ProfilerReport rules' reports live with the database: the server owns
  // that directory, whereas output paths may be read-only to it.
  const fs::path report_dir = fs::path(data_dir) / "reports";
  scheduler_options.report_dir = report_dir;
  auto scheduler = std::make_unique<debugplane::rules_engine::EvaluationScheduler>(
      manager->get(), scheduler_options);
  scheduler->Start();
  auto actions = std::make_unique<debugplane::rules_engine::ActionDispatcher>(
      manager->get(), std::move(action_options));
  actions->Start();

  debugplane::core::TrainingAgentManager agents(manager->get());
  debugplane::core::ProfilerReportHandler reports(manager->get(), report_dir);
  auto server =
      debugplane::service::GrpcServer::Start(grpc_options, manager->get(), &agents, &reports);
  if (!server.ok()) return Fail(server.status().ToString());

  std::vector<std::string> root_names;
  for (const auto& root : (*manager)->options().validation.data_roots) {
    root_names.push_back(root.string());
  }
  spdlog::info("serving: listen={} port={} database={} data_roots=[{}] jobs={}",
               grpc_options.listen_address, (*server)->port(), db_path,
               absl::StrJoin(root_names, ","), (*manager)->job_count());
  // A machine-readable line for scripts and tests that pass port 0.
  std::cout << "debugplane-server listening on port " << (*server)->port() << std::endl;

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("signal {}: shutting down", signal_number);

  // Stop evaluating, commit what is queued and refuse new changes, so calls
  // in flight complete; then stop the transport, then close the database.
  actions->Shutdown();
  scheduler->Shutdown();
  (*manager)->Shutdown();
  (*server)->Shutdown(absl::Seconds(shutdown_grace_s));
  (*server)->Wait();
  server->reset();
  actions.reset();
  scheduler.reset();
  manager->reset();  // Commits the last changes and closes the database.
  spdlog::info("shut down cleanly");
  spdlog::shutdown();
  std::fflush(nullptr);
  // Everything durable is closed; skip gRPC's library teardown, which can
  // take seconds and would only delay supervisors restarting the service.
  std::_Exit(0);
}
