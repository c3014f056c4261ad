// Assembles the gRPC server: TrainingJobService, the standard health service
// and server reflection, on one listening address, with optional TLS.

#ifndef DEBUGPLANE_SERVICE_SERVER_H_
#define DEBUGPLANE_SERVICE_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/handlers/profiler_report_handler.h"
#include "core/handlers/training_agent_handler.h"
#include "core/manager/training_job_handler.h"
#include "grpcpp/server.h"
#include "metrics/request_metrics.h"
#include "rules_engine/query_handler/tensor_query_handler.h"
#include "service/auth/auth.h"
#include "service/stream_writer.h"

namespace debugplane::service {

struct GrpcServerOptions {
  // HOST:PORT; port 0 picks a free port (see GrpcServer::port()).
  std::string listen_address = "127.0.0.1:7070";
  // PEM files; both empty for plaintext, both set for TLS.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM CA bundle (needs TLS): clients may present a certificate, which must
  // then be signed by it (an unknown CA fails the handshake); its subject CN
  // authenticates the call if the credentials file maps it (`cn:NAME`).
  // Clients without a certificate still connect (bearer tokens).
  std::string tls_client_ca_file;
  // Who may call: null (or disabled) serves every call as an anonymous admin.
  std::shared_ptr<const auth::Authenticator> authenticator;
  // Largest request accepted; larger ones fail with RESOURCE_EXHAUSTED.
  int max_receive_message_bytes = 4 * 1024 * 1024;
  // How far a WatchTrainingJob client may fall behind (service/stream_writer.h).
  StreamLimits watch_limits;
  // The server pings each connection idle this long, and drops it when a
  // ping is not answered within as long again: a host cut off from the
  // network (no FIN, no RST) ends its agent's stream, so a multi-host job's
  // wait for the host (HostWaitLimits::reconnect) starts. Zero: no pings.
  absl::Duration keepalive = absl::Seconds(20);
  // Where every call is counted by method and code; null: nowhere. Must
  // outlive the server.
  metrics::RequestMetrics* request_metrics = nullptr;
};

class TrainingJobServiceImpl;
class TrainingAgentServiceImpl;
class ProfilerReportServiceImpl;
class TensorQueryServiceImpl;

// A running server. Thread-safe.
class GrpcServer {
 public:
  // Binds and starts serving `handler` (TrainingJobService) and, if given,
  // `agents` (TrainingAgentService), `reports` (ProfilerReportService) and
  // `tensors` (TensorQueryService).
  // Returns INVALID_ARGUMENT if only one TLS file is given or a client CA
  // without them, NOT_FOUND if a TLS
  // file cannot be read, UNAVAILABLE if the address cannot be bound (in use,
  // bad host), each naming the file or address.
  // REQUIRES: the handlers outlive the server.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(
      const GrpcServerOptions& options, core::TrainingJobHandler* handler,
      core::TrainingAgentHandler* agents = nullptr, core::ProfilerReportHandler* reports = nullptr,
      rules_engine::TensorQueryHandler* tensors = nullptr);

  // Shuts down (grace period zero) if still running.
  ~GrpcServer();

  // The bound port.
  int port() const { return port_; }

  // Marks the health service NOT_SERVING, stops accepting calls, lets calls in
  // flight finish for up to `grace`, then cancels the rest. Idempotent.
  void Shutdown(absl::Duration grace);
  // The gRPC health service's answer for the server ("" service): SERVING
  // or NOT_SERVING (e.g. while its database cannot be reached).
  void SetServing(bool serving);

  // Blocks until the server has shut down.
  void Wait();

 private:
  GrpcServer() = default;
  // Kept alive for the services, which hold a raw pointer to it.
  std::shared_ptr<const auth::Authenticator> authenticator_;
  std::unique_ptr<TrainingJobServiceImpl> service_;
  std::unique_ptr<TrainingAgentServiceImpl> agent_service_;
  std::unique_ptr<ProfilerReportServiceImpl> report_service_;
  std::unique_ptr<TensorQueryServiceImpl> tensor_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_SERVER_H_
