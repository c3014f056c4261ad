// One HTTP request on one connection as the server handles it: the state
// libmicrohttpd's callbacks share with the request's responder, the
// responder a handler answers through (from any thread), and the replies
// the server gives by itself (refusals, a handler that gave no answer).
// Internal to service/http (http_server.cc).
//
// Threading contract: the fields above Exchange::mu are libmicrohttpd's
// (its thread for the connection only); those below are guarded by `mu`.
// The responder never blocks: it stores the reply and resumes the
// suspended connection, whose access handler (libmicrohttpd's thread) then
// queues it.

#ifndef DEBUGPLANE_SERVICE_HTTP_HTTP_EXCHANGE_H_
#define DEBUGPLANE_SERVICE_HTTP_HTTP_EXCHANGE_H_

#include <microhttpd.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/http/client_rate_limiter.h"
#include "service/http/http_server.h"
#include "service/http/http_stream.h"

namespace debugplane::service::http {

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

  // Resumes the connection if it waits for the answer: libmicrohttpd then
  // calls the access handler again (on its thread), which queues it. Only
  // signals that thread.
  void WakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
};

// Answers one exchange from any thread (see HttpResponder). A reply marked
// failed_authentication charges the exchange's client in `limiter` (if
// any); streams get `max_stream_queue_bytes` and are registered in
// `streams`.
class ExchangeResponder final : public HttpResponder {
 public:
  ExchangeResponder(std::shared_ptr<Exchange> exchange, std::shared_ptr<StreamRegistry> streams,
                    size_t max_stream_queue_bytes, std::shared_ptr<ClientRateLimiter> limiter);
  // Answers 500 if neither Respond nor StartStream was called.
  ~ExchangeResponder() override;

  void Respond(HttpResponse response) override;
  std::unique_ptr<HttpStream> StartStream(int status, HttpHeaders headers) override;

 private:
  std::shared_ptr<Exchange> exchange_;
  const std::shared_ptr<StreamRegistry> streams_;
  const size_t max_stream_queue_bytes_;
  const std::shared_ptr<ClientRateLimiter> limiter_;
  bool answered_ = false;
};

// `text` and a newline as text/plain.
HttpResponse TextResponse(int status, absl::string_view text);

// 413 for a body over `limit` bytes; the connection closes.
HttpResponse TooLarge(const HttpRequest& request, size_t limit);

// 503 with Retry-After: the server already receives `budget` bytes of
// request bodies; the connection closes.
HttpResponse Busy(size_t budget);

// 429 with Retry-After (whole seconds, at least 1) for a client out of
// authentication tries; the connection closes.
HttpResponse TooManyFailures(const std::string& client, absl::Duration retry_after);

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_HTTP_EXCHANGE_H_
