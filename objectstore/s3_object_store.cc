#include "objectstore/s3_object_store.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <tinyxml2.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "absl/base/call_once.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/message_text.h"

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
// A listing that goes on with this many empty pages in a row (IsTruncated
// with no keys) is refused: S3 may send a few, a broken server forever.
constexpr int kMaxEmptyPagesInARow = 100;
// S3's cap on keys per ListObjectsV2 page.
constexpr size_t kMaxKeysPerPage = 1000;
// S3's limits on multipart uploads: parts (but the last) of at least 5 MiB,
// at most 10000 of them.
constexpr uint64_t kMinPartBytes = 5 << 20;
constexpr uint64_t kMaxParts = 10000;

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

bool IsBucketNameChar(char c) {
  return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '.' || c == '-';
}

absl::Status ValidateBucketName(absl::string_view bucket) {
  const bool valid = bucket.size() >= 3 && bucket.size() <= 63 &&
                     std::all_of(bucket.begin(), bucket.end(), IsBucketNameChar) &&
                     absl::ascii_isalnum(bucket.front()) && absl::ascii_isalnum(bucket.back());
  if (valid) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("invalid S3 bucket name ", base::SingleQuoteForMessage(bucket, 80),
                   ": 3 to 63 lower-case letters, digits, '.' and '-', starting and ending with "
                   "a letter or digit"));
}

// "Tue, 24 Nov 2026 10:09:05 GMT" (an HTTP date, as Last-Modified is).
absl::Time ParseHttpDate(absl::string_view text) {
  absl::Time time;
  std::string error;
  if (absl::ParseTime("%a, %d %b %Y %H:%M:%S GMT", std::string(text), absl::UTCTimeZone(), &time,
                      &error)) {
    return time;
  }
  return absl::InfinitePast();
}

