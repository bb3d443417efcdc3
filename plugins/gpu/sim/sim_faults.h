#pragma once
// Fault injection in the GPU simulator: the Nth device allocation, copy,
// memset or kernel launch fails, for tests of how the plugin and the host
// recover.
//
// Note [Fault injection in the simulator]
// The simulator counts four fault points, each on its own: gpuMalloc
// ("malloc": fails with gpuErrorMemoryAllocation, as a device out of
// memory), gpuMemcpyAsync and gpuMemcpyPeerAsync of any direction
// ("memcpy") and gpuMemsetAsync ("memset"), both failing with
// gpusimErrorInjectedFault before they queue any work, and kernel launches
// ("launch": the launch throws bp::Error kInternal naming the kernel before
// any thread runs). A failed call does nothing.
//
// The plugin is dlopen'ed and exports only its entry points, so a test arms
// faults through operators the simulator plugin (only it) registers:
//   gpusim::inject_fault(str point, int nth, int count=1) -> ()
//       calls nth .. nth+count-1 at `point`, counted from now (1-based),
//       fail; nth == 0 only counts (how a test finds the calls an op makes)
//   gpusim::fault_calls(str point) -> int   calls at `point` since it was armed
//   gpusim::clear_faults() -> ()            disarms every point, stops counting
// A caching allocator in front of gpuMalloc retries a failed allocation once
// after emptying its cache: count=2 makes an allocation fail for good.
// With nothing armed a fault point costs one relaxed atomic load.

#include <atomic>

namespace bp {
class Library;
}

namespace bp_gpu::sim {

enum class FaultPoint : int { kMalloc, kMemcpy, kMemset, kLaunch };

extern std::atomic<bool> g_faults_armed;
// Counts a call at `point` (when armed); true when the plan fails this call.
bool countFault(FaultPoint point);
// True when this call at `point` must fail (Note [Fault injection in the simulator]).
inline bool injectFault(FaultPoint point) {
  return g_faults_armed.load(std::memory_order_relaxed) && countFault(point);
}
// Registers gpusim::inject_fault, fault_calls and clear_faults.
void registerFaultOps(bp::Library& m);

}  // namespace bp_gpu::sim
