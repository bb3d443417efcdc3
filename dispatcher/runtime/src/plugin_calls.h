#pragma once
// Knowing when no thread is running a plugin's code, cheaply.
//
// Note [Plugin call tracking]
// Unloading a plugin must wait until no thread is inside its code, but the
// hot path (a dispatched call into a plugin kernel) cannot afford an atomic
// read-modify-write on a shared counter. Each thread keeps, per plugin slot,
// a depth counter that only it writes (plain stores, no lock prefix). A call
// raises its depth and then checks the plugin's `alive` flag; the unloader
// clears `alive` and then reads every thread's depth. This is Dekker's
// pattern, which needs a full fence between each side's store and load: the
// unloader issues membarrier(PRIVATE_EXPEDITED), which runs a full barrier on
// every thread of the process, so the callers need only a compiler barrier.
// Without membarrier (and under ThreadSanitizer) both sides use seq_cst
// stores and loads instead (slower, still correct). Either the caller sees
// alive == false and backs out without touching plugin code, or the unloader
// sees its depth and waits.
//
// Note [Refused unloads]
// An unload that finds allocations alive after the callers have left is
// refused, and sets `alive` again. Between the two, a call that saw `alive`
// cleared must not fail on account of an unload that will not happen (a
// thread that has just made a tensor on the plugin's device and reads it
// back, say). So the unloader also sets `unloading` for the whole attempt,
// and a call that finds `alive` cleared while `unloading` is set waits for
// the outcome and enters if the plugin stays (the slow path, off the hot
// path). A call made while the thread is already inside the same plugin (a
// kernel calling back into the host, which calls the plugin again) always
// enters: the unloader is waiting for that thread anyway, and the wait above
// would deadlock on it.

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace backplane::plugin_detail {

inline constexpr int kMaxPluginSlots = 64;

// What the unloader writes and every call into the plugin reads.
struct PluginGate {
  // Cleared when the plugin starts going away (for good once it is
  // unloaded); calls then refuse to enter.
  std::atomic<bool> alive{true};
  // Set for the whole of an unload attempt (Note [Refused unloads]).
  std::atomic<bool> unloading{false};
};

struct ThreadCallDepths {
  std::array<std::atomic<uint32_t>, kMaxPluginSlots> depth{};
};

// Process-wide list of every live thread's depths (registered on first use,
// removed at thread exit) and whether the asymmetric fence is available.
class CallTracker;
namespace detail {
// Trivially initialised, so reading it costs no TLS guard; set on a thread's
// first plugin call by CallTracker::registerThisThread(). Read through a TLS
// descriptor (-mtls-dialect=gnu2 in dispatcher/CMakeLists.txt), not a
// __tls_get_addr call per plugin call (about 3 ns of BM_PluginKernelCall).
// Not initial-exec: that would put the library's whole TLS block in the
// static TLS that glibc keeps spare for libraries loaded by dlopen, as
// Python loads this one.
inline thread_local ThreadCallDepths* tls_depths = nullptr;
}  // namespace detail

class CallTracker {
 public:
  static CallTracker& instance();
  ThreadCallDepths& forThisThread() {
    ThreadCallDepths* d = detail::tls_depths;
    return d ? *d : registerThisThread();
  }
  // True if any thread is inside plugin `slot` now. Call after clearing the
  // plugin's alive flag.
  bool anyInside(int slot);
  bool lightweightCallers() const { return membarrier_ok_; }

 private:
  struct Registration {
    Registration();
    ~Registration();
    ThreadCallDepths depths;
  };
  ThreadCallDepths& registerThisThread();
  CallTracker();
  void heavyFence();
  absl::Mutex mu_;
  std::vector<ThreadCallDepths*> threads_ ABSL_GUARDED_BY(mu_);
  bool membarrier_ok_ = false;
};

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer models neither fences nor membarrier: under it every
// access of the protocol is a seq_cst load or store, which it does model
// (and which is correct on its own: seq_cst accesses have one total order).
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif

// Whether callers may rely on the unloader's membarrier (read once at start-up
// so that the hot path has no initialisation guard).
// Hidden: read directly, not through the GOT (it never leaves libbackplane).
[[gnu::visibility("hidden")]] inline const bool kLightweightCallers =
    !kThreadSanitizer && CallTracker::instance().lightweightCallers();

// Marks the current thread as inside plugin `slot` for its lifetime, unless
// the plugin is going away (then entered() is false and nothing may be
// called; during an unload attempt it first waits for the outcome, Note
// [Refused unloads]). With `always`, it enters even then: for freeing memory,
// which must reach the plugin and which unload waits for.
class PluginCallScope {
 public:
  [[gnu::always_inline]] PluginCallScope(int slot, const PluginGate& gate, bool always = false) {
    ThreadCallDepths* d = detail::tls_depths;
    depth_ = &(d ? *d : CallTracker::instance().forThisThread()).depth[slot];
    saved_ = depth_->load(std::memory_order_relaxed);
    // A nested call (saved_ != 0) enters: the unloader waits for this thread.
    if (kLightweightCallers) {
      depth_->store(saved_ + 1, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the unloader's membarrier is the fence
      // One test for both (nested, or alive): the common call takes no branch.
      entered_ = always || (saved_ | static_cast<uint32_t>(gate.alive.load(std::memory_order_relaxed))) != 0;
    } else {
      depth_->store(saved_ + 1, std::memory_order_seq_cst);
      entered_ = always || saved_ != 0 || gate.alive.load(std::memory_order_seq_cst);
    }
    if (!entered_) [[unlikely]] {
      depth_->store(saved_, std::memory_order_relaxed);
      entered_ = enterAfterUnloadAttempt(depth_, saved_, gate);
    }
  }
  [[gnu::always_inline]] ~PluginCallScope() {
    if (entered_) depth_->store(saved_, std::memory_order_release);
  }
  PluginCallScope(const PluginCallScope&) = delete;
  PluginCallScope& operator=(const PluginCallScope&) = delete;
  bool entered() const { return entered_; }

 private:
  // The slow path: while an unload attempt runs, waits for its outcome and
  // enters (sets *depth to saved + 1) if the plugin stays. False if it is
  // gone. Static, so that the scope's address never escapes and its fields
  // stay in registers across the call it guards.
  [[gnu::noinline, gnu::cold]] static bool enterAfterUnloadAttempt(std::atomic<uint32_t>* depth, uint32_t saved,
                                                                   const PluginGate& gate);

  std::atomic<uint32_t>* depth_;
  uint32_t saved_;
  bool entered_;
};

}  // namespace backplane::plugin_detail
