#include "core/jobs/profiling_parameters.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/jobs/json_bounds.h"
#include "core/jobs/validation_text.h"
#include "nlohmann/json.hpp"

namespace debugplane::core {
namespace {

constexpr absl::string_view kFrameworkConfigs[] = {
    "DataloaderProfilingConfig", "DetailedProfilingConfig", "PythonProfilingConfig",
    "HorovodProfilingConfig", "SMDataParallelProfilingConfig"};
constexpr absl::string_view kIntegerKeys[] = {
    "RotateMaxFileSizeInBytes", "RotateFileCloseIntervalInSeconds", "FileOpenFailThreshold"};

bool IsFrameworkConfig(absl::string_view key) {
  for (absl::string_view known : kFrameworkConfigs) {
    if (key == known) return true;
  }
  return false;
}

// Longest excerpt of a member's value in a message, in characters.
constexpr size_t kMaxShownChars = 64;

// `item` as JSON text for a message (invalid UTF-8 replaced, never thrown;
// control characters escaped by JSON itself), cut after kMaxShownChars
// characters. Only called on values within kRequestJsonBounds: dump()
// recurses once per nesting level.
std::string Shown(const nlohmann::json& item) {
  std::string text = item.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  size_t end = 0;
  for (size_t chars = 0; end < text.size() && chars < kMaxShownChars; ++chars) {
    ++end;  // Past the lead byte, then past its continuation bytes.
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
  }
  if (end < text.size()) {
    text.resize(end);
    text += "...";
  }
  return text;
}

// A JSON integer, or a string holding one (smdebug accepts both).
bool AsInteger(const nlohmann::json& value, int64_t* out) {
  if (value.is_number_integer()) {
    *out = value.get<int64_t>();
    return true;
  }
  return value.is_string() && absl::SimpleAtoi(value.get<std::string>(), out);
}

// Which kinds of range a framework configuration's members give.
struct RangeKinds {
  bool has_step = false;  // StartStep or NumSteps.
  bool has_time = false;  // StartTimeInSecSinceEpoch or DurationInSeconds.
};

// One member `name` of framework configuration `key`: known to that
// configuration, with a valid value. Records its range kind in `ranges`.
absl::Status CheckFrameworkMember(absl::string_view key, const std::string& name,
                                  const nlohmann::json& item, RangeKinds& ranges) {
  int64_t number = 0;
  if (name == "StartStep" || name == "NumSteps" || name == "StartTimeInSecSinceEpoch" ||
      name == "DurationInSeconds") {
    const int64_t minimum = (name == "NumSteps" || name == "DurationInSeconds") ? 1 : 0;
    if (!AsInteger(item, &number) || number < minimum) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " must be an integer of at least ", minimum, ", not ", Shown(item)));
    }
    ranges.has_step = ranges.has_step || name == "StartStep" || name == "NumSteps";
    ranges.has_time =
        ranges.has_time || name == "StartTimeInSecSinceEpoch" || name == "DurationInSeconds";
  } else if (name == "MetricsRegex" && key == "DataloaderProfilingConfig") {
    if (!item.is_string()) return absl::InvalidArgumentError("MetricsRegex must be a string");
  } else if (name == "ProfilerName" && key == "PythonProfilingConfig") {
    const std::string profiler =
        item.is_string() ? absl::AsciiStrToLower(item.get<std::string>()) : "";
    if (profiler != "cprofile" && profiler != "pyinstrument") {
      return absl::InvalidArgumentError(
          absl::StrCat("ProfilerName must be cProfile or Pyinstrument, not ", Shown(item)));
    }
  } else if (name == "cProfileTimer" && key == "PythonProfilingConfig") {
    const std::string timer = item.is_string() ? item.get<std::string>() : "";
    if (timer != "total_time" && timer != "cpu" && timer != "off_cpu" && timer != "cpu_time" &&
        timer != "off_cpu_time") {
      return absl::InvalidArgumentError(
          absl::StrCat("cProfileTimer must be total_time, cpu or off_cpu, not ", Shown(item)));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "has an unknown member \"", name,
        "\"; use StartStep and NumSteps, or StartTimeInSecSinceEpoch and DurationInSeconds",
        key == "DataloaderProfilingConfig" ? ", and MetricsRegex" : "",
        key == "PythonProfilingConfig" ? ", and ProfilerName, cProfileTimer" : ""));
  }
  return absl::OkStatus();
}

// The members of a framework configuration whose values are each valid go
// together: one kind of range, each count with its start, cProfileTimer
// only with cProfile.
absl::Status CheckFrameworkMemberCombination(const nlohmann::json& config,
                                             const RangeKinds& ranges) {
  if (ranges.has_step && ranges.has_time) {
    return absl::InvalidArgumentError(
        "gives both a step range (StartStep, NumSteps) and a time range "
        "(StartTimeInSecSinceEpoch, DurationInSeconds); use one");
  }
  if (config.contains("NumSteps") && !config.contains("StartStep")) {
    return absl::InvalidArgumentError("NumSteps needs StartStep");
  }
  if (config.contains("DurationInSeconds") && !config.contains("StartTimeInSecSinceEpoch")) {
    return absl::InvalidArgumentError("DurationInSeconds needs StartTimeInSecSinceEpoch");
  }
  if (config.contains("cProfileTimer") && config.contains("ProfilerName") &&
      absl::AsciiStrToLower(config["ProfilerName"].get<std::string>()) != "cprofile") {
    return absl::InvalidArgumentError("cProfileTimer applies only to ProfilerName cProfile");
  }
  return absl::OkStatus();
}

absl::Status CheckFrameworkConfig(absl::string_view key, absl::string_view value) {
  if (absl::Status bounded = CheckJsonBounds(value, kRequestJsonBounds); !bounded.ok()) {
    return bounded;
  }
  const nlohmann::json config =
      nlohmann::json::parse(StripTrailingCommas(value), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(
        "must be a JSON object in a string, e.g. \"{\\\"StartStep\\\": 5, \\\"NumSteps\\\": 3}\"");
  }
  RangeKinds ranges;
  for (const auto& [name, item] : config.items()) {
    if (absl::Status member = CheckFrameworkMember(key, name, item, ranges); !member.ok()) {
      return member;
    }
  }
  return CheckFrameworkMemberCombination(config, ranges);
}

}  // namespace

std::string StripTrailingCommas(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < text.size()) {
        out.push_back(text[++i]);
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == ',') {
      size_t next = i + 1;
      while (next < text.size() && absl::ascii_isspace(static_cast<unsigned char>(text[next]))) {
        ++next;
      }
      if (next < text.size() && (text[next] == '}' || text[next] == ']')) continue;
    }
    out.push_back(c);
  }
  return out;
}

absl::Status CheckProfilingParameter(absl::string_view key, absl::string_view value) {
  if (IsFrameworkConfig(key)) return CheckFrameworkConfig(key, value);
  if (key == "LocalPath") {
    if (value.empty() || value[0] != '/') {
      return absl::InvalidArgumentError("must be an absolute path on the training host");
    }
    return absl::OkStatus();
  }
  for (absl::string_view integer_key : kIntegerKeys) {
    if (key != integer_key) continue;
    int64_t number;
    if (!absl::SimpleAtoi(value, &number) || number < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("must be a positive integer, not \"", EscapeForMessage(value), "\""));
    }
    return absl::OkStatus();
  }
  // Other keys pass through: smdebug ignores what it does not know, and
  // newer smdebug versions know more.
  return absl::OkStatus();
}

}  // namespace debugplane::core
