// Who may call debugplane, and what they may do.
//
// Credentials come from `--credentials FILE`: one per line,
//   ROLE ACCESS_KEY_ID SECRET_ACCESS_KEY [JOB_NAME]
// (`#` starts a comment). The same keys authenticate gRPC calls
// (`authorization: Bearer ACCESS_KEY_ID:SECRET_ACCESS_KEY`), HTTP calls signed
// with AWS Signature Version 4 (the SageMaker protocol, service/http/), and,
// optionally, TLS client certificates mapped to a role. With no credentials
// configured, authentication is off: every caller is an anonymous admin, and
// the server only listens on loopback addresses (see server_app.h).
//
// This header is the contract between the adapters (gRPC in service/, HTTP in
// service/http/) and the authentication code in service/auth/.

#ifndef DEBUGPLANE_SERVICE_AUTH_AUTH_H_
#define DEBUGPLANE_SERVICE_AUTH_AUTH_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace debugplane::service::auth {

// What a credential may do:
//   kAdmin     everything;
//   kOperator  create, update, stop, delete, and everything a reader may;
//   kReader    describe, list, watch, read reports and tensors (and the
//              dashboard's data);
//   kAgent     TrainingAgentService, only for its job if its line names one.
enum class Role { kAdmin, kOperator, kReader, kAgent };

// "admin", "operator", "reader", "agent".
absl::string_view RoleName(Role role);

// The caller of one request, once authenticated.
struct Principal {
  Role role = Role::kReader;
  // The key id that authenticated the call ("cn:<common name>" for a TLS
  // client certificate, "anonymous" while authentication is off). Safe to log.
  std::string access_key_id;
  // Non-empty: the credential is restricted to this training job.
  std::string job_name;
};

// What a request does, for authorization.
enum class Action {
  kCreateTrainingJob,
  kDescribeTrainingJob,
  kListTrainingJobs,
  kUpdateTrainingJob,
  kStopTrainingJob,
  kDeleteTrainingJob,
  kWatchTrainingJob,
  kGetProfilerReport,
  kQueryTensors,  // TensorQueryService: ListTensors, GetTensorValues.
  kAgent,         // Any TrainingAgentService method.
};

// The API name of `action`, e.g. "CreateTrainingJob" (kAgent: "TrainingAgentService").
absl::string_view ActionName(Action action);

// Returns OK if `principal` may do `action` on the job `job_name` (empty for
// calls that name no job, such as ListTrainingJobs). Otherwise
// PERMISSION_DENIED naming the key id, its role, the action and the role(s)
// that would allow it, e.g. "access key 'AKID1' (role reader) may not
// StopTrainingJob: it needs role operator or admin", or, for a job-bound
// credential, the job it is bound to.
absl::Status Authorize(const Principal& principal, Action action, absl::string_view job_name);

// An HTTP request as received, for AWS Signature Version 4 verification.
struct SignedHttpRequest {
  std::string method;  // "POST"
  std::string path;    // As received, percent-encoded, without the query.
  std::string query;   // As received, without '?'; may be empty.
  // Every header as received (names in any case; repeated names allowed).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// AWS's error code for a refused request, carried as a payload of the
// UNAUTHENTICATED / PERMISSION_DENIED status that the authenticator returns
// (e.g. "UnrecognizedClientException", "InvalidSignatureException",
// "IncompleteSignatureException", "MissingAuthenticationTokenException",
// "AccessDeniedException"), so the HTTP adapter answers with the error boto3
// expects. Absent for statuses that carry none.
std::optional<std::string> AwsErrorCode(const absl::Status& status);
void SetAwsErrorCode(absl::Status& status, absl::string_view code);

// Authenticates requests against the configured credentials.
//
// Thread-safety: all methods may be called concurrently, also while the
// credentials are reloaded (SIGHUP). No method blocks on I/O.
class Authenticator {
 public:
  virtual ~Authenticator() = default;

  // False when no credentials are configured: every Authenticate* call
  // then returns an anonymous admin principal.
  virtual bool enabled() const = 0;

  // `authorization` is the gRPC `authorization` metadata value ("" if
  // absent). Returns the principal for "Bearer ACCESS_KEY_ID:SECRET", or
  // UNAUTHENTICATED saying what is wrong (missing, malformed, unknown key
  // id, wrong secret) without echoing the secret.
  virtual absl::StatusOr<Principal> AuthenticateBearer(absl::string_view authorization) const = 0;

  // A TLS client certificate that gRPC already verified against the
  // configured client CA; `common_name` is its subject's CN. Returns the
  // principal mapped to it, or UNAUTHENTICATED if none is.
  virtual absl::StatusOr<Principal> AuthenticateCertificate(
      absl::string_view common_name) const = 0;

  // Verifies an AWS Signature Version 4 `Authorization` header as AWS does:
  // the signed headers (x-amz-date and the configured ones, by default
  // host, content-type and x-amz-target), the payload hash, the request
  // time within the allowed skew of `now`, the credential scope's region
  // and service ("sagemaker"); and, unlike AWS, that a state-changing
  // request's signature is used once (a replay within the skew is refused).
  // Returns the principal, or UNAUTHENTICATED / PERMISSION_DENIED with an
  // AwsErrorCode payload.
  virtual absl::StatusOr<Principal> AuthenticateSigV4(const SignedHttpRequest& request,
                                                      absl::Time now) const = 0;
};

}  // namespace debugplane::service::auth

#endif  // DEBUGPLANE_SERVICE_AUTH_AUTH_H_
