#pragma once
// The one portability header of the GPU plugins. The same kernel sources
// build three plugins, selected by a compile definition the build sets:
//
//   BP_GPU_CUDA  nvcc, the CUDA runtime          (device type "cuda")
//   BP_GPU_HIP   hipcc, the HIP runtime          (device type "hip")
//   BP_GPU_SIM   the host compiler, sim/         (device type "gpusim", tests)
//
// Kernels are written in plain CUDA C++ (__global__, __shared__, threadIdx,
// __syncthreads(), atomicAdd, the C math functions) and launched with
// bp_gpu::launch, never with <<<>>>: the simulator cannot parse it and
// launch() is where launch errors become bp::Error. What the simulator does
// not model is not allowed in kernels: warp shuffles and votes, warpSize,
// cooperative groups, __ldg, inline PTX, `extern __shared__` (use
// bp_gpu::dynamicShared<T>()), textures. Every thread of a block must reach
// every __syncthreads() (the simulator reports a divergent barrier).
//
// The runtime API is spelled gpu* (gpuMalloc, gpuStream_t, ...) and maps to
// cuda*, hip* or the simulator's functions of the same meaning.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backplane/float16_conversions.h"
#include "backplane/plugin.hpp"
#include "bp_common/dtypes.h"

#if (defined(BP_GPU_CUDA) + defined(BP_GPU_HIP) + defined(BP_GPU_SIM)) != 1
#error "gpu_port.h: define exactly one of BP_GPU_CUDA, BP_GPU_HIP, BP_GPU_SIM (the build does)"
#endif

// ------------------------------------------------------------ runtime names

#if defined(BP_GPU_CUDA)
#include <cuda_runtime.h>

#define BP_GPU_NAME "cuda"
#define BP_GPU_RUNTIME_PREFIX "cuda"
using gpuError_t = cudaError_t;
using gpuStream_t = cudaStream_t;
using gpuEvent_t = cudaEvent_t;
using gpuDeviceProp_t = cudaDeviceProp;
#define gpuSuccess cudaSuccess
#define gpuErrorMemoryAllocation cudaErrorMemoryAllocation
#define gpuErrorNotReady cudaErrorNotReady
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuEventDisableTiming cudaEventDisableTiming
#define gpuEventDefault cudaEventDefault
#define gpuErrorInvalidResourceHandle cudaErrorInvalidResourceHandle
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuSetDevice cudaSetDevice
#define gpuGetDevice cudaGetDevice
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuHostAlloc(ptr, nbytes) cudaHostAlloc((ptr), (nbytes), cudaHostAllocDefault)
#define gpuHostAllocMapped(ptr, nbytes) cudaHostAlloc((ptr), (nbytes), cudaHostAllocMapped | cudaHostAllocPortable)
#define gpuHostGetDevicePointer cudaHostGetDevicePointer
#define gpuFreeHost cudaFreeHost
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemcpyPeerAsync cudaMemcpyPeerAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemGetInfo cudaMemGetInfo
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuStreamWaitEvent cudaStreamWaitEvent
#define gpuEventCreateWithFlags cudaEventCreateWithFlags
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventQuery cudaEventQuery
#define gpuEventDestroy cudaEventDestroy
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuGetLastError cudaGetLastError
#define gpuGetErrorName cudaGetErrorName
#define gpuGetErrorString cudaGetErrorString
using gpuGraph_t = cudaGraph_t;
using gpuGraphExec_t = cudaGraphExec_t;
#define gpuErrorStreamCaptureUnsupported cudaErrorStreamCaptureUnsupported
#define gpuStreamBeginCapture(stream) cudaStreamBeginCapture((stream), cudaStreamCaptureModeThreadLocal)
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuGraphInstantiate(exec, graph) cudaGraphInstantiate((exec), (graph), 0)
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuGraphDestroy cudaGraphDestroy

#elif defined(BP_GPU_HIP)
#include <hip/hip_runtime.h>

