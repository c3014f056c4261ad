#include "objectstore/s3_object_store.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/message_text.h"

namespace debugplane::objectstore {
namespace {

// S3's minimum size of a multipart upload's parts (but the last).
constexpr uint64_t kMinPartBytes = 5 << 20;

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

bool IsSessionTokenErrorCode(absl::string_view code) {
  return code == "ExpiredToken" || code == "InvalidToken" || code == "TokenRefreshRequired";
}

// S3 error codes that refuse the credentials, whatever the HTTP status.
bool IsCredentialsErrorCode(absl::string_view code) {
  return IsSessionTokenErrorCode(code) || code == "InvalidAccessKeyId" ||
         code == "SignatureDoesNotMatch";
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
  return std::shared_ptr<S3ObjectStore>(new S3ObjectStore(std::move(options)));
}

S3ObjectStore::S3ObjectStore(Options options)
    : config_(std::move(options.config)),
      bucket_(std::move(options.bucket)),
      multipart_part_bytes_(options.multipart_part_bytes),
      transport_(config_, bucket_, std::move(options.sleep_for)) {}

S3ObjectStore::~S3ObjectStore() = default;

std::string S3ObjectStore::Describe(absl::string_view key) const {
  if (key.empty()) return absl::StrCat("s3://", bucket_);
  return absl::StrCat("s3://", bucket_, "/", key);
}

bool S3ObjectStore::BucketMissing() const {
  S3Request request;
  request.head = true;
  const S3Response response = transport_.Send(request);
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

absl::Status S3ObjectStore::ErrorStatus(const S3Response& response, const std::string& what,
                                        const S3Request& request) const {
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
  S3Request request;
  request.key = std::string(key);
  request.body_out = out;
  request.range = absl::StrCat("bytes=", offset, "-", offset + length - 1);
  request.range_offset = offset;
  request.range_length = length;
  const S3Response response = transport_.Send(request);
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
  S3Request request;
  request.head = true;
  request.key = std::string(key);
  const S3Response response = transport_.Send(request);
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
