// Counts HTTP requests by route and status code into metrics::RequestMetrics
// (debugplane_http_requests_total): each route's handler gets a responder
// that counts the reply it sends. The route label is the route's registered
// path, never the path as sent (labels stay a fixed set); requests no route
// matches (404, 405) are answered by the HTTP server and not counted.

#ifndef DEBUGPLANE_SERVICE_HTTP_REQUEST_COUNTING_H_
#define DEBUGPLANE_SERVICE_HTTP_REQUEST_COUNTING_H_

#include <vector>

#include "metrics/request_metrics.h"
#include "service/http/http_server.h"

namespace debugplane::service::http {

// `routes` with counting handlers; `routes` themselves if `metrics` is null.
// REQUIRES: `metrics` outlives the routes' requests.
std::vector<HttpRoute> CountRequests(std::vector<HttpRoute> routes,
                                     metrics::RequestMetrics* metrics);

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_REQUEST_COUNTING_H_
