// What a TensorBoard tag says about its tensor, with no configuration:
// its mode and its collection (rules select tensors by collection).

#ifndef DEBUGPLANE_RULES_ENGINE_TENSORBOARD_TAG_NAMING_H_
#define DEBUGPLANE_RULES_ENGINE_TENSORBOARD_TAG_NAMING_H_

#include <string>

#include "absl/strings/string_view.h"
#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine::tensorboard {

// The tag's mode: TRAIN when a path component ('/'-separated) is, or the
// tag's first or last word (split at '/', '_', '.' and '-') is, "train" or
// "training"; EVAL for "eval", "val", "valid", "validation" or "test"
// (case-insensitive); path components first, then the first word, then the
// last. Else GLOBAL. "train/loss", "eval/loss" (Hugging Face), "train_loss",
// "val_loss" (Lightning), "Loss/train", "loss/val" (torch examples).
Mode ModeOfTag(absl::string_view tag);

// The tag's collection besides "default": the first word that is not a
// mode word decides: "loss"/"losses" -> "losses"; "grad", "grads",
// "gradient", "gradients" -> "gradients"; "weight", "weights", "param",
// "params" -> "weights"; else "" (the default collection only).
// "train/train_loss" -> losses, "train/grad_norm" -> gradients,
// "gradients/fc1.weight" -> gradients, "Loss/eval" -> losses.
std::string CollectionOfTag(absl::string_view tag);

// The tag without its mode words (for pairing a TRAIN series with the EVAL
// series of the same quantity): "train/loss" and "eval/loss" -> "loss",
// "train_loss" and "val_loss" -> "loss".
std::string SeriesOfTag(absl::string_view tag);

}  // namespace debugplane::rules_engine::tensorboard

#endif  // DEBUGPLANE_RULES_ENGINE_TENSORBOARD_TAG_NAMING_H_
