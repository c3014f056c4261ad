#include "core/jobs/rule_actions.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/jobs/json_bounds.h"
#include "core/jobs/validation_text.h"
#include "nlohmann/json.hpp"

namespace debugplane::core {
namespace {

// smdebug accepts any number; ten is plenty and keeps a record bounded.
constexpr size_t kMaxActions = 10;
constexpr size_t kMaxDetails = 1024;

bool IsEmailAddress(absl::string_view address) {
  const size_t at = address.find('@');
  if (at == absl::string_view::npos || at == 0 || at + 1 >= address.size()) return false;
  if (address.find('@', at + 1) != absl::string_view::npos) return false;
  for (char c : address) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '<' || c == '>' || c == ',') {
      return false;
    }
  }
  return address.size() <= 254 && address.substr(at + 1).find('.') != absl::string_view::npos;
}

// E.164 as SageMaker's SMS action wants it: '+', country code and number,
// no spaces or punctuation.
bool IsPhoneNumber(absl::string_view number) {
  if (number.size() < 9 || number.size() > 16 || number[0] != '+') return false;
  for (char c : number.substr(1)) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The action kinds: one row each, read by the parser and by
// RuleActionTypeName.
struct ActionKind {
  RuleActionType type;
  absl::string_view json_name;    // "name" in action_json (lower case).
  absl::string_view status_name;  // RuleActionTypeName's answer.
  absl::string_view target_key;   // The one other key the action takes.
};

constexpr ActionKind kActionKinds[] = {
    {RuleActionType::kStopTraining, "stoptraining", "StopTraining", "training_job_prefix"},
    {RuleActionType::kEmail, "email", "Email", "endpoint"},
    {RuleActionType::kSms, "sms", "SMS", "endpoint"},
};

absl::StatusOr<RuleActionSpec> ParseOne(const nlohmann::json& entry) {
  if (!entry.is_object()) {
    return absl::InvalidArgumentError("must be an object like {\"name\": \"stoptraining\"}");
  }
  auto name_it = entry.find("name");
  if (name_it == entry.end() || !name_it->is_string()) {
    return absl::InvalidArgumentError(
        "needs \"name\": one of \"stoptraining\", \"email\", \"sms\"");
  }
  const std::string name = absl::AsciiStrToLower(name_it->get<std::string>());
  const ActionKind* kind = nullptr;
  for (const ActionKind& candidate : kActionKinds) {
    if (candidate.json_name == name) kind = &candidate;
  }
  if (kind == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown action \"", name_it->get<std::string>(),
                     "\"; use \"stoptraining\", \"email\" or \"sms\""));
  }
  RuleActionSpec spec;
  spec.type = kind->type;
  const absl::string_view target_key = kind->target_key;
  for (const auto& [key, value] : entry.items()) {
    if (key == "name") continue;
    if (key != target_key) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", name, "\" takes no \"", key, "\" (only \"", target_key, "\")"));
    }
    if (!value.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be a string"));
    }
    spec.target = value.get<std::string>();
  }
  switch (spec.type) {
    case RuleActionType::kStopTraining:
      break;  // An empty or missing prefix stops the rule's own job.
    case RuleActionType::kEmail:
      if (!IsEmailAddress(spec.target)) {
        return absl::InvalidArgumentError(
            absl::StrCat("\"email\" needs \"endpoint\": an email address like "
                         "\"ml-team@example.com\", not \"",
                         spec.target, "\""));
      }
      break;
    case RuleActionType::kSms:
      if (!IsPhoneNumber(spec.target)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "\"sms\" needs \"endpoint\": a phone number as '+', country code and number with no "
            "spaces (e.g. \"+12223334444\"), not \"",
            spec.target, "\""));
      }
      break;
  }
  return spec;
}

v1::DebugRuleConfiguration* FindDebugRule(JobRecord& job, absl::string_view rule) {
  for (auto& config : *job.mutable_debug_rule_configurations()) {
    if (config.rule_configuration_name() == rule) return &config;
  }
  return nullptr;
}

}  // namespace

absl::string_view RuleActionTypeName(RuleActionType type) {
  for (const ActionKind& kind : kActionKinds) {
    if (kind.type == type) return kind.status_name;
  }
  return "Unknown";
}

