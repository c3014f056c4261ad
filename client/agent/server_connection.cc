#include "client/agent/server_connection.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/agent/clock_wait.h"

namespace debugplane::client {
namespace {

using Stub = v1::TrainingAgentService::Stub;

constexpr absl::Duration kMaxBackoff = absl::Seconds(5);
constexpr absl::Duration kFirstStreamBackoff = absl::Milliseconds(50);
constexpr absl::Duration kFirstReportBackoff = absl::Milliseconds(100);
// The deadline of one ReportTrainingStatus call.
constexpr std::chrono::seconds kReportCallTimeout(10);
// How long a probe of the server's transport (TLS or not) may take.
constexpr absl::Duration kProbeTimeout = absl::Seconds(2);

// Codes that mean the server is away (or the agent cancelled), not that it
// refuses: the stream or the report is tried again.
bool ServerAway(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
}

v1::ConnectAgentRequest ConnectRequest(const std::string& job, const HostIdentity& identity) {
  v1::ConnectAgentRequest request;
  request.set_training_job_name(job);
  request.set_host(identity.host);
  request.set_agent(identity.agent);
  return request;
}

v1::ReportTrainingStatusRequest ReportRequest(const std::string& job, const HostIdentity& identity,
                                              const StatusReport& report) {
  using Event = v1::ReportTrainingStatusRequest;
  v1::ReportTrainingStatusRequest request;
  request.set_training_job_name(job);
  request.set_host(identity.host);
  request.set_event(report.event);
  if (report.step.has_value()) request.set_current_step(*report.step);
  if (report.event == Event::EVENT_CONFIG_APPLIED) {
    request.set_applied_config_version(report.applied_config_version);
  }
  if (report.event == Event::EVENT_STOPPED) {
    request.set_status_message(report.message);
  } else {
    request.set_failure_reason(report.message);
  }
  if (const auto& backlog = report.upload_backlog; backlog.has_value()) {
    v1::UploadBacklog* out = request.mutable_upload_backlog();
    out->set_pending_files(backlog->pending_files);
    out->set_pending_bytes(backlog->pending_bytes);
    out->set_uploaded_files(backlog->uploaded_files);
    out->set_uploaded_bytes(backlog->uploaded_bytes);
    out->set_last_error(std::string(backlog->last_error.message()));
  }
  return request;
}

}  // namespace

// What the stream loop carries from one connection attempt to the next.
struct ServerConnection::Reconnection {
  absl::Duration backoff = kFirstStreamBackoff;
  bool lost = false;                 // The last attempt failed.
  std::unique_ptr<Stub> fresh_stub;  // See FreshStub.
  int security_failures = 0;         // In a row.
  std::string security_problem;      // The last one logged.
};

ServerConnection::ServerConnection(ConnectionOptions options, std::string job,
                                   HostIdentity identity, std::shared_ptr<grpc::Channel> channel,
                                   base::Clock& clock, std::ostream& log,
                                   int security_failures_at_start)
    : options_(std::move(options)),
      job_(std::move(job)),
      identity_(std::move(identity)),
      stub_(v1::TrainingAgentService::NewStub(std::move(channel))),
      clock_(clock),
      log_(log),
      security_failures_at_start_(security_failures_at_start) {}

ServerConnection::~ServerConnection() { Stop(); }

void ServerConnection::StartStream(ConnectionListener& listener) {
  stream_thread_ = std::thread([this, &listener] { StreamLoop(listener); });
}

void ServerConnection::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    if (stream_context_ != nullptr) stream_context_->TryCancel();
    stopped_.SignalAll();
  }
  if (stream_thread_.joinable()) stream_thread_.join();
}

absl::StatusOr<v1::TrainingJobStatus::Value> ServerConnection::Report(const StatusReport& report,
                                                                      absl::Duration patience) {
  const v1::ReportTrainingStatusRequest request = ReportRequest(job_, identity_, report);
  const absl::Time deadline = clock_.Now() + patience;
  absl::Duration backoff = kFirstReportBackoff;
  std::unique_ptr<Stub> retry_stub;  // See FreshStub.
  while (true) {
    grpc::ClientContext context;
    // gRPC deadlines are on the system clock, whatever clock_ is.
    context.set_deadline(std::chrono::system_clock::now() + kReportCallTimeout);
    v1::ReportTrainingStatusResponse response;
    const grpc::Status status = (retry_stub != nullptr ? *retry_stub : *stub_)
                                    .ReportTrainingStatus(&context, request, &response);
    if (status.ok()) return response.training_job_status();
    if (!ServerAway(status.error_code()) || clock_.Now() + backoff > deadline) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
    if (auto fresh = FreshStub(); fresh != nullptr) retry_stub = std::move(fresh);
  }
}

