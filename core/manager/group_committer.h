// GroupCommitter: the job manager's commit pipeline and its thread.
//
// Changes computed by the manager are queued here in order (PendingCommit)
// and written by one thread that takes everything queued (up to
// max_commit_group) as one storage transaction: one fsync for many calls.
// Each write expects the row version its change was computed against, and
// a change made under a rules-engine lease is written only while that lease
// holds (the batch checks the fence once before the changes made under it).
//
// What a write means for the jobs (publishing it to readers, watchers and
// observers, or rolling the jobs back) is the CommitTarget's: the committer
// knows the queue, the batch and the storage, not the jobs. It calls the
// target from its thread, without its own lock held, and with `apply_mu`
// held around each write and its publication, so that whoever else applies
// changes under that lock (the change feed) sees them in storage order.
//
// After the write, the committer answers the `done` of every commit of the
// group that the target did not take over (a change whose job has watchers
// answers once they have it): OK, or the write's error, as an ABORTED or
// UNAVAILABLE that says the change was not saved. The answers run on a
// reply thread of their own ("dp-reply"), group after group in the order
// the groups were written, so that the next group's write starts as soon
// as this one is published instead of after every caller's reply has been
// sent (a gRPC reply is a `Finish` and a `sendmsg`, and freeing the call).
// A `done` still runs only after its change is durable. After a failure the
// target takes every change queued behind the group too (they may build on
// it) and those fail alike; after a version conflict (retry_conflicts) the
// target runs the group's mutations again instead.
//
// Thread-safety: thread-safe. Lock order: the manager's lock, then this
// committer's (Enqueue and the Take* calls are made under the manager's lock,
// so that the queue's order is the order the changes were computed in).

#ifndef DEBUGPLANE_CORE_MANAGER_GROUP_COMMITTER_H_
#define DEBUGPLANE_CORE_MANAGER_GROUP_COMMITTER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/thread_pool.h"
#include "core/jobs/job_mutations.h"
#include "core/manager/training_job_handler.h"
#include "persistence/storage.h"

namespace debugplane::core {

// Computes a change from a job's latest state (nullptr if there is none).
// It may run more than once (after a version conflict, on the newer state):
// it must depend only on its arguments and what it captured.
using MutationFunction = std::function<absl::StatusOr<JobMutation>(const JobRecord* latest)>;

// One computed change of a job, queued for the committer.
struct PendingCommit {
  std::string job_name;
  bool changed = false;
  std::shared_ptr<const JobRecord> next;  // nullptr deletes the job.
  // `next` serialized: by the caller when it had the record before queuing
  // it (Create), else by the committer.
  std::shared_ptr<const std::string> encoded;
  DoneCallback done;  // Null once taken over (handed to the watchers).
  // The row version the change was computed against (what the write
  // expects), and what computed it, to run it again after a conflict.
  int64_t expected_version = persistence::kAbsent;
  std::shared_ptr<const MutationFunction> mutation;
  int attempts = 1;
  // The lease the change was made under (written only while it holds); a
  // change run again after a conflict keeps it.
  std::optional<persistence::CheckLease> fence;
  // Set by the committer once the change is written: its change feed
  // sequence number (0: the storage has no feed) and the row version it got.
  int64_t written_sequence = 0;
  int64_t written_version = persistence::kAbsent;
};

// Moves the elements of `from` for which `take` holds to the end of
// `taken`, in order; the others stay, in order.
template <typename Container>
void MoveOutIf(Container& from, const std::function<bool(const PendingCommit&)>& take,
               std::vector<PendingCommit>& taken) {
  for (auto it = from.begin(); it != from.end();) {
    if (take(*it)) {
      taken.push_back(std::move(*it));
      it = from.erase(it);
    } else {
      ++it;
    }
  }
}

// What the committer has done since the start.
struct CommitStats {
  int64_t writes = 0;      // Storage writes (groups with at least one change).
  int64_t changes = 0;     // Changes written.
  absl::Duration writing;  // Time spent in storage writes (options' clock).
  // Time spent waiting for an acknowledged group's callers to come back
  // (GroupCommitterOptions::max_group_wait).
  absl::Duration waiting;
};

// What the committer needs from the jobs it commits (the manager).
class CommitTarget {
 public:
  virtual ~CommitTarget() = default;
  // `group` is durable (each changed commit has its written_sequence and
  // written_version): publishes the changes in order at `now`. It may take
  // over a commit's `done` (setting it to null). Called with the apply lock
  // held.
  virtual void PublishWritten(std::vector<PendingCommit>& group, absl::Time now) = 0;
  // Writing `group` failed with `written` (`conflict`: another server's
  // write overtook it): appends every commit still queued to `group`
  // (TakeQueued) and rolls their jobs back to the committed state. Called
  // with the apply lock held.
  virtual void RollBackFailed(std::vector<PendingCommit>& group, const absl::Status& written,
                              bool conflict) = 0;
  // The write was refused by the fence of `stale_job`'s lease: moves the
  // changes made under it, and every change (in `group` and queued) of the
  // jobs they change, to `taken`, and rolls those jobs back. False if
  // nothing was taken. Called with the apply lock held.
  virtual bool TakeOutFenced(const std::string& stale_job, std::vector<PendingCommit>& group,
                             std::vector<PendingCommit>& taken) = 0;
  // After a version conflict (without the apply lock): brings in the other
  // servers' changes and runs the mutations of `group` again on them,
  // queuing them first (EnqueueFirst), or answers their `done`s.
  virtual void RetryAfterConflict(std::vector<PendingCommit> group,
                                  const absl::Status& conflict) = 0;
};

struct GroupCommitterOptions {
  // Upper bound of changes written in one storage transaction.
  int max_commit_group = 1024;
  // See TrainingJobManagerOptions::max_group_wait.
  absl::Duration max_group_wait = absl::Milliseconds(2);
  // An ABORTED write is a version conflict to retry (replicas) rather than a
  // failure.
  bool retry_conflicts = false;
  std::shared_ptr<base::Clock> clock = base::SystemClock();
};

class GroupCommitter {
 public:
  // Writes to `storage`, holding `apply_mu` around each write and its
  // publication; `target` gets the outcomes. All three must outlive it.
  GroupCommitter(persistence::Storage& storage, absl::Mutex& apply_mu, CommitTarget& target,
                 GroupCommitterOptions options);
  // Stops (see Stop).
  ~GroupCommitter();

