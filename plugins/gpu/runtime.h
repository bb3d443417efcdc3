#pragma once
// The GPU plugins' device API as kernels and plugin code use it: errors,
// the current device and stream, device limits. The DeviceBackend the host
// sees (allocator, copies, streams, events) is built on these in runtime.cu. One
// source for CUDA, HIP and the simulator, through gpu_port.h.

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "backplane/plugin.hpp"
#include "gpu_port.h"

namespace bp_gpu {

// Throws bp::Error "<what>: <error name>: <error string>" unless `e` is
// gpuSuccess; out-of-memory is BP_RESOURCE_EXHAUSTED, anything else
// BP_INTERNAL.
void check(gpuError_t e, const char* what);

// Makes `device` the current device of this host thread for its lifetime,
// then restores the previous one. Kernels create one before launching.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

// The stream every kernel and copy of `device` is queued on: this host
// thread's current stream of the device (set through the host's
// set_current_stream), else the device's default stream, one non-blocking
// stream created on first use and shared by all host threads (Note
// [Streams and the caching allocator] in runtime.cu). No lock, no allocation.
gpuStream_t currentStream(int device);

// What a launch configuration must respect on `device`.
struct DeviceLimits {
  int sm_count;
  int max_threads_per_block;
  size_t shared_mem_per_block;
};
const DeviceLimits& limits(int device);

// The number the host gave this plugin's device type ("cuda", "hip",
// "gpusim"); valid after the plugin's init registered it.
int32_t deviceType();

// ------------------------------------------------- the plugin's device API

// The caching allocator's statistics of one device, in bytes and counts
// since the plugin loaded (peak since the last resetPeakMemoryStats).
struct MemoryStats {
  int64_t allocated_bytes;  // in live tensors (rounded to the allocator's size classes)
  int64_t reserved_bytes;   // obtained from the driver: allocated + cached
  int64_t peak_allocated_bytes;
  int64_t allocations;           // requests served
  int64_t cache_hits;            // requests served from the cache
  int64_t cache_misses;          // requests that went to the driver (allocations = cache_hits + cache_misses)
  int64_t allocation_retries;    // driver out of memory: the cache was emptied and the request retried
  int64_t out_of_memory_errors;  // requests refused with BP_RESOURCE_EXHAUSTED (not counted above)
};
MemoryStats memoryStats(int device);
void resetPeakMemoryStats(int device);
// Returns every cached (free) block of `device` to the driver.
void emptyCache(int device);
// Waits for all work queued on `device`.
void synchronize(int device);
// Throws BP_FAILED_PRECONDITION naming `what` when this thread's current
// stream of `device` is capturing a graph (Note [Graphs] in plugin_api.h):
// what a replay cannot repeat (a host read, a copy from the host, a wait).
void refuseWhileCapturing(int device, const char* what);

// Note [Deterministic mode]
// Kernels that may sum in a run-dependent order (atomicAdd from several
// blocks into one element) have a deterministic variant: a fixed order, no
// atomics, the same bits run after run, usually somewhat slower. The
// process-wide switch is
//   <ns>::set_deterministic(bool enabled) -> ()    (ns: cuda, hip, gpusim)
//   <ns>::deterministic() -> bool
// or BACKPLANE_DETERMINISTIC=1 in the environment when the plugin loads
// (gpu_plugin.cu). Kernels read it once per call (a relaxed atomic load);
// which kernels have both variants is said where they are (the sparse
// convolutions: Note [Sparse convolution kernels on the GPU]).
inline std::atomic<bool> g_deterministic{false};
inline bool deterministic() { return g_deterministic.load(std::memory_order_relaxed); }

// The DeviceBackend registered with the host (static lifetime), and the
// device type number it got (gpu_plugin.cu records it after registering).
bp::DeviceBackend& deviceBackend();
void setDeviceType(int32_t type);

}  // namespace bp_gpu
