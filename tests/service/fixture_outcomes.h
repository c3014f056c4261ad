// The verdicts the smdebug fixture trials must reach (tests/data/README.md,
// smdebug table): one table for the tests that read them from disk and from
// object storage.

#ifndef DEBUGPLANE_TESTS_SERVICE_FIXTURE_OUTCOMES_H_
#define DEBUGPLANE_TESTS_SERVICE_FIXTURE_OUTCOMES_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace debugplane::testing {

// One fixture (tests/data/smdebug/<fixture>) and the built-in rules that
// must find issues in it and those that must find none.
struct FixtureOutcome {
  const char* fixture;
  std::vector<std::string> issues_found;
  std::vector<std::string> no_issues_found;

  // Every rule named above, those finding issues first.
  std::vector<std::string> rules() const {
    std::vector<std::string> all = issues_found;
    all.insert(all.end(), no_issues_found.begin(), no_issues_found.end());
    return all;
  }
  // A valid job name for the fixture: `prefix` and the fixture's name with
  // '-' for '_'.
  std::string JobName(const std::string& prefix) const {
    std::string job = absl::StrCat(prefix, fixture);
    std::replace(job.begin(), job.end(), '_', '-');
    return job;
  }
};

inline const std::vector<FixtureOutcome>& SmdebugFixtureOutcomes() {
  static const auto* const kOutcomes = new std::vector<FixtureOutcome>{
      {"healthy",
       {},
       {"VanishingGradient", "ExplodingTensor", "LossNotDecreasing", "DeadRelu", "ClassImbalance",
        "AllZero"}},
      {"vanishing_gradient", {"VanishingGradient"}, {"ExplodingTensor"}},
      {"exploding_tensor", {"ExplodingTensor"}, {}},
      {"loss_not_decreasing",
       {"LossNotDecreasing", "UnchangedTensor"},
       {"ExplodingTensor", "VanishingGradient"}},
      {"dead_relu", {"DeadRelu"}, {"ExplodingTensor"}},
      {"overfit", {"Overfit"}, {"ExplodingTensor"}},
  };
  return *kOutcomes;
}

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_FIXTURE_OUTCOMES_H_
