// ThreadPool: a fixed number of worker threads that run tasks, first
// scheduled first started.
//
// The job manager keeps work that may block or take long off the threads
// that call it (gRPC's callback threads must never wait): request validation
// that reads the file system, and the delivery of watch events. Tasks on
// different workers run concurrently; a pool gives no order between them.

#ifndef DEBUGPLANE_BASE_THREAD_POOL_H_
#define DEBUGPLANE_BASE_THREAD_POOL_H_

#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace debugplane::base {

class ThreadPool {
 public:
  using Task = absl::AnyInvocable<void() &&>;

  // Starts `threads` workers (at least one), named `name` (at most 15
  // characters show, e.g. in top -H and perf).
  ThreadPool(int threads, std::string name);

  // Shuts down (see Shutdown).
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task` to run on a worker and returns at once. Returns false,
  // and drops the task without running it, once Shutdown has started.
  // Thread-safe; may be called from a task.
  bool Schedule(Task task);

  // Refuses new tasks, runs every task already queued (tasks they schedule
  // are refused), then stops the workers: when it returns, no task is
  // running. Idempotent; concurrent calls all wait.
  // REQUIRES: not called from a task of this pool.
  void Shutdown();

 private:
  void Work();

  const std::string name_;
  mutable absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  // Workers waiting for a task: Schedule wakes one only if there is one.
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  absl::CondVar work_;

  // Joined by the first Shutdown; concurrent calls wait on joined_.
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
  bool joining_ ABSL_GUARDED_BY(mu_) = false;
  bool joined_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace debugplane::base

#endif  // DEBUGPLANE_BASE_THREAD_POOL_H_
