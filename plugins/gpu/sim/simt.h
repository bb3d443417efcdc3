#pragma once
// The simulator's kernel side: CUDA's kernel built-ins on the host. A launch
// runs the grid's blocks one after another on the launching host thread;
// each thread of a block is a fiber, and __syncthreads() is a real barrier
// across the block's fibers (Note [SIMT on fibers] in simt.cc). Everything
// here is what gpu_port.h promises kernels, nothing more: what is not
// modelled (warp shuffles, warpSize, cooperative groups, extern __shared__)
// does not compile.
//
// Only the simulator build includes this header (through gpu_port.h).

#include <math.h>  // the C math functions kernels call (expf, ...), in the global namespace

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "sim_runtime.h"

// BP_GPU_SIM_ASAN: defined when AddressSanitizer instruments this build (GCC
// says so with __SANITIZE_ADDRESS__, clang with __has_feature).
#if defined(__SANITIZE_ADDRESS__)
#define BP_GPU_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BP_GPU_SIM_ASAN 1
#endif
#endif
// BP_GPU_SIM_TSAN: the same for ThreadSanitizer.
#if defined(__SANITIZE_THREAD__)
#define BP_GPU_SIM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BP_GPU_SIM_TSAN 1
#endif
#endif

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

namespace bp_gpu::sim {

// What a simulated thread sees of itself.
struct ThreadContext {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  unsigned char* dynamic_shared;  // this block's dynamic shared memory
};

// The simulated thread running on this host thread; set by the scheduler
// before it switches to a thread's fiber. constinit: kernels in other
// translation units then read it directly, without GCC's thread_local
// init-wrapper check (under -O2 -fsanitize=undefined, GCC 12 miscompiles
// that check into a false "load of null pointer" report).
extern thread_local constinit const ThreadContext* t_current_thread;
inline const ThreadContext& currentThread() { return *t_current_thread; }

// Waits until every thread of the block reaches this barrier. `where` names
// the call site (function, file and line) for the divergence report.
void syncThreads(const char* function, const char* file, int line);

// Runs `run(bound)` on every thread of `grid` x `block`: before returning
// on a synchronous stream; on a deferred one (Note [Deferred streams in the
// simulator]) when the stream is forced, on a copy made by `copy(bound)`
// now. Throws bp::Error naming the kernel (`signature`), the block and the
// thread for what a GPU would refuse or a real kernel bug: more than 1024
// threads per block, more dynamic shared memory than a block has (both at
// the launch), a barrier that not every thread of the block reaches (when
// the kernel runs).
void launchKernel(void (*run)(const void*), const void* bound, std::shared_ptr<const void> (*copy)(const void*),
                  dim3 grid, dim3 block, size_t dynamic_shmem, gpuStream_t stream, std::string_view signature);

// The block's dynamic shared memory (launch's `dynamic_shmem` bytes), 16-byte aligned.
template <class T>
T* dynamicShared() {
  return reinterpret_cast<T*>(currentThread().dynamic_shared);
}

// Atomics: blocks and their threads never run concurrently (one host thread
// runs a launch and switches fibers only at barriers), so a plain
// read-modify-write is atomic.
template <class T, class Op>
T atomicUpdate(T* address, Op op) {
  const T old = *address;
  *address = op(old);
  return old;
}

}  // namespace bp_gpu::sim

namespace bp_gpu {
using sim::dynamicShared;
}  // namespace bp_gpu

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))
// One copy per host thread, shared by the fibers (threads) of the block it
// is running: the lifetime and sharing of a block's shared memory.
#define __shared__ static thread_local
#define threadIdx (::bp_gpu::sim::currentThread().thread_idx)
#define blockIdx (::bp_gpu::sim::currentThread().block_idx)
#define blockDim (::bp_gpu::sim::currentThread().block_dim)
#define gridDim (::bp_gpu::sim::currentThread().grid_dim)
#define __syncthreads() ::bp_gpu::sim::syncThreads(__PRETTY_FUNCTION__, __FILE__, __LINE__)

#define BP_GPU_SIM_ATOMIC(NAME, T, EXPR)                                                             \
  inline T NAME(T* address, T val) {                                                                 \
    return ::bp_gpu::sim::atomicUpdate(address, [val](T old) -> T { return static_cast<T>(EXPR); }); \
  }
BP_GPU_SIM_ATOMIC(atomicAdd, int, old + val)
BP_GPU_SIM_ATOMIC(atomicAdd, unsigned, old + val)
BP_GPU_SIM_ATOMIC(atomicAdd, unsigned long long, old + val)
BP_GPU_SIM_ATOMIC(atomicAdd, float, old + val)
BP_GPU_SIM_ATOMIC(atomicAdd, double, old + val)
BP_GPU_SIM_ATOMIC(atomicMax, int, old < val ? val : old)
BP_GPU_SIM_ATOMIC(atomicMax, unsigned, old < val ? val : old)
BP_GPU_SIM_ATOMIC(atomicMax, long long, old < val ? val : old)
BP_GPU_SIM_ATOMIC(atomicMax, unsigned long long, old < val ? val : old)
BP_GPU_SIM_ATOMIC(atomicMin, int, val < old ? val : old)
BP_GPU_SIM_ATOMIC(atomicMin, unsigned, val < old ? val : old)
BP_GPU_SIM_ATOMIC(atomicMin, long long, val < old ? val : old)
BP_GPU_SIM_ATOMIC(atomicMin, unsigned long long, val < old ? val : old)
BP_GPU_SIM_ATOMIC(atomicExch, int, val)
BP_GPU_SIM_ATOMIC(atomicExch, unsigned, val)
BP_GPU_SIM_ATOMIC(atomicExch, unsigned long long, val)
BP_GPU_SIM_ATOMIC(atomicExch, float, val)
#undef BP_GPU_SIM_ATOMIC

#define BP_GPU_SIM_ATOMIC_CAS(T)                                                                               \
  inline T atomicCAS(T* address, T compare, T val) {                                                           \
    return ::bp_gpu::sim::atomicUpdate(address, [compare, val](T old) { return old == compare ? val : old; }); \
  }
BP_GPU_SIM_ATOMIC_CAS(int)
BP_GPU_SIM_ATOMIC_CAS(unsigned)
BP_GPU_SIM_ATOMIC_CAS(unsigned long long)
#undef BP_GPU_SIM_ATOMIC_CAS
