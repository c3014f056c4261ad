#include "base/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

namespace debugplane::base {

ThreadPool::ThreadPool(int threads, std::string name) : name_(std::move(name)) {
  absl::MutexLock lock(&mu_);
  const int count = std::max(1, threads);
  workers_.reserve(count);
  for (int i = 0; i < count; ++i) workers_.emplace_back([this] { Work(); });
}

ThreadPool::~ThreadPool() { Shutdown(); }

bool ThreadPool::Schedule(Task task) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return false;
  queue_.push_back(std::move(task));
  // A busy worker takes the task when it is done with its own.
  if (idle_ > 0) work_.Signal();
  return true;
}

void ThreadPool::Shutdown() {
  std::vector<std::thread> workers;
  {
    absl::MutexLock lock(&mu_);
    if (joining_) {
      mu_.Await(absl::Condition(&joined_));
      return;
    }
    joining_ = true;
    shutting_down_ = true;
    work_.SignalAll();
    workers.swap(workers_);
  }
  for (std::thread& worker : workers) worker.join();
  absl::MutexLock lock(&mu_);
  joined_ = true;
}

void ThreadPool::Work() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      while (queue_.empty() && !shutting_down_) {
        ++idle_;
        work_.Wait(&mu_);
        --idle_;
      }
      if (queue_.empty()) return;  // Shutting down, and everything queued ran.
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(task)();
  }
}

}  // namespace debugplane::base
