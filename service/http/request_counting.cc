#include "service/http/request_counting.h"

#include <atomic>
#include <memory>
#include <string>
#include <utility>

namespace debugplane::service::http {
namespace {

// Counts the reply, then hands it on. A request dropped without a reply is
// answered 500 by the wrapped responder's destructor, uncounted.
class CountingResponder final : public HttpResponder {
 public:
  CountingResponder(std::unique_ptr<HttpResponder> responder, std::string route,
                    metrics::RequestMetrics* metrics)
      : responder_(std::move(responder)), route_(std::move(route)), metrics_(metrics) {}

  void Respond(HttpResponse response) override {
    // Only the first reply is sent (HttpResponder's contract): count it once.
    if (!responded_.exchange(true)) metrics_->CountHttp(route_, response.status);
    responder_->Respond(std::move(response));
  }

  // A stream (the dashboard's events) counts as answered with its status
  // when it starts.
  std::unique_ptr<HttpStream> StartStream(int status, HttpHeaders headers) override {
    if (!responded_.exchange(true)) metrics_->CountHttp(route_, status);
    return responder_->StartStream(status, std::move(headers));
  }

 private:
  const std::unique_ptr<HttpResponder> responder_;
  const std::string route_;
  metrics::RequestMetrics* const metrics_;
  std::atomic<bool> responded_{false};
};

}  // namespace

std::vector<HttpRoute> CountRequests(std::vector<HttpRoute> routes,
                                     metrics::RequestMetrics* metrics) {
  if (metrics == nullptr) return routes;
  for (HttpRoute& route : routes) {
    route.handler = [handler = std::move(route.handler), route_path = route.path, metrics](
                        HttpRequest request, std::unique_ptr<HttpResponder> responder) {
      handler(std::move(request),
              std::make_unique<CountingResponder>(std::move(responder), route_path, metrics));
    };
  }
  return routes;
}

}  // namespace debugplane::service::http
