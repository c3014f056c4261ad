// HttpServer's glue to libmicrohttpd: its callbacks admit a request from
// its headers, receive its body within the budgets, dispatch it to its
// route and queue the answer. The parts live beside it: the exchange and
// its responder (http_exchange.h), streamed replies (http_stream.h) and the
// socket-level helpers (http_listener.h).

#include "service/http/http_server.h"

#include <microhttpd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "service/http/allowed_hosts.h"
#include "service/http/client_rate_limiter.h"
#include "service/http/http_exchange.h"
#include "service/http/http_listener.h"
#include "service/http/http_stream.h"
#include "service/http/request_id.h"
#include "spdlog/spdlog.h"

namespace debugplane::service::http {

absl::string_view HttpRequest::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return value;
  }
  return {};
}

std::unique_ptr<HttpStream> HttpResponder::StartStream(int, HttpHeaders) {
  Respond(TextResponse(500, "this reply cannot be streamed"));
  return nullptr;
}

namespace {

// Bytes of a refused request's body read and dropped before its
// connection is closed instead (a client that keeps sending).
constexpr size_t kMaxDiscardedBytes = size_t{1024} * 1024;

MHD_Result CollectHeader(void* cls, MHD_ValueKind, const char* key, const char* value) {
  static_cast<HttpHeaders*>(cls)->emplace_back(key, value == nullptr ? "" : value);
  return MHD_YES;
}

// A libmicrohttpd response over `response`'s body without copying it: the
// bytes move to the heap (or, for a shared body, a reference is taken) and
// libmicrohttpd frees them once it has sent them.
MHD_Response* NewMhdResponse(HttpResponse& response) {
  auto* owner = response.shared_body != nullptr
                    ? new std::shared_ptr<const std::string>(std::move(response.shared_body))
                    : new std::shared_ptr<const std::string>(
                          std::make_shared<const std::string>(std::move(response.body)));
  MHD_Response* reply = MHD_create_response_from_buffer_with_free_callback_cls(
      (*owner)->size(), const_cast<char*>((*owner)->data()),
      [](void* cls) { delete static_cast<std::shared_ptr<const std::string>*>(cls); }, owner);
  if (reply == nullptr) delete owner;
  return reply;
}

void LogFromMhd(void*, const char* format, va_list args) {
  char line[512];
  vsnprintf(line, sizeof(line), format, args);
  std::string text(line);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  spdlog::debug("http: {}", text);
}

}  // namespace

class HttpServer::Impl {
 public:
  Impl(HttpServerOptions options, std::vector<HttpRoute> routes)
      : options_(std::move(options)),
        routes_(std::move(routes)),
        allowed_hosts_(options_.listen_address, options_.allowed_hosts) {}

  ~Impl() { Shutdown(absl::ZeroDuration()); }

  absl::Status Start();
  void Shutdown(absl::Duration grace);
  int port() const { return port_; }
  bool tls() const { return !options_.tls_cert_file.empty(); }
  size_t peak_buffered_body_bytes() const {
    absl::MutexLock lock(&budget_mu_);
    return peak_buffered_bytes_;
  }

 private:
  static MHD_Result OnConnect(void* cls, const struct sockaddr* address, socklen_t length);
  static void* OnRequestStart(void* cls, const char* uri, MHD_Connection* connection);
  static MHD_Result OnAccess(void* cls, MHD_Connection* connection, const char* url,
                             const char* method, const char* version, const char* upload_data,
                             size_t* upload_data_size, void** con_cls);
  static void OnCompleted(void* cls, MHD_Connection* connection, void** con_cls,
                          MHD_RequestTerminationCode code);

