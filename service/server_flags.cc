#include "service/server_flags.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"

namespace debugplane::service {
namespace {

// Seconds as a flag, a Duration in the configuration.
class SecondsFlag {
 public:
  SecondsFlag(absl::Duration* target) : target_(target), seconds_(absl::ToDoubleSeconds(*target)) {}
  double* value() { return &seconds_; }
  void Store() const { *target_ = absl::Seconds(seconds_); }

 private:
  absl::Duration* target_;
  double seconds_;
};

}  // namespace

std::string DefaultDataDir() {
  namespace fs = std::filesystem;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && *xdg != '\0') {
    return (fs::path(xdg) / "debugplane").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return (fs::path(home) / ".local/share/debugplane").string();
  }
  return "debugplane-data";
}

ParsedServerFlags ParseServerFlags(int argc, const char* const* argv, std::ostream& out,
                                   std::ostream& err) {
  ServerConfig config;
  config.manager.replica_id.clear();  // Unless given: DefaultReplicaId().
  config.data_dir = DefaultDataDir();
  CLI::App app{"debugplane-server: the training-job debug control plane (gRPC)"};
  app.set_config("--config", "", "Read flags from this TOML/INI file");

  SecondsFlag evaluator_time_limit(&config.evaluator_time_limit);
  SecondsFlag shutdown_grace(&config.shutdown_grace);
  SecondsFlag stop_wait_without_agent(&config.manager.stop_wait.without_agent);
  SecondsFlag stop_confirm_timeout(&config.manager.stop_wait.for_agent);
  SecondsFlag lease_duration(&config.lease_duration);
  SecondsFlag lease_safety_margin(&config.lease_safety_margin);
  SecondsFlag action_claim_duration(&config.action_claim_duration);
  SecondsFlag change_feed_retention(&config.change_feed_retention);

  app.add_option("--listen", config.grpc.listen_address, "Address to serve on (HOST:PORT)")
      ->capture_default_str();
  app.add_option("--http-listen", config.http_listen_address,
                 "Also serve the SageMaker API over HTTP (AWS JSON 1.1, for boto3 and the AWS "
                 "CLI's --endpoint-url) on HOST:PORT; port 0 picks a free one. Off unless given");
  app.add_option("--http-threads", config.http_threads, "Threads of the HTTP listener")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--http-allowed-host", config.http_allowed_hosts,
                 "Host name the HTTP listener answers besides localhost, loopback addresses and "
                 "the --http-listen address (repeatable), e.g. the name a proxy or DNS gives it; "
                 "any other Host header is refused (421), against DNS rebinding");
  app.add_option("--data-dir", config.data_dir, "Directory of the database")->capture_default_str();
  app.add_option("--database", config.database_url,
                 "PostgreSQL to store jobs in instead of SQLite in the data directory: "
                 "postgresql://USER@HOST:PORT/DATABASE[?sslmode=verify-full&sslrootcert=CA.pem]; "
                 "give the password in PGPASSWORD or ~/.pgpass, not here (ps shows flags)");
  app.add_option("--data-root", config.data_roots,
                 "Directory that local output paths may point into (repeatable; default: the "
                 "data directory)");
  app.add_option("--tls-cert", config.grpc.tls_cert_file, "PEM certificate chain for TLS");
  app.add_option("--tls-key", config.grpc.tls_key_file, "PEM private key for TLS");
  app.add_option("--client-ca", config.grpc.tls_client_ca_file,
                 "PEM CA bundle: clients may authenticate with a certificate it signed, mapped "
                 "to a role by a 'ROLE cn:COMMON_NAME -' line of --credentials (needs TLS)");
  app.add_option("--credentials", config.credentials_file,
                 "File of access keys, one per line: ROLE ACCESS_KEY_ID SECRET_ACCESS_KEY "
                 "[JOB_NAME] (ROLE: admin, operator, reader or agent; mode 600; re-read on "
                 "SIGHUP). Without it authentication is off and only loopback addresses are "
                 "served");
  app.add_flag("--insecure", config.insecure,
               "Serve a non-loopback address without --credentials, or with them but without "
               "TLS");
  app.add_option("--allow-evaluator", config.allowed_evaluators,
                 "Custom rule evaluator to accept (repeatable): an absolute executable path "
                 "used as RuleEvaluatorImage, or IMAGE=COMMAND [ARGS] mapping a "
                 "RuleEvaluatorImage to a local command");
  app.add_option("--evaluator-time-limit", *evaluator_time_limit.value(),
                 "Seconds a custom rule evaluator may run before it is killed")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 30.0 * 86400));
  app.add_option("--region", config.manager.arn_scope.region,
                 "Region named in ARNs; SageMaker HTTP requests must be signed for it (any "
                 "region while it is 'local')")
      ->capture_default_str();
  app.add_option("--account", config.manager.arn_scope.account, "Account named in ARNs")
      ->capture_default_str();
  app.add_option("--log-level", config.log_level, "trace, debug, info, warn, error or critical")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical"}));
  app.add_option("--log-format", config.log_format, "text or json (one JSON object per line)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--max-request-bytes", config.grpc.max_receive_message_bytes,
                 "Largest request accepted")
      ->capture_default_str()
      ->check(CLI::Range(1024, 64 * 1024 * 1024));
  app.add_option("--watch-buffer-bytes", config.grpc.watch_limits.max_pending_bytes,
                 "Changes a WatchTrainingJob client that does not read may fall behind by "
                 "before its stream ends with RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::Range(size_t{4096}, size_t{1} << 30));
  app.add_option("--rule-workers", config.rule_workers, "Threads that evaluate rules")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--shutdown-grace", *shutdown_grace.value(),
                 "Seconds calls in flight get to finish on SIGTERM")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--lease-duration", *lease_duration.value(),
                 "Seconds a server replica's lease on evaluating a job lasts without renewal "
                 "(renewed every third of it); after a replica dies, another takes its jobs over "
                 "within about this long")
      ->capture_default_str()
      ->check(CLI::Range(0.03, 3600.0));
  app.add_option("--lease-safety-margin", *lease_safety_margin.value(),
                 "Seconds before its lease would expire in the database that a replica which "
                 "could not renew it stops writing for the job (below two thirds of "
                 "--lease-duration)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 3600.0));
  app.add_option("--action-claim-duration", *action_claim_duration.value(),
                 "Seconds a replica's claim on carrying out a rule action lasts; a replica killed "
                 "while delivering leaves the action to another after it (longer than a "
                 "delivery may take)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--change-feed-retention", *change_feed_retention.value(),
                 "Seconds the change feed keeps a job's changes after a later change replaced "
                 "them (a replica further behind reads the jobs' current states instead)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 30.0 * 86400.0));
  app.add_option("--notify-webhook", config.notify_webhooks,
                 "URL that Email and SMS rule actions are POSTed to as JSON (repeatable)");
  app.add_option("--smtp-url", config.smtp.url,
                 "SMTP server for Email rule actions: smtp://host:port (STARTTLS when offered) "
                 "or smtps://host:port");
  app.add_option("--smtp-from", config.smtp.from, "Sender address of Email rule actions");
  app.add_option("--smtp-user", config.smtp.username, "SMTP user name (AUTH)");
  app.add_option("--smtp-password-file", config.smtp_password_file,
                 "File whose first line is the SMTP password");
  app.add_option("--action-attempts", config.action_attempts,
                 "Deliveries of a notification before its action ends Failed")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--replica-id", config.manager.replica_id,
                 "This server's name among the servers sharing one --database (change feed, "
                 "evaluation leases, agent presence, logs); default HOSTNAME-PID");
  SecondsFlag change_poll_interval(&config.manager.change_poll_interval);
  app.add_option("--change-poll-interval", *change_poll_interval.value(),
                 "With --database: seconds between reads of the change feed when no "
                 "notification came (the safety net of LISTEN/NOTIFY)")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  app.add_option("--stop-wait-without-agent", *stop_wait_without_agent.value(),
                 "Seconds a stopping job whose training started waits for an agent to "
                 "(re)connect and report the process gone, before it is Stopped without one")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--stop-confirm-timeout", *stop_confirm_timeout.value(),
                 "Seconds a stopping job waits for its connected agent to report the training "
                 "process gone, before it is Stopped without that report (more than the agents' "
                 "--stop-grace)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 7 * 86400.0));

  // Object storage (s3:// output paths): empty means "as the AWS tools
  // resolve it" (objectstore/aws_config.h).
  std::string s3_endpoint, s3_region, s3_profile, s3_ca_file, s3_addressing = "auto";
  app.add_option("--s3-endpoint", s3_endpoint,
                 "S3-compatible endpoint for s3:// output paths, http(s)://host[:port] "
                 "(default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS S3)");
  app.add_option("--s3-region", s3_region,
                 "Region requests to the store are signed for (default: AWS_REGION, "
                 "AWS_DEFAULT_REGION, the profile's region, else us-east-1)");
  app.add_option("--s3-profile", s3_profile,
                 "Profile of the AWS credentials and config files (default: AWS_PROFILE, else "
                 "default); keys come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or that file");
  app.add_option("--s3-ca-file", s3_ca_file,
                 "PEM CA bundle to verify the store's TLS certificate (default: AWS_CA_BUNDLE, "
                 "else the system's)");
  app.add_option("--s3-addressing", s3_addressing,
                 "path (http://endpoint/bucket/key), virtual (http://bucket.endpoint/key) or auto "
                 "(path for a custom endpoint, virtual for AWS)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "path", "virtual"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return ParsedServerFlags{.config = std::nullopt, .exit_code = app.exit(error, out, err)};
  }
  for (const SecondsFlag* flag :
       {&evaluator_time_limit, &shutdown_grace, &stop_wait_without_agent, &stop_confirm_timeout,
        &change_poll_interval, &lease_duration, &lease_safety_margin, &action_claim_duration,
        &change_feed_retention}) {
    flag->Store();
  }
  if (config.manager.replica_id.empty()) config.manager.replica_id = DefaultReplicaId();
  const auto given = [](std::string value) {
    return value.empty() ? std::nullopt : std::optional<std::string>(std::move(value));
  };
  config.s3.endpoint = given(s3_endpoint);
  config.s3.region = given(s3_region);
  config.s3.profile = given(s3_profile);
  config.s3.ca_file = given(s3_ca_file);
  if (s3_addressing != "auto") config.s3.path_style = s3_addressing == "path";
  return ParsedServerFlags{.config = std::move(config), .exit_code = 0};
}

std::string DefaultReplicaId() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') strcpy(host, "localhost");
  return absl::StrCat(host, "-", getpid());
}

}  // namespace debugplane::service
