// Helpers for the built-in rule tests: synthetic steps and trial info.

#ifndef DEBUGPLANE_TESTS_RULES_ENGINE_TENSOR_RULES_RULES_TEST_UTIL_H_
#define DEBUGPLANE_TESTS_RULES_ENGINE_TENSOR_RULES_RULES_TEST_UTIL_H_

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine::testing {

inline Tensor T(std::string name, std::vector<double> values, std::vector<int64_t> shape = {},
                std::string worker = "worker_0") {
  Tensor t;
  t.name = std::move(name);
  t.worker = std::move(worker);
  t.dtype = 1;
  if (shape.empty() && values.size() != 1) shape = {static_cast<int64_t>(values.size())};
  t.shape = std::move(shape);
  t.values = std::move(values);
  return t;
}

inline Step S(int64_t global_step, std::vector<Tensor> tensors, Mode mode = Mode::kTrain,
              int64_t mode_step = -1) {
  Step s;
  s.global_step = global_step;
  s.mode = mode;
  s.mode_step = mode_step < 0 ? global_step : mode_step;
  std::sort(tensors.begin(), tensors.end(), [](const Tensor& a, const Tensor& b) {
    return a.name != b.name ? a.name < b.name : a.worker < b.worker;
  });
  s.tensors = std::move(tensors);
  return s;
}

// smdebug's PyTorch collections, as in the fixtures.
inline TrialInfo PyTorchInfo() {
  TrialInfo info;
  auto add = [&info](std::string name, std::vector<std::string> regex) {
    Collection c;
    c.name = name;
    c.include_regex = std::move(regex);
    info.collections[name] = c;
  };
  add("gradients", {"^gradient"});
  add("weights", {"^(?!gradient).*weight"});
  add("biases", {"^(?!gradient).*bias"});
  add("losses", {"[Ll]oss_(?!input).*output"});
  add("relu_output", {".*relu[0-9]+_output_0"});
  add("labels", {"^labels$"});
  add("predictions", {"^predictions$"});
  info.workers = {"worker_0"};
  return info;
}

inline std::unique_ptr<Rule> Make(const std::string& name, const RuleParameters& params = {}) {
  absl::StatusOr<std::unique_ptr<Rule>> r = CreateBuiltinRule(name, params);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(*r) : nullptr;
}

// Feeds `steps` (only the tensors the rule wants, as the reader would) and
// returns the first conclusion, or OnTrainingEnd's.
inline RuleVerdict Feed(Rule& rule, const std::vector<Step>& steps,
                        const TrialInfo& info = PyTorchInfo(), bool end = true) {
  for (Step s : steps) {
    std::vector<Tensor> wanted;
    for (Tensor& t : s.tensors) {
      if (rule.Wants(t.name, info)) wanted.push_back(std::move(t));
    }
    s.tensors = std::move(wanted);
    RuleVerdict v = rule.OnStep(s, info);
    if (v.kind != RuleVerdict::Kind::kContinue) return v;
  }
  return end ? rule.OnTrainingEnd(info) : RuleVerdict::Continue();
}

}  // namespace debugplane::rules_engine::testing

#endif  // DEBUGPLANE_TESTS_RULES_ENGINE_TENSOR_RULES_RULES_TEST_UTIL_H_
