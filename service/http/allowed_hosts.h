// Which Host headers the HTTP listener answers: the defence against DNS
// rebinding, where a web page at a name its attacker controls (evil.test)
// re-resolves that name to 127.0.0.1 and drives a loopback server that
// has no credentials, the browser sending `Host: evil.test:PORT` and
// treating the page and the server as one origin.
//
// Accepted are the names the server is really reached by:
//   - loopback: `localhost`, 127.0.0.0/8, [::1];
//   - the listen address's host (--http-listen);
//   - when it listens on every address (0.0.0.0, [::]), any IP address
//     (an address in Host is no rebinding: the browser's origin is then
//     the server itself);
//   - the names given with --http-allowed-host (exact, case-insensitive).
// A request without Host (HTTP/1.0; never a browser) is accepted. The
// port in Host is not compared (the listener's own port is the only one
// a connection can reach).

#ifndef DEBUGPLANE_SERVICE_HTTP_ALLOWED_HOSTS_H_
#define DEBUGPLANE_SERVICE_HTTP_ALLOWED_HOSTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace debugplane::service::http {

class AllowedHosts {
 public:
  // `listen_address`: HOST:PORT as given to --http-listen; `names`: the
  // --http-allowed-host values (a port, if given, is ignored).
  AllowedHosts(absl::string_view listen_address, const std::vector<std::string>& names);

  // OK, or PERMISSION_DENIED naming the Host and --http-allowed-host.
  absl::Status Check(absl::string_view host_header) const;

  // The host part of a Host header or HOST:PORT, lower case, without the
  // port, IPv6 brackets or a trailing dot ("[::1]:80" -> "::1").
  static std::string HostName(absl::string_view host_and_port);

 private:
  bool Allowed(const std::string& host) const;

  bool any_address_ = false;
  std::vector<std::string> names_;
};

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_ALLOWED_HOSTS_H_
