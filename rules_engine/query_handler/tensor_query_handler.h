// TensorQueryService's operations behind an interface that knows nothing of
// gRPC: resolves a job to its trials (DebugHookConfig.S3OutputPath and
// TensorBoardOutputConfig.S3OutputPath through core::DataRootStores, so
// local and s3:// trials alike) and runs the trial queries
// (rules_engine/query/trial_query.h) on a thread pool it owns. A job with
// both lists the tensors of both; a tensor's values come from the smdebug
// trial, else from the TensorBoard logs. A DebugHookConfig naming the
// TensorBoard location only configures the collections (include_regex).

#ifndef DEBUGPLANE_RULES_ENGINE_QUERY_HANDLER_TENSOR_QUERY_HANDLER_H_
#define DEBUGPLANE_RULES_ENGINE_QUERY_HANDLER_TENSOR_QUERY_HANDLER_H_

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "core/jobs/output_path.h"
#include "base/thread_pool.h"
#include "core/manager/training_job_handler.h"
#include "core/manager/training_job_manager.h"
#include "debugplane/v1/tensor_query.pb.h"
#include "rules_engine/query/trial_query.h"
#include "rules_engine/tensorboard/hook_collections.h"

namespace debugplane::rules_engine {

// MaxPoints: the default and the largest allowed.
inline constexpr int kDefaultMaxPoints = 2000;
inline constexpr int kMaxMaxPoints = 10000;
// Points per TensorValuesResponse.
inline constexpr int kPointsPerMessage = 1000;

struct TensorQueryOptions {
  // Threads reading trials: at most this many queries read at once, the
  // others wait in order.
  int threads = 2;
  // Where local output paths may lie, and the stores of s3:// buckets (as
  // the evaluation scheduler's).
  std::vector<std::filesystem::path> data_roots;
  core::DataRootStores::BucketStoreFactory bucket_stores;
  // Bounds of each query (steps read, time).
  QueryLimits limits;
};

class TensorQueryHandler {
 public:
  // REQUIRES: `manager` outlives the handler.
  TensorQueryHandler(core::TrainingJobManager* manager, TensorQueryOptions options);
  // Runs the queries already queued (their callbacks run), then stops.
  ~TensorQueryHandler();

  TensorQueryHandler(const TensorQueryHandler&) = delete;
  TensorQueryHandler& operator=(const TensorQueryHandler&) = delete;

  // Fills `response` and calls `done` with OK, or `done` with the error:
  // INVALID_ARGUMENT naming the field; NOT_FOUND for an unknown job (naming
  // up to 10 that exist); FAILED_PRECONDITION for a job with neither
  // DebugHookConfig nor TensorBoardOutputConfig or trials with no data yet (naming the path read and
  // what was there); UNIMPLEMENTED/INVALID_ARGUMENT when the output path
  // cannot be read by this server (s3:// without configuration); the
  // reader's errors (naming the file); UNAVAILABLE while shutting down.
  // `request` is used only during the call; `response` must stay valid until
  // `done` runs. `done` runs exactly once: on the calling thread for errors
  // found before reading, else on the handler's pool. Thread-safe; never
  // blocks on I/O.
  void ListTensors(const v1::ListTensorsRequest& request, v1::ListTensorsResponse* response,
                   core::DoneCallback done);

  // The messages of one GetTensorValues stream, in order (at least one), or
  // the error.
  using ValuesDone =
      absl::AnyInvocable<void(absl::StatusOr<std::vector<v1::TensorValuesResponse>>) &&>;
  // Reads the values and calls `done` with them in batches of
  // kPointsPerMessage points (at least one message, maybe without points).
  // Errors as ListTensors', plus NOT_FOUND for a tensor the trial never
  // saved (naming up to 10 that it did) and INVALID_ARGUMENT for StartStep,
  // EndStep, Mode and MaxPoints. A read sees `*cancelled` between batches
  // of steps and then ends with CANCELLED. Threads as ListTensors'.
  void GetTensorValues(const v1::GetTensorValuesRequest& request,
                       std::shared_ptr<const std::atomic<bool>> cancelled, ValuesDone done);

 private:
  // The trials of job `name` (its smdebug trial, its TensorBoard logs, or
  // both; at least one) and whether its training ended, or the error.
  struct JobTrial {
    std::optional<objectstore::StoreLocation> smdebug;
    std::optional<objectstore::StoreLocation> tensorboard;
    tensorboard::TensorBoardOptions tensorboard_options;
    bool training_ended = false;
  };
  absl::StatusOr<JobTrial> ResolveJob(const std::string& name);
  // Where the job's field `field` (an output URI) is read, or the error
  // naming the job and the field.
  absl::StatusOr<objectstore::StoreLocation> ResolveOutput(const std::string& job,
                                                           const std::string& field,
                                                           const std::string& uri) const;

  core::TrainingJobManager* const manager_;
  const TensorQueryOptions options_;
  const core::DataRootStores stores_;
  base::ThreadPool pool_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_QUERY_HANDLER_TENSOR_QUERY_HANDLER_H_
