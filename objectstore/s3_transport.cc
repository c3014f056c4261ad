#include "objectstore/s3_transport.h"

#include <openssl/evp.h>

#include <algorithm>
#include <utility>

#include "absl/base/call_once.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace debugplane::objectstore {
namespace {


// SHA-256 of an empty payload (GET, HEAD, DELETE). S3 needs
// x-amz-content-sha256 on every request.
constexpr char kEmptyPayloadSha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
// At most this much of an error reply is kept (its code and message are
// near the start).
constexpr size_t kMaxErrorBodyBytes = 64 * 1024;
// At most this much of any other reply kept in memory without a caller's
// bound (a listing page of 1000 keys of 1024 bytes, URL-encoded, is under
// 4 MiB): a longer one is refused, not kept.
constexpr size_t kMaxReplyBodyBytes = 16 << 20;
// A server that ignores Range answers a ranged GET with the whole object
// (200): the bytes before the range are dropped as they arrive, but at most
// this many; a read further into the object fails instead of downloading
// all that precedes it.
constexpr uint64_t kMaxSkippedBytes = 64 << 20;


// The digest of `data` with `type` (EVP_sha256(), EVP_md5()), raw bytes.
std::string Digest(const EVP_MD* type, absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, type, nullptr);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

absl::once_flag curl_global_once;

void InitCurlOnce() {
  // curl_global_init is not thread-safe in every libcurl build: once.
  absl::call_once(curl_global_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool IsUnreserved(unsigned char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

// Whether a failure to talk to the endpoint may pass (try again) or is the
// configuration's (a bad URL, a TLS certificate that does not verify).
bool RetryableCurlError(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
      return true;
    default:
      return false;
  }
}

// What curl's write callback returns to stop a transfer.
constexpr size_t kStopTransfer = 0;

size_t WriteBody(char* data, size_t size, size_t count, void* user) {
  auto* response = static_cast<S3Response*>(user);
  const size_t bytes = size * count;
  std::string* target = response->body_target;
  // An error body is kept only as far as its code and message need.
  if (response->error_body) {
    if (target->size() < kMaxErrorBodyBytes) {
      target->append(data, std::min<size_t>(bytes, kMaxErrorBodyBytes - target->size()));
    }
    return bytes;
  }
  absl::string_view chunk(data, bytes);
  if (response->skip > 0) {
    const size_t dropped = static_cast<size_t>(std::min<uint64_t>(response->skip, chunk.size()));
    response->skip -= dropped;
    chunk.remove_prefix(dropped);
  }
  const uint64_t room = response->keep - std::min<uint64_t>(response->keep, target->size());
  target->append(chunk.data(), static_cast<size_t>(std::min<uint64_t>(room, chunk.size())));
  if (chunk.size() <= room) return bytes;
  // More than wanted: a ranged read has all its bytes (the server sent
  // more than the range); any other reply is over its bound.
  if (response->ranged) {
    response->stopped_complete = true;
  } else {
    response->refused = absl::StrCat("the reply is over ", kMaxReplyBodyBytes >> 20,
                                     " MiB, more than any S3 reply this client reads");
  }
  return kStopTransfer;
}

size_t ReadHeader(char* data, size_t size, size_t count, void* user) {
  auto* response = static_cast<S3Response*>(user);
  const size_t bytes = size * count;
  absl::string_view line(data, bytes);
  if (absl::StartsWith(line, "HTTP/")) {
    // A status line: "HTTP/1.1 206 Partial Content". Headers start over (an
    // interim 100 Continue); a success body goes to the caller's buffer,
    // anything else to Response::body.
    response->content_length.reset();
    response->last_modified.clear();
    response->content_range.clear();
    response->etag.clear();
    const size_t space = line.find(' ');
    int status = 0;
    const bool success = space != absl::string_view::npos &&
                         absl::SimpleAtoi(line.substr(space + 1, 3), &status) && status >= 200 &&
                         status < 300;
    response->body_target = success ? response->success_target : &response->body;
    response->error_body = !success;
    response->skip = 0;
    response->keep = response->ranged ? response->range_length : kMaxReplyBodyBytes;
    if (success && status == 200 && response->ranged && response->range_offset > 0) {
      // The whole object for a ranged GET: its bytes before the range are
      // dropped as they arrive, up to a bound.
      if (response->range_offset > kMaxSkippedBytes) {
        response->refused = absl::StrCat(
            "the server ignores Range (it answered 200 with the whole object) and the read "
            "starts at byte ",
            response->range_offset, ", past the ", kMaxSkippedBytes >> 20,
            " MiB this client downloads to skip to it");
        return kStopTransfer;
      }
      response->skip = response->range_offset;
    }
    return bytes;
  }
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return bytes;
  const std::string name = absl::AsciiStrToLower(line.substr(0, colon));
  const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  if (name == "content-length") {
    uint64_t length = 0;
    if (absl::SimpleAtoi(value, &length)) response->content_length = length;
  } else if (name == "last-modified") {
    response->last_modified = std::string(value);
  } else if (name == "content-range") {
    response->content_range = std::string(value);
  } else if (name == "etag") {
    response->etag = std::string(value);
  }
  return bytes;
}


// The headers of every request: the payload hash S3 requires, the session
// token, and the byte range ("" for none); for a request with a payload its
// MD5 and type too. curl signs every header given here, so only headers
// that are sent may be: its own Content-Type (a form encoding, which
// servers then parse the body as) is replaced by one given here, but
// "Expect:" (which would remove the Expect: 100-continue curl adds to large
// bodies) is not given, because curl 7.88 signs it although it sends no
// such header, and the server's signature then differs. The caller frees
// the list.
curl_slist* RequestHeaders(const S3Config& config, const std::string& range,
                           const std::string& method, absl::string_view body) {
  const bool has_payload = method == "PUT" || method == "POST";
  const std::string payload_sha256 =
      has_payload ? absl::BytesToHexString(Digest(EVP_sha256(), body)) : kEmptyPayloadSha256;
  curl_slist* headers =
      curl_slist_append(nullptr, absl::StrCat("x-amz-content-sha256: ", payload_sha256).c_str());
  if (has_payload) {
    headers = curl_slist_append(
        headers,
        absl::StrCat("Content-MD5: ", absl::Base64Escape(Digest(EVP_md5(), body))).c_str());
    headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
  }
  if (!config.session_token.empty()) {
    headers = curl_slist_append(
        headers, absl::StrCat("x-amz-security-token: ", config.session_token).c_str());
  }
  if (!range.empty()) headers = curl_slist_append(headers, absl::StrCat("Range: ", range).c_str());
  return headers;
}

// Signing, timeouts and TLS, the same for every request.
void SetConnectionOptions(CURL* curl, const S3Config& config, const std::string& sigv4_provider) {
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // Timeouts without SIGALRM, for threads.
  curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4_provider.c_str());
  curl_easy_setopt(curl, CURLOPT_USERNAME, config.access_key_id.c_str());
  curl_easy_setopt(curl, CURLOPT_PASSWORD, config.secret_access_key.c_str());
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(config.connect_timeout)));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(config.request_timeout)));
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  if (!config.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, config.ca_file.c_str());
}

}  // namespace

