// Writing JSON numbers and strings straight into a reply, for the
// dashboard's big series replies (thousands of numbers per series), where
// building a nlohmann::json tree first costs more than the reduction.

#ifndef DEBUGPLANE_SERVICE_DASHBOARD_JSON_NUMBERS_H_
#define DEBUGPLANE_SERVICE_DASHBOARD_JSON_NUMBERS_H_

#include <charconv>
#include <cmath>
#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace debugplane::service::dashboard {

// `v` as the shortest text that reads back as `v` ("34.23",
// "1795300000.1"); null when not finite (JSON has no NaN).
inline void AppendJsonNumber(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buffer[32];
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof(buffer), v);
  out.append(buffer, r.ptr);
}

// `text` as a JSON string (quoted, escaped; invalid UTF-8 replaced).
inline void AppendJsonString(std::string& out, absl::string_view text) {
  out += nlohmann::json(std::string(text))
             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace debugplane::service::dashboard

#endif  // DEBUGPLANE_SERVICE_DASHBOARD_JSON_NUMBERS_H_