#define BP_GPU_NAME "hip"
#define BP_GPU_RUNTIME_PREFIX "hip"
using gpuError_t = hipError_t;
using gpuStream_t = hipStream_t;
using gpuEvent_t = hipEvent_t;
using gpuDeviceProp_t = hipDeviceProp_t;
#define gpuSuccess hipSuccess
#define gpuErrorMemoryAllocation hipErrorOutOfMemory
#define gpuErrorNotReady hipErrorNotReady
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuEventDisableTiming hipEventDisableTiming
#define gpuEventDefault hipEventDefault
#define gpuErrorInvalidResourceHandle hipErrorInvalidHandle
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuSetDevice hipSetDevice
#define gpuGetDevice hipGetDevice
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuHostAlloc(ptr, nbytes) hipHostMalloc((ptr), (nbytes), hipHostMallocDefault)
#define gpuHostAllocMapped(ptr, nbytes) hipHostMalloc((ptr), (nbytes), hipHostMallocMapped | hipHostMallocPortable)
#define gpuHostGetDevicePointer hipHostGetDevicePointer
#define gpuFreeHost hipHostFree
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemcpyPeerAsync hipMemcpyPeerAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemGetInfo hipMemGetInfo
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuStreamWaitEvent hipStreamWaitEvent
#define gpuEventCreateWithFlags hipEventCreateWithFlags
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventQuery hipEventQuery
#define gpuEventDestroy hipEventDestroy
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuGetLastError hipGetLastError
#define gpuGetErrorName hipGetErrorName
#define gpuGetErrorString hipGetErrorString
using gpuGraph_t = hipGraph_t;
using gpuGraphExec_t = hipGraphExec_t;
#define gpuErrorStreamCaptureUnsupported hipErrorStreamCaptureUnsupported
#define gpuStreamBeginCapture(stream) hipStreamBeginCapture((stream), hipStreamCaptureModeThreadLocal)
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuGraphInstantiate(exec, graph) hipGraphInstantiate((exec), (graph), nullptr, nullptr, 0)
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphExecDestroy hipGraphExecDestroy
#define gpuGraphDestroy hipGraphDestroy

#else  // BP_GPU_SIM
#include "sim/sim_runtime.h"

#define BP_GPU_NAME "gpusim"
#define BP_GPU_RUNTIME_PREFIX "gpusim"
#endif

// ------------------------------------------------------------ kernel syntax

#if defined(BP_GPU_SIM)
// The simulator runs kernels as host code: the qualifiers vanish and the
// CUDA built-ins (threadIdx, __syncthreads, atomicAdd, dynamic shared
// memory) come from sim/simt.h.
#include "sim/simt.h"
#define BP_GPU_HD
#else
#define BP_GPU_HD __host__ __device__
#endif

namespace bp_gpu {

// ------------------------------------------------------- 16-bit float types

// Storage types for float16 and bfloat16 in kernels: 16 bits, trivially
// copyable, the same bits as bp::Half / bp::BFloat16 in memory. Convert with
// toFloat / fromFloat<T>: the SDK's conversions (backplane/
// float16_conversions.h, Note [16-bit float conversions]) in software, not
// the __float2half_rn family of intrinsics, so CUDA, HIP and the simulator
// round as the CPU plugin and the host do, bit for bit, NaNs included.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
static_assert(sizeof(Half) == sizeof(bp::Half) && sizeof(BFloat16) == sizeof(bp::BFloat16),
              "bp_gpu 16-bit types must match the SDK's in memory");
}  // namespace bp_gpu

// The 16-bit formats, for plugins/common's conversions (bp_common/dtypes.h).
template <>
struct bp_common::Float16FormatOf<bp_gpu::Half> {
  static constexpr Float16Format value = Float16Format::kHalf;
};
template <>
struct bp_common::Float16FormatOf<bp_gpu::BFloat16> {
  static constexpr Float16Format value = Float16Format::kBFloat16;
};

