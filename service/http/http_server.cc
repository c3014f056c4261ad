#include "service/http/http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "service/http/allowed_hosts.h"
#include "service/http/client_rate_limiter.h"
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
  Respond(HttpResponse{.status = 500,
                       .headers = {{"Content-Type", "text/plain; charset=utf-8"}},
                       .body = "this reply cannot be streamed\n"});
  return nullptr;
}

namespace {

// One streamed reply, shared by its HttpStream (any thread), libmicrohttpd's
// content reader (its thread) and the exchange.
struct StreamState {
  explicit StreamState(size_t max_queue_bytes) : max_queue_bytes(max_queue_bytes) {}

  const size_t max_queue_bytes;
  absl::Mutex mu;
  // Set when the reply is queued, null once libmicrohttpd is done with it.
  MHD_Connection* connection ABSL_GUARDED_BY(mu) = nullptr;
  // The content reader found nothing to send and suspended the connection.
  bool suspended ABSL_GUARDED_BY(mu) = false;
  // Written, not yet handed to libmicrohttpd: pending.substr(sent).
  std::string pending ABSL_GUARDED_BY(mu);
  size_t sent ABSL_GUARDED_BY(mu) = 0;
  bool closing ABSL_GUARDED_BY(mu) = false;  // Close: end after `pending`.
  bool cut_off ABSL_GUARDED_BY(mu) = false;  // Queue overflow: drop the connection.
  bool done ABSL_GUARDED_BY(mu) = false;     // The connection is finished.
  std::function<void()> on_closed ABSL_GUARDED_BY(mu);

  // Lets libmicrohttpd call the content reader again if it is waiting.
  void WakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (connection != nullptr && suspended) {
      suspended = false;
      MHD_resume_connection(connection);
    }
  }

  // The connection is finished: refuse writes and call the callback.
  void Finish() {
    std::function<void()> callback;
    {
      absl::MutexLock lock(&mu);
      if (done) return;
      done = true;
      connection = nullptr;
      pending.clear();
      sent = 0;
      callback = std::move(on_closed);
    }
    if (callback) callback();
  }
};

// The streams a server has started, so that Shutdown ends them (an open
// stream would otherwise keep its connection, suspended, past the grace).
class StreamRegistry {
 public:
  // False once the server shuts down (the stream is then not added).
  bool Add(const std::shared_ptr<StreamState>& stream) {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return false;
    // Forget streams that ended, so the list stays as long as the open ones.
    std::erase_if(streams_, [](const std::weak_ptr<StreamState>& s) { return s.expired(); });
    streams_.push_back(stream);
    return true;
  }

  // Closes every stream (each ends after what was written) and refuses
  // new ones.
  void CloseAll() {
    std::vector<std::weak_ptr<StreamState>> streams;
    {
      absl::MutexLock lock(&mu_);
      shut_down_ = true;
      streams.swap(streams_);
    }
    for (const auto& weak : streams) {
      if (std::shared_ptr<StreamState> stream = weak.lock()) {
        absl::MutexLock lock(&stream->mu);
        stream->closing = true;
        stream->WakeLocked();
      }
    }
  }

 private:
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::weak_ptr<StreamState>> streams_ ABSL_GUARDED_BY(mu_);
};

// The HttpStream a handler writes to.
class Stream final : public HttpStream {
 public:
  explicit Stream(std::shared_ptr<StreamState> state) : state_(std::move(state)) {}
  ~Stream() override { Close(); }