  std::optional<HttpResponse> Admit(MHD_Connection* connection, Exchange& exchange);
  MHD_Result Receive(Exchange& exchange, const char* upload_data, size_t* upload_data_size);
  bool Reserve(Exchange& exchange, size_t bytes);
  void Release(Exchange& exchange);
  void Dispatch(MHD_Connection* connection, const std::shared_ptr<Exchange>& exchange);
  const HttpRoute* Route(const HttpRequest& request, bool* path_known) const;
  MHD_Result Queue(MHD_Connection* connection, const HttpRequest& request, HttpResponse response);
  MHD_Result QueueStream(MHD_Connection* connection, const HttpRequest& request,
                         const StreamStart& start, const std::shared_ptr<StreamState>& stream);

  const HttpServerOptions options_;
  const std::vector<HttpRoute> routes_;
  const AllowedHosts allowed_hosts_;
  std::string tls_cert_;
  std::string tls_key_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
  bool shut_down_ = false;
  // Cleared when Shutdown begins: connections accepted afterwards are closed
  // at once (see OnConnect).
  std::atomic<bool> accepting_{true};
  const std::shared_ptr<StreamRegistry> streams_ = std::make_shared<StreamRegistry>();

  // Requests that libmicrohttpd has started and not yet finished (the reply
  // sent or the connection closed): Shutdown waits for them.
  absl::Mutex live_mu_;
  int live_requests_ ABSL_GUARDED_BY(live_mu_) = 0;

  // Request-body bytes held (see HttpServerOptions::max_buffered_body_bytes).
  mutable absl::Mutex budget_mu_;
  size_t buffered_bytes_ ABSL_GUARDED_BY(budget_mu_) = 0;
  size_t peak_buffered_bytes_ ABSL_GUARDED_BY(budget_mu_) = 0;
};

absl::Status HttpServer::Impl::Start() {
  if (options_.tls_cert_file.empty() != options_.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS for HTTP needs both --tls-cert and --tls-key");
  }
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
  if (tls()) {
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
      return absl::FailedPreconditionError(
          "this libmicrohttpd was built without TLS (GnuTLS): serve HTTP without --tls-cert, or "
          "install a libmicrohttpd with HTTPS support");
    }
    auto cert = ReadWholeFile(options_.tls_cert_file, "--tls-cert");
    if (!cert.ok()) return cert.status();
    auto key = ReadWholeFile(options_.tls_key_file, "--tls-key");
    if (!key.ok()) return key.status();
    tls_cert_ = *std::move(cert);
    tls_key_ = *std::move(key);
    flags |= MHD_USE_TLS;
  }
  absl::StatusOr<int> socket = Listen(options_.listen_address);
  if (!socket.ok()) return socket.status();
  port_ = BoundPort(*socket);

  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_LISTEN_SOCKET, *socket, nullptr},
      // Until a request's headers are in; Admit then gives the connection
      // connection_timeout, and OnCompleted this again for the next request.
      {MHD_OPTION_CONNECTION_TIMEOUT, TimeoutSeconds(options_.request_header_timeout), nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, FittedConnectionLimit(options_.max_connections), nullptr},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, std::max(1, options_.max_connections_per_address),
       nullptr},
      {MHD_OPTION_URI_LOG_CALLBACK, reinterpret_cast<intptr_t>(&OnRequestStart), this},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&OnCompleted), this},
      {MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&LogFromMhd), nullptr},
  };
  // One thread: libmicrohttpd's single polling thread (it ignores a pool of one).
  if (options_.threads > 1) {
    items.push_back({MHD_OPTION_THREAD_POOL_SIZE, options_.threads, nullptr});
  }
  if (tls()) {
    items.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, tls_cert_.data()});
    items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, tls_key_.data()});
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  daemon_ = MHD_start_daemon(flags | MHD_USE_ERROR_LOG, 0, &OnConnect, this, &OnAccess, this,
                             MHD_OPTION_ARRAY, items.data(), MHD_OPTION_END);
  if (daemon_ == nullptr) {
    close(*socket);
    return absl::UnavailableError(absl::StrCat(
        "--http-listen ", options_.listen_address,
        ": the HTTP server did not start (a TLS certificate or key libmicrohttpd cannot use?)"));
  }
  return absl::OkStatus();
}

