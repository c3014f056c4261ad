// The connection code the agent shares with the CLI (client/common/connection.h):
// the probe and the diagnosis of connections that fail because of their
// security settings, against real in-process gRPC servers (plaintext, TLS,
// mutual TLS) with certificates made by the openssl command; the channel's
// certificate-file errors; the shared flags.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/cli/cli.h"
#include "client/common/connection.h"
#include "debugplane/v1/training_agent.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/server_credentials.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::client {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Optional;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A self-signed certificate and its key, <dir>/<name>.pem and
// <dir>/<name>-key.pem, for `subject_alt_name` (e.g. "IP:127.0.0.1").
bool MakeCertificate(const fs::path& dir, const std::string& name,
                     const std::string& subject_alt_name) {
  const std::string command =
      absl::StrCat("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=", name,
                   " -addext subjectAltName=", subject_alt_name, " -keyout ",
                   (dir / (name + "-key.pem")).string(), " -out ", (dir / (name + ".pem")).string(),
                   " > /dev/null 2>&1");
  return std::system(command.c_str()) == 0;
}

// An in-process gRPC server on a free loopback port; every method answers
// UNIMPLEMENTED, which proves a call got through the connection.
class TestServer {
 public:
  explicit TestServer(std::shared_ptr<grpc::ServerCredentials> credentials) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", std::move(credentials), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~TestServer() { server_->Shutdown(std::chrono::system_clock::now()); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  bool started() const { return server_ != nullptr && port_ > 0; }

 private:
  v1::TrainingAgentService::Service service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

std::shared_ptr<grpc::ServerCredentials> TlsCredentials(
    const fs::path& dir, const std::string& name, const std::string& client_ca = "",
    grpc_ssl_client_certificate_request_type request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE) {
  grpc::SslServerCredentialsOptions options(request);
  options.pem_root_certs = client_ca;
  options.pem_key_cert_pairs.push_back(
      {ReadAll(dir / (name + "-key.pem")), ReadAll(dir / (name + ".pem"))});
  return grpc::SslServerCredentials(options);
}

// One ReportTrainingStatus call over a channel built from `options`.
grpc::Status Call(const ConnectionOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeChannel(options);
  EXPECT_TRUE(channel.ok()) << channel.status();
  if (!channel.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "no channel");
  auto stub = v1::TrainingAgentService::NewStub(*channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ReportTrainingStatusRequest request;
  v1::ReportTrainingStatusResponse response;
  return stub->ReportTrainingStatus(&context, request, &response);
}

std::optional<std::string> Diagnose(const ConnectionOptions& options, const grpc::Status& status) {
  return DiagnoseSecurityFailure(
      options, status, [&] { return ProbeServerTransport(options.server, absl::Seconds(2)); });
}

class ConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeCertificate(dir_.path(), "server", "IP:127.0.0.1,DNS:localhost"))
        << "openssl failed";
  }
  std::string Pem(const std::string& name) const { return (dir_.path() / name).string(); }

  ScopedTempDir dir_;
};

TEST_F(ConnectionTest, TheProbeTellsTlsFromPlaintextFromNothing) {
  TestServer plaintext(grpc::InsecureServerCredentials());
  TestServer tls(TlsCredentials(dir_.path(), "server"));
  ASSERT_TRUE(plaintext.started() && tls.started());
  EXPECT_EQ(ProbeServerTransport(plaintext.address(), absl::Seconds(2)),
            ServerTransport::kPlaintextHttp2);
  EXPECT_EQ(ProbeServerTransport(tls.address(), absl::Seconds(2)), ServerTransport::kTls);
  EXPECT_EQ(ProbeServerTransport("dns:///" + tls.address(), absl::Seconds(2)),
            ServerTransport::kTls);
  EXPECT_EQ(ProbeServerTransport("unix:/tmp/socket", absl::Seconds(1)), ServerTransport::kUnknown);

  // A listener that accepts and closes at once says nothing.
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t length = sizeof(address);
  getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string silent = absl::StrCat("127.0.0.1:", ntohs(address.sin_port));
  std::thread closer([listener] {
    const int connection = accept(listener, nullptr, nullptr);
    if (connection >= 0) close(connection);
  });
  EXPECT_EQ(ProbeServerTransport(silent, absl::Seconds(2)), ServerTransport::kOther);
  closer.join();
  close(listener);
  // Nothing listens there any more.
  EXPECT_EQ(ProbeServerTransport(silent, absl::Seconds(2)), ServerTransport::kUnreachable);
}

