#include "client/common/connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <sstream>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/unique_fd.h"
#include "client/common/read_input.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"

namespace debugplane::client {
namespace {

// Reads a PEM file named by `flag`; INVALID_ARGUMENT naming both if it
// cannot be read or lacks `marker`. (gRPC only logs an unusable PEM and
// then fails every call with a message that does not name the file.)
absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& file,
                                    const std::string& marker, const std::string& what) {
  std::istringstream no_stdin;
  absl::StatusOr<std::string> pem = ReadInput(file, no_stdin);
  if (!pem.ok()) {
    // ReadInput's errors already name the file; say what it was for.
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", pem.status().message()));
  }
  if (pem->find(marker) == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", file, ": no PEM ", what, " in it"));
  }
  return pem;
}

// Adds `authorization: Bearer TOKEN` to every call's initial metadata. An
// interceptor rather than call credentials: gRPC refuses to send call
// credentials over a plaintext channel, and a loopback plaintext server
// with --credentials is a supported set-up.
class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *header_);
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;  // Owned by the factory, which the channel keeps.
};

class BearerTokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(absl::string_view token)
      : header_(absl::StrCat("Bearer ", token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerTokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

// HOST and PORT of a gRPC target; false for targets that are not TCP
// addresses (unix:, xds:, several addresses).
bool SplitTarget(absl::string_view target, std::string& host, std::string& port) {
  if (!absl::ConsumePrefix(&target, "dns:///")) {
    if (!absl::ConsumePrefix(&target, "dns:") && !absl::ConsumePrefix(&target, "ipv4:") &&
        !absl::ConsumePrefix(&target, "ipv6:") && absl::StrContains(target, "://")) {
      return false;
    }
  }
  if (absl::StartsWith(target, "unix:") || absl::StrContains(target, ",")) return false;
  absl::string_view host_part;
  if (absl::ConsumePrefix(&target, "[")) {
    const size_t close = target.find(']');
    if (close == absl::string_view::npos) return false;
    host_part = target.substr(0, close);
    target.remove_prefix(close + 1);
    if (!absl::ConsumePrefix(&target, ":")) return false;
  } else {
    const size_t colon = target.rfind(':');
    if (colon == absl::string_view::npos) return false;
    host_part = target.substr(0, colon);
    target.remove_prefix(colon + 1);
  }
  int number = 0;
  if (host_part.empty() || !absl::SimpleAtoi(target, &number) || number <= 0 || number > 65535) {
    return false;
  }
  host = std::string(host_part);
  port = std::string(target);
  return true;
}

// A TCP connection to `host`:`port` within `timeout`; -1 if none.
int ConnectWithin(const std::string& host, const std::string& port, absl::Duration timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &addresses) != 0) return -1;
  int connected = -1;
  for (addrinfo* address = addresses; address != nullptr && connected < 0;
       address = address->ai_next) {
    const int fd = socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                          address->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, address->ai_addr, address->ai_addrlen) == 0) {
      connected = fd;
      break;
    }
    if (errno == EINPROGRESS) {
      pollfd waiting{fd, POLLOUT, 0};
      int error = 0;
      socklen_t length = sizeof(error);
      if (poll(&waiting, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) == 1 &&
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0) {
        connected = fd;
        break;
      }
    }
    close(fd);
  }
  freeaddrinfo(addresses);
  return connected;
}