void HttpServer::Impl::Shutdown(absl::Duration grace) {
  if (shut_down_ || daemon_ == nullptr) return;
  shut_down_ = true;
  // Stop accepting; connections already open finish their requests. Not
  // MHD_quiesce_daemon: with a thread pool on epoll, libmicrohttpd 0.9.75
  // races each worker for the listening socket's epoll entry and aborts the
  // process when the worker wins ("Failed to remove listen FD from epoll
  // set"). A connection that arrives now is closed as soon as it is accepted;
  // MHD_stop_daemon closes the listening socket.
  accepting_.store(false);
  // Streams never finish by themselves: end them (each after what was
  // written), which also resumes their suspended connections, as
  // MHD_stop_daemon requires.
  streams_->CloseAll();
  {
    absl::MutexLock lock(&live_mu_);
    auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(live_mu_) { return live_requests_ == 0; };
    live_mu_.AwaitWithTimeout(absl::Condition(&idle), grace);
  }
  MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

MHD_Result HttpServer::Impl::OnConnect(void* cls, const struct sockaddr*, socklen_t) {
  return static_cast<Impl*>(cls)->accepting_.load() ? MHD_YES : MHD_NO;
}

void* HttpServer::Impl::OnRequestStart(void* cls, const char* uri, MHD_Connection* connection) {
  auto* self = static_cast<Impl*>(cls);
  {
    absl::MutexLock lock(&self->live_mu_);
    ++self->live_requests_;
  }
  auto exchange = std::make_shared<Exchange>();
  const absl::string_view target(uri == nullptr ? "" : uri);
  const size_t question = target.find('?');
  exchange->request.path = std::string(target.substr(0, question));
  if (question != absl::string_view::npos) {
    exchange->request.query = std::string(target.substr(question + 1));
  }
  exchange->request.request_id = NewRequestId();
  {
    absl::MutexLock lock(&exchange->mu);
    exchange->connection = connection;
  }
  return new std::shared_ptr<Exchange>(std::move(exchange));
}

MHD_Result HttpServer::Impl::OnAccess(void* cls, MHD_Connection* connection, const char* url,
                                      const char* method, const char* version,
                                      const char* upload_data, size_t* upload_data_size,
                                      void** con_cls) {
  auto* self = static_cast<Impl*>(cls);
  auto* box = static_cast<std::shared_ptr<Exchange>*>(*con_cls);
  if (box == nullptr) return MHD_NO;  // Not started through OnRequestStart.
  std::shared_ptr<Exchange>& exchange = *box;
  if (exchange->request.method.empty()) {
    exchange->request.method = method;
    MHD_get_connection_values(connection, MHD_HEADER_KIND, &CollectHeader,
                              &exchange->request.headers);
    exchange->refusal = self->Admit(connection, *exchange);
    // Refused: answered before the body is read (no 100 Continue); the
    // connection then closes. Otherwise the first call carries only the
    // headers; the body (if any) follows, then a last call with nothing.
    if (exchange->refusal.has_value()) {
      return self->Queue(connection, exchange->request, *exchange->refusal);
    }
    return MHD_YES;
  }
  if (*upload_data_size > 0) return self->Receive(*exchange, upload_data, upload_data_size);
  if (exchange->refusal.has_value()) {
    return self->Queue(connection, exchange->request, *exchange->refusal);
  }
  if (!exchange->dispatched) {
    exchange->dispatched = true;
    self->Dispatch(connection, exchange);
  }
  absl::MutexLock lock(&exchange->mu);
  if (exchange->stream_start.has_value()) {
    const StreamStart start = *std::move(exchange->stream_start);
    exchange->stream_start.reset();
    return self->QueueStream(connection, exchange->request, start, exchange->stream);
  }
  if (!exchange->response.has_value()) {
    // Resumed spuriously or not answered yet: stay suspended.
    if (!exchange->suspended) {
      exchange->suspended = true;
      MHD_suspend_connection(connection);
    }
    return MHD_YES;
  }
  HttpResponse response = *std::move(exchange->response);
  exchange->response.reset();
  return self->Queue(connection, exchange->request, std::move(response));
}

std::optional<HttpResponse> HttpServer::Impl::Admit(MHD_Connection* connection,
                                                    Exchange& exchange) {
  HttpRequest& request = exchange.request;
  // Before anything else, so that no route runs for a rebinding page.
  if (absl::Status host = allowed_hosts_.Check(request.Header("Host")); !host.ok()) {
    spdlog::debug("http {} {} {}: {}", PeerOf(connection), request.method,
                  request.path.substr(0, 200), std::string(host.message()));
    return TextResponse(421, host.message());
  }
  exchange.client = ClientKeyOf(AddressOf(connection));
  if (options_.auth_failures != nullptr) {
    if (std::optional<absl::Duration> wait = options_.auth_failures->RetryAfter(exchange.client)) {
      return TooManyFailures(exchange.client, *wait);
    }
  }
  bool path_known = false;
  exchange.route = Route(request, &path_known);
  if (exchange.route == nullptr) {
    return path_known
               ? TextResponse(405, absl::StrCat("method ", request.method, " is not allowed on ",
                                                request.path))
               : TextResponse(404, absl::StrCat("no such path: ", request.path.substr(0, 200)));
  }
  exchange.body_limit = options_.max_body_bytes;
  if (exchange.route->max_body_bytes > 0) {
    exchange.body_limit = std::min(exchange.body_limit, exchange.route->max_body_bytes);
  }
  uint64_t declared = 0;
  if (absl::SimpleAtoi(request.Header("Content-Length"), &declared) && declared > 0) {
    if (declared > exchange.body_limit) return TooLarge(request, exchange.body_limit);
    if (!Reserve(exchange, declared)) return Busy(options_.max_buffered_body_bytes);
    request.body.reserve(declared);
  }
  // Headers are in: the rest of the request may take the longer timeout.
  MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT,
                            TimeoutSeconds(options_.connection_timeout));
  return std::nullopt;
}

