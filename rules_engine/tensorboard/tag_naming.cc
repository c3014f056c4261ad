#include "rules_engine/tensorboard/tag_naming.h"

#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace debugplane::rules_engine::tensorboard {
namespace {

std::optional<Mode> ModeWord(absl::string_view word) {
  const std::string w = absl::AsciiStrToLower(word);
  if (w == "train" || w == "training") return Mode::kTrain;
  if (w == "eval" || w == "val" || w == "valid" || w == "validation" || w == "test") {
    return Mode::kEval;
  }
  return std::nullopt;
}

std::vector<absl::string_view> Words(absl::string_view tag) {
  return absl::StrSplit(tag, absl::ByAnyChar("/_.-"), absl::SkipEmpty());
}

}  // namespace

Mode ModeOfTag(absl::string_view tag) {
  for (absl::string_view component : absl::StrSplit(tag, '/', absl::SkipEmpty())) {
    if (std::optional<Mode> m = ModeWord(component)) return *m;
  }
  const std::vector<absl::string_view> words = Words(tag);
  if (words.empty()) return Mode::kGlobal;
  if (std::optional<Mode> m = ModeWord(words.front())) return *m;
  if (std::optional<Mode> m = ModeWord(words.back())) return *m;
  return Mode::kGlobal;
}

std::string CollectionOfTag(absl::string_view tag) {
  for (absl::string_view word : Words(tag)) {
    if (ModeWord(word)) continue;
    const std::string w = absl::AsciiStrToLower(word);
    if (w == "loss" || w == "losses") return "losses";
    if (w == "grad" || w == "grads" || w == "gradient" || w == "gradients") return "gradients";
    if (w == "weight" || w == "weights" || w == "param" || w == "params") return "weights";
    return "";
  }
  return "";
}

std::string SeriesOfTag(absl::string_view tag) {
  std::vector<absl::string_view> kept;
  for (absl::string_view word : Words(tag)) {
    if (!ModeWord(word)) kept.push_back(word);
  }
  return absl::StrJoin(kept, "/");
}

}  // namespace debugplane::rules_engine::tensorboard
