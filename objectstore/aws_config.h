// S3Config: where an S3-compatible store is and how to sign requests to it,
// resolved the way the AWS CLI and SDKs resolve it, so that the settings a
// user already has work unchanged.
//
// Each setting, first found wins:
//   endpoint     overrides.endpoint, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL,
//                else AWS S3 itself (https://s3.<region>.amazonaws.com)
//   region       overrides.region, AWS_REGION, AWS_DEFAULT_REGION, the
//                profile's `region` in the config file, else us-east-1
//   credentials  overrides.access_key_id/secret_access_key(/session_token),
//                AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+
//                AWS_SESSION_TOKEN), the profile's aws_access_key_id /
//                aws_secret_access_key (/ aws_session_token) in the shared
//                credentials file, then in the config file
//   profile      overrides.profile, AWS_PROFILE, else "default"
//   files        AWS_SHARED_CREDENTIALS_FILE (else $HOME/.aws/credentials),
//                AWS_CONFIG_FILE (else $HOME/.aws/config); in the config file
//                a profile's section is "[profile NAME]" ("[default]" too)
//   addressing   overrides.path_style, else path-style for a custom
//                endpoint (MinIO, Ceph RGW, moto...) and virtual-hosted for
//                AWS (path-style there too for bucket names with a '.')
//   TLS          overrides.ca_file, AWS_CA_BUNDLE, else the system CA bundle
//
// The environment is read only through an EnvironmentLookup, so tests give
// a map instead of changing the process environment. Secrets are never put
// into a message: errors name variables, files, profiles and key ids only.

#ifndef DEBUGPLANE_OBJECTSTORE_AWS_CONFIG_H_
#define DEBUGPLANE_OBJECTSTORE_AWS_CONFIG_H_

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace debugplane::objectstore {

struct S3Config {
  // "scheme://host[:port]" without a trailing '/': "http://127.0.0.1:9000".
  std::string endpoint;
  // Whether `endpoint` was derived for AWS itself (not given by the user).
  bool aws_endpoint = false;
  std::string region = "us-east-1";
  std::string access_key_id;
  std::string secret_access_key;
  // Temporary credentials' token, sent as x-amz-security-token; "" if none.
  std::string session_token;
  // Where the credentials came from, for messages ("AWS_ACCESS_KEY_ID",
  // "profile 'dev' in /home/u/.aws/credentials", "the server's flags").
  std::string credentials_source;
  // http(s)://endpoint/bucket/key (true) or http(s)://bucket.endpoint/key.
  bool path_style = true;
  // A PEM CA bundle to verify TLS with; "" for the system's bundle.
  std::string ca_file;

  // Every request: connecting may take connect_timeout, the whole request
  // (connect, send, receive) request_timeout.
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration request_timeout = absl::Seconds(60);
  // Tries per request (1 = no retry) on network errors, 5xx and throttling
  // (429, 503 SlowDown); the wait before try n+1 is in
  // [b/2, b] with b = min(max_backoff, initial_backoff * 2^(n-1)).
  int max_attempts = 4;
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  // Idle connections (curl handles) kept for reuse.
  int max_idle_connections = 8;
};

// Values given explicitly (the server's flags or configuration file); each
// set one wins over the environment and the files.
struct S3ConfigOverrides {
  std::optional<std::string> endpoint;
  std::optional<std::string> region;
  std::optional<std::string> access_key_id;
  std::optional<std::string> secret_access_key;
  std::optional<std::string> session_token;
  std::optional<std::string> profile;
  std::optional<std::string> ca_file;
  std::optional<bool> path_style;
};

// The value of an environment variable, nullopt when unset.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (getenv). Thread-safe as long as nothing calls
// setenv concurrently.
EnvironmentLookup ProcessEnvironment();
// A fixed map, for tests.
EnvironmentLookup MapEnvironment(std::map<std::string, std::string> variables);

// The configuration from `overrides`, the environment and the AWS files, as
// the file comment says. Errors (messages name what was looked at, never a
// secret):
//   UNAUTHENTICATED   no credentials anywhere, or only half of a pair
//                     (an access key id without its secret)
//   NOT_FOUND         a profile named by AWS_PROFILE or overrides.profile is
//                     in neither file
//   INVALID_ARGUMENT  an endpoint that is not http:// or https://host[:port]
//   UNAVAILABLE       a credentials or config file that exists but cannot
//                     be read
// Thread-safe; reads the files each call.
absl::StatusOr<S3Config> LoadS3Config(const S3ConfigOverrides& overrides,
                                      const EnvironmentLookup& environment);

// "http://host:port" from `url` after checking it: http or https, a host,
// no user info, query or fragment; a trailing '/' is dropped. INVALID_ARGUMENT
// naming `what` ("AWS_ENDPOINT_URL_S3") otherwise.
absl::StatusOr<std::string> NormalizeEndpoint(absl::string_view url, absl::string_view what);

}  // namespace debugplane::objectstore

#endif  // DEBUGPLANE_OBJECTSTORE_AWS_CONFIG_H_
