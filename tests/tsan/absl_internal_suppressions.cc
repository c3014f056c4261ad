// ThreadSanitizer suppressions built into every binary of a
// DP_SANITIZE=thread build (TSan calls __tsan_default_suppressions at start).
//
// Only a race inside abseil itself is suppressed: a thread's identity
// (its PerThreadSem) is allocated with LowLevelAlloc (mmap) when the thread
// first blocks on a Mutex, and a later Unlock on another thread posts to it
// (Waiter::Post). The edge between the two goes through the Mutex's own
// waiter queue, which absl's TSan annotations hide on purpose (TSan ignores
// synchronization inside a lock operation), so TSan reports the mmap and the
// post as a race. No debugplane frame is involved in such a report.

extern "C" const char* __tsan_default_suppressions() {
  return "race:absl::*::synchronization_internal::Waiter::Post\n";
}
