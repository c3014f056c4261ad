#include "service/logging.h"

#include <memory>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "base/message_text.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace debugplane::service {
namespace {

// %j: the message as a JSON string literal (quoted and escaped).
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string quoted = nlohmann::json(std::string(msg.payload.data(), msg.payload.size()))
                                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(quoted.data(), quoted.data() + quoted.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

// %q: the message on one line (EscapeControlCharacters).
class EscapedMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string escaped = base::EscapeControlCharacters(
        absl::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedMessageFlag>();
  }
};

}  // namespace

std::unique_ptr<spdlog::formatter> MakeLogFormatter(const std::string& format) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (format == "json") {
    formatter->add_flag<JsonMessageFlag>('j').set_pattern(
        R"({"ts":"%Y-%m-%dT%H:%M:%S.%f%z","level":"%l","logger":"%n","thread":%t,"msg":%j})");
  } else {
    formatter->add_flag<EscapedMessageFlag>('q').set_pattern(
        "%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ [%n] %q");
  }
  return formatter;
}

void ConfigureLogging(const std::string& level, const std::string& format) {
  auto logger = spdlog::stderr_color_mt("debugplane");
  logger->set_level(spdlog::level::from_str(level));
  logger->set_formatter(MakeLogFormatter(format));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace debugplane::service
