#include "core/manager/group_committer.h"

#include <pthread.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "persistence/lease_fence.h"
#include "spdlog/spdlog.h"

namespace debugplane::core {
namespace {

persistence::JobRow ToRow(const JobRecord& job, const std::string& encoded) {
  persistence::JobRow row;
  row.name = job.training_job_name();
  row.creation_time_us = ToUnixMicros(job.creation_time());
  row.last_modified_us = ToUnixMicros(job.last_modified_time());
  row.status = std::string(JobStatusName(job.training_job_status()));
  row.record = encoded;
  return row;
}

bool IsLeaseCheck(const persistence::WriteOp& op) {
  return std::holds_alternative<persistence::CheckLease>(op);
}

// The group's changes as one batch, each lease fence checked once before
// the changes made under it. Encodes the records not encoded yet.
persistence::WriteBatch BuildBatch(std::vector<PendingCommit>& group) {
  persistence::WriteBatch batch;
  std::set<std::tuple<std::string, std::string, int64_t>> fences;
  for (PendingCommit& commit : group) {
    if (!commit.changed) continue;
    if (commit.fence.has_value() &&
        fences.emplace(commit.fence->job_name, commit.fence->owner, commit.fence->token).second) {
      batch.Check(*commit.fence);
    }
    if (commit.next != nullptr) {
      if (commit.encoded == nullptr) {
        commit.encoded = std::make_shared<const std::string>(commit.next->SerializeAsString());
      }
      batch.Put(ToRow(*commit.next, *commit.encoded), commit.expected_version);
    } else {
      batch.Delete(commit.job_name, commit.expected_version);
    }
  }
  return batch;
}

// Gives each changed commit of the written group the sequence number and
// row version its write got (storages without versions report none: then
// they are counted here).
void AssignWrittenPositions(std::vector<PendingCommit>& group,
                            const persistence::WriteBatch& batch,
                            const persistence::WriteResult& result) {
  size_t op = 0;
  for (PendingCommit& commit : group) {
    if (!commit.changed) continue;
    // The batch's lease checks have entries of their own.
    while (op < batch.size() && IsLeaseCheck(batch.ops()[op])) ++op;
    commit.written_sequence = op < result.sequences.size() ? result.sequences[op] : 0;
    commit.written_version = op < result.versions.size() ? result.versions[op]
                             : commit.next == nullptr    ? persistence::kAbsent
                                                         : commit.expected_version + 1;
    ++op;
  }
}

// What the callers of a group hear once it is written (or not).
absl::Status ReplyFor(const absl::Status& written) {
  if (written.ok()) return absl::OkStatus();
  if (written.code() == absl::StatusCode::kAborted) {
    return absl::AbortedError(
        absl::StrCat("the change was not saved and not applied: ", written.message()));
  }
  return absl::UnavailableError(absl::StrCat(
      "the change was not saved and not applied: storage failed (", written.message(),
      "); retry later"));
}

}  // namespace

GroupCommitter::GroupCommitter(persistence::Storage& storage, absl::Mutex& apply_mu,
                               CommitTarget& target, GroupCommitterOptions options)
    : storage_(storage), apply_mu_(apply_mu), target_(target), options_(std::move(options)) {}

GroupCommitter::~GroupCommitter() { Stop(); }

void GroupCommitter::Start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "dp-commit");
    Run();
  });
}

void GroupCommitter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    queued_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  // The committer hands no more replies: those handed run first.
  replies_.Shutdown();
}

void GroupCommitter::Enqueue(PendingCommit commit) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(commit));
  queued_.Signal();
}

void GroupCommitter::EnqueueFirst(std::vector<PendingCommit> commits) {
  if (commits.empty()) return;
  absl::MutexLock lock(&mu_);
  for (auto it = commits.rbegin(); it != commits.rend(); ++it) queue_.push_front(std::move(*it));
  queued_.Signal();
}

void GroupCommitter::TakeQueuedIf(const std::function<bool(const PendingCommit&)>& take,
                                  std::vector<PendingCommit>& taken) {
  absl::MutexLock lock(&mu_);
  MoveOutIf(queue_, take, taken);
}