TEST_F(ConnectionTest, APlaintextClientOfATlsServerIsToldToUseTls) {
  TestServer tls(TlsCredentials(dir_.path(), "server"));
  ConnectionOptions options;
  options.server = tls.address();
  const grpc::Status status = Call(options);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_THAT(Diagnose(options, status),
              Optional(AllOf(HasSubstr("the server at " + tls.address() + " speaks TLS"),
                             HasSubstr("give --tls"), HasSubstr("--ca-cert"))));
  // With the CA, the call gets through.
  options.ca_cert = Pem("server.pem");
  EXPECT_EQ(Call(options).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(ConnectionTest, ATlsClientOfAPlaintextServerIsToldToDropTls) {
  TestServer plaintext(grpc::InsecureServerCredentials());
  ConnectionOptions options;
  options.server = plaintext.address();
  options.tls = true;
  const grpc::Status status = Call(options);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_THAT(Diagnose(options, status),
              Optional(HasSubstr("TLS handshake with " + plaintext.address() +
                                 " failed: the server speaks plaintext; drop --tls")));
}

TEST_F(ConnectionTest, ACertificateThatDoesNotVerifyOrNameTheServerIsSaidSo) {
  TestServer tls(TlsCredentials(dir_.path(), "server"));
  ConnectionOptions options;
  options.server = tls.address();
  options.tls = true;  // The system's CAs did not sign a self-signed certificate.
  grpc::Status status = Call(options);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_THAT(Diagnose(options, status),
              Optional(AllOf(HasSubstr("TLS handshake with " + tls.address() +
                                       " failed: certificate verify failed"),
                             HasSubstr("no --ca-cert was given"), HasSubstr("give --ca-cert"))));

  // Another CA given.
  ASSERT_TRUE(MakeCertificate(dir_.path(), "other", "DNS:other.example"));
  options.ca_cert = Pem("other.pem");
  status = Call(options);
  EXPECT_THAT(
      Diagnose(options, status),
      Optional(HasSubstr("not signed by the CA certificate in --ca-cert " + Pem("other.pem"))));

  // Signed as it should be, but for another name.
  TestServer misnamed(TlsCredentials(dir_.path(), "other"));
  options.server = misnamed.address();
  status = Call(options);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_THAT(Diagnose(options, status),
              Optional(HasSubstr("the server's certificate does not name 127.0.0.1")));
}

TEST_F(ConnectionTest, AClientCertificateIsPresentedToAServerThatRequiresOne) {
  ASSERT_TRUE(MakeCertificate(dir_.path(), "client", "DNS:agent.example"));
  TestServer mutual(TlsCredentials(dir_.path(), "server", ReadAll(dir_.path() / "client.pem"),
                                   GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY));
  ConnectionOptions options;
  options.server = mutual.address();
  options.ca_cert = Pem("server.pem");
  options.client_cert = Pem("client.pem");
  options.client_key = Pem("client-key.pem");
  EXPECT_EQ(Call(options).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  // Without it the server refuses the connection.
  options.client_cert.clear();
  options.client_key.clear();
  const grpc::Status refused = Call(options);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  // TLS 1.3: the client's side of the handshake is over when the server
  // refuses, so gRPC only says "Socket closed"; the probe finds TLS there.
  EXPECT_THAT(Diagnose(options, refused),
              Optional(AllOf(HasSubstr("TLS handshake with " + mutual.address() + " failed"),
                             HasSubstr("give --client-cert and --client-key"))));
  // A certificate the server does not trust is refused alike.
  ASSERT_TRUE(MakeCertificate(dir_.path(), "stranger", "DNS:stranger.example"));
  options.client_cert = Pem("stranger.pem");
  options.client_key = Pem("stranger-key.pem");
  const grpc::Status untrusted = Call(options);
  EXPECT_EQ(untrusted.error_code(), grpc::StatusCode::UNAVAILABLE) << untrusted.error_message();
  EXPECT_THAT(Diagnose(options, untrusted),
              Optional(HasSubstr("check that --client-cert " + Pem("stranger.pem"))));
}

TEST(DiagnoseSecurityFailureTest, AServerThatIsDownIsNotASecurityProblem) {
  ConnectionOptions options;
  options.server = "127.0.0.1:7070";
  int probes = 0;
  auto probe = [&] {
    ++probes;
    return ServerTransport::kUnreachable;
  };
  const grpc::Status refused(grpc::StatusCode::UNAVAILABLE,
                             "failed to connect to all addresses; last error: UNKNOWN: "
                             "ipv4:127.0.0.1:7070: Failed to connect to remote host: Connection "
                             "refused");
  EXPECT_EQ(DiagnoseSecurityFailure(options, refused, probe), std::nullopt);
  options.tls = true;
  EXPECT_EQ(DiagnoseSecurityFailure(options, refused, probe), std::nullopt);
  EXPECT_EQ(probes, 0);
  // A connection that closed, where nothing answers any more (a server
  // going down): probed, not a security problem.
  options.tls = false;
  const grpc::Status closed(grpc::StatusCode::UNAVAILABLE, "ipv4:127.0.0.1:7070: Socket closed");
  EXPECT_EQ(DiagnoseSecurityFailure(options, closed, probe), std::nullopt);
  options.tls = true;
  EXPECT_EQ(DiagnoseSecurityFailure(options, closed, probe), std::nullopt);
  EXPECT_EQ(probes, 2);
  // Other codes are the server's answers.
  EXPECT_EQ(
      DiagnoseSecurityFailure(options, grpc::Status(grpc::StatusCode::NOT_FOUND, "no job"), probe),
      std::nullopt);
  EXPECT_EQ(probes, 2);
}

TEST(DiagnoseSecurityFailureTest, AHandshakeRefusedForAnotherReasonSuggestsAClientCertificate) {
  ConnectionOptions options;
  options.server = "10.0.0.1:7070";
  options.tls = true;
  const grpc::Status status(grpc::StatusCode::UNAVAILABLE,
                            "ipv4:10.0.0.1:7070: Ssl handshake failed: SSL_ERROR_SSL: "
                            "error:0A00045C:SSL routines::tlsv13 alert certificate required");
  EXPECT_THAT(DiagnoseSecurityFailure(options, status, [] { return ServerTransport::kTls; }),
              Optional(AllOf(HasSubstr("TLS handshake with 10.0.0.1:7070 failed: "),
                             HasSubstr("certificate required"), HasSubstr("--client-cert"))));
  // Not a plaintext server behind "wrong version number": something else.
  const grpc::Status wrong_version(grpc::StatusCode::UNAVAILABLE,
                                   "Ssl handshake failed: SSL_ERROR_SSL: error:0A00010B:SSL "
                                   "routines::wrong version number");
  EXPECT_THAT(
      DiagnoseSecurityFailure(options, wrong_version, [] { return ServerTransport::kOther; }),
      Optional(HasSubstr("the server does not answer in TLS")));
}

TEST_F(ConnectionTest, UnusableCertificateFilesAreNamed) {
  const std::string empty = (dir_.path() / "empty.pem").string();
  std::ofstream(empty) << "not a certificate\n";
  ConnectionOptions options;
  options.ca_cert = empty;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeChannel(options);
  EXPECT_EQ(channel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(channel.status().message(), "--ca-cert " + empty + ": no PEM certificate in it");

  options.ca_cert.clear();
  options.client_cert = Pem("server.pem");
  channel = MakeChannel(options);
  EXPECT_THAT(channel.status().message(), HasSubstr("--client-cert and --client-key go together"));
  options.client_key = empty;
  channel = MakeChannel(options);
  EXPECT_EQ(channel.status().message(), "--client-key " + empty + ": no PEM private key in it");
  options.client_key = (dir_.path() / "missing.pem").string();
  channel = MakeChannel(options);
  EXPECT_THAT(channel.status().message(),
              AllOf(HasSubstr("--client-key"), HasSubstr("missing.pem")));
  options.client_key = Pem("server-key.pem");
  EXPECT_TRUE(MakeChannel(options).ok());
  EXPECT_TRUE(UsesTls(options));
}

TEST_F(ConnectionTest, TheCliTakesTheSameFlags) {
  std::vector<const char*> argv = {"debugplane", "--client-cert", nullptr,     "describe", "x",
                                   "--server",   "127.0.0.1:1",   "--timeout", "1"};
  const std::string cert = Pem("server.pem");
  argv[2] = cert.c_str();
  std::ostringstream out, err;
  // --client-cert needs --client-key: a usage error, before any call.
  EXPECT_EQ(RunCli(static_cast<int>(argv.size()), argv.data(), out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("--client-key"));
}

}  // namespace
}  // namespace debugplane::client