  bool Write(std::string chunk) override {
    absl::MutexLock lock(&state_->mu);
    if (state_->closing || state_->cut_off || state_->done) return false;
    if (chunk.empty()) return true;
    const size_t queued = state_->pending.size() - state_->sent;
    if (queued + chunk.size() > state_->max_queue_bytes) {
      // The client does not keep up: drop it rather than buffer forever.
      state_->cut_off = true;
      state_->pending.clear();
      state_->sent = 0;
      if (state_->connection != nullptr && !state_->suspended) {
        // libmicrohttpd waits for the socket to take more bytes, which a
        // client that does not read never lets happen: shutting the socket
        // down (libmicrohttpd still owns and closes it) ends that wait.
        const MHD_ConnectionInfo* info =
            MHD_get_connection_info(state_->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (info != nullptr) shutdown(info->connect_fd, SHUT_RDWR);
      }
      state_->WakeLocked();
      return false;
    }
    if (state_->sent > 0 && state_->sent == state_->pending.size()) {
      state_->pending.clear();
      state_->sent = 0;
    }
    state_->pending.append(chunk);
    state_->WakeLocked();
    return true;
  }

  void Close() override {
    absl::MutexLock lock(&state_->mu);
    state_->closing = true;
    state_->WakeLocked();
  }

  bool closed() const override {
    absl::MutexLock lock(&state_->mu);
    return state_->closing || state_->cut_off || state_->done;
  }

  void SetOnClosed(std::function<void()> callback) override {
    {
      absl::MutexLock lock(&state_->mu);
      if (!state_->done) {
        state_->on_closed = std::move(callback);
        return;
      }
    }
    callback();
  }

 private:
  const std::shared_ptr<StreamState> state_;
};

// libmicrohttpd's content reader of a stream: what was written, or, with
// nothing to send, a suspended connection until the next write.
ssize_t ReadStream(void* cls, uint64_t, char* buf, size_t max) {
  StreamState& state = **static_cast<std::shared_ptr<StreamState>*>(cls);
  absl::MutexLock lock(&state.mu);
  if (state.cut_off) return MHD_CONTENT_READER_END_WITH_ERROR;
  const size_t left = state.pending.size() - state.sent;
  if (left > 0) {
    const size_t n = std::min(left, max);
    std::memcpy(buf, state.pending.data() + state.sent, n);
    state.sent += n;
    if (state.sent == state.pending.size()) {
      state.pending.clear();
      state.sent = 0;
    }
    return static_cast<ssize_t>(n);
  }
  if (state.closing || state.connection == nullptr) return MHD_CONTENT_READER_END_OF_STREAM;
  // Allowed from a content reader; returning 0 with the connection
  // suspended is how libmicrohttpd waits without polling.
  state.suspended = true;
  MHD_suspend_connection(state.connection);
  return 0;
}

void FreeStreamBox(void* cls) { delete static_cast<std::shared_ptr<StreamState>*>(cls); }

// A stream's start, from StartStream to the access handler that queues it.
struct StreamStart {
  int status = 200;
  HttpHeaders headers;
};

// One request on one connection, shared by libmicrohttpd's callbacks and the
// request's responder (which may answer from another thread).
struct Exchange {
  HttpRequest request;
  // Set from the request's headers (libmicrohttpd's thread only).
  const HttpRoute* route = nullptr;
  size_t body_limit = 0;
  std::string client;  // ClientKeyOf the peer: what the rate limiter counts.
  // The answer given without dispatching (a refused Host, a body too
  // large, ...): the body is discarded, `discarded` counting it.
  std::optional<HttpResponse> refusal;
  size_t discarded = 0;
  // Bytes of the server's body budget this request holds.
  size_t reserved = 0;
  bool dispatched = false;

