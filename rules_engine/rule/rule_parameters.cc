#include "rules_engine/rule/rule_parameters.h"

#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/message_text.h"
#include "rules_engine/smdebug/python_regex.h"

namespace debugplane::rules_engine {
namespace {

std::string Quote(absl::string_view s) { return absl::StrCat("'", s, "'"); }

}  // namespace

bool IsReservedRuleParameter(absl::string_view key) {
  // rule_to_invoke selects the rule, action_json carries actions (handled by
  // the scheduler); base_trial and other_trials are set by SageMaker itself
  // (other_trials is read by SimilarAcrossRuns, which declares it).
  return key == "rule_to_invoke" || key == "action_json" || key == "base_trial" ||
         key == "other_trials";
}

std::string RegexError(const std::string& pattern) {
  absl::StatusOr<std::shared_ptr<const PythonRegex>> compiled = RegexCache::Shared().Get(pattern);
  return compiled.ok() ? "" : std::string(compiled.status().message());
}

bool RegexMatchPrefix(const std::string& pattern, absl::string_view text) {
  absl::StatusOr<std::shared_ptr<const PythonRegex>> compiled = RegexCache::Shared().Get(pattern);
  return compiled.ok() && (*compiled)->MatchPrefix(text);
}

RuleParameterReader::RuleParameterReader(std::string rule_name, const RuleParameters& parameters)
    : rule_name_(std::move(rule_name)), parameters_(parameters) {}

absl::optional<std::string> RuleParameterReader::Raw(absl::string_view name) {
  known_.insert(std::string(name));
  auto it = parameters_.find(std::string(name));
  if (it == parameters_.end()) return absl::nullopt;
  absl::string_view v = absl::StripAsciiWhitespace(it->second);
  // The SDK writes an unset optional parameter as "None".
  if (v == "None") return absl::nullopt;
  return std::string(v);
}

bool RuleParameterReader::Has(absl::string_view name) const {
  auto it = parameters_.find(std::string(name));
  return it != parameters_.end() && absl::StripAsciiWhitespace(it->second) != "None";
}

void RuleParameterReader::Fail(absl::string_view name, absl::string_view message) {
  if (!error_.ok()) return;
  error_ = absl::InvalidArgumentError(
      absl::StrCat(rule_name_, ": parameter ", Quote(name), " ", message));
}

double RuleParameterReader::FloatValue(absl::string_view name, double default_value, double min,
                                       double max) {
  absl::optional<std::string> raw = Raw(name);
  if (!raw) return default_value;
  double v = 0;
  if (!absl::SimpleAtod(*raw, &v) || std::isnan(v)) {
    Fail(name, absl::StrCat("must be a number, got ", Quote(*raw)));
    return default_value;
  }
  if (v < min || v > max) {
    Fail(name, absl::StrCat("must be between ", min, " and ", max, ", got ", Quote(*raw)));
    return default_value;
  }
  return v;
}

double RuleParameterReader::FloatExclusive(absl::string_view name, double default_value, double min,
                                           double max) {
  double v = Float(name, default_value);
  if (Has(name) && error_.ok() && (v <= min || v >= max)) {
    Fail(name, absl::StrCat("must be greater than ", min, " and less than ", max, ", got ",
                            Quote(parameters_.at(std::string(name)))));
    return default_value;
  }
  return v;
}

absl::optional<double> RuleParameterReader::OptionalFloat(absl::string_view name) {
  if (!Has(name)) {
    known_.insert(std::string(name));
    return absl::nullopt;
  }
  return Float(name, 0);
}

int64_t RuleParameterReader::IntValue(absl::string_view name, int64_t default_value, int64_t min,
                                      int64_t max) {
  absl::optional<std::string> raw = Raw(name);
  if (!raw) return default_value;
  int64_t v = 0;
  if (!absl::SimpleAtoi(*raw, &v)) {
    double d = 0;
    // "10.0" is an integer in a float's clothing; "10.5" is not.
    if (!absl::SimpleAtod(*raw, &d) || !std::isfinite(d) || d != std::floor(d) ||
        std::fabs(d) > 9e15) {
      Fail(name, absl::StrCat("must be an integer, got ", Quote(*raw)));
      return default_value;
    }
    v = static_cast<int64_t>(d);
  }
  if (v < min || v > max) {
    Fail(name, max == std::numeric_limits<int64_t>::max()
                   ? absl::StrCat("must be at least ", min, ", got ", Quote(*raw))
                   : absl::StrCat("must be between ", min, " and ", max, ", got ", Quote(*raw)));
    return default_value;
  }
  return v;
}

absl::optional<int64_t> RuleParameterReader::OptionalInt(absl::string_view name, int64_t min,
                                                         int64_t max) {
  if (!Has(name)) {
    known_.insert(std::string(name));
    return absl::nullopt;
  }
  return Int(name, min, min, max);
}

bool RuleParameterReader::BoolValue(absl::string_view name, bool default_value) {
  absl::optional<std::string> raw = Raw(name);
  if (!raw) return default_value;
  const std::string lower = absl::AsciiStrToLower(*raw);
  if (lower == "true" || lower == "1") return true;
  if (lower == "false" || lower == "0") return false;
  Fail(name, absl::StrCat("must be True or False, got ", Quote(*raw)));
  return default_value;
}

std::string RuleParameterReader::StringValue(absl::string_view name, std::string default_value,
                                             const std::vector<std::string>& allowed) {
  absl::optional<std::string> raw = Raw(name);
  if (!raw) return default_value;
  if (!allowed.empty()) {
    for (const std::string& a : allowed) {
      if (*raw == a) return *raw;
    }
    Fail(name,
         absl::StrCat("must be one of ", absl::StrJoin(allowed, ", "), ", got ", Quote(*raw)));
    return default_value;
  }
  return *raw;
}

double RuleParameterReader::Float(absl::string_view name, double default_value, double min,
                                  double max) {
  const double v = FloatValue(name, default_value, min, max);
  resolved_[std::string(name)] = absl::StrCat(v);
  return v;
}

int64_t RuleParameterReader::Int(absl::string_view name, int64_t default_value, int64_t min,
                                 int64_t max) {
  const int64_t v = IntValue(name, default_value, min, max);
  resolved_[std::string(name)] = absl::StrCat(v);
  return v;
}

bool RuleParameterReader::Bool(absl::string_view name, bool default_value) {
  const bool v = BoolValue(name, default_value);
  resolved_[std::string(name)] = v ? "True" : "False";
  return v;
}

std::string RuleParameterReader::String(absl::string_view name, std::string default_value,
                                        const std::vector<std::string>& allowed) {
  std::string v = StringValue(name, std::move(default_value), allowed);
  resolved_[std::string(name)] = v;
  return v;
}

absl::optional<std::string> RuleParameterReader::OptionalString(absl::string_view name) {
  return Raw(name);
}

std::vector<std::string> RuleParameterReader::List(absl::string_view name,
                                                   std::vector<std::string> default_value) {
  return SplitList(name, /*regex_items=*/false, std::move(default_value));
}

namespace {

// The items of a list value (without the brackets of a Python list literal):
// split at commas outside quotes and, for regular expressions, outside
// (), [] and {} and not escaped, so that "a{1,3}, [x,y]z" is two patterns.
// Items are stripped of whitespace and of one pair of enclosing quotes;
// empty items are dropped.
std::vector<std::string> SplitListItems(absl::string_view value, bool regex_items) {
  std::vector<std::string> items;
  auto add = [&items](absl::string_view item) {
    item = absl::StripAsciiWhitespace(item);
    if (item.size() >= 2 && (item.front() == '\'' || item.front() == '"') &&
        item.back() == item.front()) {
      item = item.substr(1, item.size() - 2);
    }
    if (!item.empty()) items.emplace_back(item);
  };
  char quote = 0;  // The quote character of the item being read, if any.
  int depth = 0;   // Open (, [ and { of a regular expression.
  size_t start = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (regex_items && c == '\\') {
      ++i;  // An escaped character never splits or nests.
    } else if (quote != 0) {
      if (c == quote) quote = 0;
    } else if ((c == '\'' || c == '"') &&
               absl::StripAsciiWhitespace(value.substr(start, i - start)).empty()) {
      quote = c;
    } else if (regex_items && (c == '(' || c == '[' || c == '{')) {
      ++depth;
    } else if (regex_items && (c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      add(value.substr(start, i - start));
      start = i + 1;
    }
  }
  add(value.substr(std::min(start, value.size())));
  return items;
}

}  // namespace

std::vector<std::string> RuleParameterReader::SplitList(absl::string_view name, bool regex_items,
                                                        std::vector<std::string> default_value) {
  absl::optional<std::string> raw = Raw(name);
  if (!raw) return default_value;
  absl::string_view v = *raw;
  // A Python list literal, as str(list) writes it. A regular expression may
  // start with a character class ("[ab]c"), so for regular expressions only
  // a bracket followed by a quote ("['a', 'b']") opens a list.
  const bool literal =
      absl::StartsWith(v, "[") &&
      (!regex_items || absl::StartsWith(absl::StripLeadingAsciiWhitespace(v.substr(1)), "'") ||
       absl::StartsWith(absl::StripLeadingAsciiWhitespace(v.substr(1)), "\""));
  if (literal) {
    v.remove_prefix(1);
    if (!absl::ConsumeSuffix(&v, "]")) {
      Fail(name, absl::StrCat("has an unterminated list, got ", Quote(*raw)));
      return default_value;
    }
  }
  std::vector<std::string> out = SplitListItems(v, regex_items);
  if (out.empty()) return default_value;
  return out;
}

std::string RuleParameterReader::Regex(absl::string_view name, std::string default_value) {
  std::string pattern = String(name, std::move(default_value));
  if (std::string err = RegexError(pattern); !err.empty()) {
    Fail(name, absl::StrCat("has an invalid regular expression ",
                            base::SingleQuoteForMessage(pattern), ": ", err));
  }
  return pattern;
}

std::vector<std::string> RuleParameterReader::RegexList(absl::string_view name,
                                                        std::vector<std::string> default_value) {
  std::vector<std::string> patterns =
      SplitList(name, /*regex_items=*/true, std::move(default_value));
  for (const std::string& p : patterns) {
    std::string err = RegexError(p);
    if (!err.empty()) {
      Fail(name, absl::StrCat("has an invalid regular expression ",
                              base::SingleQuoteForMessage(p), ": ", err));
      return {};
    }
  }
  return patterns;
}

std::vector<double> RuleParameterReader::FloatList(absl::string_view name,
                                                   std::vector<double> default_value) {
  if (!Has(name)) {
    known_.insert(std::string(name));
    return default_value;
  }
  std::vector<double> out;
  for (const std::string& item : List(name)) {
    double v = 0;
    if (!absl::SimpleAtod(item, &v) || !std::isfinite(v)) {
      Fail(name, absl::StrCat("must be a comma-separated list of numbers, got ", Quote(item)));
      return default_value;
    }
    out.push_back(v);
  }
  if (out.empty()) return default_value;
  return out;
}

absl::Status RuleParameterReader::status() const {
  if (!error_.ok()) return error_;
  for (const auto& [key, value] : parameters_) {
    if (known_.count(key) > 0 || IsReservedRuleParameter(key)) continue;
    std::vector<std::string> names(known_.begin(), known_.end());
    return absl::InvalidArgumentError(absl::StrCat(
        rule_name_, ": unknown parameter ", Quote(key),
        "; allowed: ", names.empty() ? std::string("none") : absl::StrJoin(names, ", ")));
  }
  return absl::OkStatus();
}

}  // namespace debugplane::rules_engine
