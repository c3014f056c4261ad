// Process-wide structured logging with spdlog.

#ifndef DEBUGPLANE_SERVICE_LOGGING_H_
#define DEBUGPLANE_SERVICE_LOGGING_H_

#include <string>

namespace debugplane::service {

// Sets the default logger: stderr, `level` (trace ... critical), and `format`
// "text" (human-readable) or "json" (one object per line with ts, level,
// logger and msg, the message JSON-escaped).
void ConfigureLogging(const std::string& level, const std::string& format);

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_LOGGING_H_
