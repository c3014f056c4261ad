#include "service/dashboard/dashboard_routes.h"

#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/jobs/validation.h"
#include "service/dashboard/gzip_reply.h"
#include "service/dashboard/job_summary.h"
#include "service/dashboard/profiling_form.h"
#include "service/http/percent_decoding.h"
#include "service/http/sagemaker_json.h"
#include "spdlog/spdlog.h"

namespace debugplane::service::dashboard {
namespace {

using http::HttpRequest;
using http::HttpResponder;
using http::HttpResponse;
using json = nlohmann::json;

constexpr absl::string_view kJobsPrefix = "/api/jobs/";

std::string ContentTypeOf(absl::string_view path) {
  if (absl::EndsWith(path, ".html")) return "text/html; charset=utf-8";
  if (absl::EndsWith(path, ".js")) return "text/javascript; charset=utf-8";
  if (absl::EndsWith(path, ".css")) return "text/css; charset=utf-8";
  if (absl::EndsWith(path, ".svg")) return "image/svg+xml";
  if (absl::EndsWith(path, ".png")) return "image/png";
  if (absl::EndsWith(path, ".json")) return "application/json";
  return "application/octet-stream";
}

HttpResponse Redirect(absl::string_view location) {
  HttpResponse response{.status = 302,
                        .headers = {{"Location", std::string(location)},
                                    {"Content-Type", "text/plain; charset=utf-8"}},
                        .body = absl::StrCat("see ", location, "\n")};
  return response;
}

void RespondError(HttpResponder& responder, const absl::Status& status,
                  absl::string_view field = "") {
  responder.Respond(JsonErrorResponse(status, field));
}

// A name from a URL, safe to quote in a message.
std::string Printable(absl::string_view text) {
  std::string out(text.substr(0, 100));
  for (char& c : out) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c))) c = '?';
  }
  return out;
}

std::string SessionCookie(absl::string_view value, bool tls, bool expire) {
  return absl::StrCat(kSessionCookie, "=", value, "; Path=/; HttpOnly; SameSite=Strict",
                      tls ? "; Secure" : "", expire ? "; Max-Age=0" : "");
}

json SessionJson(const Caller& caller, bool auth_required) {
  return {{"role", std::string(auth::RoleName(caller.principal.role))},
          {"principal", caller.principal.access_key_id},
          {"csrfToken", caller.csrf_token},
          {"authRequired", auth_required}};
}

// The job summary of `name` now, or null if it is gone.
json SummaryOf(core::TrainingJobManager& manager, DashboardEvents& events,
               const std::string& name) {
  std::shared_ptr<const core::JobRecord> record = manager.GetJob(name);
  if (record == nullptr) return nullptr;
  return JobSummary(*record, events.LastDataTime(name));
}

}  // namespace

std::string QueryParameter(absl::string_view query, absl::string_view name) {
  for (absl::string_view pair : absl::StrSplit(query, '&')) {
    const size_t equals = pair.find('=');
    const absl::string_view key = pair.substr(0, equals);
    if (http::PercentDecode(key, http::PlusMeans::kSpace) != name) continue;
    return equals == absl::string_view::npos
               ? ""
               : http::PercentDecode(pair.substr(equals + 1), http::PlusMeans::kSpace);
  }
  return "";
}

Dashboard::Dashboard(core::TrainingJobManager* manager, const auth::Authenticator* authenticator,
                     std::shared_ptr<auth::CredentialStore> credentials,
                     std::shared_ptr<DashboardEvents> events, DashboardOptions options)
    : manager_(manager),
      events_(std::move(events)),
      options_(std::move(options)),
      sessions_(options_.sessions),
      auth_(authenticator, std::move(credentials), &sessions_, options_.tls),
      resources_(options_.resources) {
  resources_.push_back(ProfilingResource());
  for (const EmbeddedFile& file : EmbeddedDashboardFiles()) {
    std::optional<std::string> gzipped = Gzip(file.content, 9);
    const bool smaller = gzipped.has_value() && gzipped->size() < file.content.size();
    files_.emplace(file.path, StaticFile{file, smaller ? *std::move(gzipped) : std::string()});
  }
}

