// Percent-decoding of URL parts (RFC 3986 %XX escapes), one implementation
// for the SigV4 canonical request, the dashboard's query strings and its
// insights parameters.

#ifndef DEBUGPLANE_SERVICE_HTTP_PERCENT_DECODING_H_
#define DEBUGPLANE_SERVICE_HTTP_PERCENT_DECODING_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace debugplane::service::http {

// What '+' means: itself (a path, SigV4) or a space (an HTML form's
// application/x-www-form-urlencoded query).
enum class PlusMeans { kPlus, kSpace };

// Decodes every %XX escape; a '%' not followed by two hex digits stays as
// it is.
std::string PercentDecode(absl::string_view text, PlusMeans plus);

// Decodes every %XX escape; nullopt if a '%' is not followed by two hex
// digits.
std::optional<std::string> PercentDecodeStrict(absl::string_view text, PlusMeans plus);

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_PERCENT_DECODING_H_
