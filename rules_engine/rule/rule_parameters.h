// Typed parsing of built-in rule parameters (all strings in the API, e.g.
// "threshold": "0.0000001", "only_nan": "False", "tensor_regex": "a,b").

#ifndef DEBUGPLANE_RULES_ENGINE_RULE_RULE_PARAMETERS_H_
#define DEBUGPLANE_RULES_ENGINE_RULE_RULE_PARAMETERS_H_

#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "rules_engine/rule/rule.h"

namespace debugplane::rules_engine {

// Reads one rule's parameters. Each getter declares the parameter as known
// and returns its parsed value or the default; the first bad value is kept
// and reported by status(), together with any parameter no getter declared.
// Getting every parameter unconditionally (even ones a configuration does
// not use) is what makes the unknown-parameter check exact.
//
//   RuleParameterReader p("VanishingGradient", params);
//   double threshold = p.Float("threshold", 1e-7);
//   if (absl::Status s = p.status(); !s.ok()) return s;
class RuleParameterReader {
 public:
  RuleParameterReader(std::string rule_name, const RuleParameters& parameters);

  // A number ("1e-7", "10", "-23"); `min`/`max` inclusive bounds.
  double Float(absl::string_view name, double default_value,
               double min = -std::numeric_limits<double>::infinity(),
               double max = std::numeric_limits<double>::infinity());
  // Like Float but exclusive bounds (e.g. diff_percent: 0 < x < 100).
  double FloatExclusive(absl::string_view name, double default_value, double min, double max);
  // Absent (or "None", the SDK's spelling of no value) -> nullopt.
  absl::optional<double> OptionalFloat(absl::string_view name);
  // An integer ("10"; "10.0" is accepted as the SDK writes some defaults so).
  int64_t Int(absl::string_view name, int64_t default_value,
              int64_t min = std::numeric_limits<int64_t>::min(),
              int64_t max = std::numeric_limits<int64_t>::max());
  absl::optional<int64_t> OptionalInt(absl::string_view name, int64_t min, int64_t max);
  // "True"/"False" (Python), "true"/"false", "1"/"0".
  bool Bool(absl::string_view name, bool default_value);
  // Any string; `allowed` (if not empty) lists the accepted values.
  std::string String(absl::string_view name, std::string default_value,
                     const std::vector<std::string>& allowed = {});
  absl::optional<std::string> OptionalString(absl::string_view name);
  // A list: "a, b", "a" or a Python list literal "['a', 'b']". Items are
  // split at commas outside quotes; empty items are dropped; absent, "" or
  // "None" -> `default_value`.
  std::vector<std::string> List(absl::string_view name,
                                std::vector<std::string> default_value = {});
  // One regular expression, checked to compile (RegexError); the error
  // quotes an excerpt of the pattern and RE2's reason.
  std::string Regex(absl::string_view name, std::string default_value);
  // A list of regular expressions, each checked to compile (RegexError);
  // the error quotes an excerpt of the pattern and RE2's reason. As List,
  // but a comma inside (), [] or {} or escaped does not split
  // ("a{1,3}, [x,y]z" is two patterns), and a leading '[' opens a Python
  // list literal only when a quote follows it ("[ab]c" is one pattern).
  std::vector<std::string> RegexList(absl::string_view name,
                                     std::vector<std::string> default_value = {});
  // A list of numbers ("3, 0").
  std::vector<double> FloatList(absl::string_view name, std::vector<double> default_value);

  // True if the parameter was passed (and is not "None").
  bool Has(absl::string_view name) const;
  // Records an error about `name` unless one was recorded already (for
  // checks across parameters).
  void Fail(absl::string_view name, absl::string_view message);

  // OK, or INVALID_ARGUMENT for the first bad value or an unknown parameter.
  absl::Status status() const;
  const std::string& rule_name() const { return rule_name_; }
  // The value each Float/Int/Bool/String getter returned (the given value or
  // the default), as text: what a rule actually uses, for reports.
  const std::map<std::string, std::string>& resolved() const { return resolved_; }

 private:
  double FloatValue(absl::string_view name, double default_value, double min, double max);
  int64_t IntValue(absl::string_view name, int64_t default_value, int64_t min, int64_t max);
  bool BoolValue(absl::string_view name, bool default_value);
  std::string StringValue(absl::string_view name, std::string default_value,
                          const std::vector<std::string>& allowed);
  // The raw value, or nullopt when absent/"None"; declares `name` known.
  absl::optional<std::string> Raw(absl::string_view name);
  // List and RegexList: `regex_items` splits as RegexList documents.
  std::vector<std::string> SplitList(absl::string_view name, bool regex_items,
                                     std::vector<std::string> default_value);

  std::string rule_name_;
  const RuleParameters parameters_;  // A copy: callers pass temporaries.
  std::set<std::string> known_;
  absl::Status error_;
  std::map<std::string, std::string> resolved_;
};

// Keys SageMaker or this service adds to every rule's parameters; never
// reported as unknown.
bool IsReservedRuleParameter(absl::string_view key);

// Compiles `pattern` as smdebug would use it (a Python re pattern, within
// RE2's syntax plus one negative lookahead: rules_engine/smdebug/python_regex.h), through
// the shared bounded cache. Empty string when it compiles, else why not
// (RE2's error, short; refused patterns are not cached).
std::string RegexError(const std::string& pattern);
// Python re.match semantics (anchored at the start, not at the end), which
// is how smdebug matches tensor_regex against names. False for a pattern
// RegexError refuses.
bool RegexMatchPrefix(const std::string& pattern, absl::string_view text);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_RULE_RULE_PARAMETERS_H_
