// An HTTP/1.1 server on libmicrohttpd for the SageMaker protocol (and, later,
// the dashboard and GET /metrics): routes a request, once its body is
// complete, to a handler that answers whenever it is ready, from any thread.
//
// Threading contract:
//   - libmicrohttpd's threads (a pool of `threads`, each with its own epoll
//     loop) receive requests and call handlers. A handler must not block: it
//     starts its work and returns; the connection stays suspended (no thread
//     is held) until the request's HttpResponder answers.
//   - HttpResponder::Respond may be called from any thread (typically the
//     core's completion threads), exactly once; it only queues the reply and
//     wakes libmicrohttpd, so it never blocks either.
//   - Every reply carries `x-amzn-RequestId` (the request's random UUID).
//   - A handler may instead start a stream (HttpResponder::StartStream, for
//     server-sent events): the reply's headers go out at once and its body
//     (chunked) is whatever the HttpStream is given, written from any thread
//     without blocking. Between writes the connection is suspended: no
//     thread is held per stream.
//
// Before any route runs, from the request's headers alone (the body unread):
// a Host the server is not reached by gets 421 (allowed_hosts.h), an address
// out of authentication tries 429 (client_rate_limiter.h), an unknown path
// 404 or 405, a declared body over the route's limit 413, and one beyond the
// server's budget for bodies being received 503.
//
// Adding a dashboard or metrics: register more routes (exact paths or path
// prefixes, per method).

#ifndef DEBUGPLANE_SERVICE_HTTP_HTTP_SERVER_H_
#define DEBUGPLANE_SERVICE_HTTP_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace debugplane::service::http {

class ClientRateLimiter;

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// A request as received, with its complete body.
struct HttpRequest {
  std::string method;   // "GET", "POST", ...
  std::string path;     // As received (percent-encoded), without the query.
  std::string query;    // As received, without '?'; empty if none.
  HttpHeaders headers;  // In arrival order, names as sent.
  std::string body;
  std::string request_id;  // The UUID that the reply's x-amzn-RequestId carries.
  std::string peer;        // "ADDRESS:PORT" of the client, for logs.

  // The first header named `name` (case-insensitive), or "" if absent.
  absl::string_view Header(absl::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;  // Content-Type among them; x-amzn-RequestId is added.
  std::string body;
  // When set, the body sent instead of `body`: bytes shared with a cache
  // (immutable), handed to libmicrohttpd without a copy and kept alive
  // until it has sent them.
  std::shared_ptr<const std::string> shared_body;
  // The request presented a credential that was refused (a wrong key or
  // secret, a bad signature; see MarkCredentialRefused in
  // client_rate_limiter.h): charged to the client's address in
  // HttpServerOptions::auth_failures. Not sent.
  bool failed_authentication = false;

  // The body sent: *shared_body if set, else body.
  absl::string_view BodyBytes() const {
    return shared_body != nullptr ? absl::string_view(*shared_body) : absl::string_view(body);
  }
};

// The body of a streamed reply (see HttpResponder::StartStream), sent as it
// is written. Thread-safe: every method may be called from any thread and
// none blocks (a write only queues its bytes and wakes libmicrohttpd).
// Destroying it closes the stream (as Close).
class HttpStream {
 public:
  virtual ~HttpStream() = default;

  // Queues `chunk` to be sent after what was written before. Returns false,
  // and sends nothing, once the stream is closed: by Close, because the
  // client went away, because the server shut down, or because the bytes
  // queued and not yet sent would exceed the server's
  // max_stream_queue_bytes (a client that does not read is cut off: the
  // stream is closed and its connection dropped, rather than buffered
  // without bound).
  virtual bool Write(std::string chunk) = 0;

  // Ends the reply once what was written is sent (the last chunk of the
  // chunked body). Later writes return false. Idempotent.
  virtual void Close() = 0;

  // True once writes are refused (see Write). libmicrohttpd learns that a
  // client went away only when it sends to it: a stream that nothing is
  // written to does not notice a disconnected client.
  virtual bool closed() const = 0;

  // Calls `callback` once, when the stream's connection is done (the end
  // sent, the client gone, the server stopped), on a libmicrohttpd thread,
  // or at once on this thread if it is already done. It must not block and
  // must not destroy the stream. Replaces an earlier callback.
  virtual void SetOnClosed(std::function<void()> callback) = 0;
};

// Answers one request. Destroying it without Respond or StartStream answers
// 500, so a request is never left hanging.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  // Sends `response`. Callable from any thread; never blocks. A second call
  // is ignored, as is a call after the client went away or the server
  // stopped.
  virtual void Respond(HttpResponse response) = 0;