  absl::Mutex mu;
  // Null once libmicrohttpd is done with the request (client gone, server
  // stopped): a late answer is then dropped.
  MHD_Connection* connection ABSL_GUARDED_BY(mu) = nullptr;
  bool suspended ABSL_GUARDED_BY(mu) = false;
  std::optional<HttpResponse> response ABSL_GUARDED_BY(mu);
  // A streamed reply: its state (from StartStream on) and, until queued,
  // its status and headers.
  std::shared_ptr<StreamState> stream ABSL_GUARDED_BY(mu);
  std::optional<StreamStart> stream_start ABSL_GUARDED_BY(mu);
};

HttpResponse TextResponse(int status, absl::string_view text) {
  return HttpResponse{.status = status,
                      .headers = {{"Content-Type", "text/plain; charset=utf-8"}},
                      .body = absl::StrCat(text, "\n")};
}

HttpResponse TooLarge(const HttpRequest& request, size_t limit) {
  HttpResponse response =
      TextResponse(413, absl::StrCat("the request body is larger than ", limit, " bytes, the most ",
                                     request.method, " ", request.path.substr(0, 200), " accepts"));
  response.headers.emplace_back("Connection", "close");
  return response;
}

HttpResponse Busy(size_t budget) {
  HttpResponse response = TextResponse(
      503, absl::StrCat("the server is receiving ", budget,
                        " bytes of request bodies already (its limit); retry shortly"));
  response.headers.emplace_back("Retry-After", "1");
  response.headers.emplace_back("Connection", "close");
  return response;
}

HttpResponse TooManyFailures(const std::string& client, absl::Duration retry_after) {
  const int64_t seconds =
      std::max<int64_t>(1, absl::ToInt64Seconds(absl::Ceil(retry_after, absl::Seconds(1))));
  HttpResponse response = TextResponse(429, absl::StrCat("too many failed authentications from ",
                                                         client, ": retry after ", seconds, " s"));
  response.headers.emplace_back("Retry-After", absl::StrCat(seconds));
  response.headers.emplace_back("Connection", "close");
  return response;
}

// Bytes of a refused request's body read and dropped before its
// connection is closed instead (a client that keeps sending).
constexpr size_t kMaxDiscardedBytes = 1024 * 1024;

// File descriptors kept for the rest of the server (gRPC, the database,
// training output) when the connection limit is fitted to RLIMIT_NOFILE.
constexpr int kFilesKeptForTheRest = 256;

// `wanted` connections, or fewer if the process may not open that many
// files and still keep kFilesKeptForTheRest: accepting up to the file
// limit would leave every other part of the server without descriptors.
int FittedConnectionLimit(int wanted) {
  wanted = std::max(1, wanted);
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return wanted;
  const int room =
      static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 30)) - kFilesKeptForTheRest;
  if (room >= wanted) return wanted;
  spdlog::warn(
      "http: {} connections at most, not {}: RLIMIT_NOFILE is {} (raise it with ulimit -n)",
      std::max(16, room), wanted, files.rlim_cur);
  return std::max(16, room);
}

unsigned int Seconds(absl::Duration duration) {
  return static_cast<unsigned int>(std::max<int64_t>(1, absl::ToInt64Seconds(duration)));
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, " ", path, " cannot be read"));
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// HOST:PORT -> a bound, listening socket.
absl::StatusOr<int> Listen(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-listen ", address, ": expected HOST:PORT (port 0 picks a free one)"));
  }
  std::string host = address.substr(0, colon);
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(port);
  if (int error =
          getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints, &found);
      error != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-listen ", address, ": ", gai_strerror(error)));
  }
  std::string last_error = "no address";
  int fd = -1;
  for (addrinfo* candidate = found; candidate != nullptr; candidate = candidate->ai_next) {
    fd = socket(candidate->ai_family, candidate->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, candidate->ai_addr, candidate->ai_addrlen) == 0 && listen(fd, 512) == 0) break;
    last_error = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("--http-listen ", address, ": cannot listen: ", last_error));
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) return 0;
  if (bound.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

const sockaddr* AddressOf(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  return info == nullptr ? nullptr : info->client_addr;
}

std::string PeerOf(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == nullptr || info->client_addr == nullptr) return "unknown";
  char host[INET6_ADDRSTRLEN] = "";
  const sockaddr* address = info->client_addr;
  if (address->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    return absl::StrCat("[", host, "]:", ntohs(in6->sin6_port));
  }
  const auto* in4 = reinterpret_cast<const sockaddr_in*>(address);
  inet_ntop(AF_INET, &in4->sin_addr, host, sizeof(host));
  return absl::StrCat(host, ":", ntohs(in4->sin_port));
}

