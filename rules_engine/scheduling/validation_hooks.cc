#include "rules_engine/scheduling/validation_hooks.h"

#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/rule/rule.h"

namespace debugplane::rules_engine {

void InstallRuleValidation(core::ValidationOptions* options) {
  options->check_rule_parameters = [](const std::string& rule,
                                      const core::RuleParameterMap& parameters) {
    return ValidateBuiltinRuleParameters(rule, parameters);
  };
  options->rule_collections = [](const std::string& rule,
                                 const core::RuleParameterMap& parameters) {
    // Only the collections are wanted: give SimilarAcrossRuns a lookup so it
    // can be built; it is never called.
    RuleContext context;
    context.other_trial = [](const std::string&, int64_t,
                             const std::string&) -> absl::StatusOr<Tensor> {
      return absl::NotFoundError("not read");
    };
    absl::StatusOr<std::unique_ptr<Rule>> built = CreateBuiltinRule(rule, parameters, context);
    return built.ok() ? (*built)->RequiredCollections() : std::vector<std::string>{};
  };
}

}  // namespace debugplane::rules_engine