// A TLS 1.2 ClientHello (RFC 5246 7.4.1.2) offering common ECDHE suites.
// Any TLS server answers it with a TLS record: a ServerHello, or an alert
// if it dislikes the offer. Either tells that it speaks TLS.
std::vector<uint8_t> ClientHello() {
  const std::vector<uint8_t> suites = {0xc0, 0x2f, 0xc0, 0x30, 0xc0, 0x2b, 0xc0, 0x2c, 0x00, 0x9c};
  const std::vector<uint8_t> extensions = {
      0x00, 0x0a, 0x00, 0x06, 0x00, 0x04, 0x00, 0x1d, 0x00, 0x17,  // supported_groups
      0x00, 0x0b, 0x00, 0x02, 0x01, 0x00,                          // ec_point_formats
      0x00, 0x0d, 0x00, 0x0a, 0x00, 0x08, 0x04, 0x03, 0x08, 0x04,  // signature_algorithms
      0x04, 0x01, 0x05, 0x01};
  std::vector<uint8_t> body = {0x03, 0x03};  // client_version TLS 1.2
  for (int i = 0; i < 32; ++i) body.push_back(static_cast<uint8_t>(i * 7 + 1));  // random
  body.push_back(0x00);                                                          // session_id
  body.push_back(0x00);
  body.push_back(static_cast<uint8_t>(suites.size()));
  body.insert(body.end(), suites.begin(), suites.end());
  body.push_back(0x01);  // compression_methods: null
  body.push_back(0x00);
  body.push_back(0x00);
  body.push_back(static_cast<uint8_t>(extensions.size()));
  body.insert(body.end(), extensions.begin(), extensions.end());
  std::vector<uint8_t> handshake = {0x01, 0x00, static_cast<uint8_t>(body.size() >> 8),
                                    static_cast<uint8_t>(body.size())};
  handshake.insert(handshake.end(), body.begin(), body.end());
  std::vector<uint8_t> record = {0x16, 0x03, 0x01, static_cast<uint8_t>(handshake.size() >> 8),
                                 static_cast<uint8_t>(handshake.size())};
  record.insert(record.end(), handshake.begin(), handshake.end());
  return record;
}

// The host part of the server address, for certificate-name messages.
std::string HostOf(const std::string& server) {
  std::string host, port;
  return SplitTarget(server, host, port) ? host : server;
}

std::string DiagnoseTlsChannel(const ConnectionOptions& options, const std::string& message,
                               absl::FunctionRef<ServerTransport()> probe) {
  const std::string handshake = absl::StrCat("TLS handshake with ", options.server, " failed: ");
  if (absl::StrContains(message, "certificate verify failed") ||
      absl::StrContains(message, "CERTIFICATE_VERIFY_FAILED")) {
    const std::string signer =
        options.ca_cert.empty()
            ? "a certificate authority this system trusts (no --ca-cert was given)"
            : absl::StrCat("the CA certificate in --ca-cert ", options.ca_cert);
    return absl::StrCat(
        handshake, "certificate verify failed: the server's certificate is not signed by ", signer,
        "; give --ca-cert with the PEM certificate of the CA that signed it (for a "
        "self-signed server certificate: that certificate)");
  }
  if (absl::StrContains(message, "Peer name") &&
      absl::StrContains(message, "not in peer certificate")) {
    return absl::StrCat(handshake, "the server's certificate does not name ",
                        HostOf(options.server),
                        "; connect with --server NAME:PORT using a name in its subjectAltName, "
                        "or reissue the certificate for this name");
  }
  if (absl::StrContains(message, "wrong version number") ||
      absl::StrContains(message, "WRONG_VERSION_NUMBER") ||
      absl::StrContains(message, "packet length too long")) {
    if (probe() == ServerTransport::kPlaintextHttp2) {
      return absl::StrCat(handshake, "the server speaks plaintext; drop --tls",
                          options.ca_cert.empty() ? "" : " and --ca-cert",
                          " (or start debugplane-server with --tls-cert and --tls-key)");
    }
    return absl::StrCat(handshake, "the server does not answer in TLS (", message,
                        "); check --server, or drop --tls if it serves plaintext");
  }
  // TLS 1.3 ends the client's side of the handshake before the server has
  // checked the client's certificate: a refusal then only closes the
  // connection. A server that speaks TLS and does that wants another one.
  if ((absl::StrContains(message, "Socket closed") ||
       absl::StrContains(message, "Connection reset")) &&
      probe() == ServerTransport::kTls) {
    return absl::StrCat(
        handshake, "the server closed the connection during the handshake",
        options.client_cert.empty()
            ? "; if it requires a client certificate, give --client-cert and --client-key"
            : absl::StrCat("; check that --client-cert ", options.client_cert,
                           " is signed by a CA the server trusts and has not expired"));
  }
  if (absl::StrContains(message, "andshake failed")) {
    return absl::StrCat(handshake, message,
                        options.client_cert.empty()
                            ? "; if the server requires a client certificate, give "
                              "--client-cert and --client-key"
                            : "");
  }
  return "";
}

}  // namespace

