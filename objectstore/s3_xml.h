// The XML replies of S3's REST API that S3ObjectStore reads, parsed with
// tinyxml2: a ListObjectsV2 page and an error reply. Input is untrusted (any
// server, or something pretending to be one): parsing never crashes, and
// errors never quote the reply beyond a short escaped excerpt.

#ifndef DEBUGPLANE_OBJECTSTORE_S3_XML_H_
#define DEBUGPLANE_OBJECTSTORE_S3_XML_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "objectstore/object_store.h"

namespace debugplane::objectstore {

// One page of a ListObjectsV2 reply (<ListBucketResult>).
struct ListObjectsV2Page {
  std::vector<ObjectEntry> objects;          // <Contents>: Key, Size, LastModified
  std::vector<std::string> common_prefixes;  // <CommonPrefixes><Prefix>
  bool truncated = false;                    // <IsTruncated>true
  std::string next_continuation_token;       // <NextContinuationToken>
};

// The page in `xml`. Keys and common prefixes are decoded when the reply
// says <EncodingType>url</EncodingType> (S3 then sends them URL-encoded, so
// that any key, control characters included, fits in XML 1.0; '+' is a
// space). DATA_LOSS if it is not well-formed XML, its root is not
// ListBucketResult, or an entry lacks its Key / Prefix, has a Size that is
// not a decimal number, or a LastModified that is not an ISO 8601 time (an
// absent LastModified is InfinitePast). A truncated page without a
// continuation token is DATA_LOSS too (it could never be continued).
absl::StatusOr<ListObjectsV2Page> ParseListObjectsV2(absl::string_view xml);

// An S3 error reply: <Error><Code>NoSuchBucket</Code><Message>...</Message>.
struct S3ErrorReply {
  std::string code;     // "" when the body is not an S3 error document
  std::string message;  // "" when absent
};

// The code and message of an error reply; both empty when `xml` is not one
// (empty, HTML from a proxy, a HEAD reply). Never fails.
S3ErrorReply ParseS3Error(absl::string_view xml);

// The UploadId of an InitiateMultipartUploadResult document (the answer to
// CreateMultipartUpload); nullopt if `xml` is not one or has no UploadId.
std::optional<std::string> ParseUploadId(absl::string_view xml);

// The CompleteMultipartUpload document naming parts 1, 2, ... with
// `part_etags` (as UploadPart answered them, in part order).
std::string CompleteMultipartUploadXml(const std::vector<std::string>& part_etags);

}  // namespace debugplane::objectstore

#endif  // DEBUGPLANE_OBJECTSTORE_S3_XML_H_
