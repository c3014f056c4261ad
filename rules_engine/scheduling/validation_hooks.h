// Connects CreateTrainingJob validation (core/) to the built-in rules: core
// does not depend on the rules engine, so the server installs these.

#ifndef DEBUGPLANE_RULES_ENGINE_SCHEDULING_VALIDATION_HOOKS_H_
#define DEBUGPLANE_RULES_ENGINE_SCHEDULING_VALIDATION_HOOKS_H_

#include "core/jobs/validation.h"

namespace debugplane::rules_engine {

// Sets options->check_rule_parameters (bad rule parameters are refused at
// CreateTrainingJob time, naming the parameter) and options->rule_collections
// (warnings for collections a rule reads that the hook does not save).
void InstallRuleValidation(core::ValidationOptions* options);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SCHEDULING_VALIDATION_HOOKS_H_
