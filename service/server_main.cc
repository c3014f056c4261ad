// debugplane-server: the training-job debug control plane.
//
//   debugplane-server [--listen HOST:PORT] [--data-dir DIR] [--data-root DIR]...
//                     [--tls-cert PEM --tls-key PEM] [--http-listen HOST:PORT]
//                     [--log-level LEVEL] [--config FILE]
//
// `--help` lists every flag (service/server_flags.h); a config file may give
// them too. SIGTERM or SIGINT shut down gracefully: the health service turns
// NOT_SERVING, queued changes are committed, calls in flight finish, watch
// streams end with UNAVAILABLE, the database closes. SIGHUP re-reads
// --credentials (a bad file keeps the old credentials).

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "absl/synchronization/mutex.h"
#include "service/logging.h"
#include "service/server_app.h"
#include "service/server_flags.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  // Debian's abseil ships with absl::Mutex deadlock detection on: a global
  // graph update on every lock acquisition, ours and gRPC's. Tests keep it
  // on; the server does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  debugplane::service::ParsedServerFlags flags =
      debugplane::service::ParseServerFlags(argc, argv, std::cout, std::cerr);
  if (!flags.config.has_value()) return flags.exit_code;
  debugplane::service::ConfigureLogging(flags.config->log_level, flags.config->log_format);

  // Block the shutdown signals in every thread (the server's threads start
  // below and inherit the mask); main waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto app = debugplane::service::ServerApp::Start(*std::move(flags.config));
  if (!app.ok()) {
    spdlog::critical("{}", std::string(app.status().message()));
    std::cerr << "debugplane-server: " << app.status().message() << "\n";
    return 1;
  }
  // Machine-readable lines for scripts and tests that pass port 0 (the HTTP
  // one first: readers may stop at the gRPC one).
  if ((*app)->http_port() != 0) {
    std::cout << "debugplane-server http listening on port " << (*app)->http_port() << std::endl;
  }
  std::cout << "debugplane-server listening on port " << (*app)->port() << std::endl;

  int signal_number = 0;
  for (;;) {
    sigwait(&signals, &signal_number);
    if (signal_number != SIGHUP) break;
    (void)(*app)->ReloadCredentials();  // Logs the outcome; the server keeps serving.
  }
  spdlog::info("signal {}: shutting down", signal_number);
  (*app)->Shutdown();
  spdlog::info("shut down cleanly");
  spdlog::shutdown();
  std::fflush(nullptr);
  // Everything durable is closed; skip gRPC's library teardown, which can
  // take seconds and would only delay supervisors restarting the service.
  std::_Exit(0);
}
