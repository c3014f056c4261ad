// Secure by default: which listen addresses a server may serve on without
// credentials or TLS. Shared by the gRPC listener (--listen) and the HTTP
// listener (--http-listen).

#ifndef DEBUGPLANE_SERVICE_AUTH_LISTEN_EXPOSURE_H_
#define DEBUGPLANE_SERVICE_AUTH_LISTEN_EXPOSURE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace debugplane::service::auth {

// True if `address` (HOST:PORT, [V6]:PORT, or unix:PATH) can only be reached
// from this machine: 127.0.0.0/8, ::1, "localhost", and unix sockets.
// 0.0.0.0, [::], and every other host name are not.
bool IsLoopbackAddress(absl::string_view address);

// Returns OK if serving on `address` is safe enough: a loopback address;
// or credentials and TLS; or `insecure` (--insecure) given. Otherwise
// FAILED_PRECONDITION naming `flag` and the address, why (no credentials:
// anyone who reaches the port may do anything; credentials without TLS: the
// tokens cross the network in plaintext) and what to add.
absl::Status CheckListenExposure(absl::string_view address, bool has_credentials, bool has_tls,
                                 bool insecure, absl::string_view flag = "--listen");

}  // namespace debugplane::service::auth

#endif  // DEBUGPLANE_SERVICE_AUTH_LISTEN_EXPOSURE_H_