bool UsesTls(const ConnectionOptions& options) {
  return options.tls || !options.ca_cert.empty() || !options.client_cert.empty() ||
         !options.client_key.empty();
}

void AddTlsFlags(CLI::App& app, ConnectionOptions& options) {
  const CLI::Validator existing_file = CLI::Validator(CLI::ExistingFile).description("");
  app.add_flag("--tls", options.tls, "Use TLS (default: plaintext)");
  app.add_option("--ca-cert", options.ca_cert,
                 "PEM root certificates to verify the server with; implies --tls")
      ->type_name("FILE")
      ->check(existing_file);
  CLI::Option* cert =
      app.add_option("--client-cert", options.client_cert,
                     "PEM certificate chain to present to a server that asks for one (mutual "
                     "TLS); needs --client-key, implies --tls")
          ->type_name("FILE")
          ->check(existing_file);
  CLI::Option* key =
      app.add_option("--client-key", options.client_key,
                     "PEM private key of --client-cert; needs --client-cert, implies --tls")
          ->type_name("FILE")
          ->check(existing_file);
  cert->needs(key);
  key->needs(cert);
}

void AddTokenFlags(CLI::App& app, ConnectionOptions& options) {
  CLI::Option* token =
      app.add_option("--token", options.token,
                     "Access key sent to the server on every call (default: DEBUGPLANE_TOKEN)")
          ->type_name("ACCESS_KEY_ID:SECRET")
          ->envname("DEBUGPLANE_TOKEN");
  CLI::Option* file =
      app.add_option("--token-file", options.token_file,
                     "File whose first line is ACCESS_KEY_ID:SECRET (keeps the secret out of "
                     "the process list)")
          ->type_name("FILE")
          ->check(CLI::Validator(CLI::ExistingFile).description(""));
  token->excludes(file);
  file->excludes(token);
}

absl::StatusOr<std::string> ResolveToken(const ConnectionOptions& options) {
  std::string token = options.token;
  std::string source = "--token (or DEBUGPLANE_TOKEN)";
  if (!options.token_file.empty()) {
    source = absl::StrCat("--token-file ", options.token_file);
    std::istringstream no_stdin;
    absl::StatusOr<std::string> content = ReadInput(options.token_file, no_stdin);
    if (!content.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--token-file ", content.status().message()));
    }
    token.clear();
    for (absl::string_view line : absl::StrSplit(*content, '\n')) {
      line = absl::StripAsciiWhitespace(line);
      if (!line.empty()) {
        token = std::string(line);
        break;
      }
    }
    if (token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": the file holds no token"));
    }
  }
  if (token.empty()) return token;
  const size_t colon = token.find(':');
  const bool printable = std::all_of(token.begin(), token.end(), [](char c) {
    return absl::ascii_isgraph(static_cast<unsigned char>(c));
  });
  if (colon == std::string::npos || colon == 0 || colon + 1 == token.size() || !printable) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": the token must be ACCESS_KEY_ID:SECRET_ACCESS_KEY (printable, no blanks)"));
  }
  return token;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ConnectionOptions& options) {
  absl::StatusOr<std::string> token = ResolveToken(options);
  if (!token.ok()) return token.status();
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (UsesTls(options)) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_cert.empty()) {
      absl::StatusOr<std::string> pem =
          ReadPem("--ca-cert", options.ca_cert, "-----BEGIN CERTIFICATE-----", "certificate");
      if (!pem.ok()) return pem.status();
      ssl.pem_root_certs = *std::move(pem);
    }
    if (options.client_cert.empty() != options.client_key.empty()) {
      return absl::InvalidArgumentError(
          "--client-cert and --client-key go together: give both or neither");
    }
    if (!options.client_cert.empty()) {
      absl::StatusOr<std::string> chain = ReadPem("--client-cert", options.client_cert,
                                                  "-----BEGIN CERTIFICATE-----", "certificate");
      if (!chain.ok()) return chain.status();
      absl::StatusOr<std::string> key =
          ReadPem("--client-key", options.client_key, "PRIVATE KEY-----", "private key");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(chain);
      ssl.pem_private_key = *std::move(key);
    }
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments arguments;
  arguments.SetUserAgentPrefix(options.user_agent);
  // gRPC's own reconnect backoff grows to 120 s while a server is down; a
  // restarted server (or another replica behind the same address) must be
  // found within seconds, so it grows to 5 s at most, like the agent's.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  if (token->empty()) return grpc::CreateCustomChannel(options.server, credentials, arguments);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<BearerTokenInterceptorFactory>(*token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      options.server, credentials, arguments, std::move(interceptors));
}