namespace {

// 404 in JSON for a path under /api/ that no route serves.
void AnswerUnknownApi(HttpRequest request, std::unique_ptr<HttpResponder> responder) {
  responder->Respond(JsonErrorResponse(absl::NotFoundError(
      absl::StrCat("no such API: ", request.method, " ", Printable(request.path)))));
}

// 405 in JSON (with the security headers) for a method the dashboard does
// not serve.
void AnswerMethodNotAllowed(HttpRequest request, std::unique_ptr<HttpResponder> responder) {
  HttpResponse response = JsonErrorResponse(absl::NotFoundError(""));
  response.status = 405;
  response.body =
      Dump(json{{"error", absl::StrCat("method ", Printable(request.method), " is not allowed on ",
                                       Printable(request.path))}});
  responder->Respond(std::move(response));
}

}  // namespace

std::vector<http::HttpRoute> Dashboard::Routes() {
  auto handler = [this](void (Dashboard::*serve)(const HttpRequest&, HttpResponder&) const) {
    return [this, serve](HttpRequest request, std::unique_ptr<HttpResponder> responder) {
      (this->*serve)(request, *responder);
    };
  };
  auto redirect = [](HttpRequest, std::unique_ptr<HttpResponder> responder) {
    responder->Respond(Redirect("/dashboard/"));
  };
  auto serve_job = [this](HttpRequest request, std::unique_ptr<HttpResponder> responder) {
    ServeJob(std::move(request), std::move(responder));
  };
  const http::HttpHandler unknown_api = &AnswerUnknownApi;
  const http::HttpHandler not_allowed = &AnswerMethodNotAllowed;
  std::vector<http::HttpRoute> routes = {
      {.method = "GET", .path = "/", .handler = redirect},
      {.method = "GET", .path = "/dashboard", .handler = redirect},
      {.method = "GET",
       .path = "/dashboard/",
       .prefix = true,
       .handler = handler(&Dashboard::ServeStatic)},
      {.method = "POST", .path = "/api/session", .handler = handler(&Dashboard::SignIn)},
      {.method = "GET", .path = "/api/session", .handler = handler(&Dashboard::GetSession)},
      {.method = "DELETE", .path = "/api/session", .handler = handler(&Dashboard::SignOut)},
      {.method = "GET", .path = "/api/jobs", .handler = handler(&Dashboard::ListJobs)},
      {.method = "GET",
       .path = "/api/events",
       .handler =
           [this](HttpRequest request, std::unique_ptr<HttpResponder> responder) {
             Subscribe(request, std::move(responder));
           }},
      {.method = "GET", .path = std::string(kJobsPrefix), .prefix = true, .handler = serve_job},
      {.method = "POST", .path = std::string(kJobsPrefix), .prefix = true, .handler = serve_job},
      {.method = "GET", .path = "/api/", .prefix = true, .handler = unknown_api},
      {.method = "POST", .path = "/api/", .prefix = true, .handler = unknown_api},
      {.method = "DELETE", .path = "/api/", .prefix = true, .handler = unknown_api},
  };
  // Other methods get JSON with the security headers too, not the server's
  // plain 405.
  for (const char* method : {"PUT", "PATCH", "HEAD", "OPTIONS"}) {
    routes.push_back({.method = method, .path = "/api/", .prefix = true, .handler = not_allowed});
    routes.push_back(
        {.method = method, .path = "/dashboard/", .prefix = true, .handler = not_allowed});
  }
  // Bodies are read before anyone is authenticated: sign-in takes a token,
  // the rest small JSON forms at most.
  for (http::HttpRoute& route : routes) {
    route.max_body_bytes =
        route.path == "/api/session" ? kMaxSignInBodyBytes : kMaxDashboardBodyBytes;
  }
  return routes;
}