std::string S3UriEncode(absl::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string encoded;
  encoded.reserve(text.size() * 3);
  for (unsigned char c : text) {
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      encoded.push_back(static_cast<char>(c));
    } else {
      encoded.push_back('%');
      encoded.push_back(kHex[c >> 4]);
      encoded.push_back(kHex[c & 0xF]);
    }
  }
  return encoded;
}

// A curl easy handle; curl_easy_cleanup closes its connection.
class S3Transport::CurlHandle {
 public:
  CurlHandle() : curl_(curl_easy_init()) {}
  ~CurlHandle() {
    if (curl_ != nullptr) curl_easy_cleanup(curl_);
  }
  CurlHandle(const CurlHandle&) = delete;
  CurlHandle& operator=(const CurlHandle&) = delete;
  CURL* get() const { return curl_; }

 private:
  CURL* const curl_;
};

bool S3Response::network_failure() const { return curl_code != CURLE_OK && refused.empty(); }

bool S3Response::success() const {
  return !network_failure() && refused.empty() && http_status >= 200 && http_status < 300;
}

bool S3Response::retryable() const {
  if (!refused.empty()) return false;
  if (network_failure()) return RetryableCurlError(curl_code);
  return http_status >= 500 || http_status == 429;
}

S3Transport::S3Transport(const S3Config& config, std::string bucket,
                         std::function<void(absl::Duration)> sleep_for)
    : config_(config),
      bucket_(std::move(bucket)),
      // Virtual-hosted names with a '.' do not match AWS's TLS certificate.
      path_style_(config_.path_style || absl::StrContains(bucket_, '.')),
      sleep_for_(std::move(sleep_for)),
      sigv4_provider_(absl::StrCat("aws:amz:", config_.region, ":s3")) {
  InitCurlOnce();
}

S3Transport::~S3Transport() = default;

