// The server's flags: `debugplane-server --help` lists them; a config file
// (--config FILE, TOML or INI with the flags' names: `listen = "..."`,
// `data-root = ["/a", "/b"]`) may give them too. Parsing only reads the
// command line and that file; checking what the values point at (data
// roots, evaluators, URLs) is the server's start (see server_app.h), so both
// are testable without starting a process.

#ifndef DEBUGPLANE_SERVICE_SERVER_FLAGS_H_
#define DEBUGPLANE_SERVICE_SERVER_FLAGS_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/manager/training_job_manager.h"
#include "objectstore/aws_config.h"
#include "rules_engine/actions/notification_sink.h"
#include "service/server.h"

namespace debugplane::service {

struct ServerConfig {
  GrpcServerOptions grpc;
  // --http-listen: HOST:PORT of the SageMaker API over HTTP (AWS JSON 1.1,
  // service/http/); empty: no HTTP listener. Uses --tls-cert/--tls-key too.
  std::string http_listen_address;
  // Threads of the HTTP listener (each with its own epoll loop).
  int http_threads = 2;
  // --http-allowed-host: Host names the HTTP listener answers besides
  // loopback names and the --http-listen address (service/http/allowed_hosts.h).
  std::vector<std::string> http_allowed_hosts;
  // The database and reports live here; default $XDG_DATA_HOME/debugplane or
  // ~/.local/share/debugplane.
  std::string data_dir;
  // --database: a postgresql:// or postgres:// URI (libpq's, see
  // persistence/postgres/postgres_storage.h) selects PostgreSQL; empty: SQLite in
  // data_dir. The data directory's lock and reports stay in data_dir.
  std::string database_url;
  // Where local output paths may point; empty: the data directory.
  std::vector<std::string> data_roots;
  // --allow-evaluator values: an absolute executable, or IMAGE=COMMAND ARGS.
  std::vector<std::string> allowed_evaluators;
  absl::Duration evaluator_time_limit = absl::Hours(24);
  std::string log_level = "info";
  std::string log_format = "text";
  // How long calls in flight get to finish at SIGTERM.
  absl::Duration shutdown_grace = absl::Seconds(10);
  // Validation (data roots, evaluators) is filled in by the server's start.
  core::TrainingJobManagerOptions manager;
  int rule_workers = 2;
  std::vector<std::string> notify_webhooks;
  rules_engine::SmtpSinkOptions smtp;  // Password read from smtp_password_file at start.
  std::string smtp_password_file;
  int action_attempts = 8;
  // Where s3:// output paths are read from, over the AWS environment
  // variables and files (objectstore/aws_config.h). Credentials come only
  // from the environment or the AWS files: a flag would show in `ps`.
  objectstore::S3ConfigOverrides s3;
  // --credentials: who may call (service/auth/credentials_file.h); empty:
  // authentication off, loopback addresses only.
  std::string credentials_file;
  // --insecure: serve a non-loopback address without credentials or TLS.
  bool insecure = false;
  // Evaluation leases (core/replication/lease_keeper.h): how long a replica's lease on a
  // job lasts without renewal, how long before that it stops counting it as
  // held (the replica's id is manager.replica_id), and how long a claim on a
  // rule action lasts (persistence/action_outbox.h).
  absl::Duration lease_duration = absl::Seconds(10);
  absl::Duration lease_safety_margin = absl::Seconds(2);
  absl::Duration action_claim_duration = absl::Minutes(2);
  // How long the change feed keeps a job's superseded changes
  // (core/replication/change_feed_pruner.h).
  absl::Duration change_feed_retention = absl::Hours(1);
};

// The outcome of parsing: a configuration to run, or an exit code (0 after
// --help, non-zero after an error) with what was printed to `out`/`err`.
struct ParsedServerFlags {
  std::optional<ServerConfig> config;
  int exit_code = 0;
};

// Parses the command line (argv[0] is the program). Messages (help, errors
// naming the flag) go to `out` and `err` as CLI11 writes them.
ParsedServerFlags ParseServerFlags(int argc, const char* const* argv, std::ostream& out,
                                   std::ostream& err);

// The default data directory (see ServerConfig::data_dir).
std::string DefaultDataDir();
// "HOSTNAME-PID": unique among the servers of one database unless set.
std::string DefaultReplicaId();

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_SERVER_FLAGS_H_
