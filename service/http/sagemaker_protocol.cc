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

absl::StatusOr<auth::Principal> SageMakerProtocol::Authenticate(const HttpRequest& request) const {
  if (authenticator_ == nullptr) {
    return auth::Principal{.role = auth::Role::kAdmin, .access_key_id = "anonymous"};
  }
  auth::SignedHttpRequest signed_request{.method = request.method,
                                         .path = request.path,
                                         .query = request.query,
                                         .headers = request.headers,
                                         .body = request.body};
  return authenticator_->AuthenticateSigV4(signed_request, options_.clock->Now());
}

void SageMakerProtocol::Handle(HttpRequest request, std::unique_ptr<HttpResponder> responder) {
  const absl::string_view target = request.Header("X-Amz-Target");
  const std::optional<auth::Action> operation = ParseAmzTarget(target);
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
  for (const auto& [action, serve] : kServing) {
    if (action == *operation)
      return (this->*serve)(request, *principal, action, std::move(responder));
  }
}

template <typename Request, typename Response>
void SageMakerProtocol::Serve(const HttpRequest& http, const auth::Principal& principal,
                              auth::Action action,
                              void (core::TrainingJobHandler::*operation)(const Request&, Response*,
                                                                          core::DoneCallback),
                              std::unique_ptr<HttpResponder> responder) {
  const absl::string_view target = http.Header("X-Amz-Target");
  auto call = std::make_shared<Call<Request, Response>>();
  if (absl::Status parsed = ParseSageMakerJson(http.body, &call->request); !parsed.ok()) {
    RespondError(*responder, http, target, parsed);
    return;
  }
  if (absl::Status allowed = auth::Authorize(principal, action, JobNameOf(call->request));
      !allowed.ok()) {
    if (!auth::AwsErrorCode(allowed).has_value()) {
      auth::SetAwsErrorCode(allowed, "AccessDeniedException");
    }
    RespondError(*responder, http, target, allowed);
    return;
  }
  if (in_flight_->fetch_add(1) >= options_.max_operations_in_flight) {
    in_flight_->fetch_sub(1);
    RespondError(*responder, http, target, "ThrottlingException",
                 absl::StrCat("more than ", options_.max_operations_in_flight,
                              " operations are in flight; retry with backoff"));
    return;
  }
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
