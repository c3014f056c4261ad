// The agent's uploads of one job's s3:// output: which local directories go
// to which prefix, starting them before the command starts, and waiting for
// the last files after it exited (client/agent/output_uploads.h does the
// S3 part).

#ifndef DEBUGPLANE_CLIENT_AGENT_JOB_OUTPUT_UPLOADS_H_
#define DEBUGPLANE_CLIENT_AGENT_JOB_OUTPUT_UPLOADS_H_

#include <memory>
#include <ostream>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/agent/training_config_writer.h"
#include "debugplane/v1/training_agent.pb.h"
#include "objectstore/directory_uploader.h"

namespace debugplane::client {

// For a job whose tensor, profiler or TensorBoard output (DebugHookConfig,
// ProfilerConfig or TensorBoardOutputConfig S3OutputPath in `directive`) is
// s3://: creates the local
// directories of `paths` the training writes and starts uploading them,
// logging what goes where to `log`. nullptr when nothing is uploaded (no
// s3:// output, or no AWS credentials on this host: logged). Errors name
// the field and the URI (StartOutputUploads).
absl::StatusOr<std::unique_ptr<objectstore::DirectoryUploader>> StartJobOutputUploads(
    const v1::ConnectAgentResponse& directive, const TrainingPaths& paths, std::ostream& log);

// Waits up to `wait` (--upload-wait) for the last files to go up, then logs
// the outcome and any files that could not be uploaded to `log`.
void FinishJobOutputUploads(objectstore::DirectoryUploader& uploader, absl::Duration wait,
                            std::ostream& log);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_JOB_OUTPUT_UPLOADS_H_
