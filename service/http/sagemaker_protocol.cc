#include "service/http/sagemaker_protocol.h"

#include <type_traits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "service/http/aws_errors.h"
#include "service/http/client_rate_limiter.h"
#include "service/http/sagemaker_json.h"
#include "spdlog/spdlog.h"

namespace debugplane::service::http {
namespace {

constexpr absl::string_view kTargetPrefix = "SageMaker.";
constexpr absl::string_view kJsonContentType = "application/x-amz-json-1.1";

// The operations served (see ParseAmzTarget), each named by ActionName.
constexpr auth::Action kOperations[] = {
    auth::Action::kCreateTrainingJob, auth::Action::kDescribeTrainingJob,
    auth::Action::kListTrainingJobs,  auth::Action::kUpdateTrainingJob,
    auth::Action::kStopTrainingJob,   auth::Action::kDeleteTrainingJob,
};

void RespondError(HttpResponder& responder, const HttpRequest& request, absl::string_view target,
                  const absl::Status& status) {
  AwsError error = ToAwsError(status);
  spdlog::debug("http {} {} {}: {} {}", request.peer, std::string(target), request.request_id,
                error.code, error.message);
  HttpResponse response = AwsErrorResponse(error);
  response.failed_authentication = CredentialRefused(status);
  responder.Respond(std::move(response));
}

void RespondError(HttpResponder& responder, const HttpRequest& request, absl::string_view target,
                  absl::string_view code, std::string message) {
  absl::Status status = absl::InvalidArgumentError(std::move(message));
  auth::SetAwsErrorCode(status, code);
  RespondError(responder, request, target, status);
}

HttpResponse JsonReply(std::string body) {
  return HttpResponse{.status = 200,
                      .headers = {{"Content-Type", std::string(kJsonContentType)}},
                      .body = std::move(body)};
}

// The reply body of a completed operation.
template <typename Response>
std::string ReplyBody(const Response& response) {
  if constexpr (std::is_same_v<Response, v1::ListTrainingJobsResponse>) {
    // SageMaker's model requires the member even when the page is empty.
    if (response.training_job_summaries().empty()) return R"({"TrainingJobSummaries":[]})";
  }
  return ToSageMakerJson(response);
}

// The job a request names ("" for ListTrainingJobs), for authorization.
template <typename Request>
std::string JobNameOf(const Request& request) {
  if constexpr (requires { request.training_job_name(); }) {
    return request.training_job_name();
  } else {
    return "";
  }
}

// One operation in flight: what the handler reads and fills, kept alive
// until it completes.
template <typename Request, typename Response>
struct Call {
  Request request;
  Response response;
};

}  // namespace

std::optional<auth::Action> ParseAmzTarget(absl::string_view target) {
  if (!absl::ConsumePrefix(&target, kTargetPrefix)) return std::nullopt;
  for (const auth::Action operation : kOperations) {
    if (auth::ActionName(operation) == target) return operation;
  }
  return std::nullopt;
}

SageMakerProtocol::SageMakerProtocol(core::TrainingJobHandler* jobs,
                                     const auth::Authenticator* authenticator,
                                     SageMakerProtocolOptions options)
    : jobs_(jobs), authenticator_(authenticator), options_(std::move(options)) {}

HttpRoute SageMakerProtocol::Route() {
  return HttpRoute{.method = "POST",
                   .path = "/",
                   .prefix = false,
                   .handler =
                       [this](HttpRequest request, std::unique_ptr<HttpResponder> responder) {
                         Handle(std::move(request), std::move(responder));
                       },
                   .max_body_bytes = kMaxSageMakerRequestBytes};
}

absl::StatusOr<auth::Principal> SageMakerProtocol::Authenticate(HttpRequest& request) const {
  if (authenticator_ == nullptr) {
    return auth::Principal{.role = auth::Role::kAdmin, .access_key_id = "anonymous"};
  }
  // Moved in and back rather than copied: headers and body are most of a
  // request's bytes.
  auth::SignedHttpRequest signed_request{.method = std::move(request.method),
                                         .path = std::move(request.path),
                                         .query = std::move(request.query),
                                         .headers = std::move(request.headers),
                                         .body = std::move(request.body)};
  absl::StatusOr<auth::Principal> principal =
      authenticator_->AuthenticateSigV4(signed_request, options_.clock->Now());
  request.method = std::move(signed_request.method);
  request.path = std::move(signed_request.path);
  request.query = std::move(signed_request.query);
  request.headers = std::move(signed_request.headers);
  request.body = std::move(signed_request.body);
  return principal;
}

void SageMakerProtocol::Handle(HttpRequest request, std::unique_ptr<HttpResponder> responder) {
  const std::optional<auth::Action> operation = ParseAmzTarget(request.Header("X-Amz-Target"));
  // Read after Authenticate, which moves the headers out and back.
  const std::string target(request.Header("X-Amz-Target"));
  if (!operation.has_value()) {
    RespondError(*responder, request, target, "UnknownOperationException",
                 target.empty()
                     ? "the X-Amz-Target header is missing (SageMaker.<Operation>)"
                     : absl::StrCat("X-Amz-Target '", target.substr(0, 100),
                                    "' is not an operation debugplane serves; it serves "
                                    "SageMaker.CreateTrainingJob, DescribeTrainingJob, "
                                    "ListTrainingJobs, UpdateTrainingJob, StopTrainingJob and "
                                    "DeleteTrainingJob"));
    return;
  }
  absl::StatusOr<auth::Principal> principal = Authenticate(request);
  if (!principal.ok()) {
    absl::Status refused = principal.status();
    // A signature that was checked and failed counts against the address;
    // an unsigned request guessed nothing.
    if (!request.Header("Authorization").empty()) MarkCredentialRefused(refused);
    RespondError(*responder, request, target, refused);
    return;
  }
  if (*operation == auth::Action::kDescribeTrainingJob) {
    ServeDescribe(request, *principal, std::move(responder));
    return;
  }
  using H = core::TrainingJobHandler;
  using Serving = void (SageMakerProtocol::*)(const HttpRequest&, const auth::Principal&,
                                              auth::Action, std::unique_ptr<HttpResponder>);
  // The handler method of each operation (kOperations).
  static constexpr std::pair<auth::Action, Serving> kServing[] = {
      {auth::Action::kCreateTrainingJob, &SageMakerProtocol::ServeOperation<&H::CreateTrainingJob>},
      {auth::Action::kDescribeTrainingJob,
       &SageMakerProtocol::ServeOperation<&H::DescribeTrainingJob>},
      {auth::Action::kListTrainingJobs, &SageMakerProtocol::ServeOperation<&H::ListTrainingJobs>},
      {auth::Action::kUpdateTrainingJob, &SageMakerProtocol::ServeOperation<&H::UpdateTrainingJob>},
      {auth::Action::kStopTrainingJob, &SageMakerProtocol::ServeOperation<&H::StopTrainingJob>},
      {auth::Action::kDeleteTrainingJob, &SageMakerProtocol::ServeOperation<&H::DeleteTrainingJob>},
  };
  for (const auto& [action, serve] : kServing) {  // Describe is served above.
    if (action == *operation)
      return (this->*serve)(request, *principal, action, std::move(responder));
  }
}

absl::StatusOr<std::shared_ptr<const std::string>> SageMakerProtocol::DescribedJson(
    const v1::DescribeTrainingJobRequest& request, const absl::Status& caught_up) {
  if (!caught_up.ok()) return caught_up;
  absl::StatusOr<std::shared_ptr<const std::string>> encoded =
      jobs_->DescribeTrainingJobEncoded(request);
  if (!encoded.ok()) {
    if (absl::IsNotFound(encoded.status())) describe_json_.Forget(request.training_job_name());
    return encoded.status();
  }
  return describe_json_.Json(request.training_job_name(), *std::move(encoded));
}

template <typename Request>
bool SageMakerProtocol::Admit(const HttpRequest& http, const auth::Principal& principal,
                              auth::Action action, Request* request, HttpResponder& responder) {
  const absl::string_view target = http.Header("X-Amz-Target");
  if (absl::Status parsed = ParseSageMakerJson(http.body, request); !parsed.ok()) {
    RespondError(responder, http, target, parsed);
    return false;
  }
  if (absl::Status allowed = auth::Authorize(principal, action, JobNameOf(*request));
      !allowed.ok()) {
    if (!auth::AwsErrorCode(allowed).has_value()) {
      auth::SetAwsErrorCode(allowed, "AccessDeniedException");
    }
    RespondError(responder, http, target, allowed);
    return false;
  }
  if (in_flight_->fetch_add(1) >= options_.max_operations_in_flight) {
    in_flight_->fetch_sub(1);
    RespondError(responder, http, target, "ThrottlingException",
                 absl::StrCat("more than ", options_.max_operations_in_flight,
                              " operations are in flight; retry with backoff"));
    return false;
  }
  return true;
}

void SageMakerProtocol::ServeDescribe(const HttpRequest& http, const auth::Principal& principal,
                                      std::unique_ptr<HttpResponder> responder) {
  const absl::string_view target = http.Header("X-Amz-Target");
  auto request = std::make_shared<v1::DescribeTrainingJobRequest>();
  if (!Admit(http, principal, auth::Action::kDescribeTrainingJob, request.get(), *responder)) {
    return;
  }
  // As gRPC's Describe: read-your-writes first (at once with one server),
  // then the committed record's bytes, printed once per version.
  jobs_->AwaitConsistentRead([this, request = std::move(request),
                              responder = std::move(responder), in_flight = in_flight_,
                              request_id = http.request_id, peer = http.peer,
                              target = std::string(target)](absl::Status status) mutable {
    in_flight->fetch_sub(1);
    absl::StatusOr<std::shared_ptr<const std::string>> json = DescribedJson(*request, status);
    if (!json.ok()) {
      AwsError error = ToAwsError(json.status());
      spdlog::debug("http {} {} {}: {} {}", peer, target, request_id, error.code, error.message);
      responder->Respond(AwsErrorResponse(error));
      return;
    }
    HttpResponse reply = JsonReply("");
    reply.shared_body = *std::move(json);
    responder->Respond(std::move(reply));
  });
}

template <typename Request, typename Response>
void SageMakerProtocol::Serve(const HttpRequest& http, const auth::Principal& principal,
                              auth::Action action,
                              void (core::TrainingJobHandler::*operation)(const Request&, Response*,
                                                                          core::DoneCallback),
                              std::unique_ptr<HttpResponder> responder) {
  const absl::string_view target = http.Header("X-Amz-Target");
  auto call = std::make_shared<Call<Request, Response>>();
  if (!Admit(http, principal, action, &call->request, *responder)) return;
  Request& request = call->request;
  Response* response = &call->response;
  (jobs_->*operation)(request, response,
                      [call = std::move(call), responder = std::move(responder),
                       in_flight = in_flight_, request_id = http.request_id, peer = http.peer,
                       target = std::string(target)](absl::Status status) mutable {
                        in_flight->fetch_sub(1);
                        if (!status.ok()) {
                          AwsError error = ToAwsError(status);
                          spdlog::debug("http {} {} {}: {} {}", peer, target, request_id,
                                        error.code, error.message);
                          responder->Respond(AwsErrorResponse(error));
                          return;
                        }
                        responder->Respond(JsonReply(ReplyBody(call->response)));
                      });
}

}  // namespace debugplane::service::http
