// S3Transport: the signed HTTP exchanges of S3ObjectStore with one bucket of
// an S3-compatible store, over libcurl.
//
// Each request is signed with AWS Signature Version 4 by libcurl
// (CURLOPT_AWS_SIGV4), with the payload's SHA-256 (x-amz-content-sha256),
// the session token as x-amz-security-token and, for a payload, its
// Content-MD5. Keys are URI-encoded as SigV4 canonicalizes them
// (S3UriEncode), and callers give the query already in canonical (sorted)
// order, so the URL curl signs is already canonical.
//
// Every request has a connect and a total timeout (S3Config). Network
// errors, HTTP 5xx and throttling (429, 503 SlowDown) are retried with
// exponential backoff and "equal jitter", up to S3Config::max_attempts
// tries; other replies are final. Connections are reused: a small pool of
// curl handles (S3Config::max_idle_connections), each keeping its
// connection alive between requests.
//
// Memory: a ranged read into a caller's buffer keeps at most the bytes of
// its range, whatever the server sends; other success replies are kept up
// to 16 MiB and error replies up to 64 KiB (a reply over its bound is
// refused: S3Response::refused).
//
// Thread-safe: any number of threads may Send at once; each request uses
// its own curl handle.

#ifndef DEBUGPLANE_OBJECTSTORE_S3_TRANSPORT_H_
#define DEBUGPLANE_OBJECTSTORE_S3_TRANSPORT_H_

#include <curl/curl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "objectstore/aws_config.h"

namespace debugplane::objectstore {

// The URI encoding of SigV4 (and S3): bytes other than A-Z a-z 0-9 - _ . ~
// as %XX (upper-case hex); '/' kept when `keep_slash` (key paths).
std::string S3UriEncode(absl::string_view text, bool keep_slash);

// One HTTP exchange to send.
struct S3Request {
  bool head = false;   // HEAD (no body) instead of GET
  std::string method;  // "PUT", "POST", "DELETE"; "" for GET/HEAD
  // The payload of a PUT or POST; must outlive the request.
  absl::string_view body;
  std::string key;                  // "" for the bucket itself
  std::string query;                // canonical: sorted, S3UriEncode'd; "" if none
  std::string range;                // "bytes=FIRST-[LAST]", "" for the whole object
  std::string* body_out = nullptr;  // where a successful body goes (else S3Response::body)
  // With body_out and a range: the first byte and the length of the range
  // asked for. At most `range_length` bytes of a success body are kept; of a
  // whole object (200: Range ignored) the bytes before `range_offset` are
  // dropped. The transfer is stopped once they are there.
  uint64_t range_offset = 0;
  uint64_t range_length = 0;
};

// The outcome of an S3Request: a network failure, a refused reply, or an
// HTTP status with its headers and body.
struct S3Response {
  CURLcode curl_code = CURLE_OK;
  std::string curl_error;  // curl's reason, when curl_code is not CURLE_OK
  long http_status = 0;
  std::string body;  // the error body, or the body when S3Request::body_out is null
  // Where the body being received goes: success_target for a 2xx reply,
  // `body` otherwise (decided at the status line).
  std::string* body_target = nullptr;
  std::string* success_target = nullptr;
  // Whether the body being received is an error body, which is kept only as
  // far as its code and message need (64 KiB; a success body, e.g. a
  // listing page of 1000 keys, is kept up to `keep`).
  bool error_body = true;
  // Of a success body: bytes still to drop before keeping (a whole-object
  // answer to a ranged GET), and at most how many to keep.
  uint64_t skip = 0;
  uint64_t keep = 0;
  // The transfer was stopped on purpose: every byte wanted was there
  // (`stopped_complete`) or the reply was refused (`refused`: why).
  bool stopped_complete = false;
  std::string refused;
  // The request's range (S3Request::range_offset/length; not `ranged`: no
  // range, the reply kept up to 16 MiB).
  bool ranged = false;
  uint64_t range_offset = 0;
  uint64_t range_length = 0;
  std::optional<uint64_t> content_length;
  std::string last_modified;
  std::string content_range;
  std::string etag;
  std::string url;
  int attempts = 0;

  // The endpoint could not be reached or the exchange broke off.
  bool network_failure() const;
  // A 2xx reply, received whole (or every byte of a range).
  bool success() const;
  // Worth another try: a passing network failure, 5xx or 429.
  bool retryable() const;
};

class S3Transport {
 public:
  // Requests to `bucket` at `config.endpoint` (normalized), signed with
  // `config`'s credentials for its region; `sleep_for` waits between tries.
  // Initializes libcurl once per process. Makes no request.
  S3Transport(const S3Config& config, std::string bucket,
              std::function<void(absl::Duration)> sleep_for);
  ~S3Transport();

  S3Transport(const S3Transport&) = delete;
  S3Transport& operator=(const S3Transport&) = delete;

  // Sends `request` with retries as the file comment says; the last
  // response (or network failure) once it is final. Of a request with
  // body_out, the body is there only on success (cleared otherwise).
  S3Response Send(const S3Request& request) const;

  // The URL of `key` ("" for the bucket) with `query` (already canonical).
  std::string Url(absl::string_view key, absl::string_view query) const;

 private:
  // A curl easy handle and the connection it keeps open.
  class CurlHandle;

  // One try of `request` on a pooled handle.
  S3Response SendOnce(const S3Request& request) const;
  // The wait before try `attempt` + 1 (attempt >= 1).
  absl::Duration Backoff(int attempt) const;
  // An idle pooled handle, or a new one (nullptr if curl cannot make one).
  std::unique_ptr<CurlHandle> AcquireHandle() const;
  // Back into the pool for reuse (dropped when the pool is full).
  void ReleaseHandle(std::unique_ptr<CurlHandle> handle) const;

  const S3Config config_;
  const std::string bucket_;
  // Whether requests name the bucket in the path (else in the host name).
  const bool path_style_;
  const std::function<void(absl::Duration)> sleep_for_;
  // "aws:amz:<region>:s3", for CURLOPT_AWS_SIGV4.
  const std::string sigv4_provider_;

  mutable absl::Mutex mu_;
  mutable std::vector<std::unique_ptr<CurlHandle>> idle_handles_ ABSL_GUARDED_BY(mu_);
  mutable absl::BitGen random_ ABSL_GUARDED_BY(mu_);
};

}  // namespace debugplane::objectstore

#endif  // DEBUGPLANE_OBJECTSTORE_S3_TRANSPORT_H_