MHD_Result CollectHeader(void* cls, MHD_ValueKind, const char* key, const char* value) {
  static_cast<HttpHeaders*>(cls)->emplace_back(key, value == nullptr ? "" : value);
  return MHD_YES;
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
  class Responder;

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
  MHD_Result Queue(MHD_Connection* connection, const HttpRequest& request,
                   const HttpResponse& response);
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

// Answers one exchange from any thread: stores the reply and wakes the
// suspended connection, whose access handler then queues it.
class HttpServer::Impl::Responder final : public HttpResponder {
 public:
  Responder(std::shared_ptr<Exchange> exchange, std::shared_ptr<StreamRegistry> streams,
            size_t max_stream_queue_bytes, std::shared_ptr<ClientRateLimiter> limiter)
      : exchange_(std::move(exchange)),
        streams_(std::move(streams)),
        max_stream_queue_bytes_(max_stream_queue_bytes),
        limiter_(std::move(limiter)) {}
  ~Responder() override {
    if (!answered_) Respond(TextResponse(500, "the request's handler gave no answer"));
  }

  void Respond(HttpResponse response) override {
    if (answered_) return;
    answered_ = true;
    if (response.failed_authentication && limiter_ != nullptr && !exchange_->client.empty()) {
      limiter_->Charge(exchange_->client);
    }
    absl::MutexLock lock(&exchange_->mu);
    exchange_->response = std::move(response);
    // Resuming makes libmicrohttpd call the access handler again (on its
    // thread), which queues the reply. It only signals that thread.
    if (exchange_->connection != nullptr && exchange_->suspended) {
      exchange_->suspended = false;
      MHD_resume_connection(exchange_->connection);
    }
  }

  std::unique_ptr<HttpStream> StartStream(int status, HttpHeaders headers) override {
    auto state = std::make_shared<StreamState>(max_stream_queue_bytes_);
    auto stream = std::make_unique<Stream>(state);
    if (answered_) {
      state->Finish();
      return stream;
    }
    answered_ = true;
    {
      absl::MutexLock lock(&exchange_->mu);
      if (exchange_->connection != nullptr && streams_->Add(state)) {
        exchange_->stream = state;
        exchange_->stream_start = StreamStart{.status = status, .headers = std::move(headers)};
        if (exchange_->suspended) {
          exchange_->suspended = false;
          MHD_resume_connection(exchange_->connection);
        }
        return stream;
      }
      if (exchange_->connection != nullptr) {
        // The server is shutting down: an empty reply, ended at once.
        exchange_->stream = state;
        exchange_->stream_start = StreamStart{.status = status, .headers = std::move(headers)};
        absl::MutexLock stream_lock(&state->mu);
        state->closing = true;
        if (exchange_->suspended) {
          exchange_->suspended = false;
          MHD_resume_connection(exchange_->connection);
        }
        return stream;
      }
    }
    state->Finish();  // The client is gone.
    return stream;
  }

 private:
  std::shared_ptr<Exchange> exchange_;
  const std::shared_ptr<StreamRegistry> streams_;
  const size_t max_stream_queue_bytes_;
  const std::shared_ptr<ClientRateLimiter> limiter_;
  bool answered_ = false;
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
      {MHD_OPTION_CONNECTION_TIMEOUT, Seconds(options_.request_header_timeout), nullptr},
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
  daemon_ = MHD_start_daemon(flags | MHD_USE_ERROR_LOG, 0, nullptr, nullptr, &OnAccess, this,
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
  // Stop accepting; connections already open finish their requests.
  const MHD_socket listener = MHD_quiesce_daemon(daemon_);
  if (listener != MHD_INVALID_SOCKET) close(listener);
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
  return self->Queue(connection, exchange->request, response);
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
                            Seconds(options_.connection_timeout));
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
  auto responder = std::make_unique<Responder>(exchange, streams_, options_.max_stream_queue_bytes,
                                               options_.auth_failures);
  // The handler gets a copy of the request so that the exchange (read by
  // this thread when it queues the reply) is never shared mutably; the body
  // moves, so that it is held once.
  HttpRequest request = exchange->request;
  request.body = std::move(exchange->request.body);
  std::string().swap(exchange->request.body);
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
                                   const HttpResponse& response) {
  MHD_Response* reply = MHD_create_response_from_buffer(
      response.body.size(), const_cast<char*>(response.body.data()), MHD_RESPMEM_MUST_COPY);
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
  MHD_Response* reply = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, &ReadStream,
                                                          box, &FreeStreamBox);
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
                              Seconds(self->options_.request_header_timeout));
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
