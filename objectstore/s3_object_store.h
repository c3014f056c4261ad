// S3ObjectStore: an ObjectStore over one bucket of an S3-compatible store
// (AWS S3, MinIO, Ceph RGW, moto...), read with libcurl.
//
// Requests: ListObjectsV2 (GET ?list-type=2 with prefix, start-after,
// delimiter, max-keys and continuation-token; encoding-type=url, so that
// keys with any bytes list), ranged GET for reads, HEAD
// for Stat, PUT (and multipart uploads for large objects) for Put; each
// signed with AWS Signature Version 4 by libcurl
// (CURLOPT_AWS_SIGV4), with the session token as x-amz-security-token. Keys
// are URI-encoded as SigV4 canonicalizes them (every byte but A-Z a-z 0-9
// - _ . ~ and the '/' between components as %XX) and the query is built in
// canonical (sorted) order, so the URL curl signs is already canonical.
//
// Every request has a connect and a total timeout (S3Config). Network
// errors, HTTP 5xx and throttling (429, 503 SlowDown) are retried with
// exponential backoff and jitter, up to S3Config::max_attempts tries; other
// 4xx replies are not retried. Connections are reused: a small pool of curl
// handles, each keeping its connection alive between requests.
//
// Errors (object_store.h), with messages a user can act on (never a secret):
//   NOT_FOUND          no such object
//   PERMISSION_DENIED  AccessDenied, InvalidAccessKeyId,
//                      SignatureDoesNotMatch, an expired or invalid session
//                      token: naming the access key id and where it came from
//   UNAVAILABLE        the endpoint cannot be reached (naming the URL and
//                      curl's reason), timeouts, 5xx and throttling still
//                      failing after the last try
//   DATA_LOSS          a reply that is not what S3 sends (a listing that is
//                      not ListObjectsV2 XML, a ranged reply for other bytes,
//                      a listing page that says IsTruncated but leads
//                      nowhere new, a reply over 16 MiB where no caller
//                      bounds it, a whole-object answer to a read starting
//                      past 64 MiB)
//
// Memory: a read keeps at most the bytes of its range, whatever the server
// sends (more is dropped and the transfer stopped; of a whole-object answer
// to a ranged GET only the range is kept); other replies are kept up to
// 16 MiB (listings) and error replies up to 64 KiB.
//   FAILED_PRECONDITION  no such bucket ("bucket 'x' does not exist at
//                      http://127.0.0.1:9000": not a missing "directory",
//                      which readers wait for); any other refusal (400, a
//                      redirect to another region, ...): the configuration
//                      is wrong, retrying will not help; the message has
//                      S3's code and text
//   INVALID_ARGUMENT   an invalid key (ValidateKey)
// S3 has no directories: listing under a prefix with no keys is an empty
// result, never NOT_FOUND.
//
// Thread-safe: any number of threads may call at once; each request uses
// its own curl handle.

#ifndef DEBUGPLANE_OBJECTSTORE_S3_OBJECT_STORE_H_
#define DEBUGPLANE_OBJECTSTORE_S3_OBJECT_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "objectstore/aws_config.h"
#include "objectstore/object_store.h"
#include "objectstore/s3_transport.h"
#include "objectstore/s3_xml.h"

namespace debugplane::objectstore {

class S3ObjectStore final : public ObjectStore {
 public:
  struct Options {
    S3Config config;
    std::string bucket;
    // Waits between tries; absl::SleepFor by default. Tests record them.
    std::function<void(absl::Duration)> sleep_for;
    // Put sends objects of more than this many bytes as a multipart upload
    // in parts of this size (the last one smaller). S3 refuses parts under
    // 5 MiB (but the last) and more than 10000 parts; Create refuses a
    // smaller size, and Put raises it for objects that would need more.
    uint64_t multipart_part_bytes = 16 << 20;
  };

  // A store over `options.bucket`. No request is made (the bucket is
  // checked by the first request). INVALID_ARGUMENT if the bucket name is
  // not a valid S3 bucket name (3-63 of a-z 0-9 . -, starting and ending
  // with a letter or digit) or the endpoint is not http(s)://host[:port];
  // UNAUTHENTICATED if the access key id or secret is empty.
  static absl::StatusOr<std::shared_ptr<S3ObjectStore>> Create(Options options);

  ~S3ObjectStore() override;

  absl::StatusOr<ListResult> List(const ListOptions& options) const override;
  absl::Status ReadRangeInto(absl::string_view key, uint64_t offset, uint64_t length,
                             std::string* out) const override;
  absl::StatusOr<ObjectEntry> Stat(absl::string_view key) const override;
  // A HEAD per Stat: readers list instead.
  bool StatIsARoundTrip() const override { return true; }
  // "s3://bucket/key" ("s3://bucket" for "").
  std::string Describe(absl::string_view key) const override;

