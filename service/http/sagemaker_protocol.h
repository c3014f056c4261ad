// The SageMaker API over HTTP (AWS JSON 1.1), so that boto3, the AWS CLI and
// the tools built on them reach debugplane by changing only the endpoint:
//
//   POST /
//   X-Amz-Target: SageMaker.<Operation>
//   Content-Type: application/x-amz-json-1.1
//   Authorization: AWS4-HMAC-SHA256 ...   (AWS Signature Version 4)
//   {"TrainingJobName": "..."}
//
// Operations: CreateTrainingJob, DescribeTrainingJob, ListTrainingJobs,
// UpdateTrainingJob, StopTrainingJob, DeleteTrainingJob, served by the same
// core::TrainingJobHandler as gRPC (same validation and durability). A
// request is authenticated (SigV4), parsed (service/http/sagemaker_json.h),
// authorized for its operation and job, then handed to the handler; the
// reply is the response's SageMaker JSON, or an AWS error
// (service/http/aws_errors.h). debugplane's own members (Warnings,
// ConfigVersion, RuleActions, ConfigurationUpdates, LastEvaluatedStep,
// TrainingHosts) appear as extra members, which SageMaker clients ignore.

#ifndef DEBUGPLANE_SERVICE_HTTP_SAGEMAKER_PROTOCOL_H_
#define DEBUGPLANE_SERVICE_HTTP_SAGEMAKER_PROTOCOL_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "base/clock.h"
#include "core/manager/training_job_handler.h"
#include "service/auth/auth.h"
#include "service/http/describe_json_cache.h"
#include "service/http/http_server.h"

namespace debugplane::service::http {

// "SageMaker.DescribeTrainingJob" -> auth::Action::kDescribeTrainingJob:
// the operations served are the job actions, CreateTrainingJob to
// DeleteTrainingJob, as ActionName names them. nullopt for any other target
// (another service, an operation debugplane does not serve).
std::optional<auth::Action> ParseAmzTarget(absl::string_view target);

// Largest request body POST / accepts (413 beyond, before it is read or
// hashed for SigV4). SageMaker's own requests are far smaller: a
// CreateTrainingJob with every list at its documented maximum stays well
// under it.
inline constexpr size_t kMaxSageMakerRequestBytes = 1024 * 1024;

struct SageMakerProtocolOptions {
  // Operations being served at once beyond which requests are refused with
  // ThrottlingException (which the AWS SDKs retry with backoff).
  int max_operations_in_flight = 4096;
  // Checks SigV4 request times against this clock (real time by default).
  std::shared_ptr<base::Clock> clock = base::SystemClock();
};

// Thread-safe. Handle() never blocks: the reply is sent when the handler
// completes, from the handler's thread.
class SageMakerProtocol {
 public:
  // `authenticator` verifies every request's signature; with authentication
  // off (no credentials) it accepts any. Null only in unit tests that do not
  // exercise authentication (every caller is then an anonymous admin).
  // REQUIRES: `jobs` and `authenticator` outlive this object and every
  // request it is handling.
  SageMakerProtocol(core::TrainingJobHandler* jobs, const auth::Authenticator* authenticator,
                    SageMakerProtocolOptions options = {});

  // POST / served by Handle().
  HttpRoute Route();

  void Handle(HttpRequest request, std::unique_ptr<HttpResponder> responder);

 private:
  // Takes the request's parts for the verifier and gives them back.
  absl::StatusOr<auth::Principal> Authenticate(HttpRequest& request) const;
  // Parses `http`'s body into `request`, authorizes `action` on it and takes
  // an in-flight slot; otherwise answers the error and returns false.
  template <typename Request>
  bool Admit(const HttpRequest& http, const auth::Principal& principal, auth::Action action,
             Request* request, HttpResponder& responder);
  // The JSON of the job `request` names, once `caught_up` (the read-your-
  // writes wait) is OK; its error otherwise.
  absl::StatusOr<std::shared_ptr<const std::string>> DescribedJson(
      const v1::DescribeTrainingJobRequest& request, const absl::Status& caught_up);
  // DescribeTrainingJob from the committed record's bytes and their cached
  // JSON (describe_json_cache.h); same answers and errors as Serve.
  void ServeDescribe(const HttpRequest& http, const auth::Principal& principal,
                     std::unique_ptr<HttpResponder> responder);
  template <typename Request, typename Response>
  void Serve(const HttpRequest& http, const auth::Principal& principal, auth::Action action,
             void (core::TrainingJobHandler::*operation)(const Request&, Response*,
                                                         core::DoneCallback),
             std::unique_ptr<HttpResponder> responder);
  // Serve for the handler method `kOperation` (a TrainingJobHandler member
  // pointer): one type for every operation, for the table of operations.
  template <auto kOperation>
  void ServeOperation(const HttpRequest& http, const auth::Principal& principal,
                      auth::Action action, std::unique_ptr<HttpResponder> responder) {
    Serve(http, principal, action, kOperation, std::move(responder));
  }

  core::TrainingJobHandler* const jobs_;
  const auth::Authenticator* const authenticator_;
  const SageMakerProtocolOptions options_;
  DescribeJsonCache describe_json_;
  // Shared with the calls in flight, which release their slot when done.
  std::shared_ptr<std::atomic<int>> in_flight_ = std::make_shared<std::atomic<int>>(0);
};

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_SAGEMAKER_PROTOCOL_H_
