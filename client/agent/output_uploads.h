// The agent's uploads of a job's s3:// output (issue 11): the training
// process writes into a local directory, and the agent uploads each file to
// the job's S3 prefix as it is complete (objectstore/directory_uploader.h).
//
// Credentials and endpoint follow the AWS conventions (LoadS3Config in
// objectstore/aws_config.h: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL,
// AWS_REGION, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
// AWS_PROFILE and the shared files), as the server's.

#ifndef DEBUGPLANE_CLIENT_AGENT_OUTPUT_UPLOADS_H_
#define DEBUGPLANE_CLIENT_AGENT_OUTPUT_UPLOADS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "objectstore/aws_config.h"
#include "objectstore/directory_uploader.h"

namespace debugplane::client {

// "s3://bucket/some/prefix/" as bucket "bucket", prefix "some/prefix" (no
// trailing '/'; "" for the bucket's top).
struct S3Location {
  std::string bucket;
  std::string prefix;
};

// The location `uri` names; nullopt when it is not an s3:// URI.
// INVALID_ARGUMENT naming `field` when it is one without a bucket
// ("s3://", "s3:///x").
absl::StatusOr<std::optional<S3Location>> ParseS3Location(absl::string_view field,
                                                          absl::string_view uri);

// One output to upload: the local directory the training writes and the
// s3:// URI of the job field it goes to.
struct OutputUpload {
  std::string field;  // "DebugHookConfig.S3OutputPath", for messages
  std::string uri;    // "s3://bucket/prefix"
  std::string local_dir;
  // Relative path prefixes of files appended to while training ("system/").
  std::vector<std::string> appended_prefixes;
  // Whether TensorBoard event files are appended to while training.
  bool appended_event_files = false;
};

// Loads the S3 configuration from `environment`, checks that each bucket is
// there and the credentials may list it (one ListObjectsV2 of the prefix),
// and starts uploading. A host without any AWS credentials (none in the
// environment, no AWS_PROFILE, nothing in the shared files) uploads
// nothing: nullptr, saying so through `log` (the training still writes
// locally; the host is not set up for object storage). Errors name the
// field and the URI: the configuration's (UNAUTHENTICATED: half a key
// pair; NOT_FOUND: a missing profile, ...), a missing bucket, refused
// credentials (PERMISSION_DENIED), a refused request (FAILED_PRECONDITION),
// and those of DirectoryUploader::Start. A store that cannot be reached now
// is no error (files wait on disk): it is logged through `log`.
absl::StatusOr<std::unique_ptr<objectstore::DirectoryUploader>> StartOutputUploads(
    const std::vector<OutputUpload>& uploads, const objectstore::EnvironmentLookup& environment,
    std::function<void(const std::string&)> log);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_OUTPUT_UPLOADS_H_