MHD_Result HttpServer::Impl::Receive(Exchange& exchange, const char* upload_data,
                                     size_t* upload_data_size) {
  const size_t size = *upload_data_size;
  *upload_data_size = 0;
  std::string& body = exchange.request.body;
  if (!exchange.refusal.has_value()) {
    if (body.size() + size > exchange.body_limit) {
      exchange.refusal = TooLarge(exchange.request, exchange.body_limit);
    } else if (body.size() + size > exchange.reserved &&
               !Reserve(exchange, body.size() + size - exchange.reserved)) {
      exchange.refusal = Busy(options_.max_buffered_body_bytes);
    }
    if (exchange.refusal.has_value()) {
      exchange.discarded = body.size();
      std::string().swap(body);
      Release(exchange);
    }
  }
  if (exchange.refusal.has_value()) {
    exchange.discarded += size;
    // A client that keeps sending after its refusal: drop the connection.
    return exchange.discarded > exchange.body_limit + kMaxDiscardedBytes ? MHD_NO : MHD_YES;
  }
  body.append(upload_data, size);
  return MHD_YES;
}

bool HttpServer::Impl::Reserve(Exchange& exchange, size_t bytes) {
  absl::MutexLock lock(&budget_mu_);
  if (buffered_bytes_ + bytes > options_.max_buffered_body_bytes) return false;
  buffered_bytes_ += bytes;
  peak_buffered_bytes_ = std::max(peak_buffered_bytes_, buffered_bytes_);
  exchange.reserved += bytes;
  return true;
}

void HttpServer::Impl::Release(Exchange& exchange) {
  if (exchange.reserved == 0) return;
  absl::MutexLock lock(&budget_mu_);
  buffered_bytes_ -= exchange.reserved;
  exchange.reserved = 0;
}

