// ThreadSanitizer builds only (core/CMakeLists.txt): makes absl::Mutex
// visible to ThreadSanitizer.
//
// Note [absl::Mutex under ThreadSanitizer]
// Abseil annotates absl::Mutex for ThreadSanitizer inside its own sources
// (mutex.cc), which only a TSan build of Abseil compiles in; the system's
// libabsl_synchronization is built without, so TSan sees none of its lock
// and unlock operations and reports every access guarded by an absl::Mutex
// as a race (the CPU allocator's free lists, the plugin registry, the
// profiler's records: all false). This file interposes the absl::Mutex
// member functions the project calls (libbackplane.so and the test
// executables that link core's objects define them, so they come first in
// symbol lookup, for every caller in the process), tells TSan about each
// lock and unlock with its mutex annotations, and forwards to the real
// function (dlsym RTLD_NEXT). Nothing is suppressed: a real race on data an
// absl::Mutex does not guard is still reported, and so is a lock-order
// inversion.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"

namespace {

#define BP_STR2(x) #x
#define BP_STR(x) BP_STR2(x)

// The mangled name of absl::<inline namespace>::<rest>, e.g. rest
// "5Mutex4LockEv" for absl::Mutex::Lock().
std::string abslSymbol(const char* rest) {
#if ABSL_OPTION_USE_INLINE_NAMESPACE
  const char* ns = BP_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return "_ZN4absl" + std::to_string(std::strlen(ns)) + ns + rest;
#else
  return std::string("_ZN4absl") + rest;
#endif
}

template <typename Fn>
Fn real(const char* rest) {
  void* f = dlsym(RTLD_NEXT, abslSymbol(rest).c_str());
  if (!f) {
    std::fprintf(stderr, "tsan_absl_mutex: %s not found after this library: %s\n", abslSymbol(rest).c_str(), dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

using PlainFn = void (*)(absl::Mutex*);
using TryFn = bool (*)(absl::Mutex*);
using AwaitFn = void (*)(absl::Mutex*, const absl::Condition&);
using AwaitTimeoutFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Duration);

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

Mutex::~Mutex() {
  static const PlainFn f = real<PlainFn>("5MutexD2Ev");
  __tsan_mutex_destroy(this, 0);
  f(this);
}

void Mutex::Lock() {
  static const PlainFn f = real<PlainFn>("5Mutex4LockEv");
  __tsan_mutex_pre_lock(this, 0);
  f(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::Unlock() {
  static const PlainFn f = real<PlainFn>("5Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  f(this);
  __tsan_mutex_post_unlock(this, 0);
}

bool Mutex::TryLock() {
  static const TryFn f = real<TryFn>("5Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = f(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Mutex::ReaderLock() {
  static const PlainFn f = real<PlainFn>("5Mutex10ReaderLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  f(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

void Mutex::ReaderUnlock() {
  static const PlainFn f = real<PlainFn>("5Mutex12ReaderUnlockEv");
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  f(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

// Await releases the mutex while it waits and holds it again on return:
// TSan is told of an unlock before and a lock after (the release it sees
// is a little early, which only adds order that the real mutex has too).
void Mutex::Await(const Condition& cond) {
  static const AwaitFn f = real<AwaitFn>("5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_mutex_pre_unlock(this, 0);
  __tsan_mutex_post_unlock(this, 0);
  f(this, cond);
  __tsan_mutex_pre_lock(this, 0);
  __tsan_mutex_post_lock(this, 0, 0);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static const AwaitTimeoutFn f = real<AwaitTimeoutFn>("5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_mutex_pre_unlock(this, 0);
  __tsan_mutex_post_unlock(this, 0);
  const bool met = f(this, cond, timeout);
  __tsan_mutex_pre_lock(this, 0);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

ABSL_NAMESPACE_END
}  // namespace absl
