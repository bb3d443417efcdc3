// The GPU plugin's entry point: registers the device type (BP_GPU_NAME:
// "cuda", "hip" or "gpusim"), every kernel family of kernels.h, and the
// plugin's own operators in its namespace:
//
//   <ns>::memory_stat(str name, int device=0) -> int   the caching allocator's
//       statistic `name`: allocated_bytes, reserved_bytes, peak_allocated_bytes,
//       allocations, cache_hits, cache_misses, allocation_retries,
//       out_of_memory_errors (runtime.h MemoryStats)
//   <ns>::reset_peak_memory_stats(int device=0) -> ()
//   <ns>::empty_cache(int device=0) -> ()
//   <ns>::synchronize(int device=0) -> ()
//   <ns>::activity_stat(str name) -> int   the process's count of `name`:
//       kernel_launches, host_reads, host_read_bytes, graph_launches (Note [Launch counters]
//       in gpu_port.h)
//   <ns>::set_deterministic(bool enabled) -> ()   and   <ns>::deterministic() -> bool
//       the deterministic mode (Note [Deterministic mode] in runtime.h);
//       initially BACKPLANE_DETERMINISTIC=1 in the environment at load
//   gpusim::inject_fault, gpusim::fault_calls, gpusim::clear_faults   the
//       simulator only: fail the Nth device allocation, copy, memset or
//       kernel launch (Note [Fault injection in the simulator], sim/sim_faults.h)
//
// They take no tensor, so they dispatch to the CPU key: they are registered
// there and name the device by index.
#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "kernels.h"
#include "runtime.h"
#include "spconv/gpu/spconv_gpu.h"
#if defined(BP_CUDA_NCCL)
#include "cuda/nccl_engine.h"
#endif
#if defined(BP_CUDA_CUDNN)
#include "cuda/cudnn_conv.h"
#endif
#if defined(BP_GPU_SIM)
#include "sim/sim_faults.h"
#endif

namespace {

// One statistic by name (the SDK returns tuples of tensors only, and a name
// reads better at the call site than a position).
int64_t memoryStat(std::string_view name, int64_t device) {
  const bp_gpu::MemoryStats s = bp_gpu::memoryStats(static_cast<int>(device));
  const std::pair<std::string_view, int64_t> stats[] = {{"allocated_bytes", s.allocated_bytes},
                                                        {"reserved_bytes", s.reserved_bytes},
                                                        {"peak_allocated_bytes", s.peak_allocated_bytes},
                                                        {"allocations", s.allocations},
                                                        {"cache_hits", s.cache_hits},
                                                        {"cache_misses", s.cache_misses},
                                                        {"allocation_retries", s.allocation_retries},
                                                        {"out_of_memory_errors", s.out_of_memory_errors}};
  for (const auto& [key, value] : stats) {
    if (key == name) return value;
  }
  bp::fail(BP_INVALID_ARGUMENT, bp::detail::concat(BP_GPU_NAME "::memory_stat: unknown statistic '", name,
                                                   "'; use allocated_bytes, reserved_bytes, peak_allocated_bytes, "
                                                   "allocations, cache_hits, cache_misses, allocation_retries or "
                                                   "out_of_memory_errors"));
}

int64_t activityStat(std::string_view name) {
  const bp_gpu::ActivityCounters& a = bp_gpu::g_activity;
  const std::pair<std::string_view, const std::atomic<int64_t>*> stats[] = {{"kernel_launches", &a.kernel_launches},
                                                                            {"host_reads", &a.host_reads},
                                                                            {"host_read_bytes", &a.host_read_bytes},
                                                                            {"graph_launches", &a.graph_launches}};
  for (const auto& [key, value] : stats) {
    if (key == name) return value->load(std::memory_order_relaxed);
  }
  bp::fail(BP_INVALID_ARGUMENT, bp::detail::concat(BP_GPU_NAME "::activity_stat: unknown statistic '", name,
                                                   "'; use kernel_launches, host_reads, host_read_bytes or "
                                                   "graph_launches"));
}

void setDeterministic(bool enabled) { bp_gpu::g_deterministic.store(enabled, std::memory_order_relaxed); }
bool deterministic() { return bp_gpu::deterministic(); }

void resetPeakMemoryStats(int64_t device) { bp_gpu::resetPeakMemoryStats(static_cast<int>(device)); }
void emptyCache(int64_t device) { bp_gpu::emptyCache(static_cast<int>(device)); }
void synchronize(int64_t device) { bp_gpu::synchronize(static_cast<int>(device)); }

void registerPluginOps(bp::Library& m) {
  const std::string ns = BP_GPU_NAME "::";
  const auto def = [&](const char* schema) { m.def((ns + schema).c_str()); };
  def("memory_stat(str name, int device=0) -> int");
  def("reset_peak_memory_stats(int device=0) -> ()");
  def("empty_cache(int device=0) -> ()");
  def("synchronize(int device=0) -> ()");
  def("activity_stat(str name) -> int");
  def("set_deterministic(bool enabled) -> ()");
  def("deterministic() -> bool");
  m.impl((ns + "memory_stat").c_str(), 0, &memoryStat);
  m.impl((ns + "reset_peak_memory_stats").c_str(), 0, &resetPeakMemoryStats);
  m.impl((ns + "empty_cache").c_str(), 0, &emptyCache);
  m.impl((ns + "synchronize").c_str(), 0, &synchronize);
  m.impl((ns + "activity_stat").c_str(), 0, &activityStat);
  m.impl((ns + "set_deterministic").c_str(), 0, &setDeterministic);
  m.impl((ns + "deterministic").c_str(), 0, &deterministic);
#if defined(BP_GPU_SIM)
  bp_gpu::sim::registerFaultOps(m);  // Note [Fault injection in the simulator]
#endif
  const char* env = std::getenv("BACKPLANE_DETERMINISTIC");
  setDeterministic(env != nullptr && std::string_view(env) == "1");
}

void init(bp::Library& m) {
  const int32_t type = m.registerDevice(BP_GPU_NAME, &bp_gpu::deviceBackend());
  bp_gpu::setDeviceType(type);
  registerPluginOps(m);
  bp_gpu::registerCreationKernels(m, type);
  bp_gpu::registerElementwiseKernels(m, type);
  bp_gpu::registerElementwiseMoreKernels(m, type);
  bp_gpu::registerDataMovementKernels(m, type);
  bp_gpu::registerReductionKernels(m, type);
  bp_gpu::registerScanPadKernels(m, type);
  bp_gpu::registerSortKernels(m, type);
  bp_gpu::registerConvPoolKernels(m, type);
  bp_gpu::registerNormKernels(m, type);
  bp_gpu::registerBackwardKernels(m, type);
  bp_gpu::registerOptimKernels(m, type);
  bp_gpu::registerLinalgKernels(m, type);
  bp_spconv_gpu::registerKernels(m, type);
#if defined(BP_CUDA_NCCL)
  bp_cuda::registerNcclCollectives(m, type);  // Note [NCCL engine]
#endif
#if defined(BP_CUDA_CUDNN)
  bp_gpu::registerCudnnKernels(m, type);  // Note [cuDNN convolutions]
#endif
}

}  // namespace

BACKPLANE_PLUGIN(BP_GPU_NAME, "0.1.0", init)
