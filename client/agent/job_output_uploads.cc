#include "client/agent/job_output_uploads.h"

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/agent/output_uploads.h"
#include "objectstore/aws_config.h"

namespace debugplane::client {
namespace {

// The job's outputs that go to object storage.
std::vector<OutputUpload> S3Outputs(const v1::ConnectAgentResponse& directive,
                                    const TrainingPaths& paths) {
  std::vector<OutputUpload> uploads;
  const std::string& hook_uri = directive.debug_hook_config().s3_output_path();
  const std::string& profiler_uri = directive.profiler_config().s3_output_path();
  if (absl::StartsWith(hook_uri, "s3://")) {
    uploads.push_back({"DebugHookConfig.S3OutputPath", hook_uri, paths.tensor_dir, {}});
  }
  if (absl::StartsWith(profiler_uri, "s3://")) {
    // The sampler appends to its hour's file (client/agent/system_metrics.h).
    uploads.push_back(
        {"ProfilerConfig.S3OutputPath", profiler_uri, paths.profiler_dir, {"system/"}});
  }
  const std::string& tensorboard_uri = directive.tensor_board_output_config().s3_output_path();
  if (absl::StartsWith(tensorboard_uri, "s3://") && !paths.tensorboard_dir.empty()) {
    // TensorBoard writers append to their event files all run long.
    uploads.push_back({"TensorBoardOutputConfig.S3OutputPath", tensorboard_uri,
                       paths.tensorboard_dir, {}, /*appended_event_files=*/true});
  }
  return uploads;
}

absl::Status CreateLocalDirectories(const std::vector<OutputUpload>& uploads) {
  for (const OutputUpload& upload : uploads) {
    std::error_code error;
    std::filesystem::create_directories(upload.local_dir, error);
    if (error) {
      return absl::FailedPreconditionError(absl::StrCat("cannot create ", upload.local_dir,
                                                        " for ", upload.field, " ", upload.uri,
                                                        ": ", error.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<objectstore::DirectoryUploader>> StartJobOutputUploads(
    const v1::ConnectAgentResponse& directive, const TrainingPaths& paths, std::ostream& log) {
  const std::vector<OutputUpload> uploads = S3Outputs(directive, paths);
  if (uploads.empty()) return nullptr;
  if (absl::Status created = CreateLocalDirectories(uploads); !created.ok()) return created;
  absl::StatusOr<std::unique_ptr<objectstore::DirectoryUploader>> uploader = StartOutputUploads(
      uploads, objectstore::ProcessEnvironment(),
      [&log](const std::string& line) { log << "debugplane-agent: " << line << "\n"; });
  if (!uploader.ok() || *uploader == nullptr) return uploader;  // No credentials: said why.
  for (const OutputUpload& upload : uploads) {
    log << "debugplane-agent: uploading " << upload.local_dir << " to " << upload.uri << " ("
        << upload.field << ") as each file is complete\n";
  }
  return uploader;
}

void FinishJobOutputUploads(objectstore::DirectoryUploader& uploader, absl::Duration wait,
                            std::ostream& log) {
  const absl::Status finished = uploader.Finish(wait);
  const objectstore::DirectoryUploader::Backlog backlog = uploader.backlog();
  if (finished.ok()) {
    log << "debugplane-agent: uploaded " << backlog.uploaded_files << " files ("
        << backlog.uploaded_bytes << " bytes) of the job's output\n";
  } else {
    log << "debugplane-agent: " << finished.message() << " (--upload-wait); they stay on disk\n";
  }
  if (backlog.refused_files > 0) {
    log << "debugplane-agent: " << backlog.refused_files
        << " files of the job's output could not be uploaded (each is named above); the last: "
        << backlog.last_refusal.message() << "\n";
  }
}

}  // namespace debugplane::client
