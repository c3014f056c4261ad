// The dashboard on the server's HTTP listener (docs/dashboard-api.md): the
// page's embedded files under /dashboard/, sign-in (/api/session), the jobs
// (/api/jobs, /api/jobs/NAME), live updates (/api/events), the profiling
// controls and every JobResource other areas register
// (/api/jobs/NAME/<resource>).
//
// Every route answers without blocking libmicrohttpd's threads: reads of the
// job manager are snapshots, changes complete through its callbacks, and
// events are fanned out by DashboardEvents' thread.

#ifndef DEBUGPLANE_SERVICE_DASHBOARD_DASHBOARD_ROUTES_H_
#define DEBUGPLANE_SERVICE_DASHBOARD_DASHBOARD_ROUTES_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/manager/training_job_manager.h"
#include "service/auth/auth.h"
#include "service/auth/credential_store.h"
#include "service/dashboard/dashboard_events.h"
#include "service/dashboard/dashboard_http.h"
#include "service/dashboard/embedded_files.h"
#include "service/dashboard/session_auth.h"
#include "service/dashboard/session_store.h"
#include "service/http/http_server.h"

namespace debugplane::service::dashboard {

// Largest request bodies (413 beyond, before they are read): sign-in's
// {"token": "KEY:SECRET"}, and every other dashboard route's form.
inline constexpr size_t kMaxSignInBodyBytes = 16 * 1024;
inline constexpr size_t kMaxDashboardBodyBytes = 64 * 1024;

struct DashboardOptions {
  // The listener serves HTTPS: cookies get Secure, the own origin is https.
  bool tls = false;
  // /api/jobs/NAME/<resource> of other areas (overview, system, framework,
  // tensors, tensor, ...). The profiling controls are added by Dashboard.
  std::vector<JobResource> resources;
  SessionOptions sessions;
};

class Dashboard {
 public:
  // `credentials` null exactly when `authenticator` is not enabled.
  // REQUIRES: `manager`, `authenticator` outlive this object and the routes
  // it returns (the server stops before they go); `events` is started.
  Dashboard(core::TrainingJobManager* manager, const auth::Authenticator* authenticator,
            std::shared_ptr<auth::CredentialStore> credentials,
            std::shared_ptr<DashboardEvents> events, DashboardOptions options);

  Dashboard(const Dashboard&) = delete;
  Dashboard& operator=(const Dashboard&) = delete;

  // The routes, to be given to http::HttpServer::Start (after the routes
  // that must win, e.g. POST / of the SageMaker protocol; every path here
  // is /, /dashboard... or /api/...).
  std::vector<http::HttpRoute> Routes();

  const SessionAuth& auth() const { return auth_; }
  SessionStore& sessions() { return sessions_; }

 private:
  void ServeStatic(const http::HttpRequest& request, http::HttpResponder& responder) const;
  void SignIn(const http::HttpRequest& request, http::HttpResponder& responder) const;
  void GetSession(const http::HttpRequest& request, http::HttpResponder& responder) const;
  void SignOut(const http::HttpRequest& request, http::HttpResponder& responder) const;
  void ListJobs(const http::HttpRequest& request, http::HttpResponder& responder) const;
  void ServeJob(http::HttpRequest request, std::unique_ptr<http::HttpResponder> responder) const;
  void DescribeJob(const http::HttpRequest& request, const std::string& name,
                   std::unique_ptr<http::HttpResponder> responder) const;
  void Subscribe(const http::HttpRequest& request,
                 std::unique_ptr<http::HttpResponder> responder) const;
  JobResource ProfilingResource() const;

  core::TrainingJobManager* const manager_;
  const std::shared_ptr<DashboardEvents> events_;
  const DashboardOptions options_;
  mutable SessionStore sessions_;
  const SessionAuth auth_;
  std::vector<JobResource> resources_;
  // An embedded file and its gzip form ("" when gzip does not make it
  // smaller), compressed once at start: the page's files are sent on each
  // first visit.
  struct StaticFile {
    EmbeddedFile file;
    std::string gzipped;
  };
  std::map<std::string, StaticFile, std::less<>> files_;
};

// The value of query parameter `name` in `query` (percent-decoded, '+' a
// space), or "" if absent.
std::string QueryParameter(absl::string_view query, absl::string_view name);

}  // namespace debugplane::service::dashboard

#endif  // DEBUGPLANE_SERVICE_DASHBOARD_DASHBOARD_ROUTES_H_