void ServerConnection::StreamLoop(ConnectionListener& listener) {
  const v1::ConnectAgentRequest request = ConnectRequest(job_, identity_);
  Reconnection reconnection;
  while (true) {
    auto context = std::make_shared<grpc::ClientContext>();
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      stream_context_ = context;
    }
    // After a lost connection, each attempt on a new channel (FreshStub).
    if (reconnection.lost) {
      if (auto fresh = FreshStub(); fresh != nullptr) reconnection.fresh_stub = std::move(fresh);
    }
    Stub& stub = reconnection.fresh_stub != nullptr ? *reconnection.fresh_stub : *stub_;
    std::unique_ptr<grpc::ClientReader<v1::ConnectAgentResponse>> reader =
        stub.ConnectAgent(context.get(), request);
    const StreamEnd end = ReadDirectives(*reader, *context, listener, reconnection);
    const grpc::Status status = reader->Finish();
    // A connection that worked ended for another reason than its security.
    const std::optional<std::string> security =
        end.delivered ? std::nullopt : DiagnoseSecurity(status);
    {
      absl::MutexLock lock(&mu_);
      stream_context_ = nullptr;
      if (stop_) return;
    }
    // status.ok(): the job has ended; its last directive was applied.
    if (end.refused || status.ok()) return;
    if (!HandleFailure(status, security, listener, reconnection)) return;
    if (!Backoff(clock_.Now() + reconnection.backoff)) return;
    reconnection.backoff = std::min(reconnection.backoff * 2, kMaxBackoff);
  }
}

ServerConnection::StreamEnd ServerConnection::ReadDirectives(
    grpc::ClientReader<v1::ConnectAgentResponse>& reader, grpc::ClientContext& context,
    ConnectionListener& listener, Reconnection& reconnection) {
  StreamEnd end;
  v1::ConnectAgentResponse directive;
  while (reader.Read(&directive)) {
    end.delivered = true;
    if (reconnection.lost) {
      log_ << "debugplane-agent: reconnected to " << options_.server << "\n";
      reconnection.lost = false;
    }
    reconnection.backoff = kFirstStreamBackoff;
    reconnection.security_failures = 0;
    if (!listener.OnDirective(directive)) {
      context.TryCancel();  // Refused: the job cannot run under this agent.
      end.refused = true;
      break;
    }
  }
  return end;
}

bool ServerConnection::HandleFailure(const grpc::Status& status,
                                     const std::optional<std::string>& security,
                                     ConnectionListener& listener, Reconnection& reconnection) {
  if (status.error_code() == grpc::StatusCode::ALREADY_EXISTS) {
    // The host name is held by another agent: a real twin (the agent gives
    // up after --connect-timeout, saying who holds it), or this host's
    // previous agent, whose lost connection the server has not seen yet.
    if (!reconnection.lost) {
      log_ << "debugplane-agent: job '" << job_ << "': " << status.error_message()
           << "; trying again until the name is released\n";
      reconnection.lost = true;
    }
    listener.OnStreamFailure({.error = status.error_message()});
    return true;
  }
  if (!ServerAway(status.error_code()) && status.error_code() != grpc::StatusCode::CANCELLED) {
    StreamFailure failure{
        .error = absl::StrCat(status.error_message(), " (code ", status.error_code(), ")"),
        .final = true,
        .job_not_found = status.error_code() == grpc::StatusCode::NOT_FOUND};
    log_ << "debugplane-agent: job '" << job_ << "': " << failure.error << "\n";
    listener.OnStreamFailure(failure);
    return false;
  }
  if (security.has_value()) {
    const bool configured = listener.Configured();
    if (!configured && ++reconnection.security_failures >= security_failures_at_start_) {
      listener.OnStreamFailure({.error = *security, .final = true});  // The agent says why.
      return false;
    }
    listener.OnStreamFailure({.error = *security});
    // Before the start, the agent says it once it gives up.
    if (configured && *security != reconnection.security_problem) {
      log_ << "debugplane-agent: " << *security << "; reconnecting, the training goes on\n";
      reconnection.security_problem = *security;
    }
    reconnection.lost = true;
  } else {
    reconnection.security_failures = 0;
    listener.OnStreamFailure({.error = status.error_message()});
  }
  if (!reconnection.lost) {
    log_ << "debugplane-agent: lost the connection to " << options_.server << " ("
         << status.error_message() << "); reconnecting, the training goes on\n";
    reconnection.lost = true;
  }
  return true;
}

std::unique_ptr<Stub> ServerConnection::FreshStub() const {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeChannel(options_);
  if (!channel.ok()) return nullptr;
  return v1::TrainingAgentService::NewStub(*std::move(channel));
}

std::optional<std::string> ServerConnection::DiagnoseSecurity(const grpc::Status& status) const {
  return DiagnoseSecurityFailure(options_, status, [this] {
    return ProbeServerTransport(options_.server, kProbeTimeout);
  });
}

bool ServerConnection::Backoff(absl::Time until) {
  absl::MutexLock lock(&mu_);
  while (!stop_ && !WaitOnClock(stopped_, mu_, clock_, until)) {
  }
  return !stop_;
}

}  // namespace debugplane::client
