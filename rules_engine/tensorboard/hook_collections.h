// A TensorBoard job's collections as its DebugHookConfig configures them:
// CollectionConfigurations[].CollectionParameters.include_regex (smdebug's
// own key) overrides the tag naming per collection. One reading for the
// rule scheduler and the tensor queries.

#ifndef DEBUGPLANE_RULES_ENGINE_TENSORBOARD_HOOK_COLLECTIONS_H_
#define DEBUGPLANE_RULES_ENGINE_TENSORBOARD_HOOK_COLLECTIONS_H_

#include "debugplane/v1/training_job.pb.h"
#include "rules_engine/tensorboard/tensorboard_reader.h"

namespace debugplane::rules_engine::tensorboard {

// The reader's options from `hook`: each collection's include_regex, split
// at commas (as smdebug reads it), empty patterns dropped.
TensorBoardOptions TensorBoardOptionsOf(const v1::DebugHookConfig& hook);

}  // namespace debugplane::rules_engine::tensorboard

#endif  // DEBUGPLANE_RULES_ENGINE_TENSORBOARD_HOOK_COLLECTIONS_H_