ServerTransport ProbeServerTransport(const std::string& target, absl::Duration timeout) {
  std::string host, port;
  if (!SplitTarget(target, host, port)) return ServerTransport::kUnknown;
  const base::UniqueFd fd(ConnectWithin(host, port, timeout));
  if (fd.get() < 0) return ServerTransport::kUnreachable;
  const std::vector<uint8_t> hello = ClientHello();
  if (send(fd.get(), hello.data(), hello.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(hello.size())) {
    return ServerTransport::kOther;
  }
  // A TLS record header is 5 bytes, an HTTP/2 frame header 9: read up to 9.
  std::array<uint8_t, 9> answer{};
  size_t received = 0;
  const absl::Time deadline = absl::Now() + timeout;
  while (received < answer.size()) {
    const absl::Duration left = deadline - absl::Now();
    pollfd readable{fd.get(), POLLIN, 0};
    if (left <= absl::ZeroDuration() ||
        poll(&readable, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) != 1) {
      break;
    }
    const ssize_t n = recv(fd.get(), answer.data() + received, answer.size() - received, 0);
    if (n <= 0) break;
    received += static_cast<size_t>(n);
    // Handshake (22) or alert (21) record of any TLS/SSL 3.x version.
    if (received >= 2 && (answer[0] == 0x16 || answer[0] == 0x15) && answer[1] == 0x03) {
      return ServerTransport::kTls;
    }
  }
  // An HTTP/2 server starts with its SETTINGS frame (type 4, stream 0).
  if (received == answer.size() && answer[3] == 0x04 && answer[5] == 0 && answer[6] == 0 &&
      answer[7] == 0 && answer[8] == 0) {
    return ServerTransport::kPlaintextHttp2;
  }
  return ServerTransport::kOther;
}

std::optional<std::string> DiagnoseSecurityFailure(const ConnectionOptions& options,
                                                   const grpc::Status& status,
                                                   absl::FunctionRef<ServerTransport()> probe) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return std::nullopt;
  const std::string& message = status.error_message();
  if (absl::StrContains(message, "Connection refused") ||
      absl::StrContains(message, "DNS resolution failed")) {
    return std::nullopt;
  }
  if (UsesTls(options)) {
    std::string diagnosis = DiagnoseTlsChannel(options, message, probe);
    if (diagnosis.empty()) return std::nullopt;
    return diagnosis;
  }
  // A plaintext client learns nothing from gRPC: the TLS server just closes
  // the connection ("Socket closed"), as a server going down would.
  if (probe() != ServerTransport::kTls) return std::nullopt;
  return absl::StrCat("the server at ", options.server,
                      " speaks TLS and this connection is plaintext; give --tls (and --ca-cert "
                      "FILE with the CA certificate unless a system CA signed the server's)");
}

}  // namespace debugplane::client