void Dashboard::ServeStatic(const HttpRequest& request, HttpResponder& responder) const {
  absl::string_view path = request.path;
  path.remove_prefix(absl::string_view("/dashboard/").size());
  if (path.empty()) path = "index.html";
  auto found = files_.find(path);
  if (found == files_.end()) {
    HttpResponse response{.status = 404,
                          .headers = {{"Content-Type", "text/plain; charset=utf-8"}},
                          .body = absl::StrCat("no such file: /dashboard/", Printable(path), "\n")};
    AddSecurityHeaders(response.headers);
    responder.Respond(std::move(response));
    return;
  }
  const EmbeddedFile& file = found->second.file;
  const std::string& gzipped = found->second.gzipped;
  const bool gzip = !gzipped.empty() && AcceptsGzip(request.Header("Accept-Encoding"));
  // Each encoding is a representation of its own (RFC 9110 8.8.3).
  const std::string etag = absl::StrCat("\"", file.sha256.substr(0, 32), gzip ? "-gzip" : "", "\"");
  HttpResponse response{.status = 200,
                        .headers = {{"Content-Type", ContentTypeOf(file.path)},
                                    {"ETag", etag},
                                    // Revalidated each time: a new server may carry a new page.
                                    {"Cache-Control", "no-cache"}}};
  AddSecurityHeaders(response.headers);
  if (!gzipped.empty()) response.headers.emplace_back("Vary", "Accept-Encoding");
  if (request.Header("If-None-Match") == etag) {
    response.status = 304;
  } else if (gzip) {
    response.body = gzipped;
    response.headers.emplace_back("Content-Encoding", "gzip");
  } else {
    response.body = std::string(file.content);
  }
  responder.Respond(std::move(response));
}

void Dashboard::SignIn(const HttpRequest& request, HttpResponder& responder) const {
  // Login CSRF: another site may not sign a browser in.
  if (absl::Status origin = auth_.CheckOrigin(request); !origin.ok()) {
    return RespondError(responder, origin);
  }
  if (!auth_.enabled()) {
    absl::StatusOr<Caller> caller = auth_.Identify(request);
    return responder.Respond(JsonResponse(200, Dump(SessionJson(*caller, false))));
  }
  const json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object() || !body.contains("token") ||
      !body["token"].is_string()) {
    return RespondError(
        responder,
        absl::InvalidArgumentError("the body must be JSON {\"token\": \"ACCESS_KEY_ID:SECRET\"}"),
        "token");
  }
  absl::StatusOr<Session> session = auth_.SignIn(body["token"].get<std::string>());
  if (!session.ok()) {
    spdlog::info("dashboard: sign-in refused from {}: {}", request.peer,
                 std::string(session.status().message()));
    return RespondError(responder, session.status(), "token");
  }
  HttpRequest signed_in = request;
  signed_in.headers = {{"Cookie", absl::StrCat(kSessionCookie, "=", session->id)}};
  absl::StatusOr<Caller> caller = auth_.Identify(signed_in);
  if (!caller.ok()) return RespondError(responder, caller.status());
  spdlog::info("dashboard: access key '{}' (role {}) signed in from {}",
               caller->principal.access_key_id, std::string(auth::RoleName(caller->principal.role)),
               request.peer);
  json reply = SessionJson(*caller, true);
  reply.erase("authRequired");
  HttpResponse response = JsonResponse(200, Dump(reply));
  response.headers.emplace_back("Set-Cookie", SessionCookie(session->id, auth_.tls(), false));
  responder.Respond(std::move(response));
}

void Dashboard::GetSession(const HttpRequest& request, HttpResponder& responder) const {
  absl::StatusOr<Caller> caller = auth_.Identify(request);
  if (!caller.ok()) return RespondError(responder, caller.status());
  responder.Respond(JsonResponse(200, Dump(SessionJson(*caller, auth_.enabled()))));
}

void Dashboard::SignOut(const HttpRequest& request, HttpResponder& responder) const {
  absl::StatusOr<Caller> caller = auth_.Identify(request);
  if (!caller.ok()) return RespondError(responder, caller.status());
  if (absl::Status cross_site = auth_.CheckCrossSite(request, *caller); !cross_site.ok()) {
    return RespondError(responder, cross_site);
  }
  if (caller->via == Caller::Via::kSession) sessions_.Remove(caller->session_id);
  HttpResponse response = JsonResponse(200, "{}");
  response.headers.emplace_back("Set-Cookie", SessionCookie("", auth_.tls(), true));
  responder.Respond(std::move(response));
}

