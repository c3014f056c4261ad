#include "service/http/metrics_route.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace debugplane::service::http {
namespace {

HttpResponse TextReply(int status, std::string text) {
  return HttpResponse{.status = status,
                      .headers = {{"Content-Type", "text/plain; charset=utf-8"}},
                      .body = absl::StrCat(text, "\n")};
}

}  // namespace

MetricsRoute::MetricsRoute(const metrics::MetricsRegistry* registry,
                           const auth::Authenticator* authenticator)
    : registry_(registry), authenticator_(authenticator) {}

HttpRoute MetricsRoute::Route() {
  return HttpRoute{
      .method = "GET",
      .path = "/metrics",
      .prefix = false,
      .handler = [this](HttpRequest request,
                        std::unique_ptr<HttpResponder> responder) { Handle(request, *responder); },
      .max_body_bytes = 16 * 1024};
}

void MetricsRoute::Handle(const HttpRequest& request, HttpResponder& responder) const {
  absl::StatusOr<auth::Principal> principal =
      authenticator_->AuthenticateBearer(request.Header("Authorization"));
  if (!principal.ok()) {
    // The authenticator's message names the key id at most, never the secret.
    spdlog::debug("http {} GET /metrics {}: {}", request.peer, request.request_id,
                  std::string(principal.status().message()));
    HttpResponse reply =
        TextReply(401, absl::StrCat("GET /metrics: ", principal.status().message(),
                                    " (a reader, operator or admin key from --credentials)"));
    reply.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"debugplane\"");
    // A key that was presented and refused counts against the address.
    reply.failed_authentication = !request.Header("Authorization").empty();
    responder.Respond(std::move(reply));
    return;
  }
  if (principal->role == auth::Role::kAgent) {
    responder.Respond(TextReply(
        403, absl::StrCat("GET /metrics: access key '", principal->access_key_id,
                          "' (role agent) may not read metrics: it needs role reader, operator "
                          "or admin")));
    return;
  }
  responder.Respond(HttpResponse{.status = 200,
                                 .headers = {{"Content-Type", metrics::kExpositionContentType}},
                                 .body = registry_->Scrape()});
}

}  // namespace debugplane::service::http
