#include "service/dashboard/profiling_form.h"

#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/jobs/json_bounds.h"
#include "core/jobs/profiling_parameters.h"
#include "nlohmann/json.hpp"

namespace debugplane::service::dashboard {
namespace {

using json = nlohmann::json;

constexpr core::JsonBounds kFormBounds = {.max_chars = 4096, .max_depth = 8};

// A form section and the ProfilingParameters key it fills.
struct Section {
  absl::string_view member;
  absl::string_view parameter;
};
constexpr Section kSections[] = {
    {"detailedProfiling", "DetailedProfilingConfig"},
    {"dataloaderProfiling", "DataloaderProfilingConfig"},
    {"pythonProfiling", "PythonProfilingConfig"},
};

// Form member <-> smdebug's name, inside a section.
struct Member {
  absl::string_view form;
  absl::string_view smdebug;
};
constexpr Member kMembers[] = {
    {"startStep", "StartStep"},
    {"numSteps", "NumSteps"},
    {"startTimeSeconds", "StartTimeInSecSinceEpoch"},
    {"durationSeconds", "DurationInSeconds"},
    {"metricsRegex", "MetricsRegex"},
    {"profilerName", "ProfilerName"},
    {"cprofileTimer", "cProfileTimer"},
};

std::string Shown(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 40) text = absl::StrCat(text.substr(0, 40), "...");
  return text;
}

absl::Status Fail(FormError* error, const std::string& field, const std::string& message) {
  *error = FormError{.field = field,
                     .message = field.empty() ? message : absl::StrCat(field, ": ", message)};
  return absl::InvalidArgumentError(error->message);
}

// A whole number of at least `minimum`. Seconds may come with a fraction
// (Date.now() / 1000): they are rounded down.
bool WholeNumber(const json& value, int64_t minimum, bool allow_fraction, int64_t* out) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{1} << 53) return false;
    *out = value.get<int64_t>();
  } else if (allow_fraction && value.is_number_float()) {
    const double number = value.get<double>();
    if (!std::isfinite(number) || number < 0 || number > 9.0e15) return false;
    *out = static_cast<int64_t>(std::floor(number));
  } else {
    return false;
  }
  return *out >= minimum && *out <= (int64_t{1} << 53);
}

// The member of `section` named `name` (its form name), or the error
// naming `field` and the members the section allows.
absl::StatusOr<const Member*> AllowedMember(const Section& section, const std::string& name,
                                            const std::string& field, FormError* error) {
  const Member* member = nullptr;
  for (const Member& known : kMembers) {
    if (known.form == name) member = &known;
  }
  const bool python = section.member == "pythonProfiling";
  const bool allowed =
      member != nullptr &&
      (member->form != "metricsRegex" || section.member == "dataloaderProfiling") &&
      ((member->form != "profilerName" && member->form != "cprofileTimer") || python);
  if (allowed) return member;
  return Fail(error, field,
              absl::StrCat("is not a member of ", section.member,
                           "; use startStep and numSteps, or startTimeSeconds and "
                           "durationSeconds",
                           section.member == "dataloaderProfiling" ? ", and metricsRegex" : "",
                           python ? ", and profilerName, cprofileTimer" : ""));
}

// `value` (not null) of `member` as smdebug reads it, or the error naming
// `field`.
absl::StatusOr<json> MemberValue(const Member& member, const json& value, const std::string& field,
                                 FormError* error) {
  if (member.form == "metricsRegex") {
    if (!value.is_string() || value.get<std::string>().empty()) {
      return Fail(error, field, "must be a non-empty regular expression");
    }
    return value;
  }
  if (member.form == "profilerName") {
    if (value != "cprofile" && value != "pyinstrument") {
      return Fail(error, field,
                  absl::StrCat("must be \"cprofile\" or \"pyinstrument\", not ", Shown(value)));
    }
    return value;
  }
  if (member.form == "cprofileTimer") {
    if (value != "total_time" && value != "cpu_time" && value != "off_cpu_time") {
      return Fail(error, field,
                  absl::StrCat("must be \"total_time\", \"cpu_time\" or \"off_cpu_time\", not ",
                               Shown(value)));
    }
    return value;
  }
  const bool count = member.form == "numSteps" || member.form == "durationSeconds";
  const bool time = member.form == "startTimeSeconds";
  int64_t number = 0;
  if (!WholeNumber(value, count ? 1 : 0, time, &number)) {
    return Fail(error, field,
                absl::StrCat("must be a whole number of at least ", count ? 1 : 0,
                             time ? " (epoch seconds)" : "", ", not ", Shown(value)));
  }
  return json(number);
}

// Checks that the section's `config` (smdebug's names) gives one range, a
// step range or a time range, with its start; errors name `prefix`.
absl::Status CheckRange(const json& config, const std::string& prefix, FormError* error) {
  const bool steps = config.contains("StartStep") || config.contains("NumSteps");
  const bool times =
      config.contains("StartTimeInSecSinceEpoch") || config.contains("DurationInSeconds");
  if (steps && times) {
    return Fail(error, prefix,
                "give a step range (startStep, numSteps) or a time range (startTimeSeconds, "
                "durationSeconds), not both");
  }
  if (!steps && !times) {
    return Fail(error, absl::StrCat(prefix, ".startStep"),
                "give startStep (and numSteps), or startTimeSeconds (and durationSeconds)");
  }
  if (config.contains("NumSteps") && !config.contains("StartStep")) {
    return Fail(error, absl::StrCat(prefix, ".startStep"), "numSteps needs startStep");
  }
  if (config.contains("DurationInSeconds") && !config.contains("StartTimeInSecSinceEpoch")) {
    return Fail(error, absl::StrCat(prefix, ".startTimeSeconds"),
                "durationSeconds needs startTimeSeconds");
  }
  if (config.contains("cProfileTimer") && config.value("ProfilerName", "cprofile") != "cprofile") {
    return Fail(error, absl::StrCat(prefix, ".cprofileTimer"),
                "applies only to profilerName \"cprofile\"");
  }
  return absl::OkStatus();
}