void Dashboard::ListJobs(const HttpRequest& request, HttpResponder& responder) const {
  absl::StatusOr<auth::Principal> principal =
      auth_.Check(request, auth::Action::kListTrainingJobs, "");
  if (!principal.ok()) return RespondError(responder, principal.status());
  const std::string status = QueryParameter(request.query, "status");
  v1::TrainingJobStatus::Value wanted{};
  if (!status.empty() && (!v1::TrainingJobStatus::Value_Parse(status, &wanted) ||
                          wanted == v1::TrainingJobStatus::TRAINING_JOB_STATUS_UNSPECIFIED)) {
    return RespondError(responder,
                        absl::InvalidArgumentError(absl::StrCat(
                            "status '", Printable(status),
                            "' is not a training job status; use InProgress, Completed, Failed, "
                            "Stopping, Stopped or Deleting")),
                        "status");
  }
  const std::string name = absl::AsciiStrToLower(QueryParameter(request.query, "name"));
  json jobs = json::array();
  for (const JobView& job : events_->Jobs()) {
    const core::JobRecord& record = *job.record;
    if (!status.empty() && record.training_job_status() != wanted) continue;
    if (!name.empty() &&
        !absl::StrContains(absl::AsciiStrToLower(record.training_job_name()), name)) {
      continue;
    }
    if (!auth::Authorize(*principal, auth::Action::kDescribeTrainingJob, record.training_job_name())
             .ok()) {
      continue;
    }
    jobs.push_back(JobSummary(record, job.last_data_time));
  }
  responder.Respond(JsonResponse(200, Dump(json{{"jobs", std::move(jobs)}})));
}

void Dashboard::ServeJob(HttpRequest request, std::unique_ptr<HttpResponder> responder) const {
  absl::string_view rest = request.path;
  rest.remove_prefix(kJobsPrefix.size());
  const size_t slash = rest.find('/');
  const std::string name(rest.substr(0, slash));
  const std::string resource(slash == absl::string_view::npos ? "" : rest.substr(slash + 1));
  if (!core::ValidateTrainingJobName(name, "job name").ok()) {
    return RespondError(*responder, absl::NotFoundError(absl::StrCat(
                                        "training job '", Printable(name), "' does not exist")));
  }
  if (resource.empty()) {
    if (request.method != "GET") {
      return RespondError(*responder,
                          absl::NotFoundError(absl::StrCat("no such API: ", request.method, " ",
                                                           Printable(request.path))));
    }
    return DescribeJob(request, name, std::move(responder));
  }
  const JobResource* found = nullptr;
  bool other_method = false;
  for (const JobResource& candidate : resources_) {
    if (candidate.resource != resource) continue;
    if (candidate.method == request.method) {
      found = &candidate;
    } else {
      other_method = true;
    }
  }
  if (found == nullptr) {
    return RespondError(
        *responder, other_method ? absl::NotFoundError(absl::StrCat(request.method,
                                                                    " is not served on /api/jobs/",
                                                                    name, "/", Printable(resource)))
                                 : absl::NotFoundError(absl::StrCat("no such resource of a job: '",
                                                                    Printable(resource), "'")));
  }
  absl::StatusOr<auth::Principal> principal = auth_.Check(request, found->action, name);
  if (!principal.ok()) return RespondError(*responder, principal.status());
  if (manager_->GetJob(name) != nullptr) {
    return found->handler(std::move(request), name, *std::move(principal), std::move(responder));
  }
  // Replicas: a job created through another replica a moment ago is known
  // here once the change feed is read (at once without replicas). The
  // handlers hand their work to pools, so they may run on the feed's thread.
  manager_->AwaitConsistentRead([this, found, name, request = std::move(request),
                                 principal = *std::move(principal),
                                 responder = std::move(responder)](absl::Status caught_up) mutable {
    if (!caught_up.ok()) return RespondError(*responder, caught_up);
    if (manager_->GetJob(name) == nullptr) {
      return RespondError(*responder, absl::NotFoundError(absl::StrCat("training job '", name,
                                                                       "' does not exist")));
    }
    found->handler(std::move(request), name, std::move(principal), std::move(responder));
  });
}

void Dashboard::DescribeJob(const HttpRequest& request, const std::string& name,
                            std::unique_ptr<HttpResponder> responder) const {
  absl::StatusOr<auth::Principal> principal =
      auth_.Check(request, auth::Action::kDescribeTrainingJob, name);
  if (!principal.ok()) return RespondError(*responder, principal.status());
  struct Call {
    v1::DescribeTrainingJobRequest request;
    v1::DescribeTrainingJobResponse response;
  };
  auto call = std::make_shared<Call>();
  call->request.set_training_job_name(name);
  manager_->DescribeTrainingJob(
      call->request, &call->response,
      [call, name, events = events_, responder = std::move(responder)](absl::Status status) {
        if (!status.ok()) return RespondError(*responder, status);
        // The SageMaker document, plus when data was last read.
        std::string body = http::ToSageMakerJson(call->response);
        const std::string last_data = Dump(EpochSeconds(events->LastDataTime(name)));
        if (!body.empty() && body.back() == '}') {
          body.pop_back();
          absl::StrAppend(&body, body.size() > 1 ? "," : "", "\"lastDataTime\":", last_data, "}");
        }
        responder->Respond(JsonResponse(200, std::move(body)));
      });
}

