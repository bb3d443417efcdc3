#include "plugin_calls.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace backplane::plugin_detail {

CallTracker& CallTracker::instance() {
  static CallTracker* t = new CallTracker();  // leaked: threads may exit after main
  return *t;
}

CallTracker::CallTracker() {
  long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  membarrier_ok_ = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                   syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

CallTracker::Registration::Registration() {
  CallTracker& t = instance();
  absl::MutexLock lock(&t.mu_);
  t.threads_.push_back(&depths);
}

CallTracker::Registration::~Registration() {
  CallTracker& t = instance();
  absl::MutexLock lock(&t.mu_);
  t.threads_.erase(std::find(t.threads_.begin(), t.threads_.end(), &depths));
  detail::tls_depths = nullptr;
}

ThreadCallDepths& CallTracker::registerThisThread() {
  thread_local Registration reg;  // removed from threads_ at thread exit
  detail::tls_depths = &reg.depths;
  return reg.depths;
}

void CallTracker::heavyFence() {
  if (membarrier_ok_) syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  // Without membarrier (or under ThreadSanitizer) callers use seq_cst
  // accesses, and so do the loads in anyInside(): no fence needed here.
}

bool CallTracker::anyInside(int slot) {
  heavyFence();
  absl::MutexLock lock(&mu_);
  for (ThreadCallDepths* d : threads_)
    if (d->depth[slot].load(std::memory_order_seq_cst) != 0) return true;
  return false;
}

bool PluginCallScope::enterAfterUnloadAttempt(std::atomic<uint32_t>* depth, uint32_t saved, const PluginGate& gate) {
  // The unloader sets unloading before it clears alive, and on a refusal
  // sets alive before it clears unloading (all seq_cst): a caller that sees
  // unloading cleared and alive still cleared sees a plugin that is gone.
  for (;;) {
    if (gate.unloading.load(std::memory_order_seq_cst)) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      continue;
    }
    depth->store(saved + 1, std::memory_order_seq_cst);
    if (gate.alive.load(std::memory_order_seq_cst)) return true;
    depth->store(saved, std::memory_order_relaxed);
    if (!gate.unloading.load(std::memory_order_seq_cst)) return false;  // unloaded; else a new attempt: wait again
  }
}

}  // namespace backplane::plugin_detail