  // Stores `data` at `key`, replacing any object there; a reader sees the
  // old object or the whole new one, never a part. Up to
  // Options::multipart_part_bytes: one PUT with Content-MD5 (S3 refuses a
  // body that arrived changed) and the payload's SHA-256 signed
  // (x-amz-content-sha256). Larger: a multipart upload (CreateMultipartUpload,
  // one UploadPart per part, each with its MD5 and SHA-256,
  // CompleteMultipartUpload), aborted when a part or the completion fails,
  // so that no stored parts are left behind. Every request is retried as
  // reads are; a PUT is idempotent, so a retried one stores the same bytes.
  // Errors as for reads (the file comment): FAILED_PRECONDITION for a
  // missing bucket,
  // PERMISSION_DENIED, UNAVAILABLE (the store is down: try again later),
  // INVALID_ARGUMENT for an invalid key, DATA_LOSS when S3 answers the
  // completion of a multipart upload with an error document. Thread-safe.
  absl::Status Put(absl::string_view key, absl::string_view data) const;

  const std::string& bucket() const { return bucket_; }
  const S3Config& config() const { return config_; }

 private:
  explicit S3ObjectStore(Options options);

  // The status for a response that is not a success, for `what` (the
  // object or listing, as Describe names it).
  absl::Status ErrorStatus(const S3Response& response, const std::string& what,
                           const S3Request& request) const;
  // The status of a 401/403 reply: which key id was refused and why
  // (`detail`: S3's code and message).
  absl::Status DeniedStatus(const S3ErrorReply& reply, const std::string& detail,
                            const std::string& what) const;
  // A HEAD of the bucket: whether a 404 on a key means the bucket is gone.
  bool BucketMissing() const;

  // Listing (s3_listing.cc).
  // OK if the truncated listing `page`, asked for with `token`, leads on to
  // a next page; DATA_LOSS naming the listing and the endpoint otherwise.
  absl::Status CheckListingProgress(const ListOptions& options, const ListObjectsV2Page& page,
                                    const std::string& token, int empty_pages_in_a_row) const;
  // One ListObjectsV2 request: options.start_after on the first page
  // (`continuation_token` empty), the token on later ones.
  absl::StatusOr<ListObjectsV2Page> ListPage(const ListOptions& options,
                                             const std::string& continuation_token,
                                             size_t max_keys) const;

  // Uploads (s3_upload.cc).
  // One PUT of the whole object.
  absl::Status PutSingle(absl::string_view key, absl::string_view data) const;
  // A multipart upload of `data` in parts of `part_bytes`: started, the
  // parts uploaded, completed; aborted when a step after the start fails.
  absl::Status PutMultipart(absl::string_view key, absl::string_view data,
                            uint64_t part_bytes) const;
  // CreateMultipartUpload: the new upload's id.
  absl::StatusOr<std::string> StartMultipart(absl::string_view key) const;
  // UploadPart for each `part_bytes` of `data`: the parts' ETags in order.
  absl::StatusOr<std::vector<std::string>> UploadParts(absl::string_view key,
                                                       const std::string& upload_id,
                                                       absl::string_view data,
                                                       uint64_t part_bytes) const;
  // CompleteMultipartUpload of the parts with `part_etags`; OK also when a
  // retried completion finds the first try took effect (the object has
  // `object_bytes`).
  absl::Status CompleteMultipart(absl::string_view key, const std::string& upload_id,
                                 const std::vector<std::string>& part_etags,
                                 uint64_t object_bytes) const;
  // Best effort: drops the parts of an upload that will not complete.
  void AbortMultipart(absl::string_view key, const std::string& upload_id) const;

  const S3Config config_;
  const std::string bucket_;
  const uint64_t multipart_part_bytes_;
  const S3Transport transport_;
};

// Makes the store of a bucket: what DataRootStores (core/jobs/output_path.h)
// takes to read s3:// output paths. Each call loads the configuration
// afresh (LoadS3Config(overrides, environment)), so credentials or a
// profile written after a failure take effect on the next call; the store
// takes the timeouts and retries of S3Config's defaults. Makes no request.
// Errors keep LoadS3Config's and Create's codes, the message prefixed with
// "cannot read s3://bucket: ". Thread-safe.
using S3BucketStoreFactory =
    std::function<absl::StatusOr<std::shared_ptr<const ObjectStore>>(absl::string_view bucket)>;
S3BucketStoreFactory MakeS3BucketStoreFactory(S3ConfigOverrides overrides,
                                              EnvironmentLookup environment);

}  // namespace debugplane::objectstore

#endif  // DEBUGPLANE_OBJECTSTORE_S3_OBJECT_STORE_H_