void Dashboard::Subscribe(const HttpRequest& request,
                          std::unique_ptr<HttpResponder> responder) const {
  const std::string job = QueryParameter(request.query, "job");
  absl::StatusOr<auth::Principal> principal =
      job.empty() ? auth_.Check(request, auth::Action::kListTrainingJobs, "")
                  : auth_.Check(request, auth::Action::kWatchTrainingJob, job);
  if (!principal.ok()) return RespondError(*responder, principal.status());
  if (!job.empty() && manager_->GetJob(job) == nullptr) {
    return RespondError(*responder, absl::NotFoundError(absl::StrCat(
                                        "training job '", Printable(job), "' does not exist")));
  }
  http::HttpHeaders headers = {{"Content-Type", "text/event-stream; charset=utf-8"},
                               {"Cache-Control", "no-store"},
                               // Proxies (nginx) would otherwise hold events back.
                               {"X-Accel-Buffering", "no"}};
  AddSecurityHeaders(headers);
  std::unique_ptr<http::HttpStream> stream = responder->StartStream(200, std::move(headers));
  if (stream == nullptr) return;
  // The stream outlives this request: its credentials are checked again at
  // every keep-alive with the headers it came with.
  HttpRequest credentials;
  credentials.method = "GET";
  for (const auto& header : request.headers) {
    if (absl::EqualsIgnoreCase(header.first, "Cookie") ||
        absl::EqualsIgnoreCase(header.first, "Authorization")) {
      credentials.headers.push_back(header);
    }
  }
  const SessionAuth* auth = &auth_;
  events_->Subscribe(
      std::move(stream), job, *std::move(principal),
      [auth, credentials = std::move(credentials)] { return auth->Authenticate(credentials); });
}

JobResource Dashboard::ProfilingResource() const {
  core::TrainingJobManager* manager = manager_;
  std::shared_ptr<DashboardEvents> events = events_;
  return JobResource{
      .method = "POST",
      .resource = "profiling",
      .action = auth::Action::kUpdateTrainingJob,
      .handler = [manager, events](HttpRequest request, std::string job, auth::Principal principal,
                                   std::unique_ptr<HttpResponder> responder) {
        FormError error;
        absl::StatusOr<v1::UpdateTrainingJobRequest> update =
            ParseProfilingForm(request.body, job, &error);
        if (!update.ok()) return RespondError(*responder, update.status(), error.field);
        struct Call {
          v1::UpdateTrainingJobRequest request;
          v1::UpdateTrainingJobResponse response;
        };
        auto call = std::make_shared<Call>();
        call->request = *std::move(update);
        spdlog::info("dashboard: access key '{}' changes the profiling of job '{}' from {}",
                     principal.access_key_id, job, request.peer);
        manager->UpdateTrainingJob(
            call->request, &call->response,
            [call, manager, events, job, responder = std::move(responder)](absl::Status status) {
              if (!status.ok()) {
                for (const core::FieldViolation& violation : core::FieldViolationsOf(status)) {
                  const std::string field = FormFieldOf(violation);
                  if (field.empty()) continue;
                  return RespondError(
                      *responder,
                      absl::InvalidArgumentError(absl::StrCat(field, ": ", violation.description)),
                      field);
                }
                return RespondError(*responder, status);
              }
              json summary = SummaryOf(*manager, *events, job);
              if (summary.is_null()) {
                return RespondError(*responder, absl::NotFoundError(absl::StrCat(
                                                    "training job '", job, "' does not exist")));
              }
              summary["warnings"] = json::array();
              for (const std::string& warning : call->response.warnings()) {
                summary["warnings"].push_back(warning);
              }
              responder->Respond(JsonResponse(200, Dump(summary)));
            });
      }};
}

}  // namespace debugplane::service::dashboard
