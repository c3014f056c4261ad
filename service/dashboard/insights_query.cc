#include "service/dashboard/insights_query.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/message_text.h"
#include "rules_engine/query_handler/tensor_query_handler.h"
#include "service/http/percent_decoding.h"

namespace debugplane::service::dashboard {

namespace {

using rules_engine::insights::Metric;

ParamError Bad(absl::string_view field, absl::string_view message) {
  return {absl::InvalidArgumentError(message), std::string(field)};
}

std::string Quoted(absl::string_view text) {
  return absl::StrCat("'", base::EscapeForMessage(text, 64), "'");
}

ParamError Seconds(const std::map<std::string, std::string>& params, const char* name,
                   std::optional<double>* out) {
  auto it = params.find(name);
  if (it == params.end() || it->second.empty()) return {};
  double v = 0;
  // Bounded so that no bucket index computed from it can overflow.
  if (!absl::SimpleAtod(it->second, &v) || !std::isfinite(v) || v < 0 ||
      v > rules_engine::insights::kLatestTime) {
    return Bad(name, absl::StrCat(name, " must be a time in seconds since the epoch, from 0 to ",
                                  static_cast<int64_t>(rules_engine::insights::kLatestTime),
                                  " (the year 2286), not ", Quoted(it->second)));
  }
  *out = v;
  return {};
}

ParamError Range(const std::map<std::string, std::string>& params,
                 rules_engine::insights::TimeRange* range) {
  if (ParamError e = Seconds(params, "start", &range->start); !e.ok()) return e;
  if (ParamError e = Seconds(params, "end", &range->end); !e.ok()) return e;
  if (range->start && range->end && *range->start > *range->end) {
    return Bad("start", absl::StrCat("start after end (", *range->start, " > ", *range->end, ")"));
  }
  if (range->start && range->end && *range->start == *range->end) {
    return Bad("start",
               absl::StrCat("start equals end (", *range->start, "): the range must not be empty"));
  }
  return {};
}

ParamError Integer(const std::map<std::string, std::string>& params, const char* name, int min,
                   int max, int* out) {
  auto it = params.find(name);
  if (it == params.end()) return {};
  int64_t v = 0;
  if (!absl::SimpleAtoi(it->second, &v) || v < min || v > max) {
    return Bad(name, absl::StrCat(name, " must be ", min, "..", max, ", not ", Quoted(it->second)));
  }
  *out = static_cast<int>(v);
  return {};
}

// "mean,max": the arrays named (at least one; each of t, min, max, mean).
ParamError ParseFields(absl::string_view text, SystemFields* out) {
  const std::pair<const char*, bool SystemFields::*> kFields[] = {
      {"t", &SystemFields::t},
      {"min", &SystemFields::min},
      {"max", &SystemFields::max},
      {"mean", &SystemFields::mean}};
  int named = 0;
  for (absl::string_view name : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    name = absl::StripAsciiWhitespace(name);
    auto known = std::find_if(std::begin(kFields), std::end(kFields),
                              [name](const auto& f) { return name == f.first; });
    if (known == std::end(kFields)) {
      return Bad("fields", absl::StrCat("fields must list t, min, max or mean (comma-separated), "
                                        "not ",
                                        Quoted(name)));
    }
    out->*(known->second) = true;
    ++named;
  }
  if (named == 0) return Bad("fields", "fields must name at least one of t, min, max, mean");
  return {};
}

}  // namespace

ParamError ParseQueryString(absl::string_view query, const std::vector<std::string>& known,
                            std::map<std::string, std::string>* out) {
  out->clear();
  if (query.empty()) return {};
  for (absl::string_view part : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    const size_t eq = part.find('=');
    const absl::string_view raw_name = part.substr(0, eq);
    const absl::string_view raw_value =
        eq == absl::string_view::npos ? absl::string_view() : part.substr(eq + 1);
    std::optional<std::string> decoded_name =
        http::PercentDecodeStrict(raw_name, http::PlusMeans::kSpace);
    if (!decoded_name.has_value()) {
      return Bad("query", absl::StrCat("query: bad percent-encoding in ", Quoted(raw_name)));
    }
    const std::string name = *std::move(decoded_name);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return Bad(name, absl::StrCat("unknown query parameter ", Quoted(name),
                                    "; known: ", absl::StrJoin(known, ", ")));
    }
    std::optional<std::string> decoded_value =
        http::PercentDecodeStrict(raw_value, http::PlusMeans::kSpace);
    if (!decoded_value.has_value()) {
      return Bad(name, absl::StrCat(name, ": bad percent-encoding in ", Quoted(raw_value)));
    }
    (*out)[name] = *std::move(decoded_value);
  }
  return {};
}

