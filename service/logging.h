// Process-wide structured logging with spdlog.

#ifndef DEBUGPLANE_SERVICE_LOGGING_H_
#define DEBUGPLANE_SERVICE_LOGGING_H_

#include <memory>
#include <string>

#include "spdlog/formatter.h"

namespace debugplane::service {

// Sets the default logger: stderr, `level` (trace ... critical), and `format`
// "text" (human-readable) or "json" (one object per line with ts, level,
// logger and msg, the message JSON-escaped).
void ConfigureLogging(const std::string& level, const std::string& format);

// The formatter of `format` ("json", else text). Either way one message is
// one line: messages quote names and texts from requests and training data,
// so the text format escapes control characters C style (\r, \n, \t, \xNN)
// and the JSON format escapes them as JSON does; no message can forge
// another log line.
std::unique_ptr<spdlog::formatter> MakeLogFormatter(const std::string& format);

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_LOGGING_H_
