#include "service/server.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "service/grpc_request_metrics.h"
#include "service/profiler_report_service.h"
#include "service/tensor_query_service.h"
#include "service/training_agent_service.h"
#include "service/training_job_service.h"

// Linked in so that reflection serves grpc.health.v1's descriptors: clients
// then call grpc.health.v1.Health/Check with no proto file of their own.
#include "grpc/health/v1/health.pb.h"

namespace debugplane::service {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the ", what, " file ", path));
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const GrpcServerOptions& options) {
  if (options.tls_cert_file.empty() && options.tls_key_file.empty()) {
    if (!options.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--client-ca (client certificates) needs TLS: give --tls-cert and --tls-key too");
    }
    return grpc::InsecureServerCredentials();
  }
  if (options.tls_cert_file.empty() || options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both a certificate and a private key (--tls-cert and --tls-key)");
  }
  absl::StatusOr<std::string> cert = ReadFile(options.tls_cert_file, "TLS certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile(options.tls_key_file, "TLS private key");
  if (!key.ok()) return key.status();
  // Requested and, if sent, verified: callers without a certificate still
  // connect and authenticate with a bearer token.
  grpc::SslServerCredentialsOptions ssl(options.tls_client_ca_file.empty()
                                            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                            : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!options.tls_client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(options.tls_client_ca_file, "client CA");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
  }
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    const GrpcServerOptions& options, core::TrainingJobHandler* handler,
    core::TrainingAgentHandler* agents, core::ProfilerReportHandler* reports,
    rules_engine::TensorQueryHandler* tensors) {
  // Force the health descriptors into the generated pool for reflection.
  grpc::health::v1::HealthCheckRequest::descriptor();
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials(options);
  if (!credentials.ok()) return credentials.status();

  std::unique_ptr<GrpcServer> server(new GrpcServer());
  server->authenticator_ = options.authenticator;
  server->service_ = std::make_unique<TrainingJobServiceImpl>(handler, options.watch_limits,
                                                              server->authenticator_.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, *credentials, &server->port_);
  builder.RegisterService(server->service_.get());
  if (agents != nullptr) {
    server->agent_service_ =
        std::make_unique<TrainingAgentServiceImpl>(agents, server->authenticator_.get());
    builder.RegisterService(server->agent_service_.get());
  }
  if (reports != nullptr) {
    server->report_service_ =
        std::make_unique<ProfilerReportServiceImpl>(reports, server->authenticator_.get());
    builder.RegisterService(server->report_service_.get());
  }
  if (tensors != nullptr) {
    server->tensor_service_ =
        std::make_unique<TensorQueryServiceImpl>(tensors, server->authenticator_.get());
    builder.RegisterService(server->tensor_service_.get());
  }
  if (options.request_metrics != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(NewRequestCountingFactory(options.request_metrics));
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  // gRPC sets SO_REUSEPORT by default: a second server on the same port
  // would then silently take a share of the connections. Binding must fail.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (options.keepalive > absl::ZeroDuration()) {
    const int keepalive_ms = static_cast<int>(absl::ToInt64Milliseconds(options.keepalive));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, keepalive_ms);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_ms);
    // An agent's stream carries nothing for minutes: ping it all the same.
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen_address,
                     " (address in use, or not a local HOST:PORT?); pick another with --listen"));
  }
  server->server_->GetHealthCheckService()->SetServingStatus(true);
  return server;
}

GrpcServer::~GrpcServer() { Shutdown(absl::ZeroDuration()); }

void GrpcServer::Shutdown(absl::Duration grace) {
  if (server_ == nullptr) return;
  server_->GetHealthCheckService()->SetServingStatus(false);
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
}

void GrpcServer::SetServing(bool serving) {
  if (server_ != nullptr) server_->GetHealthCheckService()->SetServingStatus(serving);
}

void GrpcServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace debugplane::service
