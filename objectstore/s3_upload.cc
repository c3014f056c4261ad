// S3ObjectStore's uploads: one PUT for a small object, a multipart upload
// (create, parts, complete; aborted on failure) for a large one
// (s3_object_store.h).

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/message_text.h"
#include "objectstore/s3_object_store.h"

namespace debugplane::objectstore {
namespace {

// S3's cap on the parts of one multipart upload.
constexpr uint64_t kMaxParts = 10000;

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
  S3Request request;
  request.method = "PUT";
  request.key = std::string(key);
  request.body = data;
  const S3Response response = transport_.Send(request);
  if (!response.success()) return ErrorStatus(response, Describe(key), request);
  return absl::OkStatus();
}

absl::Status S3ObjectStore::PutMultipart(absl::string_view key, absl::string_view data,
                                         uint64_t part_bytes) const {
  absl::StatusOr<std::string> upload_id = StartMultipart(key);
  if (!upload_id.ok()) return upload_id.status();
  absl::StatusOr<std::vector<std::string>> part_etags =
      UploadParts(key, *upload_id, data, part_bytes);
  if (!part_etags.ok()) {
    AbortMultipart(key, *upload_id);
    return part_etags.status();
  }
  absl::Status completed = CompleteMultipart(key, *upload_id, *part_etags, data.size());
  if (!completed.ok()) AbortMultipart(key, *upload_id);
  return completed;
}

absl::StatusOr<std::string> S3ObjectStore::StartMultipart(absl::string_view key) const {
  S3Request create;
  create.method = "POST";
  create.key = std::string(key);
  create.query = "uploads=";
  const S3Response created = transport_.Send(create);
  if (!created.success()) return ErrorStatus(created, Describe(key), create);
  const std::optional<std::string> upload_id = ParseUploadId(created.body);
  if (!upload_id.has_value() || upload_id->empty()) {
    return absl::DataLossError(absl::StrCat(Describe(key), ": S3 at ", config_.endpoint,
                                            " answered CreateMultipartUpload without an UploadId"));
  }
  return *upload_id;
}

absl::StatusOr<std::vector<std::string>> S3ObjectStore::UploadParts(absl::string_view key,
                                                                    const std::string& upload_id,
                                                                    absl::string_view data,
                                                                    uint64_t part_bytes) const {
  const std::string encoded_upload_id = S3UriEncode(upload_id, /*keep_slash=*/false);
  std::vector<std::string> part_etags;
  for (uint64_t offset = 0; offset < data.size(); offset += part_bytes) {
    const size_t part_number = part_etags.size() + 1;
    S3Request part;
    part.method = "PUT";
    part.key = std::string(key);
    part.query = absl::StrCat("partNumber=", part_number, "&uploadId=", encoded_upload_id);
    part.body = data.substr(offset, part_bytes);
    const S3Response uploaded = transport_.Send(part);
    if (!uploaded.success()) {
      return ErrorStatus(uploaded, absl::StrCat(Describe(key), " (part ", part_number, ")"), part);
    }
    part_etags.push_back(uploaded.etag);
  }
  return part_etags;
}

absl::Status S3ObjectStore::CompleteMultipart(absl::string_view key, const std::string& upload_id,
                                              const std::vector<std::string>& part_etags,
                                              uint64_t object_bytes) const {
  const std::string what = Describe(key);
  const std::string completion = CompleteMultipartUploadXml(part_etags);
  S3Request complete;
  complete.method = "POST";
  complete.key = std::string(key);
  complete.query = absl::StrCat("uploadId=", S3UriEncode(upload_id, /*keep_slash=*/false));
  complete.body = completion;
  const S3Response completed = transport_.Send(complete);
  if (!completed.success()) {
    // A retried completion whose first try took effect finds no upload:
    // the object is there if it has the size uploaded.
    if (completed.attempts > 1 && completed.http_status == 404) {
      absl::StatusOr<ObjectEntry> stored = Stat(key);
      if (stored.ok() && stored->size == object_bytes) return absl::OkStatus();
    }
    return ErrorStatus(completed, what, complete);
  }
  // S3 may answer 200 and report a failure in the body.
  const S3ErrorReply reply = ParseS3Error(completed.body);
  if (!reply.code.empty()) {
    return absl::DataLossError(absl::StrCat(what, ": S3 at ", config_.endpoint,
                                            " did not complete the multipart upload (",
                                            base::EscapeForMessage(reply.code, 60), ": ",
                                            base::EscapeForMessage(reply.message, 200), ")"));
  }
  return absl::OkStatus();
}

void S3ObjectStore::AbortMultipart(absl::string_view key, const std::string& upload_id) const {
  S3Request abort;
  abort.method = "DELETE";
  abort.key = std::string(key);
  abort.query = absl::StrCat("uploadId=", S3UriEncode(upload_id, /*keep_slash=*/false));
  transport_.Send(abort);  // Best effort: a lifecycle rule on the bucket drops what remains.
}

}  // namespace debugplane::objectstore