ParamError ParseSystemQuery(absl::string_view query, rules_engine::insights::SystemQuery* out,
                            SystemFields* fields) {
  std::map<std::string, std::string> params;
  if (ParamError e = ParseQueryString(
          query, {"start", "end", "width", "node", "metric", "devices", "fields"}, &params);
      !e.ok()) {
    return e;
  }
  if (auto it = params.find("fields"); it != params.end()) {
    SystemFields parsed{.t = false, .min = false, .max = false, .mean = false};
    if (ParamError e = ParseFields(it->second, &parsed); !e.ok()) return e;
    if (fields != nullptr) *fields = parsed;
  }
  if (ParamError e = Range(params, &out->range); !e.ok()) return e;
  out->width = kDefaultWidth;
  if (ParamError e = Integer(params, "width", 1, kMaxWidth, &out->width); !e.ok()) return e;
  if (auto it = params.find("node"); it != params.end()) out->node = it->second;
  if (auto it = params.find("metric"); it != params.end() && !it->second.empty()) {
    out->metric = rules_engine::insights::ParseMetric(it->second);
    if (!out->metric) {
      return Bad("metric", absl::StrCat("metric must be cpu, gpu, gpu_memory, cpu_memory, "
                                        "io_wait, network_rx or network_tx, not ",
                                        Quoted(it->second)));
    }
  }
  if (auto it = params.find("devices"); it != params.end()) {
    out->devices = absl::StrSplit(it->second, ',', absl::SkipWhitespace());
  }
  return {};
}

ParamError ParseFrameworkQuery(absl::string_view query, rules_engine::insights::TimeRange* range,
                               int* width) {
  std::map<std::string, std::string> params;
  if (ParamError e = ParseQueryString(query, {"start", "end", "width"}, &params); !e.ok()) {
    return e;
  }
  if (ParamError e = Range(params, range); !e.ok()) return e;
  *width = kDefaultWidth;
  return Integer(params, "width", 1, kMaxWidth, width);
}

ParamError ParseTensorQuery(absl::string_view query, const std::string& job_name,
                            v1::GetTensorValuesRequest* out) {
  std::map<std::string, std::string> params;
  if (ParamError e = ParseQueryString(query, {"name", "mode", "steps", "maxPoints"}, &params);
      !e.ok()) {
    return e;
  }
  out->set_training_job_name(job_name);
  auto name = params.find("name");
  if (name == params.end() || name->second.empty()) return Bad("name", "name is required");
  out->set_tensor_name(name->second);
  const std::string mode = params.count("mode") ? params["mode"] : "ALL";
  if (mode == "ALL" || mode.empty()) {
    out->set_mode(v1::TensorMode::TENSOR_MODE_UNSPECIFIED);
  } else {
    v1::TensorMode::Value value;
    if (!v1::TensorMode::Value_Parse(mode, &value) ||
        value == v1::TensorMode::TENSOR_MODE_UNSPECIFIED) {
      return Bad("mode", absl::StrCat("mode must be TRAIN, EVAL, PREDICT, GLOBAL or ALL, not ",
                                      Quoted(mode)));
    }
    out->set_mode(value);
  }
  if (auto it = params.find("steps"); it != params.end() && !it->second.empty()) {
    const size_t colon = it->second.find(':');
    const absl::string_view text = it->second;
    const absl::string_view from = text.substr(0, colon);
    const absl::string_view to =
        colon == absl::string_view::npos ? absl::string_view() : text.substr(colon + 1);
    int64_t a = 0, b = 0;
    if (colon == absl::string_view::npos || (!from.empty() && !absl::SimpleAtoi(from, &a)) ||
        (!to.empty() && !absl::SimpleAtoi(to, &b)) || a < 0 || (!to.empty() && b < a)) {
      return Bad("steps", absl::StrCat("steps must be FIRST:LAST (global steps, FIRST <= LAST, "
                                       "either may be empty), not ",
                                       Quoted(text)));
    }
    out->set_start_step(a);
    if (!to.empty()) out->set_end_step(b);
  }
  int points = kDefaultTensorPoints;
  if (ParamError e = Integer(params, "maxPoints", 1, rules_engine::kMaxMaxPoints, &points);
      !e.ok()) {
    return e;
  }
  out->set_max_points(points);
  return {};
}

}  // namespace debugplane::service::dashboard
