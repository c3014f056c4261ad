#include "service/http/http_exchange.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace debugplane::service::http {

void Exchange::WakeLocked() {
  if (connection != nullptr && suspended) {
    suspended = false;
    MHD_resume_connection(connection);
  }
}

ExchangeResponder::ExchangeResponder(std::shared_ptr<Exchange> exchange,
                                     std::shared_ptr<StreamRegistry> streams,
                                     size_t max_stream_queue_bytes,
                                     std::shared_ptr<ClientRateLimiter> limiter)
    : exchange_(std::move(exchange)),
      streams_(std::move(streams)),
      max_stream_queue_bytes_(max_stream_queue_bytes),
      limiter_(std::move(limiter)) {}

ExchangeResponder::~ExchangeResponder() {
  if (!answered_) Respond(TextResponse(500, "the request's handler gave no answer"));
}

void ExchangeResponder::Respond(HttpResponse response) {
  if (answered_) return;
  answered_ = true;
  if (response.failed_authentication && limiter_ != nullptr && !exchange_->client.empty()) {
    limiter_->Charge(exchange_->client);
  }
  absl::MutexLock lock(&exchange_->mu);
  exchange_->response = std::move(response);
  exchange_->WakeLocked();
}

std::unique_ptr<HttpStream> ExchangeResponder::StartStream(int status, HttpHeaders headers) {
  auto state = std::make_shared<StreamState>(max_stream_queue_bytes_);
  auto stream = std::make_unique<QueuedStream>(state);
  if (answered_) {
    state->Finish();
    return stream;
  }
  answered_ = true;
  {
    absl::MutexLock lock(&exchange_->mu);
    if (exchange_->connection != nullptr) {
      const bool registered = streams_->Add(state);
      exchange_->stream = state;
      exchange_->stream_start = StreamStart{.status = status, .headers = std::move(headers)};
      if (!registered) {
        // The server is shutting down: an empty reply, ended at once.
        absl::MutexLock stream_lock(&state->mu);
        state->closing = true;
      }
      exchange_->WakeLocked();
      return stream;
    }
  }
  state->Finish();  // The client is gone.
  return stream;
}

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

}  // namespace debugplane::service::http
