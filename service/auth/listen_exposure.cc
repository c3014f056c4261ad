#include "service/auth/listen_exposure.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace debugplane::service::auth {
namespace {

// The host part of HOST:PORT or [HOST]:PORT.
absl::string_view HostOf(absl::string_view address) {
  if (absl::ConsumePrefix(&address, "[")) return address.substr(0, address.find(']'));
  const size_t colon = address.rfind(':');
  // More than one colon without brackets: a bare IPv6 address.
  if (colon != absl::string_view::npos && address.find(':') == colon) {
    return address.substr(0, colon);
  }
  return address;
}

}  // namespace

bool IsLoopbackAddress(absl::string_view address) {
  if (absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:")) {
    return true;
  }
  if (!absl::ConsumePrefix(&address, "ipv4:")) absl::ConsumePrefix(&address, "ipv6:");
  const std::string host(HostOf(address));
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

absl::Status CheckListenExposure(absl::string_view address, bool has_credentials, bool has_tls,
                                 bool insecure, absl::string_view flag) {
  if (insecure || IsLoopbackAddress(address)) return absl::OkStatus();
  if (!has_credentials) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, " ", address,
        " is reachable from other machines but no --credentials are given: anyone who can "
        "reach it could create, stop and delete every job. Give --credentials FILE with "
        "--tls-cert and --tls-key, listen on 127.0.0.1, or pass --insecure to serve anyway"));
  }
  if (!has_tls) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, " ", address,
        " is reachable from other machines without TLS: access keys would cross the network in "
        "plaintext. Give --tls-cert and --tls-key, or pass --insecure to serve anyway"));
  }
  return absl::OkStatus();
}

}  // namespace debugplane::service::auth
