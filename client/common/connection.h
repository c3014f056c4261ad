// How the clients (the `debugplane` CLI and `debugplane-agent`) reach the
// server: the connection flags they share (--tls, --ca-cert, --client-cert,
// --client-key; --token, DEBUGPLANE_TOKEN, --token-file), the gRPC channel
// built from them, and the diagnosis of a
// connection that fails because of its security settings.
//
// gRPC reports a TLS/plaintext mismatch as UNAVAILABLE, exactly like a
// server that is down: a plaintext client talking to a TLS server only sees
// "Socket closed". A client that retries UNAVAILABLE (the agent) would then
// retry forever. DiagnoseSecurityFailure tells the two apart, from gRPC's
// message where it is specific (handshake errors) and otherwise by probing
// the server with a TLS ClientHello (ProbeServerTransport).
//
// Thread-safety: every function here is thread-safe and keeps no state.

#ifndef DEBUGPLANE_CLIENT_COMMON_CONNECTION_H_
#define DEBUGPLANE_CLIENT_COMMON_CONNECTION_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace debugplane::client {

// Where and how to reach the server.
struct ConnectionOptions {
  std::string server = "127.0.0.1:7070";  // A gRPC target, e.g. HOST:PORT.
  double timeout_seconds = 30;            // Deadline of each unary call (CLI).
  bool tls = false;                       // Else an insecure channel (but see UsesTls).
  std::string ca_cert;                    // PEM roots for TLS; "" = system roots.
  // PEM certificate chain and private key presented to a server that asks
  // for a client certificate (mutual TLS); both or neither.
  std::string client_cert;
  std::string client_key;
  // ACCESS_KEY_ID:SECRET_ACCESS_KEY sent as `authorization: Bearer ...` on
  // every call (--token or DEBUGPLANE_TOKEN), or the file holding it
  // (--token-file); at most one. Both empty: no credentials sent.
  std::string token;
  std::string token_file;
  // Prefix of the user-agent header, so server logs tell clients apart.
  std::string user_agent = "debugplane-cli";
};

// True if the channel uses TLS: --tls, or any certificate flag (each of
// them implies --tls).
bool UsesTls(const ConnectionOptions& options);

// Adds --tls, --ca-cert FILE, --client-cert FILE and --client-key FILE to
// `app`, bound to `options` (which must outlive parsing). The files must
// exist (checked while parsing); --client-cert and --client-key need each
// other.
void AddTlsFlags(CLI::App& app, ConnectionOptions& options);

// Adds --token ACCESS_KEY_ID:SECRET (default: the DEBUGPLANE_TOKEN
// environment variable) and --token-file FILE (its first line is the token)
// to `app`, bound to `options`; they exclude each other.
void AddTokenFlags(CLI::App& app, ConnectionOptions& options);

// The token the options name: --token, else --token-file's first non-blank
// line (trimmed); "" if neither. INVALID_ARGUMENT naming the flag (and the
// file) if the file cannot be read or the token is not
// ACCESS_KEY_ID:SECRET_ACCESS_KEY. Never includes the token in an error.
absl::StatusOr<std::string> ResolveToken(const ConnectionOptions& options);

// A channel to `options.server`. Reads the certificate and token files now:
// errors are INVALID_ARGUMENT naming the flag and the file (unreadable, no
// PEM certificate or key in it, no token in it). With a token, every call on
// the channel carries `authorization: Bearer TOKEN`. Does not connect: the
// first call does.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ConnectionOptions& options);

// What answers at a server address, as far as TLS is concerned.
enum class ServerTransport {
  kTls,             // Answered a TLS ClientHello with a TLS record.
  kPlaintextHttp2,  // Answered with an HTTP/2 frame: gRPC without TLS.
  kOther,           // Accepted the connection, then said nothing TLS or HTTP/2.
  kUnreachable,     // The address does not resolve or refuses the connection.
  kUnknown,         // A target that cannot be probed (unix:, xds:, ...).
};

// Connects to `target` (HOST:PORT, [IPV6]:PORT, optionally with a dns:,
// dns:///, ipv4: or ipv6: scheme) over TCP, sends a TLS ClientHello and
// classifies the first bytes of the answer. Waits at most `timeout` for
// the connection and at most `timeout` for the answer. Blocking; never
// throws. The probe ends with a close: the server sees one aborted
// handshake.
ServerTransport ProbeServerTransport(const std::string& target, absl::Duration timeout);

// If the failed call's `status` is caused by the connection's security
// settings rather than by a server that is down, returns a message naming
// the server address, the cause and the flag that fixes it, e.g.
//   "TLS handshake with 127.0.0.1:7070 failed: the server speaks plaintext;
//    drop --tls (or start debugplane-server with --tls-cert and --tls-key)".
// Returns nullopt for anything else (the server is down, restarting, slow,
// or the call failed for another reason). `probe` is called (at most once)
// only for an UNAVAILABLE status of a plaintext channel that is not a
// refused connection, to learn whether the server speaks TLS.
std::optional<std::string> DiagnoseSecurityFailure(const ConnectionOptions& options,
                                                   const grpc::Status& status,
                                                   absl::FunctionRef<ServerTransport()> probe);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_COMMON_CONNECTION_H_
