// gzip for the dashboard's replies: the Nodes view's series are hundreds
// of KB of JSON numbers, which gzip to a fifth. A reply is compressed only
// when the request's Accept-Encoding allows gzip (RFC 9110 section 12.5.3)
// and the body is at least kMinGzipBytes; it then carries
// Content-Encoding: gzip. Every reply that could be compressed carries
// Vary: Accept-Encoding, so that a cache never hands one client's encoding
// to another.

#ifndef DEBUGPLANE_SERVICE_DASHBOARD_GZIP_REPLY_H_
#define DEBUGPLANE_SERVICE_DASHBOARD_GZIP_REPLY_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "service/http/http_server.h"

namespace debugplane::service::dashboard {

// Smaller bodies gain less than the header costs.
inline constexpr size_t kMinGzipBytes = 1024;

// Whether an Accept-Encoding value allows gzip: "gzip" (or "x-gzip") or "*"
// listed with a q-value above 0 ("gzip;q=0" refuses it, and so does "*;q=0"
// unless gzip is listed itself). Case-insensitive; malformed members are
// ignored (never an error: the reply is then simply not compressed).
bool AcceptsGzip(absl::string_view accept_encoding);

// The largest body Gzip compresses: zlib counts bytes in 32 bits, and one
// deflate call takes the whole body.
inline constexpr size_t kMaxGzipBytes = size_t{1} << 31;

// `data` as a gzip stream (RFC 1952) at zlib `level` (1 fastest .. 9
// smallest); nullopt if `data` is over kMaxGzipBytes or zlib fails (out of
// memory).
std::optional<std::string> Gzip(absl::string_view data, int level);

// Compresses `response`'s body in place (level 1: a reply is compressed
// for each request, so speed over the last percent) when `accept_encoding`
// (the request's Accept-Encoding) allows gzip and the body has at least
// kMinGzipBytes; adds Vary: Accept-Encoding either way. A reply that
// already has a Content-Encoding is left alone.
void GzipIfAccepted(absl::string_view accept_encoding, http::HttpResponse& response);

}  // namespace debugplane::service::dashboard

#endif  // DEBUGPLANE_SERVICE_DASHBOARD_GZIP_REPLY_H_