// The first byte of a "bytes FIRST-LAST/TOTAL" Content-Range.
std::optional<uint64_t> ContentRangeStart(absl::string_view content_range) {
  if (!absl::ConsumePrefix(&content_range, "bytes ")) return std::nullopt;
  const size_t dash = content_range.find('-');
  uint64_t start = 0;
  if (dash == absl::string_view::npos || !absl::SimpleAtoi(content_range.substr(0, dash), &start)) {
    return std::nullopt;
  }
  return start;
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
class S3ObjectStore::CurlHandle {
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

struct S3ObjectStore::Request {
  bool head = false;   // HEAD (no body) instead of GET
  std::string method;  // "PUT", "POST", "DELETE"; "" for GET/HEAD
  // The payload of a PUT or POST; must outlive the request.
  absl::string_view body;
  std::string key;                  // "" for the bucket itself
  std::string query;                // canonical: sorted, S3UriEncode'd; "" if none
  std::string range;                // "bytes=FIRST-[LAST]", "" for the whole object
  std::string* body_out = nullptr;  // where a successful body goes (else Response::body)
  // With body_out and a range: the first byte and the length of the range
  // asked for. At most `range_length` bytes of a success body are kept; of a
  // whole object (200: Range ignored) the bytes before `range_offset` are
  // dropped. The transfer is stopped once they are there.
  uint64_t range_offset = 0;
  uint64_t range_length = 0;
};

struct S3ObjectStore::Response {
  CURLcode curl_code = CURLE_OK;
  std::string curl_error;  // curl's reason, when curl_code is not CURLE_OK
  long http_status = 0;
  std::string body;  // the error body, or the body when Request::body_out is null
  // Where the body being received goes: success_target for a 2xx reply,
  // `body` otherwise (ReadHeader decides at the status line).
  std::string* body_target = nullptr;
  std::string* success_target = nullptr;
  // Whether the body being received is an error body, which is kept only as
  // far as its code and message need (kMaxErrorBodyBytes; a success body,
  // e.g. a listing page of 1000 keys, is kept up to `keep`).
  bool error_body = true;
  // Of a success body: bytes still to drop before keeping (a whole-object
  // answer to a ranged GET), and at most how many to keep.
  uint64_t skip = 0;
  uint64_t keep = 0;
  // The transfer was stopped on purpose: every byte wanted was there
  // (`stopped_complete`) or the reply was refused (`refused`: why).
  bool stopped_complete = false;
  std::string refused;
  // The request's range (Request::range_offset/length; keep 0: no range,
  // the reply kept up to kMaxReplyBodyBytes).
  bool ranged = false;
  uint64_t range_offset = 0;
  uint64_t range_length = 0;
  std::optional<uint64_t> content_length;
  std::string last_modified;
  std::string content_range;
  std::string etag;
  std::string url;
  int attempts = 0;

  bool network_failure() const { return curl_code != CURLE_OK && refused.empty(); }
  bool success() const {
    return !network_failure() && refused.empty() && http_status >= 200 && http_status < 300;
  }
  bool retryable() const {
    if (!refused.empty()) return false;
    if (network_failure()) return RetryableCurlError(curl_code);
    return http_status >= 500 || http_status == 429;
  }
};

namespace {

// What curl's write callback returns to stop a transfer.
constexpr size_t kStopTransfer = 0;

size_t WriteBody(char* data, size_t size, size_t count, void* user) {
  auto* response = static_cast<S3ObjectStore::Response*>(user);
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
  auto* response = static_cast<S3ObjectStore::Response*>(user);
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

bool IsSessionTokenErrorCode(absl::string_view code) {
  return code == "ExpiredToken" || code == "InvalidToken" || code == "TokenRefreshRequired";
}

// S3 error codes that refuse the credentials, whatever the HTTP status.
bool IsCredentialsErrorCode(absl::string_view code) {
  return IsSessionTokenErrorCode(code) || code == "InvalidAccessKeyId" ||
         code == "SignatureDoesNotMatch";
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

absl::StatusOr<std::shared_ptr<S3ObjectStore>> S3ObjectStore::Create(Options options) {
  if (absl::Status status = ValidateBucketName(options.bucket); !status.ok()) return status;
  absl::StatusOr<std::string> endpoint = NormalizeEndpoint(options.config.endpoint, "S3 endpoint");
  if (!endpoint.ok()) return endpoint.status();
  options.config.endpoint = *std::move(endpoint);
  if (options.config.access_key_id.empty() || options.config.secret_access_key.empty()) {
    return absl::UnauthenticatedError(
        absl::StrCat("S3 at ", options.config.endpoint,
                     ": an access key id and a secret access key are needed"));
  }
  if (options.multipart_part_bytes < kMinPartBytes) {
    return absl::InvalidArgumentError(absl::StrCat("S3 multipart part size ",
                                                   options.multipart_part_bytes,
                                                   " is below S3's minimum of ", kMinPartBytes));
  }
  if (!options.sleep_for) options.sleep_for = [](absl::Duration d) { absl::SleepFor(d); };
  InitCurlOnce();
  return std::shared_ptr<S3ObjectStore>(new S3ObjectStore(std::move(options)));
}

S3ObjectStore::S3ObjectStore(Options options)
    : config_(std::move(options.config)),
      bucket_(std::move(options.bucket)),
      // Virtual-hosted names with a '.' do not match AWS's TLS certificate.
      path_style_(config_.path_style || absl::StrContains(bucket_, '.')),
      sleep_for_(std::move(options.sleep_for)),
      multipart_part_bytes_(options.multipart_part_bytes),
      sigv4_provider_(absl::StrCat("aws:amz:", config_.region, ":s3")) {}

S3ObjectStore::~S3ObjectStore() = default;

std::string S3ObjectStore::Describe(absl::string_view key) const {
  if (key.empty()) return absl::StrCat("s3://", bucket_);
  return absl::StrCat("s3://", bucket_, "/", key);
}

std::string S3ObjectStore::Url(absl::string_view key, absl::string_view query) const {
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

std::unique_ptr<S3ObjectStore::CurlHandle> S3ObjectStore::AcquireHandle() const {
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

void S3ObjectStore::ReleaseHandle(std::unique_ptr<CurlHandle> handle) const {
  absl::MutexLock lock(&mu_);
  if (idle_handles_.size() < static_cast<size_t>(std::max(0, config_.max_idle_connections))) {
    idle_handles_.push_back(std::move(handle));
  }
}

S3ObjectStore::Response S3ObjectStore::SendOnce(const Request& request) const {
  Response response;
  response.url = Url(request.key, request.query);
  response.body_target = &response.body;
  response.ranged = request.body_out != nullptr && !request.range.empty();
  response.range_offset = request.range_offset;
  response.range_length = request.range_length;
  response.keep = response.ranged ? response.range_length : kMaxReplyBodyBytes;
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
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
  // Success bodies go straight into the caller's buffer (its capacity
  // reused), error bodies into response.body.
  response.success_target = &response.body;
  if (request.body_out != nullptr) {
    request.body_out->clear();
    response.success_target = request.body_out;
  }
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

absl::Duration S3ObjectStore::Backoff(int attempt) const {
  absl::Duration bound = config_.initial_backoff;
  for (int i = 1; i < attempt && bound < config_.max_backoff; ++i) bound *= 2;
  bound = std::min(bound, config_.max_backoff);
  // Half fixed, half random ("equal jitter"): growing waits that do not
  // line up across clients retrying at once.
  absl::MutexLock lock(&mu_);
  const double fraction = absl::Uniform(random_, 0.0, 1.0);
  return bound / 2 + (bound / 2) * fraction;
}

S3ObjectStore::Response S3ObjectStore::Send(const Request& request) const {
  const int max_attempts = std::max(1, config_.max_attempts);
  for (int attempt = 1;; ++attempt) {
    Response response = SendOnce(request);
    response.attempts = attempt;
    if (response.success() || !response.retryable() || attempt >= max_attempts) return response;
    sleep_for_(Backoff(attempt));
  }
}

bool S3ObjectStore::BucketMissing() const {
  Request request;
  request.head = true;
  const Response response = Send(request);
  return !response.network_failure() && response.http_status == 404;
}

absl::Status S3ObjectStore::DeniedStatus(const S3ErrorReply& reply, const std::string& detail,
                                         const std::string& what) const {
  const std::string key_id = absl::StrCat(
      "access key id ", base::SingleQuoteForMessage(config_.access_key_id, 40), " (from ",
      config_.credentials_source.empty() ? "the configuration" : config_.credentials_source, ")");
  if (reply.code == "InvalidAccessKeyId") {
    return absl::PermissionDeniedError(
        absl::StrCat("S3 at ", config_.endpoint, " does not know the ", key_id, " (", detail, ")"));
  }
  if (reply.code == "SignatureDoesNotMatch") {
    return absl::PermissionDeniedError(
        absl::StrCat("S3 at ", config_.endpoint, " refused the signature of ", key_id,
                     ": the secret access key is not the one of that key id (", detail, ")"));
  }
  if (IsSessionTokenErrorCode(reply.code)) {
    return absl::PermissionDeniedError(
        absl::StrCat("the session token of ", key_id, " is expired or invalid (", detail, ")"));
  }
  return absl::PermissionDeniedError(
      absl::StrCat("access to ", what, " denied for ", key_id, " (", detail, ")"));
}

absl::Status S3ObjectStore::ErrorStatus(const Response& response, const std::string& what,
                                        const Request& request) const {
  const std::string tries =
      response.attempts > 1 ? absl::StrCat(" (", response.attempts, " tries)") : "";
  if (!response.refused.empty()) {
    return absl::DataLossError(
        absl::StrCat(what, ": S3 at ", config_.endpoint, " answered wrongly: ", response.refused));
  }
  if (response.network_failure()) {
    // curl's own words, which already say what failed and where.
    const std::string reason = base::EscapeForMessage(response.curl_error, 200);
    if (response.curl_code == CURLE_PEER_FAILED_VERIFICATION ||
        response.curl_code == CURLE_SSL_CACERT_BADFILE) {
      return absl::FailedPreconditionError(
          absl::StrCat("TLS with the S3 endpoint ", config_.endpoint, " failed (", reason,
                       "); give the CA bundle that signed its certificate (AWS_CA_BUNDLE)"));
    }
    return absl::UnavailableError(absl::StrCat("cannot reach the S3 endpoint ", config_.endpoint,
                                               " for ", what, " (", reason, ")", tries));
  }
  const S3ErrorReply reply = ParseS3Error(response.body);
  std::string detail = reply.code.empty() ? absl::StrCat("HTTP ", response.http_status)
                                          : absl::StrCat(base::EscapeForMessage(reply.code, 60),
                                                         ", HTTP ", response.http_status);
  if (!reply.message.empty()) absl::StrAppend(&detail, ": ", base::EscapeForMessage(reply.message, 200));
  const int status = static_cast<int>(response.http_status);
  if (status == 404) {
    if (reply.code == "NoSuchBucket" ||
        (reply.code.empty() && !request.key.empty() && BucketMissing())) {
      // Not a missing "directory" (which readers wait for): nothing in
      // this store can be read until the bucket or the configuration is
      // fixed.
      return absl::FailedPreconditionError(
          absl::StrCat("bucket '", bucket_, "' does not exist at ", config_.endpoint));
    }
    if (reply.code.empty() || reply.code == "NoSuchKey") {
      return absl::NotFoundError(absl::StrCat(what, ": no such object"));
    }
    return absl::NotFoundError(absl::StrCat(what, ": ", detail));
  }
  // AWS refuses expired and invalid session tokens with 400.
  if (status == 401 || status == 403 || IsCredentialsErrorCode(reply.code)) {
    return DeniedStatus(reply, detail, what);
  }
  if (response.retryable()) {
    return absl::UnavailableError(absl::StrCat("S3 at ", config_.endpoint, " could not serve ",
                                               what, " (", detail, ")", tries));
  }
  std::string hint;
  if (reply.code == "PermanentRedirect" || reply.code == "AuthorizationHeaderMalformed" ||
      reply.code == "IllegalLocationConstraintException") {
    hint = absl::StrCat("; is the region '", config_.region, "' (AWS_REGION) the bucket's region?");
  }
  return absl::FailedPreconditionError(
      absl::StrCat("S3 at ", config_.endpoint, " refused ", what, " (", detail, ")", hint));
}

absl::StatusOr<ListObjectsV2Page> S3ObjectStore::ListPage(const ListOptions& options,
                                                          const std::string& continuation_token,
                                                          size_t max_keys) const {
  // Parameters in canonical (byte) order, so that the URL is what SigV4
  // signs.
  std::vector<std::string> query;
  if (!continuation_token.empty()) {
    query.push_back(absl::StrCat("continuation-token=", S3UriEncode(continuation_token, false)));
  }
  if (!options.delimiter.empty()) {
    query.push_back(absl::StrCat("delimiter=", S3UriEncode(options.delimiter, false)));
  }
  // Keys come URL-encoded: XML 1.0 cannot carry every byte a key may hold.
  query.push_back("encoding-type=url");
  query.push_back("list-type=2");
  query.push_back(absl::StrCat("max-keys=", max_keys));
  query.push_back(absl::StrCat("prefix=", S3UriEncode(options.prefix, false)));
  if (continuation_token.empty() && !options.start_after.empty()) {
    query.push_back(absl::StrCat("start-after=", S3UriEncode(options.start_after, false)));
  }
  Request request;
  request.query = absl::StrJoin(query, "&");
  const Response response = Send(request);
  const std::string what = absl::StrCat("the listing of ", Describe(options.prefix));
  if (!response.success()) return ErrorStatus(response, what, request);
  absl::StatusOr<ListObjectsV2Page> page = ParseListObjectsV2(response.body);
  if (!page.ok()) {
    return absl::DataLossError(
        absl::StrCat(what, " at ", config_.endpoint, ": ", page.status().message()));
  }
  return page;
}

absl::StatusOr<ListResult> S3ObjectStore::List(const ListOptions& options) const {
  if (absl::Status status = ValidatePrefix(options.prefix); !status.ok()) return status;
  if (!options.delimiter.empty() && options.delimiter != "/") {
    return absl::InvalidArgumentError(absl::StrCat("list delimiter ",
                                                   base::SingleQuoteForMessage(options.delimiter, 20),
                                                   ": only '/' (or none) is supported"));
  }
  ListResult result;
  const size_t wanted = std::max<size_t>(1, options.max_keys);
  size_t gathered = 0;
  std::string token;
  int empty_pages_in_a_row = 0;
  while (true) {
    // A common prefix equal to start_after comes back (S3 rolls the keys
    // after it up into it) and is dropped below: ask for one more.
    const size_t ask = std::min(kMaxKeysPerPage, wanted - gathered + 1);
    absl::StatusOr<ListObjectsV2Page> page = ListPage(options, token, ask);
    if (!page.ok()) return page.status();
    // Objects and common prefixes merged in key order, both after
    // start_after, until `wanted` of them are taken.
    size_t object = 0, common = 0;
    const auto& objects = page->objects;
    const auto& prefixes = page->common_prefixes;
    while (object < objects.size() || common < prefixes.size()) {
      const bool take_object = common >= prefixes.size() ||
                               (object < objects.size() && objects[object].key < prefixes[common]);
      const std::string& name = take_object ? objects[object].key : prefixes[common];
      if (!options.start_after.empty() && name <= options.start_after) {
        take_object ? ++object : ++common;
        continue;
      }
      if (gathered == wanted) {
        result.truncated = true;
        return result;
      }
      if (take_object) {
        result.objects.push_back(objects[object++]);
      } else {
        result.common_prefixes.push_back(prefixes[common++]);
      }
      result.next_start_after = name;
      ++gathered;
    }
    if (!page->truncated) return result;
    if (gathered == wanted) {
      result.truncated = true;
      return result;
    }
    empty_pages_in_a_row = objects.empty() && prefixes.empty() ? empty_pages_in_a_row + 1 : 0;
    if (absl::Status progress = CheckListingProgress(options, *page, token, empty_pages_in_a_row);
        !progress.ok()) {
      return progress;
    }
    token = page->next_continuation_token;
  }
}

absl::Status S3ObjectStore::CheckListingProgress(const ListOptions& options,
                                                 const ListObjectsV2Page& page,
                                                 const std::string& token,
                                                 int empty_pages_in_a_row) const {
  // A truncated page must say where the next one starts, somewhere new;
  // else the listing would be followed forever.
  std::string wrong;
  if (page.next_continuation_token.empty()) {
    wrong = "says IsTruncated without a NextContinuationToken";
  } else if (page.next_continuation_token == token) {
    wrong = "says IsTruncated and gives back the continuation token it was asked with";
  } else if (empty_pages_in_a_row > kMaxEmptyPagesInARow) {
    wrong = absl::StrCat("gave ", empty_pages_in_a_row,
                         " pages in a row without keys, each saying IsTruncated");
  }
  if (wrong.empty()) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("the listing of ", Describe(options.prefix), " at ",
                                          config_.endpoint, " ", wrong, "; it would never end"));
}

absl::Status S3ObjectStore::ReadRangeInto(absl::string_view key, uint64_t offset, uint64_t length,
                                          std::string* out) const {
  out->clear();
  if (absl::Status status = ValidateKey(key); !status.ok()) return status;
  if (length > kMaxReadBytes) {
    return absl::InvalidArgumentError(absl::StrCat("read of ", length, " bytes of ", Describe(key),
                                                   ": at most ", kMaxReadBytes, " at once"));
  }
  if (length == 0) return Stat(key).status();
  // No object reaches past 2^64 - 1: the range ends there at most.
  length = std::min(length, std::numeric_limits<uint64_t>::max() - offset);
  if (length == 0) return absl::OkStatus();
  Request request;
  request.key = std::string(key);
  request.body_out = out;
  request.range = absl::StrCat("bytes=", offset, "-", offset + length - 1);
  request.range_offset = offset;
  request.range_length = length;
  const Response response = Send(request);
  if (!response.network_failure() && response.http_status == 416) {
    out->clear();  // The range starts at or after the object's end.
    return absl::OkStatus();
  }
  if (!response.success()) return ErrorStatus(response, Describe(key), request);
  if (response.http_status == 206) {
    if (ContentRangeStart(response.content_range) != offset) {
      out->clear();
      return absl::DataLossError(absl::StrCat(
          Describe(key), ": S3 at ", config_.endpoint, " answered a read from byte ", offset,
          " with other bytes (Content-Range ", base::QuoteForMessage(response.content_range, 60), ")"));
    }
    return absl::OkStatus();
  }
  // A whole object (a server that ignores Range): the bytes before the
  // range were dropped as they arrived, and no more than the range kept.
  return absl::OkStatus();
}

absl::StatusOr<ObjectEntry> S3ObjectStore::Stat(absl::string_view key) const {
  if (absl::Status status = ValidateKey(key); !status.ok()) return status;
  Request request;
  request.head = true;
  request.key = std::string(key);
  const Response response = Send(request);
  if (!response.success()) return ErrorStatus(response, Describe(key), request);
  if (!response.content_length.has_value()) {
    return absl::DataLossError(absl::StrCat(Describe(key), ": S3 at ", config_.endpoint,
                                            " answered HEAD without a Content-Length"));
  }
  ObjectEntry entry;
  entry.key = std::string(key);
  entry.size = *response.content_length;
  entry.modified = ParseHttpDate(response.last_modified);
  return entry;
}

namespace {

// The text of `element` under the root of `xml`, if the root is `root`.
std::optional<std::string> XmlRootChildText(absl::string_view xml, const char* root,
                                            const char* element) {
  tinyxml2::XMLDocument document;
  if (document.Parse(xml.data(), xml.size()) != tinyxml2::XML_SUCCESS) return std::nullopt;
  const tinyxml2::XMLElement* top = document.RootElement();
  if (top == nullptr || std::string_view(top->Name()) != root) return std::nullopt;
  const tinyxml2::XMLElement* child = top->FirstChildElement(element);
  if (child == nullptr || child->GetText() == nullptr) return std::nullopt;
  return std::string(child->GetText());
}

std::string XmlEscape(absl::string_view text) {
  std::string escaped;
  for (char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      default:
        escaped.push_back(c);
    }
  }
  return escaped;
}

}  // namespace

absl::Status S3ObjectStore::Put(absl::string_view key, absl::string_view data) const {
  if (absl::Status status = ValidateKey(key); !status.ok()) return status;
  if (data.size() <= multipart_part_bytes_) return PutSingle(key, data);
  // Parts large enough to stay within S3's count.
  const uint64_t part_bytes =
      std::max<uint64_t>(multipart_part_bytes_, (data.size() + kMaxParts - 1) / kMaxParts);
  return PutMultipart(key, data, part_bytes);
}

absl::Status S3ObjectStore::PutSingle(absl::string_view key, absl::string_view data) const {
  Request request;
  request.method = "PUT";
  request.key = std::string(key);
  request.body = data;
  const Response response = Send(request);
  if (!response.success()) return ErrorStatus(response, Describe(key), request);
  return absl::OkStatus();
}

absl::Status S3ObjectStore::PutMultipart(absl::string_view key, absl::string_view data,
                                         uint64_t part_bytes) const {
  const std::string what = Describe(key);
  Request create;
  create.method = "POST";
  create.key = std::string(key);
  create.query = "uploads=";
  const Response created = Send(create);
  if (!created.success()) return ErrorStatus(created, what, create);
  const std::optional<std::string> upload_id =
      XmlRootChildText(created.body, "InitiateMultipartUploadResult", "UploadId");
  if (!upload_id.has_value() || upload_id->empty()) {
    return absl::DataLossError(absl::StrCat(what, ": S3 at ", config_.endpoint,
                                            " answered CreateMultipartUpload without an UploadId"));
  }
  const std::string encoded_upload_id = S3UriEncode(*upload_id, /*keep_slash=*/false);
  std::string completion = "<CompleteMultipartUpload>";
  int part_number = 0;
  for (uint64_t offset = 0; offset < data.size(); offset += part_bytes) {
    ++part_number;
    Request part;
    part.method = "PUT";
    part.key = std::string(key);
    part.query = absl::StrCat("partNumber=", part_number, "&uploadId=", encoded_upload_id);
    part.body = data.substr(offset, part_bytes);
    const Response uploaded = Send(part);
    if (!uploaded.success()) {
      absl::Status status =
          ErrorStatus(uploaded, absl::StrCat(what, " (part ", part_number, ")"), part);
      AbortMultipart(key, *upload_id);
      return status;
    }
    absl::StrAppend(&completion, "<Part><PartNumber>", part_number, "</PartNumber><ETag>",
                    XmlEscape(uploaded.etag), "</ETag></Part>");
  }
  absl::StrAppend(&completion, "</CompleteMultipartUpload>");
  Request complete;
  complete.method = "POST";
  complete.key = std::string(key);
  complete.query = absl::StrCat("uploadId=", encoded_upload_id);
  complete.body = completion;
  const Response completed = Send(complete);
  if (!completed.success()) {
    // A retried completion whose first try took effect finds no upload:
    // the object is there if it has the size uploaded.
    if (completed.attempts > 1 && completed.http_status == 404) {
      absl::StatusOr<ObjectEntry> stored = Stat(key);
      if (stored.ok() && stored->size == data.size()) return absl::OkStatus();
    }
    absl::Status status = ErrorStatus(completed, what, complete);
    AbortMultipart(key, *upload_id);
    return status;
  }
  // S3 may answer 200 and report a failure in the body.
  const S3ErrorReply reply = ParseS3Error(completed.body);
  if (!reply.code.empty()) {
    AbortMultipart(key, *upload_id);
    return absl::DataLossError(absl::StrCat(
        what, ": S3 at ", config_.endpoint, " did not complete the multipart upload (",
        base::EscapeForMessage(reply.code, 60), ": ", base::EscapeForMessage(reply.message, 200), ")"));
  }
  return absl::OkStatus();
}

void S3ObjectStore::AbortMultipart(absl::string_view key, const std::string& upload_id) const {
  Request abort;
  abort.method = "DELETE";
  abort.key = std::string(key);
  abort.query = absl::StrCat("uploadId=", S3UriEncode(upload_id, /*keep_slash=*/false));
  Send(abort);  // Best effort: a lifecycle rule on the bucket drops what remains.
}

S3BucketStoreFactory MakeS3BucketStoreFactory(S3ConfigOverrides overrides,
                                              EnvironmentLookup environment) {
  return [overrides = std::move(overrides), environment = std::move(environment)](
             absl::string_view bucket) -> absl::StatusOr<std::shared_ptr<const ObjectStore>> {
    auto explain = [bucket](const absl::Status& status) {
      return absl::Status(status.code(),
                          absl::StrCat("cannot read s3://", bucket, ": ", status.message()));
    };
    absl::StatusOr<S3Config> config = LoadS3Config(overrides, environment);
    if (!config.ok()) return explain(config.status());
    S3ObjectStore::Options options;
    options.config = *std::move(config);
    options.bucket = std::string(bucket);
    absl::StatusOr<std::shared_ptr<S3ObjectStore>> store =
        S3ObjectStore::Create(std::move(options));
    if (!store.ok()) return explain(store.status());
    return std::shared_ptr<const ObjectStore>(*std::move(store));
  };
}

}  // namespace debugplane::objectstore
