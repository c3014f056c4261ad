// Request identifiers for x-amzn-RequestId: random version-4 UUIDs.

#ifndef DEBUGPLANE_SERVICE_HTTP_REQUEST_ID_H_
#define DEBUGPLANE_SERVICE_HTTP_REQUEST_ID_H_

#include <string>

namespace debugplane::service::http {

// A fresh random UUID, e.g. "3f1c2a9e-7b4d-4e8a-9c1f-0a2b3c4d5e6f" (RFC 9562
// version 4, lower case). Thread-safe; never blocks.
std::string NewRequestId();

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_REQUEST_ID_H_
