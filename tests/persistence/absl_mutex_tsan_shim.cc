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
// Limit: Await, LockWhen and CondVar::Wait release and re-acquire inside the
// library and stay invisible; the persistence tests do not use them. Every
// test binary that uses absl::Mutex under TSan needs this file (or a shared
// copy of it).

#include "absl/base/config.h"

#ifdef ABSL_HAVE_THREAD_SANITIZER

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"

extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);

namespace {

#define DP_STRINGIFY_INNER(x) #x
#define DP_STRINGIFY(x) DP_STRINGIFY_INNER(x)

// The library's definition of absl::Mutex::<method>, found by its mangled
// name (which carries absl's inline namespace, e.g. "debian3").
template <typename Function>
Function Real(const char* method) {
  const std::string inline_namespace = DP_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string symbol = "_ZN4absl" + std::to_string(inline_namespace.size()) +
                             inline_namespace + "5Mutex" + method + "Ev";
  void* function = dlsym(RTLD_NEXT, symbol.c_str());
  if (function == nullptr) {
    std::fprintf(stderr, "absl_mutex_tsan_shim: %s not found\n", symbol.c_str());
    std::abort();
  }
  return reinterpret_cast<Function>(function);
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

ABSL_NAMESPACE_END
}  // namespace absl

#endif  // ABSL_HAVE_THREAD_SANITIZER
