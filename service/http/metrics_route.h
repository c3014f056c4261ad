// GET /metrics: the server's Prometheus metrics (metrics/registry.h) in the
// text exposition format, on the HTTP listener (--http-listen).
//
// Access: with authentication off (no --credentials: the listener is then
// loopback-only) anyone who reaches the listener may scrape. With
// credentials a scrape must carry `Authorization: Bearer
// ACCESS_KEY_ID:SECRET_ACCESS_KEY` of a reader, operator or admin (what
// Prometheus' scrape config `authorization: {credentials: KEY:SECRET}`
// sends); no credentials, a malformed or unknown token answer 401 with
// `WWW-Authenticate: Bearer`, an agent's key 403. Error bodies are one line
// of text naming the cause, never the secret.
//
// Metrics carry no job names, keys or paths (see metrics/registry.h), so a
// reader's scrape shows no more than its role may describe.

#ifndef DEBUGPLANE_SERVICE_HTTP_METRICS_ROUTE_H_
#define DEBUGPLANE_SERVICE_HTTP_METRICS_ROUTE_H_

#include <memory>

#include "metrics/registry.h"
#include "service/auth/auth.h"
#include "service/http/http_server.h"

namespace debugplane::service::http {

class MetricsRoute {
 public:
  // REQUIRES: `registry` and `authenticator` are not null and outlive this
  // object and every request it is handling.
  MetricsRoute(const metrics::MetricsRegistry* registry, const auth::Authenticator* authenticator);

  // GET /metrics served by Handle().
  HttpRoute Route();

  // Answers at once on the calling thread (the scrape runs the registry's
  // hooks, which only count in memory). Thread-safe.
  void Handle(const HttpRequest& request, HttpResponder& responder) const;

 private:
  const metrics::MetricsRegistry* const registry_;
  const auth::Authenticator* const authenticator_;
};

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_METRICS_ROUTE_H_
