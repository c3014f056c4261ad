#include "rules_engine/tensorboard/hook_collections.h"

#include "absl/strings/str_split.h"

namespace debugplane::rules_engine::tensorboard {

TensorBoardOptions TensorBoardOptionsOf(const v1::DebugHookConfig& hook) {
  TensorBoardOptions options;
  for (const auto& collection : hook.collection_configurations()) {
    const auto it = collection.collection_parameters().find("include_regex");
    if (it == collection.collection_parameters().end()) continue;
    for (absl::string_view pattern : absl::StrSplit(it->second, ',', absl::SkipEmpty())) {
      options.include_regex[collection.collection_name()].emplace_back(pattern);
    }
  }
  return options;
}

}  // namespace debugplane::rules_engine::tensorboard
