// ThreadSanitizer support for Debian's absl::Mutex; compiled in TSan builds
// only.
//
// Debian's libabsl_synchronization is not built with -fsanitize=thread, so
// TSan does not see an absl::Mutex order memory: every access guarded by one
// is reported as a data race (two threads incrementing an int under
// absl::MutexLock are enough). This file interposes the library's lock and
// unlock entry points, forwards to them, and tells TSan about the
// happens-before edge that a mutex provides. It adds only the edges a correct
// mutex really gives, so it hides no real race.
//
// Await, AwaitWithTimeout, LockWhen and CondVar::Wait(WithTimeout) release
// and re-acquire the mutex inside the library: they are wrapped too, with a
// release before and an acquire after. CMake links this file into every
// binary of a DP_SANITIZE=thread build.

#include "absl/base/config.h"

#ifdef ABSL_HAVE_THREAD_SANITIZER

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);

namespace {

#define DP_STRINGIFY_INNER(x) #x
#define DP_STRINGIFY(x) DP_STRINGIFY_INNER(x)

// The library's definition of absl::Mutex::<method>, found by its mangled
// name (which carries absl's inline namespace, e.g. "debian3").
// `method` is the mangled method name and parameter list; "S0_" in it
// stands for the absl inline namespace, as in the library's mangling.
// `const_method`: the mangling of a const member function ("_ZNK...").
template <typename Function>
Function RealSymbol(const std::string& class_and_method, bool const_method = false) {
  const std::string inline_namespace = DP_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string symbol = std::string(const_method ? "_ZNK4absl" : "_ZN4absl") +
                             std::to_string(inline_namespace.size()) + inline_namespace +
                             class_and_method;
  void* function = dlsym(RTLD_NEXT, symbol.c_str());
  if (function == nullptr) {
    std::fprintf(stderr, "absl_mutex_tsan_shim: %s not found\n", symbol.c_str());
    std::abort();
  }
  return reinterpret_cast<Function>(function);
}

template <typename Function>
Function Real(const char* method) {
  return RealSymbol<Function>(std::string("5Mutex") + method + "Ev");
}

using Void = void (*)(absl::Mutex*);
using Bool = bool (*)(absl::Mutex*);

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static const Void real = Real<Void>("4Lock");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  static const Void real = Real<Void>("10ReaderLock");
  real(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  static const Bool real = Real<Bool>("7TryLock");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const Bool real = Real<Bool>("13ReaderTryLock");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  static const Void real = Real<Void>("6Unlock");
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  static const Void real = Real<Void>("12ReaderUnlock");
  __tsan_release(this);
  real(this);
}

void Mutex::Await(const Condition& cond) {
  using Fn = void (*)(Mutex*, const Condition&);
  static const Fn real = RealSymbol<Fn>("5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  using Fn = bool (*)(Mutex*, const Condition&, absl::Duration);
  static const Fn real = RealSymbol<Fn>("5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  const bool result = real(this, cond, timeout);
  __tsan_acquire(this);
  return result;
}

void Mutex::LockWhen(const Condition& cond) {
  using Fn = void (*)(Mutex*, const Condition&);
  static const Fn real = RealSymbol<Fn>("5Mutex8LockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

void CondVar::Wait(Mutex* mu) {
  using Fn = void (*)(CondVar*, Mutex*);
  static const Fn real = RealSymbol<Fn>("7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  using Fn = bool (*)(CondVar*, Mutex*, absl::Duration);
  static const Fn real = RealSymbol<Fn>("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool result = real(this, mu, timeout);
  __tsan_acquire(mu);
  return result;
}

// absl::Notification: Notify publishes with an atomic store inside the
// library, which TSan does not see; a waiter that finds the notification
// already given returns without taking the mutex. The edge is added here.
void Notification::Notify() {
  using Fn = void (*)(Notification*);
  static const Fn real = RealSymbol<Fn>("12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  using Fn = void (*)(const Notification*);
  static const Fn real =
      RealSymbol<Fn>("12Notification19WaitForNotificationEv", /*const_method=*/true);
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  using Fn = bool (*)(const Notification*, absl::Duration);
  static const Fn real =
      RealSymbol<Fn>("12Notification30WaitForNotificationWithTimeoutENS0_8DurationE",
                     /*const_method=*/true);
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  using Fn = bool (*)(const Notification*, absl::Time);
  static const Fn real =
      RealSymbol<Fn>("12Notification31WaitForNotificationWithDeadlineENS0_4TimeE",
                     /*const_method=*/true);
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl

namespace {

// absl's deadlock detection keeps its lock graph under an internal spin
// lock that TSan cannot see either, so two threads locking mutexes for the
// first time race in GraphCycles::InsertEdge as TSan sees it. The programs
// turn the detection off too (server_main.cc, agent_main.cc, cli_main.cc);
// under TSan, TSan's own lock-order checking takes its place.
const bool kDeadlockDetectionOff = [] {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return true;
}();

}  // namespace

#endif  // ABSL_HAVE_THREAD_SANITIZER