void GroupCommitter::TakeQueued(std::vector<PendingCommit>& taken) {
  absl::MutexLock lock(&mu_);
  while (!queue_.empty()) {
    taken.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
}

CommitStats GroupCommitter::stats() const {
  absl::ReaderMutexLock lock(&mu_);
  return stats_;
}

size_t GroupCommitter::QueuedCount() const {
  absl::ReaderMutexLock lock(&mu_);
  return queue_.size();
}

void GroupCommitter::Run() {
  Pacing pacing;
  while (true) {
    std::vector<PendingCommit> group = NextGroup(pacing);
    if (group.empty()) return;  // Stopping with nothing left to write.
    GroupWrite write = WriteAndPublish(group, pacing);
    if (write.conflict) {
      HandReplies(write, group, write.status);  // Only the fenced out have answers yet.
      target_.RetryAfterConflict(std::move(group), write.status);
      pacing.acknowledged_at = Now();
      pacing.expected = 0;
      continue;
    }
    HandReplies(write, group, write.status);
    // Those queued since are (some of) the callers coming back; after a
    // failure nobody is expected.
    pacing.acknowledged_at = Now();
    pacing.expected = write.status.ok() ? write.queued_behind + group.size() : 0;
  }
}

std::vector<PendingCommit> GroupCommitter::NextGroup(const Pacing& pacing) {
  const size_t max_group = static_cast<size_t>(std::max(1, options_.max_commit_group));
  std::vector<PendingCommit> group;
  absl::MutexLock lock(&mu_);
  while (queue_.empty() && !stopping_) queued_.Wait(&mu_);
  if (queue_.empty()) return group;
  WaitForReturningCallersLocked(
      std::min(pacing.expected, max_group),
      pacing.acknowledged_at + std::min(options_.max_group_wait, pacing.last_write / 2));
  const size_t take = std::min(queue_.size(), max_group);
  group.reserve(take);
  for (size_t i = 0; i < take; ++i) {
    group.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return group;
}

void GroupCommitter::WaitForReturningCallersLocked(size_t expected, absl::Time until) {
  mu_.AssertHeld();
  if (queue_.size() >= expected) return;
  const absl::Time start = Now();
  const absl::Duration left = until - start;
  if (left <= absl::ZeroDuration()) return;
  // The wait is in real time, at most `left` (a clock that moves only when
  // told, in tests, bounds nothing).
  const absl::Duration real_wait = std::min(left, options_.clock->RealTimeUntil(until));
  const auto callers_back = [this, expected]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queue_.size() >= expected || stopping_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&callers_back), real_wait);
  stats_.waiting += Now() - start;
}

GroupCommitter::GroupWrite GroupCommitter::WriteAndPublish(std::vector<PendingCommit>& group,
                                                           Pacing& pacing) {
  GroupWrite write;
  // The write and its publication are one step for whoever else applies
  // changes (the change feed): it never applies this write as another
  // server's, and observers hear every change in storage order.
  absl::MutexLock apply(&apply_mu_);
  const absl::Time write_start = Now();
  absl::StatusOr<persistence::WriteResult> result = WriteUnfenced(group, write);
  write.status = result.status();
  const absl::Time now = Now();
  if (!write.batch.empty()) {
    pacing.last_write = now - write_start;
    CountWrite(write.batch, pacing.last_write);
  }
  if (write.status.ok()) {
    AssignWrittenPositions(group, write.batch, *result);
    target_.PublishWritten(group, now);
  } else {
    write.conflict =
        write.status.code() == absl::StatusCode::kAborted && options_.retry_conflicts;
    if (!write.conflict) {
      spdlog::error("storage write of {} change(s) failed: {}", write.batch.size(),
                    write.status.ToString());
    }
    target_.RollBackFailed(group, write.status, write.conflict);
  }
  write.queued_behind = QueuedCount();
  return write;
}

absl::StatusOr<persistence::WriteResult> GroupCommitter::WriteUnfenced(
    std::vector<PendingCommit>& group, GroupWrite& write) {
  while (true) {
    // Snapshots are immutable: each write expects the version its change
    // was computed against, under its lease's fence.
    write.batch = BuildBatch(group);
    absl::StatusOr<persistence::WriteResult> result =
        write.batch.empty() ? persistence::WriteResult{} : storage_.WriteAndReport(write.batch);
    const std::optional<std::string> stale = persistence::FencedJob(result.status());
    if (!stale.has_value()) return result;
    write.fence_refusal = result.status();
    // Not a fence of ours: fails as any error.
    if (!target_.TakeOutFenced(*stale, group, write.fenced_out)) return result;
  }
}

void GroupCommitter::HandReplies(GroupWrite& write, std::vector<PendingCommit>& group,
                                 const absl::Status& written) {
  std::vector<std::pair<DoneCallback, absl::Status>> replies;
  for (PendingCommit& commit : write.fenced_out) {
    if (commit.done == nullptr) continue;
    replies.emplace_back(
        std::move(commit.done),
        commit.fence.has_value() &&
                persistence::FencedJob(write.fence_refusal) == commit.fence->job_name
            ? write.fence_refusal
            : absl::UnavailableError(absl::StrCat(
                  "the change was not saved and not applied: it followed a change of the same "
                  "job that a stale evaluation lease made (",
                  write.fence_refusal.message(), "); retry")));
    commit.done = nullptr;
  }
  // After a conflict the group is run again: its callers are answered then.
  if (!write.conflict) {
    const absl::Status reply = ReplyFor(written);
    // The rest went with their deliveries (PublishWritten).
    for (PendingCommit& commit : group) {
      if (commit.done == nullptr) continue;
      replies.emplace_back(std::move(commit.done), reply);
      commit.done = nullptr;
    }
  }
  if (replies.empty()) return;
  auto batch =
      std::make_shared<std::vector<std::pair<DoneCallback, absl::Status>>>(std::move(replies));
  auto answer = [batch] {
    for (auto& [done, status] : *batch) std::move(done)(std::move(status));
  };
  // Refused only once Stop has joined this thread, which hands no more.
  if (!replies_.Schedule(answer)) answer();
}

void GroupCommitter::CountWrite(const persistence::WriteBatch& batch, absl::Duration took) {
  absl::MutexLock lock(&mu_);
  ++stats_.writes;
  stats_.changes += std::count_if(batch.ops().begin(), batch.ops().end(),
                                  [](const persistence::WriteOp& op) { return !IsLeaseCheck(op); });
  stats_.writing += took;
}

}  // namespace debugplane::core
