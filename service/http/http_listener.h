// The HTTP server's socket-level helpers: binding the listen address,
// fitting the connection limit to the process's file limit, naming a
// connection's peer and reading the TLS files. Internal to service/http
// (http_server.cc and http_exchange.cc). Thread-safe: none keeps state.

#ifndef DEBUGPLANE_SERVICE_HTTP_HTTP_LISTENER_H_
#define DEBUGPLANE_SERVICE_HTTP_HTTP_LISTENER_H_

#include <microhttpd.h>
#include <sys/socket.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace debugplane::service::http {

// HOST:PORT (HOST a name, an IPv4 address or [IPv6]; port 0 picks a free
// one) -> a bound, listening socket (SOCK_CLOEXEC, SO_REUSEADDR). Returns
// INVALID_ARGUMENT for an address that is not HOST:PORT or does not
// resolve, UNAVAILABLE if no address can be bound; each names the address
// as --http-listen.
absl::StatusOr<int> Listen(const std::string& address);

// The port the socket `fd` is bound to, or 0 if it cannot be read.
int BoundPort(int fd);

// `wanted` connections (at least 1), or fewer (at least 16, with a
// warning) if the process may not open that many files and still keep 256
// for the rest of the server: accepting up to the file limit would leave
// gRPC, the database and training output without descriptors.
int FittedConnectionLimit(int wanted);

// `duration` in whole seconds, at least 1: libmicrohttpd's timeouts.
unsigned int TimeoutSeconds(absl::Duration duration);

// The whole content of `path`, or NOT_FOUND naming `flag` and the path.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, absl::string_view flag);

// The client address of `connection`, or null if libmicrohttpd has none.
const sockaddr* AddressOf(MHD_Connection* connection);

// "ADDRESS:PORT" ("[ADDRESS]:PORT" for IPv6) of the client of
// `connection`, for logs; "unknown" if libmicrohttpd has no address.
std::string PeerOf(MHD_Connection* connection);

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_HTTP_LISTENER_H_
