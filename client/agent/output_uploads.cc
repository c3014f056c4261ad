#include "client/agent/output_uploads.h"

#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "objectstore/s3_object_store.h"

namespace debugplane::client {
namespace {

// The status with `prefix` before its message, its code kept.
absl::Status Explain(const absl::Status& status, const std::string& prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

// Whether the environment names credentials at all (a key, a token or a
// profile), rightly or wrongly.
bool HasCredentialSettings(const objectstore::EnvironmentLookup& environment) {
  for (const char* name :
       {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"}) {
    if (environment(name).has_value()) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::optional<S3Location>> ParseS3Location(absl::string_view field,
                                                          absl::string_view uri) {
  absl::string_view rest = uri;
  if (!absl::ConsumePrefix(&rest, "s3://")) return std::nullopt;
  const size_t slash = rest.find('/');
  S3Location location;
  location.bucket = std::string(rest.substr(0, slash));
  if (location.bucket.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", uri, "' names no bucket (s3://BUCKET/PREFIX)"));
  }
  if (slash != absl::string_view::npos) {
    absl::string_view prefix = rest.substr(slash + 1);
    while (absl::ConsumeSuffix(&prefix, "/")) {
    }
    location.prefix = std::string(prefix);
  }
  return location;
}

absl::StatusOr<std::unique_ptr<objectstore::DirectoryUploader>> StartOutputUploads(
    const std::vector<OutputUpload>& uploads, const objectstore::EnvironmentLookup& environment,
    std::function<void(const std::string&)> log) {
  objectstore::DirectoryUploader::Options options;
  std::map<std::string, std::shared_ptr<const objectstore::S3ObjectStore>> stores;
  for (const OutputUpload& upload : uploads) {
    const std::string context = absl::StrCat("cannot upload ", upload.field, " ", upload.uri, ": ");
    absl::StatusOr<std::optional<S3Location>> location = ParseS3Location(upload.field, upload.uri);
    if (!location.ok()) return location.status();
    if (!location->has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(context, "not an s3:// URI"));
    }
    std::shared_ptr<const objectstore::S3ObjectStore>& store = stores[(*location)->bucket];
    if (store == nullptr) {
      absl::StatusOr<objectstore::S3Config> config = objectstore::LoadS3Config({}, environment);
      if (!config.ok() && config.status().code() == absl::StatusCode::kUnauthenticated &&
          !HasCredentialSettings(environment)) {
        if (log) {
          log(absl::StrCat("not uploading the job's s3:// output (", upload.field, " ", upload.uri,
                           "): ", config.status().message(),
                           "; the training writes to the local directories only"));
        }
        return nullptr;
      }
      if (!config.ok()) return Explain(config.status(), context);
      objectstore::S3ObjectStore::Options store_options;
      store_options.config = *std::move(config);
      store_options.bucket = (*location)->bucket;
      absl::StatusOr<std::shared_ptr<objectstore::S3ObjectStore>> made =
          objectstore::S3ObjectStore::Create(std::move(store_options));
      if (!made.ok()) return Explain(made.status(), context);
      store = *std::move(made);
    }
    // A missing bucket or refused credentials will not pass: say so before
    // the training starts. A store that is down may come back.
    objectstore::ListOptions list;
    list.prefix = (*location)->prefix;
    list.max_keys = 1;
    absl::Status listed = store->List(list).status();
    if (listed.code() == absl::StatusCode::kUnavailable) {
      if (log)
        log(absl::StrCat(context, listed.message(), "; files wait on disk until it answers"));
    } else if (!listed.ok()) {
      return Explain(listed, context);
    }
    options.sources.push_back(
        {upload.local_dir, store, (*location)->prefix, upload.appended_prefixes,
         upload.appended_event_files});
  }
  options.log = std::move(log);
  return objectstore::DirectoryUploader::Start(std::move(options));
}

}  // namespace debugplane::client