  GroupCommitter(const GroupCommitter&) = delete;
  GroupCommitter& operator=(const GroupCommitter&) = delete;

  // Starts the committer thread. REQUIRES: called once.
  void Start();
  // Writes everything queued, then ends the thread; returns once every
  // `done` the committer answers has run (the reply thread drains). Blocks
  // until it has; idempotent. The caller must have stopped queuing.
  void Stop();

  // Queues `commit` behind everything queued. REQUIRES: the caller holds the
  // lock under which the change was computed.
  void Enqueue(PendingCommit commit);
  // Queues `commits` ahead of everything queued, in their order.
  void EnqueueFirst(std::vector<PendingCommit> commits);
  // Moves the queued commits for which `take` holds to the end of `taken`,
  // in order.
  void TakeQueuedIf(const std::function<bool(const PendingCommit&)>& take,
                    std::vector<PendingCommit>& taken);
  // Moves every queued commit to the end of `taken`.
  void TakeQueued(std::vector<PendingCommit>& taken);

  CommitStats stats() const;

 private:
  // The group-commit pacing (see TrainingJobManagerOptions::max_group_wait):
  // how many changes the next group may expect (those queued when the last
  // group was acknowledged, plus its callers coming back), from when, and
  // how long the last write took. Only the committer thread touches it.
  struct Pacing {
    size_t expected = 0;
    absl::Time acknowledged_at = absl::InfinitePast();
    absl::Duration last_write;
  };
  // What writing one group came to.
  struct GroupWrite {
    persistence::WriteBatch batch;
    absl::Status status;
    bool conflict = false;
    // Changes taken out of the group (and queue) because a lease fence
    // refused them, and that refusal.
    std::vector<PendingCommit> fenced_out;
    absl::Status fence_refusal;
    size_t queued_behind = 0;  // Queued before the group is acknowledged.
  };

  void Run();
  // The next group to write (empty once stopping with nothing queued).
  std::vector<PendingCommit> NextGroup(const Pacing& pacing);
  // Waits until `expected` changes are queued, `until` passes or Stop.
  void WaitForReturningCallersLocked(size_t expected, absl::Time until)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the group and has the target publish it or roll it back, under
  // the apply lock.
  GroupWrite WriteAndPublish(std::vector<PendingCommit>& group, Pacing& pacing);
  // Writes the group's batch; while a lease fence refuses it, takes the
  // fenced changes out (TakeOutFenced) and writes the rest again.
  absl::StatusOr<persistence::WriteResult> WriteUnfenced(std::vector<PendingCommit>& group,
                                                         GroupWrite& write);
  // Answers, on the reply thread, the `done`s of the changes a stale fence
  // took out, then those the target left in `group` after its write with
  // `written`'s reply (ReplyFor). Empties their `done`s.
  void HandReplies(GroupWrite& write, std::vector<PendingCommit>& group,
                   const absl::Status& written);
  void CountWrite(const persistence::WriteBatch& batch, absl::Duration took);
  size_t QueuedCount() const;
  absl::Time Now() const { return options_.clock->Now(); }

  persistence::Storage& storage_;
  absl::Mutex& apply_mu_;
  CommitTarget& target_;
  const GroupCommitterOptions options_;

  mutable absl::Mutex mu_;
  absl::CondVar queued_;
  std::deque<PendingCommit> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  CommitStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
  // One worker: the groups' replies in the order they were written.
  base::ThreadPool replies_{1, "dp-reply"};
};

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_MANAGER_GROUP_COMMITTER_H_
