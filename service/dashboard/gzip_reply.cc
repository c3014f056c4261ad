#include "service/dashboard/gzip_reply.h"

#include <zlib.h>

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace debugplane::service::dashboard {

namespace {

// The q-value of one Accept-Encoding member's parameters ("q=0.5"); 1 when
// absent; nullopt when malformed.
std::optional<double> QValue(absl::string_view params) {
  double q = 1;
  for (absl::string_view param : absl::StrSplit(params, ';', absl::SkipWhitespace())) {
    param = absl::StripAsciiWhitespace(param);
    if (!absl::StartsWithIgnoreCase(param, "q=")) continue;
    if (!absl::SimpleAtod(param.substr(2), &q) || !(q >= 0 && q <= 1)) return std::nullopt;
  }
  return q;
}

}  // namespace

bool AcceptsGzip(absl::string_view accept_encoding) {
  std::optional<double> gzip, any;
  for (absl::string_view member : absl::StrSplit(accept_encoding, ',', absl::SkipWhitespace())) {
    const size_t semicolon = member.find(';');
    const absl::string_view coding = absl::StripAsciiWhitespace(member.substr(0, semicolon));
    const std::optional<double> q = QValue(
        semicolon == absl::string_view::npos ? absl::string_view() : member.substr(semicolon + 1));
    if (!q.has_value()) continue;
    if (absl::EqualsIgnoreCase(coding, "gzip") || absl::EqualsIgnoreCase(coding, "x-gzip")) {
      gzip = std::max(gzip.value_or(0), *q);
    } else if (coding == "*") {
      any = std::max(any.value_or(0), *q);
    }
  }
  if (gzip.has_value()) return *gzip > 0;
  return any.has_value() && *any > 0;
}

std::optional<std::string> Gzip(absl::string_view data, int level) {
  if (data.size() > kMaxGzipBytes) return std::nullopt;
  z_stream stream{};
  // windowBits 15 + 16: a gzip header and trailer, not zlib's.
  if (deflateInit2(&stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return std::nullopt;
  }
  std::string out;
  out.resize(deflateBound(&stream, static_cast<uLong>(data.size())));
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  // deflateBound's size takes the whole stream in one call.
  const int result = deflate(&stream, Z_FINISH);
  const size_t written = out.size() - stream.avail_out;
  deflateEnd(&stream);
  if (result != Z_STREAM_END) return std::nullopt;
  out.resize(written);
  return out;
}

void GzipIfAccepted(absl::string_view accept_encoding, http::HttpResponse& response) {
  for (const auto& [name, value] : response.headers) {
    if (absl::EqualsIgnoreCase(name, "Content-Encoding")) return;
  }
  response.headers.emplace_back("Vary", "Accept-Encoding");
  if (response.body.size() < kMinGzipBytes || !AcceptsGzip(accept_encoding)) return;
  std::optional<std::string> compressed = Gzip(response.body, 1);
  if (!compressed.has_value()) return;  // Sent as it is (e.g. over kMaxGzipBytes).
  response.body = *std::move(compressed);
  response.headers.emplace_back("Content-Encoding", "gzip");
}

}  // namespace debugplane::service::dashboard