  // Answers with `status` and `headers` (x-amzn-RequestId is added) and a
  // body of unknown length written through the returned stream (chunked
  // transfer encoding). Instead of Respond, at most once; callable from any
  // thread, never blocks. A stream started after the client went away or
  // the server stopped is closed from the start. The default (responders
  // that cannot stream) answers 500 and returns null.
  virtual std::unique_ptr<HttpStream> StartStream(int status, HttpHeaders headers);
};

// Serves one request. Runs on a libmicrohttpd thread; must not block (see
// the threading contract above).
using HttpHandler =
    std::function<void(HttpRequest request, std::unique_ptr<HttpResponder> responder)>;

struct HttpRoute {
  std::string method;  // Exact, e.g. "POST".
  std::string path;    // Exact path, or a prefix if it ends with '/' and `prefix` is set.
  bool prefix = false;
  HttpHandler handler;
  // Largest request body of this route, below the server's max_body_bytes
  // (0: that limit). Checked before the body is read (Content-Length) and
  // while it arrives: a request over it gets 413 and never reaches the
  // handler. Routes that are called before authentication keep this small.
  size_t max_body_bytes = 0;
};

struct HttpServerOptions {
  // HOST:PORT (HOST a name, an IPv4 address or [IPv6]); port 0 picks a free
  // port (see HttpServer::port()).
  std::string listen_address;
  // PEM files, the same as gRPC's: both empty for plain HTTP, both set for HTTPS.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Threads that run connections (each with its own epoll loop).
  int threads = 2;
  // Largest request body; a larger one gets 413 with a message.
  size_t max_body_bytes = 4 * 1024 * 1024;
  // Bytes of request bodies being received at once, over all connections
  // (every body is received before anyone is authenticated, so this bounds
  // what unauthenticated clients can make the server hold). A request that
  // would go beyond gets 503 with Retry-After. A body is counted from its
  // Content-Length (or as it arrives) until its handler returns.
  size_t max_buffered_body_bytes = 64 * 1024 * 1024;
  // A connection that has not sent a complete request's headers for this
  // long (a new one, or one kept alive after a reply) is closed, so idle
  // connections cannot hold the listener's slots.
  absl::Duration request_header_timeout = absl::Seconds(10);
  // Once a request's headers are in: a connection idle this long (a slow
  // body) is closed.
  absl::Duration connection_timeout = absl::Seconds(60);
  // Simultaneous connections; more are refused at accept. Lowered, with a
  // warning, to leave 256 descriptors of RLIMIT_NOFILE to the rest of the
  // server.
  int max_connections = 1024;
  // Simultaneous connections from one client address: well below
  // max_connections, so that one client cannot take every slot.
  int max_connections_per_address = 128;
  // Host headers answered (see allowed_hosts.h): besides loopback names
  // and the listen address, these names (--http-allowed-host). Any other
  // Host gets 421 before any route runs.
  std::vector<std::string> allowed_hosts;
  // Failed authentications per client address (null: not limited). An
  // address with no try left gets 429 with Retry-After before its request
  // is read; replies marked failed_authentication charge it.
  std::shared_ptr<ClientRateLimiter> auth_failures;
  // Bytes a stream may hold written but not yet sent; a write beyond this
  // closes the stream (see HttpStream::Write).
  size_t max_stream_queue_bytes = 1024 * 1024;
};

// A running server. Thread-safe.
class HttpServer {
 public:
  // Binds and starts serving `routes` (first match wins; unmatched requests
  // get 404, a matched path with another method 405). Returns
  // INVALID_ARGUMENT for a bad address or only one TLS file,
  // FAILED_PRECONDITION if TLS is asked of a libmicrohttpd built without
  // GnuTLS, NOT_FOUND for an unreadable TLS file, UNAVAILABLE if the address
  // cannot be bound; each names the address or file.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options,
                                                           std::vector<HttpRoute> routes);

  // Shuts down (grace zero) if still running.
  ~HttpServer();

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port.
  int port() const;
  bool tls() const;

  // The most request-body bytes held at once since the start (see
  // HttpServerOptions::max_buffered_body_bytes), for tests and metrics.
  size_t peak_buffered_body_bytes() const;

  // Stops accepting connections (one that arrives now is closed unanswered),
  // closes every open stream (each ends after what was written to it), waits
  // up to `grace` for the requests being handled to be answered and sent,
  // then closes every connection. Blocks until libmicrohttpd's threads are
  // gone. Idempotent.
  void Shutdown(absl::Duration grace);

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_HTTP_SERVER_H_
