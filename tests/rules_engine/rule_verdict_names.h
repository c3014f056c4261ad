// Names of rule verdict kinds, for test failure messages.

#ifndef DEBUGPLANE_TESTS_RULES_ENGINE_RULE_VERDICT_NAMES_H_
#define DEBUGPLANE_TESTS_RULES_ENGINE_RULE_VERDICT_NAMES_H_

#include "rules_engine/rule/rule.h"

namespace debugplane::rules_engine::testing {

// "Continue", "IssuesFound", "NoIssuesFound" or "Error"; "?" for a value
// outside the enum.
inline const char* KindName(RuleVerdict::Kind kind) {
  switch (kind) {
    case RuleVerdict::Kind::kContinue:
      return "Continue";
    case RuleVerdict::Kind::kIssuesFound:
      return "IssuesFound";
    case RuleVerdict::Kind::kNoIssuesFound:
      return "NoIssuesFound";
    case RuleVerdict::Kind::kError:
      return "Error";
  }
  return "?";
}

}  // namespace debugplane::rules_engine::testing

#endif  // DEBUGPLANE_TESTS_RULES_ENGINE_RULE_VERDICT_NAMES_H_