absl::StatusOr<std::vector<RuleActionSpec>> ParseActionJson(absl::string_view json) {
  // Bounded before parsing: dump() and copies of a nested value recurse.
  if (absl::Status bounded = CheckJsonBounds(json, kRequestJsonBounds); !bounded.ok()) {
    return bounded;
  }
  nlohmann::json parsed = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return absl::InvalidArgumentError(
        "is not JSON; expected an action object or a list of them, e.g. "
        "[{\"name\": \"stoptraining\"}, {\"name\": \"email\", \"endpoint\": \"a@example.com\"}]");
  }
  std::vector<RuleActionSpec> actions;
  if (!parsed.is_array()) {
    absl::StatusOr<RuleActionSpec> one = ParseOne(parsed);
    if (!one.ok()) return one.status();
    actions.push_back(*std::move(one));
    return actions;
  }
  if (parsed.empty()) return absl::InvalidArgumentError("lists no action");
  if (parsed.size() > kMaxActions) {
    return absl::InvalidArgumentError(
        absl::StrCat("lists ", parsed.size(), " actions; at most ", kMaxActions));
  }
  for (size_t i = 0; i < parsed.size(); ++i) {
    absl::StatusOr<RuleActionSpec> one = ParseOne(parsed[i]);
    if (!one.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("action ", i, ": ", one.status().message()));
    }
    actions.push_back(*std::move(one));
  }
  return actions;
}

int RecordTriggeredActions(JobRecord& job, absl::string_view rule, absl::Time now) {
  const v1::DebugRuleConfiguration* config = FindDebugRule(job, rule);
  if (config == nullptr) return 0;
  auto json = config->rule_parameters().find(std::string(kActionJsonParameter));
  if (json == config->rule_parameters().end()) return 0;
  const std::string id_prefix = absl::StrCat(job.training_job_name(), "/", rule, "/");
  for (const auto& action : job.rule_actions()) {
    if (action.rule_configuration_name() == rule) return 0;  // Recorded already.
  }
  auto add = [&](int index) {
    v1::RuleAction* action = job.add_rule_actions();
    action->set_action_id(absl::StrCat(id_prefix, index));
    action->set_rule_configuration_name(std::string(rule));
    action->set_status(v1::RuleActionStatus::Pending);
    SetTimestamp(now, action->mutable_creation_time());
    SetTimestamp(now, action->mutable_last_modified_time());
    return action;
  };
  absl::StatusOr<std::vector<RuleActionSpec>> specs = ParseActionJson(json->second);
  if (!specs.ok()) {
    // Validated at creation, so only a record from an older version lands
    // here; say so rather than drop the request silently.
    v1::RuleAction* action = add(0);
    action->set_status(v1::RuleActionStatus::Failed);
    action->set_details(CutToChars(
        absl::StrCat("RuleParameters.action_json ", specs.status().message()), kMaxDetails));
    return 1;
  }
  int index = 0;
  for (const RuleActionSpec& spec : *specs) {
    v1::RuleAction* action = add(index++);
    action->set_action(std::string(RuleActionTypeName(spec.type)));
    action->set_target(spec.type == RuleActionType::kStopTraining && spec.target.empty()
                           ? job.training_job_name()
                           : spec.target);
  }
  SetTimestamp(now, job.mutable_last_modified_time());
  return index;
}

bool SetRuleActionStatus(JobRecord& job, absl::string_view action_id,
                         v1::RuleActionStatus::Value status, absl::string_view details,
                         int attempts, absl::Time now) {
  for (auto& action : *job.mutable_rule_actions()) {
    if (action.action_id() != action_id) continue;
    if (action.status() != v1::RuleActionStatus::Pending) return false;
    // Cut between characters: details quote receivers' answers, and a
    // proto string must stay valid UTF-8.
    const std::string kept = CutToChars(details, kMaxDetails);
    if (action.status() == status && action.details() == kept && action.attempts() == attempts) {
      return false;
    }
    action.set_status(status);
    action.set_details(kept);
    action.set_attempts(attempts);
    SetTimestamp(now, action.mutable_last_modified_time());
    SetTimestamp(now, job.mutable_last_modified_time());
    return true;
  }
  return false;
}

bool HasPendingActions(const JobRecord& job) {
  for (const auto& action : job.rule_actions()) {
    if (action.status() == v1::RuleActionStatus::Pending) return true;
  }
  return false;
}

absl::string_view RuleActionStatusName(v1::RuleActionStatus::Value status) {
  return v1::RuleActionStatus::Value_Name(status);
}

}  // namespace debugplane::core
