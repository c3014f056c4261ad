// The agent's connection to TrainingAgentService: the ConnectAgent stream
// that brings the job's configuration versions and stop orders (kept open,
// reconnecting with backoff, until the job has ended), and the status
// reports (ReportTrainingStatus, retried while the server is unreachable).
//
// After a lost connection, retries go through a new channel: a channel
// keeps failing calls with its last error ("Connection refused") until its
// own reconnection, seconds after the server is back (16 s measured after a
// kill -9 and a restart on the same port; 0.2 s on a new channel).

#ifndef DEBUGPLANE_CLIENT_AGENT_SERVER_CONNECTION_H_
#define DEBUGPLANE_CLIENT_AGENT_SERVER_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "client/common/connection.h"
#include "debugplane/v1/training_agent.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "objectstore/directory_uploader.h"

namespace debugplane::client {

// One ReportTrainingStatus call's content.
struct StatusReport {
  v1::ReportTrainingStatusRequest::Event event =
      v1::ReportTrainingStatusRequest::EVENT_UNSPECIFIED;
  std::optional<int64_t> step;  // CurrentStep.
  // The FailureReason of EVENT_FAILED, the StatusMessage of EVENT_STOPPED.
  std::string message;
  int64_t applied_config_version = 0;  // Sent with EVENT_CONFIG_APPLIED.
  // The upload backlog, when the job's output is uploaded.
  std::optional<objectstore::DirectoryUploader::Backlog> upload_backlog;
};

// The agent's training host in the job (client/agent/host_identity.h):
// sent with the stream and every report.
struct HostIdentity {
  std::string host;   // The host name (ConnectAgentRequest.Host).
  std::string agent;  // "<machine>:<pid>" (ConnectAgentRequest.Agent).
};

// Why a ConnectAgent stream ended without the job's end.
struct StreamFailure {
  std::string error;  // As a person reads it.
  // Whether the connection gives up: the server refused the stream (not
  // UNAVAILABLE, DEADLINE_EXCEEDED or CANCELLED), or security failures
  // ended it before any configuration arrived.
  bool final = false;
  bool job_not_found = false;  // The server said NOT_FOUND (final).
};

// What the connection tells the agent. Called on the connection's thread,
// never with the connection's lock held.
class ConnectionListener {
 public:
  virtual ~ConnectionListener() = default;
  // Applies a configuration directive. Returns false if the agent refuses
  // the job: the connection then ends.
  virtual bool OnDirective(const v1::ConnectAgentResponse& directive) = 0;
  // Whether a configuration was applied (the training may run): from then
  // on, security failures are logged and retried rather than giving up.
  virtual bool Configured() = 0;
  // The stream ended without the job's end (see StreamFailure).
  virtual void OnStreamFailure(const StreamFailure& failure) = 0;
};

// Thread-safe.
class ServerConnection {
 public:
  // `clock` and `log` must outlive this object. `security_failures_at_start`:
  // how many connection failures in a row caused by the connection's
  // security settings end the stream before a configuration arrived.
  ServerConnection(ConnectionOptions options, std::string job, HostIdentity identity,
                   std::shared_ptr<grpc::Channel> channel, base::Clock& clock, std::ostream& log,
                   int security_failures_at_start);
  // Stops the stream (see Stop).
  ~ServerConnection();
  ServerConnection(const ServerConnection&) = delete;
  ServerConnection& operator=(const ServerConnection&) = delete;

  // Keeps a ConnectAgent stream for the job open on a thread of its own,
  // reconnecting with backoff, until the job has ended, `listener` refused
  // it, a StreamFailure was final, or Stop. `listener` must outlive Stop.
  // Called once.
  void StartStream(ConnectionListener& listener);

  // Cancels the stream and waits for its thread. Idempotent.
  void Stop();

  // Calls ReportTrainingStatus, retrying while the server is unreachable,
  // for up to `patience`. Returns the job's status after the report, or
  // the server's error (as an absl::Status of the same code).
  absl::StatusOr<v1::TrainingJobStatus::Value> Report(const StatusReport& report,
                                                      absl::Duration patience);

 private:
  struct Reconnection;
  // How one ConnectAgent stream ended: whether it delivered a directive (it
  // then worked, whatever ended it), and whether the listener refused one.
  struct StreamEnd {
    bool delivered = false;
    bool refused = false;
  };

  // The stream's thread: connects, reads, reconnects after a backoff.
  void StreamLoop(ConnectionListener& listener);
  // Hands each directive of one stream to `listener`.
  StreamEnd ReadDirectives(grpc::ClientReader<v1::ConnectAgentResponse>& reader,
                           grpc::ClientContext& context, ConnectionListener& listener,
                           Reconnection& reconnection);
  // Tells `listener` why a stream failed (`security`: DiagnoseSecurity's
  // finding) and logs it; returns whether to reconnect.
  bool HandleFailure(const grpc::Status& status, const std::optional<std::string>& security,
                     ConnectionListener& listener, Reconnection& reconnection);
  // A stub on a new channel to the server, or null if none can be made.
  std::unique_ptr<v1::TrainingAgentService::Stub> FreshStub() const;
  // Whether the stream's failure `status` is due to the connection's
  // security settings: the person's explanation, else nullopt. Probes the
  // server (blocking I/O).
  std::optional<std::string> DiagnoseSecurity(const grpc::Status& status) const;
  // Waits until `clock_` reads `until` or Stop; returns false on Stop.
  bool Backoff(absl::Time until);

  const ConnectionOptions options_;
  const std::string job_;
  const HostIdentity identity_;
  std::unique_ptr<v1::TrainingAgentService::Stub> stub_;
  base::Clock& clock_;
  std::ostream& log_;
  const int security_failures_at_start_;

  absl::Mutex mu_;
  absl::CondVar stopped_;  // Signalled by Stop.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<grpc::ClientContext> stream_context_ ABSL_GUARDED_BY(mu_);
  std::thread stream_thread_;  // Started and joined by the owner's thread.
};

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_SERVER_CONNECTION_H_
