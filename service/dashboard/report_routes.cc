#include "service/dashboard/report_routes.h"

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "service/dashboard/insights_query.h"

namespace debugplane::service::dashboard {
namespace {

// The report page's own policy (it is not the dashboard's page): inline
// styles and data: images only, no script, nothing fetched, not framed.
constexpr char kReportPolicy[] =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

http::HttpResponse ReportResponse(const v1::GetProfilerReportResponse& report) {
  const bool json = report.format() == v1::ProfilerReportFormat::JSON;
  http::HttpResponse response{
      .status = 200,
      .headers = {{"Content-Type",
                   json ? "application/json; charset=utf-8" : "text/html; charset=utf-8"},
                  {"Cache-Control", "no-store"},
                  {"Content-Security-Policy", kReportPolicy},
                  {"X-Content-Type-Options", "nosniff"},
                  {"Referrer-Policy", "no-referrer"}},
      .body = report.content()};
  return response;
}

}  // namespace

JobResource ReportResource(core::ProfilerReportHandler* reports) {
  return JobResource{
      "GET", "report", auth::Action::kGetProfilerReport,
      [reports](http::HttpRequest request, std::string job, auth::Principal,
                std::unique_ptr<http::HttpResponder> responder) {
        std::map<std::string, std::string> params;
        if (ParamError e = ParseQueryString(request.query, {"rule", "format"}, &params); !e.ok()) {
          responder->Respond(JsonErrorResponse(e.status, e.field));
          return;
        }
        const std::string format = params.count("format") > 0 ? params["format"] : "html";
        if (format != "html" && format != "json") {
          responder->Respond(JsonErrorResponse(
              absl::InvalidArgumentError("format must be html or json"), "format"));
          return;
        }
        auto get = std::make_shared<v1::GetProfilerReportRequest>();
        get->set_training_job_name(job);
        get->set_rule_configuration_name(params["rule"]);
        get->set_format(format == "json" ? v1::ProfilerReportFormat::JSON
                                         : v1::ProfilerReportFormat::HTML);
        auto response = std::make_shared<v1::GetProfilerReportResponse>();
        std::shared_ptr<http::HttpResponder> shared(std::move(responder));
        reports->GetProfilerReport(*get, response.get(),
                                   [shared, get, response](absl::Status status) {
                                     if (!status.ok()) {
                                       shared->Respond(JsonErrorResponse(status));
                                       return;
                                     }
                                     shared->Respond(ReportResponse(*response));
                                   });
      }};
}

}  // namespace debugplane::service::dashboard