void HttpServer::Impl::Dispatch(MHD_Connection* connection,
                                const std::shared_ptr<Exchange>& exchange) {
  exchange->request.peer = PeerOf(connection);
  auto responder = std::make_unique<ExchangeResponder>(
      exchange, streams_, options_.max_stream_queue_bytes, options_.auth_failures);
  // The handler gets the request, moved rather than copied (headers and
  // body are its bulk); the exchange keeps its own method (non-empty: the
  // request has started) and request id, which this thread reads when it
  // queues the reply, so nothing is shared mutably.
  HttpRequest request = std::move(exchange->request);
  exchange->request = HttpRequest{.method = request.method, .request_id = request.request_id};
  exchange->route->handler(std::move(request), std::move(responder));
  // Handlers authenticate and parse before they return; what they keep
  // beyond is their own (and authenticated).
  Release(*exchange);
}

const HttpRoute* HttpServer::Impl::Route(const HttpRequest& request, bool* path_known) const {
  for (const HttpRoute& route : routes_) {
    const bool path_matches =
        route.prefix ? absl::StartsWith(request.path, route.path) : request.path == route.path;
    if (!path_matches) continue;
    *path_known = true;
    if (route.method == request.method) return &route;
  }
  return nullptr;
}

MHD_Result HttpServer::Impl::Queue(MHD_Connection* connection, const HttpRequest& request,
                                   HttpResponse response) {
  MHD_Response* reply = NewMhdResponse(response);
  if (reply == nullptr) return MHD_NO;
  for (const auto& [name, value] : response.headers) {
    MHD_add_response_header(reply, name.c_str(), value.c_str());
  }
  MHD_add_response_header(reply, "x-amzn-RequestId", request.request_id.c_str());
  const MHD_Result queued = MHD_queue_response(connection, response.status, reply);
  MHD_destroy_response(reply);
  return queued;
}

MHD_Result HttpServer::Impl::QueueStream(MHD_Connection* connection, const HttpRequest& request,
                                         const StreamStart& start,
                                         const std::shared_ptr<StreamState>& stream) {
  auto* box = new std::shared_ptr<StreamState>(stream);
  MHD_Response* reply = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, size_t{16} * 1024,
                                                          &ReadStream, box, &FreeStreamBox);
  if (reply == nullptr) {
    delete box;
    return MHD_NO;
  }
  for (const auto& [name, value] : start.headers) {
    MHD_add_response_header(reply, name.c_str(), value.c_str());
  }
  MHD_add_response_header(reply, "x-amzn-RequestId", request.request_id.c_str());
  {
    absl::MutexLock lock(&stream->mu);
    stream->connection = connection;
  }
  const MHD_Result queued = MHD_queue_response(connection, start.status, reply);
  MHD_destroy_response(reply);  // Frees `box` once the connection is done with it.
  return queued;
}

void HttpServer::Impl::OnCompleted(void* cls, MHD_Connection* connection, void** con_cls,
                                   MHD_RequestTerminationCode code) {
  auto* self = static_cast<Impl*>(cls);
  auto* box = static_cast<std::shared_ptr<Exchange>*>(*con_cls);
  if (box == nullptr) return;
  self->Release(**box);
  if (code == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
    // Kept alive: waiting for the next request's headers.
    MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT,
                              TimeoutSeconds(self->options_.request_header_timeout));
  }
  std::shared_ptr<StreamState> stream;
  {
    absl::MutexLock lock(&(*box)->mu);
    (*box)->connection = nullptr;
    stream = (*box)->stream;
  }
  if (stream != nullptr) stream->Finish();
  delete box;
  *con_cls = nullptr;
  absl::MutexLock lock(&self->live_mu_);
  --self->live_requests_;
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                              std::vector<HttpRoute> routes) {
  auto impl = std::make_unique<Impl>(std::move(options), std::move(routes));
  if (absl::Status started = impl->Start(); !started.ok()) return started;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->port(); }
bool HttpServer::tls() const { return impl_->tls(); }
size_t HttpServer::peak_buffered_body_bytes() const { return impl_->peak_buffered_body_bytes(); }
void HttpServer::Shutdown(absl::Duration grace) { impl_->Shutdown(grace); }

}  // namespace debugplane::service::http