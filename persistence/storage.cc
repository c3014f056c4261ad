#include "persistence/storage.h"

#include "absl/strings/str_cat.h"

namespace debugplane::persistence {

namespace {

std::string VersionText(std::optional<int64_t> version) {
  if (!version.has_value() || *version == kAbsent) return "no row (absent)";
  return absl::StrCat("version ", *version);
}

}  // namespace

absl::Status VersionConflictError(const std::string& name, int64_t expected,
                                  std::optional<int64_t> actual) {
  return absl::AbortedError(
      absl::StrCat("training job '", name, "' was changed by another writer: the write expected ",
                   VersionText(expected), ", the database has ", VersionText(actual),
                   "; no write of the batch was applied"));
}

absl::StatusOr<WriteResult> Storage::WriteAndReport(const WriteBatch& batch) {
  if (absl::Status written = Write(batch); !written.ok()) return written;
  return WriteResult{};
}

absl::StatusOr<std::optional<JobRow>> Storage::ReadJob(const std::string& name) {
  return absl::UnimplementedError("this storage cannot read one job");
}

absl::StatusOr<std::vector<JobChange>> Storage::ReadChangesAfter(int64_t after, int limit) {
  return absl::UnimplementedError("this storage has no change feed");
}

absl::StatusOr<int64_t> Storage::LatestChangeSequence() {
  return absl::UnimplementedError("this storage has no change feed");
}

absl::StatusOr<int64_t> Storage::PruneChanges(int64_t modified_before_us, int limit) {
  return absl::UnimplementedError("this storage has no change feed");
}

std::unique_ptr<ChangeSubscription> Storage::SubscribeToChanges(std::function<void()> wake) {
  return nullptr;
}

absl::Status Storage::PutAgentPresence(const std::vector<AgentPresenceRow>& rows) {
  return absl::UnimplementedError("this storage keeps no agent presence");
}

absl::StatusOr<std::vector<AgentPresenceRow>> Storage::ReadAgentPresence(
    const std::string& job_name) {
  return absl::UnimplementedError("this storage keeps no agent presence");
}

}  // namespace debugplane::persistence