// One section -> the JSON text smdebug reads, e.g. {"StartStep":5,"NumSteps":3}.
absl::StatusOr<std::string> ParseSection(const Section& section, const json& form,
                                         FormError* error) {
  const std::string prefix(section.member);
  if (!form.is_object()) {
    return Fail(error, prefix, absl::StrCat("must be an object or null, not ", Shown(form)));
  }
  json config = json::object();
  for (const auto& [name, value] : form.items()) {
    const std::string field = absl::StrCat(prefix, ".", name);
    absl::StatusOr<const Member*> member = AllowedMember(section, name, field, error);
    if (!member.ok()) return member.status();
    if (value.is_null()) continue;
    absl::StatusOr<json> converted = MemberValue(**member, value, field, error);
    if (!converted.ok()) return converted.status();
    config[std::string((*member)->smdebug)] = *std::move(converted);
  }
  if (absl::Status range = CheckRange(config, prefix, error); !range.ok()) return range;
  // What UpdateTrainingJob will check of the whole parameter: each member
  // passed alone, so what fails now is the composed value's length. Its one
  // member of free length is metricsRegex: named when the section has one.
  std::string parameter = config.dump();
  if (absl::Status checked = core::CheckProfilingParameter(section.parameter, parameter);
      !checked.ok()) {
    const std::string field =
        config.contains("MetricsRegex") ? absl::StrCat(prefix, ".metricsRegex") : prefix;
    return Fail(error, field,
                absl::StrCat("makes ", section.parameter, " invalid: ", checked.message()));
  }
  return parameter;
}

}  // namespace

absl::StatusOr<v1::UpdateTrainingJobRequest> ParseProfilingForm(absl::string_view body,
                                                                const std::string& job_name,
                                                                FormError* error) {
  if (absl::Status bounded = core::CheckJsonBounds(body, kFormBounds); !bounded.ok()) {
    return Fail(error, "", absl::StrCat("the form is too large: ", bounded.message()));
  }
  const json form = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (form.is_discarded() || !form.is_object()) {
    return Fail(error, "", "the body must be a JSON object (see docs/dashboard-api.md)");
  }
  v1::UpdateTrainingJobRequest request;
  request.set_training_job_name(job_name);
  v1::ProfilerConfigForUpdate* config = request.mutable_profiler_config();
  bool enabled = true;
  for (const auto& [name, value] : form.items()) {
    if (name == "profilingEnabled") {
      if (!value.is_boolean() && !value.is_null()) {
        return Fail(error, name, absl::StrCat("must be true or false, not ", Shown(value)));
      }
      enabled = value.is_null() || value.get<bool>();
    } else if (name == "monitoringIntervalMillis") {
      if (value.is_null()) continue;
      int64_t interval = 0;
      if (!WholeNumber(value, 1, false, &interval)) {
        return Fail(error, name,
                    absl::StrCat("must be a number of milliseconds (100, 200, 500, 1000, 5000 or "
                                 "60000), not ",
                                 Shown(value)));
      }
      config->set_profiling_interval_in_milliseconds(interval);
    } else {
      const Section* section = nullptr;
      for (const Section& known : kSections) {
        if (known.member == name) section = &known;
      }
      if (section == nullptr) {
        return Fail(error, name,
                    "is not a member of the profiling form; use profilingEnabled, "
                    "monitoringIntervalMillis, detailedProfiling, dataloaderProfiling, "
                    "pythonProfiling");
      }
      if (value.is_null()) continue;
      absl::StatusOr<std::string> parameter = ParseSection(*section, value, error);
      if (!parameter.ok()) return parameter.status();
      (*config->mutable_profiling_parameters())[std::string(section->parameter)] = *parameter;
    }
  }
  if (!enabled) {
    // Turning profiling off goes alone (UpdateTrainingJob refuses it with
    // other changes); the rest of the form is what the page shows disabled.
    config->Clear();
    config->set_disable_profiler(true);
  }
  return request;
}

std::string FormFieldOf(const core::FieldViolation& violation) {
  const absl::string_view field = violation.field;
  if (field == "ProfilerConfig.ProfilingIntervalInMilliseconds") return "monitoringIntervalMillis";
  if (field == "ProfilerConfig.DisableProfiler") return "profilingEnabled";
  for (const Section& section : kSections) {
    if (field != absl::StrCat("ProfilerConfig.ProfilingParameters.", section.parameter)) continue;
    for (const Member& member : kMembers) {
      if (absl::StartsWith(violation.description, member.smdebug)) {
        return absl::StrCat(section.member, ".", member.form);
      }
    }
    return std::string(section.member);
  }
  return "";
}

}  // namespace debugplane::service::dashboard