namespace bp_gpu {

BP_GPU_HD inline float toFloat(Half h) { return bp::floatFromHalfBits(h.bits); }
BP_GPU_HD inline float toFloat(BFloat16 h) { return bp::floatFromBFloat16Bits(h.bits); }
// Any other element type: a plain conversion.
template <class T>
BP_GPU_HD inline float toFloat(T v) {
  return static_cast<float>(v);
}

template <class T>
BP_GPU_HD inline T fromFloat(float f) {
  if constexpr (std::is_same_v<T, Half>) {
    return Half{bp::halfBitsFromFloat(f)};
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16{bp::bfloat16BitsFromFloat(f)};
  } else {
    return static_cast<T>(f);
  }
}

#if !defined(BP_GPU_SIM)
// The block's dynamic shared memory (launch's `dynamic_shmem` bytes), 16-byte
// aligned. The simulator defines its own (sim/simt.h).
template <class T>
__device__ inline T* dynamicShared() {
  extern __shared__ __align__(16) unsigned char bp_gpu_dynamic_shared[];
  return reinterpret_cast<T*>(bp_gpu_dynamic_shared);
}
#endif

// -------------------------------------------------------------------- launch

// Note [Launch counters]
// Every launch() and every synchronising read of device memory that plugin
// code makes itself (readDevice in kernel_args.h: a 0-d tensor's value, a
// data-dependent output size) is counted, process-wide, so that tests on the
// simulator can hold an app to a budget of launches and host round trips
// per step, which is how a GPU performance regression shows on a machine
// without a GPU. The counts are relaxed atomics: one uncontended increment
// per launch. <ns>::activity_stat(name) reads them (gpu_plugin.cu).
struct ActivityCounters {
  std::atomic<int64_t> kernel_launches{0};
  std::atomic<int64_t> host_reads{0};       // synchronising device-to-host reads made by kernels' host code
  std::atomic<int64_t> host_read_bytes{0};  // the bytes those reads moved
  std::atomic<int64_t> graph_launches{0};   // graph replays (one launch each, however many kernels)
};
inline ActivityCounters g_activity;

namespace detail {
// Throws bp::Error naming the kernel (its signature, and its symbol where
// the runtime can tell) for a failed launch; defined in runtime.cu.
[[noreturn]] void launchFailed(gpuError_t error, const void* kernel, std::string_view signature);

// The kernel's C++ type, for messages: "void (*)(float*, long int)".
template <class K>
std::string_view kernelSignature() {
  // "... [with K = void (*)(float*, long int)]" (clang), or with GCC "...
  // [with K = void (*)(float*, long int); std::string_view = ...]"
  const std::string_view pretty = __PRETTY_FUNCTION__;
  const size_t start = pretty.find("K = ");
  if (start == std::string_view::npos || pretty.back() != ']') return pretty;
  size_t end = pretty.find("; ", start);  // a type has no ';'
  if (end == std::string_view::npos) end = pretty.size() - 1;
  return pretty.substr(start + 4, end - start - 4);
}
}  // namespace detail

// Launches kernel(args...) on `grid` x `block` threads with `dynamic_shmem`
// bytes of dynamic shared memory (bp_gpu::dynamicShared<T>()) on `stream`.
// Arguments are converted to the kernel's parameter types and must be
// trivially copyable. An empty grid or block launches nothing (CUDA would
// refuse it). Throws bp::Error naming the kernel if the launch is refused
// (too many threads, too much shared memory); errors while the kernel runs
// surface at the next synchronizing call. The simulator runs the kernel to
// completion before returning, except on a deferred stream (sim_runtime.h).
template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t dynamic_shmem, gpuStream_t stream, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "bp_gpu::launch: wrong number of kernel arguments");
  static_assert((std::is_trivially_copyable_v<P> && ...),
                "bp_gpu::launch: kernel parameters must be trivially copyable");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0) return;
  g_activity.kernel_launches.fetch_add(1, std::memory_order_relaxed);
#if defined(BP_GPU_SIM)
  struct Bound {
    void (*kernel)(P...);
    std::tuple<P...> params;
    static void run(const void* self) {
      const Bound& b = *static_cast<const Bound*>(self);
      std::apply(b.kernel, b.params);
    }
    static std::shared_ptr<const void> copy(const void* self) {  // for a deferred stream
      return std::make_shared<const Bound>(*static_cast<const Bound*>(self));
    }
  };
  const Bound bound{kernel, std::tuple<P...>(static_cast<P>(std::forward<A>(args))...)};
  sim::launchKernel(&Bound::run, &bound, &Bound::copy, grid, block, dynamic_shmem, stream,
                    detail::kernelSignature<decltype(kernel)>());
#else
  // (clang-format would split the closing chevrons)
  // clang-format off
  kernel<<<grid, block, dynamic_shmem, stream>>>(static_cast<P>(std::forward<A>(args))...);
  // clang-format on
  const gpuError_t e = gpuGetLastError();
  if (e != gpuSuccess) {
    detail::launchFailed(e, reinterpret_cast<const void*>(kernel), detail::kernelSignature<decltype(kernel)>());
  }
#endif
}

}  // namespace bp_gpu
