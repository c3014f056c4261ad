#include "service/http/allowed_hosts.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace debugplane::service::http {
namespace {

bool IsIpv4(const std::string& host, in_addr* address) {
  return inet_pton(AF_INET, host.c_str(), address) == 1;
}

bool IsIpv6(const std::string& host, in6_addr* address) {
  return inet_pton(AF_INET6, host.c_str(), address) == 1;
}

bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4;
  if (IsIpv4(host, &v4)) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (!IsIpv6(host, &v6)) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

// What the client sent, printable and short, for the error message.
std::string Shown(absl::string_view text) {
  std::string shown(text.substr(0, 100));
  for (char& c : shown) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c))) c = '?';
  }
  return shown;
}

}  // namespace

std::string AllowedHosts::HostName(absl::string_view host_and_port) {
  host_and_port = absl::StripAsciiWhitespace(host_and_port);
  std::string host;
  if (!host_and_port.empty() && host_and_port.front() == '[') {
    const size_t close = host_and_port.find(']');
    host = std::string(host_and_port.substr(
        1, close == absl::string_view::npos ? absl::string_view::npos : close - 1));
  } else {
    const size_t colon = host_and_port.find(':');
    // Two colons or more: an IPv6 address without brackets (a flag's value).
    const bool bare_ipv6 = colon != absl::string_view::npos &&
                           host_and_port.find(':', colon + 1) != absl::string_view::npos;
    host = std::string(bare_ipv6 ? host_and_port : host_and_port.substr(0, colon));
  }
  absl::AsciiStrToLower(&host);
  if (!host.empty() && host.back() == '.') host.pop_back();
  return host;
}

AllowedHosts::AllowedHosts(absl::string_view listen_address,
                           const std::vector<std::string>& names) {
  const std::string listen_host = HostName(listen_address);
  in_addr v4;
  in6_addr v6;
  if (listen_host.empty() || (IsIpv4(listen_host, &v4) && v4.s_addr == INADDR_ANY) ||
      (IsIpv6(listen_host, &v6) && IN6_IS_ADDR_UNSPECIFIED(&v6))) {
    any_address_ = true;
  } else {
    names_.push_back(listen_host);
  }
  for (const std::string& name : names) {
    if (std::string host = HostName(name); !host.empty()) names_.push_back(std::move(host));
  }
}

bool AllowedHosts::Allowed(const std::string& host) const {
  if (IsLoopback(host)) return true;
  if (std::find(names_.begin(), names_.end(), host) != names_.end()) return true;
  if (!any_address_) return false;
  in_addr v4;
  in6_addr v6;
  return IsIpv4(host, &v4) || IsIpv6(host, &v6);
}

absl::Status AllowedHosts::Check(absl::string_view host_header) const {
  if (host_header.empty()) return absl::OkStatus();
  if (Allowed(HostName(host_header))) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "Host '", Shown(host_header),
      "' is not a name this server is reached by (refused against DNS rebinding): use "
      "localhost, a loopback address or the --http-listen address, or start the server with "
      "--http-allowed-host ",
      Shown(HostName(host_header))));
}

}  // namespace debugplane::service::http
