#include "service/server_flags.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"

namespace debugplane::service {
namespace {

// Seconds as a flag, a Duration in the configuration.
class SecondsFlag {
 public:
  explicit SecondsFlag(absl::Duration* target)
      : target_(target), seconds_(absl::ToDoubleSeconds(*target)) {}
  double* value() { return &seconds_; }
  void Store() const { *target_ = absl::Seconds(seconds_); }

 private:
  absl::Duration* target_;
  double seconds_;
};

// The flags given in seconds: each is read into a double, its Duration's
// current value the default, and stored once the command line parsed.
class SecondsFlags {
 public:
  // Adds `name` for `*target`, checked to lie in [min_seconds, max_seconds].
  void Add(CLI::App& app, const std::string& name, absl::Duration* target,
           const std::string& description, double min_seconds, double max_seconds) {
    SecondsFlag& flag = flags_.emplace_back(target);
    app.add_option(name, *flag.value(), description)
        ->capture_default_str()
        ->check(CLI::Range(min_seconds, max_seconds));
  }

  void StoreAll() const {
    for (const SecondsFlag& flag : flags_) flag.Store();
  }

 private:
  std::deque<SecondsFlag> flags_;  // A deque: CLI11 keeps pointers to the values.
};

// Object storage (s3:// output paths): empty means "as the AWS tools
// resolve it" (objectstore/aws_config.h).
struct S3Flags {
  std::string endpoint, region, profile, ca_file, addressing = "auto";
};

void AddListenerFlags(CLI::App& app, ServerConfig& config) {
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
}

void AddStorageFlags(CLI::App& app, ServerConfig& config) {
  app.add_option("--data-dir", config.data_dir, "Directory of the database")->capture_default_str();
  app.add_option("--database", config.database_url,
                 "PostgreSQL to store jobs in instead of SQLite in the data directory: "
                 "postgresql://USER@HOST:PORT/DATABASE[?sslmode=verify-full&sslrootcert=CA.pem]; "
                 "give the password in PGPASSWORD or ~/.pgpass, not here (ps shows flags)");
  app.add_option("--data-root", config.data_roots,
                 "Directory that local output paths may point into (repeatable; default: the "
                 "data directory)");
}

void AddSecurityFlags(CLI::App& app, ServerConfig& config) {
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
}

void AddEvaluatorFlags(CLI::App& app, ServerConfig& config, SecondsFlags& seconds) {
  app.add_option("--allow-evaluator", config.allowed_evaluators,
                 "Custom rule evaluator to accept (repeatable): an absolute executable path "
                 "used as RuleEvaluatorImage, or IMAGE=COMMAND [ARGS] mapping a "
                 "RuleEvaluatorImage to a local command");
  seconds.Add(app, "--evaluator-time-limit", &config.evaluator_time_limit,
              "Seconds a custom rule evaluator may run before it is killed", 1.0, 30.0 * 86400);
}

void AddIdentityAndLogFlags(CLI::App& app, ServerConfig& config) {
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
}

void AddCapacityFlags(CLI::App& app, ServerConfig& config, SecondsFlags& seconds) {
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
  seconds.Add(app, "--shutdown-grace", &config.shutdown_grace,
              "Seconds calls in flight get to finish on SIGTERM", 0.0, 3600.0);
}

void AddLeaseFlags(CLI::App& app, ServerConfig& config, SecondsFlags& seconds) {
  seconds.Add(app, "--lease-duration", &config.lease_duration,
              "Seconds a server replica's lease on evaluating a job lasts without renewal "
              "(renewed every third of it); after a replica dies, another takes its jobs over "
              "within about this long",
              0.03, 3600.0);
  seconds.Add(app, "--lease-safety-margin", &config.lease_safety_margin,
              "Seconds before its lease would expire in the database that a replica which "
              "could not renew it stops writing for the job (below two thirds of "
              "--lease-duration)",
              0.001, 3600.0);
  seconds.Add(app, "--action-claim-duration", &config.action_claim_duration,
              "Seconds a replica's claim on carrying out a rule action lasts; a replica killed "
              "while delivering leaves the action to another after it (longer than a "
              "delivery may take)",
              1.0, 86400.0);
  seconds.Add(app, "--change-feed-retention", &config.change_feed_retention,
              "Seconds the change feed keeps a job's changes after a later change replaced "
              "them (a replica further behind reads the jobs' current states instead)",
              1.0, 30.0 * 86400.0);
}

void AddActionFlags(CLI::App& app, ServerConfig& config) {
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
}

void AddReplicaFlags(CLI::App& app, ServerConfig& config, SecondsFlags& seconds) {
  app.add_option("--replica-id", config.manager.replica_id,
                 "This server's name among the servers sharing one --database (change feed, "
                 "evaluation leases, agent presence, logs); default HOSTNAME-PID");
  seconds.Add(app, "--change-poll-interval", &config.manager.change_poll_interval,
              "With --database: seconds between reads of the change feed when no "
              "notification came (the safety net of LISTEN/NOTIFY)",
              0.05, 3600.0);
}

void AddStopFlags(CLI::App& app, ServerConfig& config, SecondsFlags& seconds) {
  seconds.Add(app, "--stop-wait-without-agent", &config.manager.stop_wait.without_agent,
              "Seconds a stopping job whose training started waits for an agent to "
              "(re)connect and report the process gone, before it is Stopped without one",
              0.0, 86400.0);
  seconds.Add(app, "--stop-confirm-timeout", &config.manager.stop_wait.for_agent,
              "Seconds a stopping job waits for its connected agent to report the training "
              "process gone, before it is Stopped without that report (more than the agents' "
              "--stop-grace)",
              1.0, 7 * 86400.0);
  seconds.Add(app, "--keepalive", &config.grpc.keepalive,
              "Seconds a connection may idle before the server pings it; one whose ping is not "
              "answered within as long again is dropped (a host cut off from the network ends "
              "its agent's stream). 0: no pings",
              0.0, 86400.0);
  seconds.Add(app, "--host-connect-wait", &config.manager.host_wait.connect,
              "Seconds from its creation a job of ResourceConfig.InstanceCount > 1 waits for "
              "all its hosts' agents to connect, before it fails naming the missing ones",
              1.0, 7 * 86400.0);
  seconds.Add(app, "--host-reconnect-wait", &config.manager.host_wait.reconnect,
              "Seconds a job of ResourceConfig.InstanceCount > 1 waits for a host whose agent's "
              "connection was lost (its command not ended) to reconnect, before it fails "
              "naming the host",
              1.0, 7 * 86400.0);
}

void AddS3Flags(CLI::App& app, S3Flags& s3) {
  struct TextFlag {
    const char* name;
    std::string S3Flags::*value;
    const char* description;
  };
  static constexpr TextFlag kTextFlags[] = {
      {"--s3-endpoint", &S3Flags::endpoint,
       "S3-compatible endpoint for s3:// output paths, http(s)://host[:port] (default: "
       "AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS S3)"},
      {"--s3-region", &S3Flags::region,
       "Region requests to the store are signed for (default: AWS_REGION, AWS_DEFAULT_REGION, "
       "the profile's region, else us-east-1)"},
      {"--s3-profile", &S3Flags::profile,
       "Profile of the AWS credentials and config files (default: AWS_PROFILE, else default); "
       "keys come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or that file"},
      {"--s3-ca-file", &S3Flags::ca_file,
       "PEM CA bundle to verify the store's TLS certificate (default: AWS_CA_BUNDLE, else the "
       "system's)"},
  };
  for (const TextFlag& flag : kTextFlags) {
    app.add_option(flag.name, s3.*flag.value, flag.description);
  }
  app.add_option("--s3-addressing", s3.addressing,
                 "path (http://endpoint/bucket/key), virtual (http://bucket.endpoint/key) or auto "
                 "(path for a custom endpoint, virtual for AWS)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "path", "virtual"}));
}

// The S3 flags as overrides: a flag left empty (or "auto") overrides nothing.
void ApplyS3Flags(S3Flags s3, objectstore::S3ConfigOverrides& overrides) {
  const auto given = [](std::string value) {
    return value.empty() ? std::nullopt : std::optional<std::string>(std::move(value));
  };
  overrides.endpoint = given(std::move(s3.endpoint));
  overrides.region = given(std::move(s3.region));
  overrides.profile = given(std::move(s3.profile));
  overrides.ca_file = given(std::move(s3.ca_file));
  if (s3.addressing != "auto") overrides.path_style = s3.addressing == "path";
}

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

  // Registered in the order `--help` lists them.
  SecondsFlags seconds;
  S3Flags s3;
  AddListenerFlags(app, config);
  AddStorageFlags(app, config);
  AddSecurityFlags(app, config);
  AddEvaluatorFlags(app, config, seconds);
  AddIdentityAndLogFlags(app, config);
  AddCapacityFlags(app, config, seconds);
  AddLeaseFlags(app, config, seconds);
  AddActionFlags(app, config);
  AddReplicaFlags(app, config, seconds);
  AddStopFlags(app, config, seconds);
  AddS3Flags(app, s3);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return ParsedServerFlags{.config = std::nullopt, .exit_code = app.exit(error, out, err)};
  }
  seconds.StoreAll();
  if (config.manager.replica_id.empty()) config.manager.replica_id = DefaultReplicaId();
  ApplyS3Flags(std::move(s3), config.s3);
  return ParsedServerFlags{.config = std::move(config), .exit_code = 0};
}

std::string DefaultReplicaId() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') strcpy(host, "localhost");
  return absl::StrCat(host, "-", getpid());
}

}  // namespace debugplane::service