std::string S3Transport::Url(absl::string_view key, absl::string_view query) const {
  std::string url;
  if (path_style_) {
    url = absl::StrCat(config_.endpoint, "/", bucket_);
    if (!key.empty()) absl::StrAppend(&url, "/", S3UriEncode(key, /*keep_slash=*/true));
  } else {
    const size_t host = config_.endpoint.find("://") + 3;
    url = absl::StrCat(config_.endpoint.substr(0, host), bucket_, ".",
                       config_.endpoint.substr(host), "/", S3UriEncode(key, true));
  }
  if (!query.empty()) absl::StrAppend(&url, "?", query);
  return url;
}

std::unique_ptr<S3Transport::CurlHandle> S3Transport::AcquireHandle() const {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_handles_.empty()) {
      std::unique_ptr<CurlHandle> handle = std::move(idle_handles_.back());
      idle_handles_.pop_back();
      return handle;
    }
  }
  auto handle = std::make_unique<CurlHandle>();
  if (handle->get() == nullptr) return nullptr;
  return handle;
}

void S3Transport::ReleaseHandle(std::unique_ptr<CurlHandle> handle) const {
  absl::MutexLock lock(&mu_);
  if (idle_handles_.size() < static_cast<size_t>(std::max(0, config_.max_idle_connections))) {
    idle_handles_.push_back(std::move(handle));
  }
}

namespace {

// A response ready to receive the reply to `request`: bodies bounded as
// the request's range (or the reply bound) says.
S3Response StartResponse(const S3Request& request, std::string url) {
  S3Response response;
  response.url = std::move(url);
  response.body_target = &response.body;
  response.ranged = request.body_out != nullptr && !request.range.empty();
  response.range_offset = request.range_offset;
  response.range_length = request.range_length;
  response.keep = response.ranged ? response.range_length : kMaxReplyBodyBytes;
  return response;
}

// The method, payload and reply callbacks of `request` on `curl`, the
// replies going into `response`.
void SetExchangeOptions(CURL* curl, const S3Request& request, S3Response* response) {
  if (request.head) curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  if (request.method == "PUT" || request.method == "POST") {
    // The payload from memory, so that curl can send it again on a retry.
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.empty() ? "" : request.body.data());
  }
  if (!request.method.empty())
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, ReadHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, response);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, response);
  // Success bodies go straight into the caller's buffer (its capacity
  // reused), error bodies into response->body.
  response->success_target = &response->body;
  if (request.body_out != nullptr) {
    request.body_out->clear();
    response->success_target = request.body_out;
  }
}

}  // namespace

S3Response S3Transport::SendOnce(const S3Request& request) const {
  S3Response response = StartResponse(request, Url(request.key, request.query));
  std::unique_ptr<CurlHandle> handle = AcquireHandle();
  if (handle == nullptr) {
    response.curl_code = CURLE_FAILED_INIT;
    response.curl_error = "curl_easy_init failed";
    return response;
  }
  CURL* curl = handle->get();
  // Reset keeps the handle's open connection (reuse) and DNS cache.
  curl_easy_reset(curl);
  char error_buffer[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = RequestHeaders(config_, request.range, request.method, request.body);
  curl_easy_setopt(curl, CURLOPT_URL, response.url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  SetConnectionOptions(curl, config_, sigv4_provider_);
  SetExchangeOptions(curl, request, &response);
  response.curl_code = curl_easy_perform(curl);
  // Neither may outlive this call in the handle.
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  curl_slist_free_all(headers);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.http_status);
  // Stopped on purpose with every byte wanted: a success.
  if (response.stopped_complete && response.curl_code == CURLE_WRITE_ERROR) {
    response.curl_code = CURLE_OK;
  }
  if (response.network_failure()) {
    response.curl_error =
        error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(response.curl_code);
  }
  if (request.body_out != nullptr && !response.success()) request.body_out->clear();
  ReleaseHandle(std::move(handle));
  return response;
}

absl::Duration S3Transport::Backoff(int attempt) const {
  absl::Duration bound = config_.initial_backoff;
  for (int i = 1; i < attempt && bound < config_.max_backoff; ++i) bound *= 2;
  bound = std::min(bound, config_.max_backoff);
  // Half fixed, half random ("equal jitter"): growing waits that do not
  // line up across clients retrying at once.
  absl::MutexLock lock(&mu_);
  const double fraction = absl::Uniform(random_, 0.0, 1.0);
  return bound / 2 + (bound / 2) * fraction;
}

S3Response S3Transport::Send(const S3Request& request) const {
  const int max_attempts = std::max(1, config_.max_attempts);
  for (int attempt = 1;; ++attempt) {
    S3Response response = SendOnce(request);
    response.attempts = attempt;
    if (response.success() || !response.retryable() || attempt >= max_attempts) return response;
    sleep_for_(Backoff(attempt));
  }
}

}  // namespace debugplane::objectstore
