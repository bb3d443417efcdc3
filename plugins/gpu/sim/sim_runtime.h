#pragma once
// The simulator's runtime API: the subset of the CUDA runtime that the GPU
// plugins use, under the gpu* names of gpu_port.h, on the host. One device
// ("gpusim:0") whose memory is host memory from malloc, so AddressSanitizer
// sees every out-of-bounds access a kernel makes. The device has a fixed
// capacity (kSimDeviceMemory) so that out-of-memory paths can be tested.
// Thread-safe.
//
// Note [Deferred streams in the simulator]
// A stream is synchronous unless it is created with gpusimStreamDeferred:
// its work (kernels, copies, fills) runs when it is queued, so it is always
// idle and an event recorded on it is complete at once. The plugin's
// default stream is synchronous, which keeps every existing test and
// conformance run exact. A deferred stream keeps its work in a queue, in
// order, and runs it only when something forces it:
// - gpuStreamSynchronize of the stream, gpuDeviceSynchronize, gpuStreamDestroy;
// - gpuEventSynchronize of an event recorded on it (up to that event);
// - gpuStreamWaitEvent by another stream: the waiting stream's later work
//   runs only after the queue up to the event has run (at once when the
//   waiting stream is synchronous, else when the waiting stream runs).
// gpuEventQuery never forces work: it answers gpuErrorNotReady until the
// work before the event has run. So a reader that skips the wait on an
// event sees the memory as it was before the writer's work: what a GPU may
// show, made certain, so a missing synchronisation fails a test instead of
// passing by luck. An error a deferred kernel throws (a divergent barrier)
// surfaces from the call that forced it, as on a GPU from the next
// synchronising call. BACKPLANE_GPUSIM_SYNC_STREAMS=1 in the environment
// makes every stream synchronous (to tell a race from a kernel bug).
//
// Note [Guard bytes in the simulator]
// A kernel that writes past its output on a GPU corrupts a neighbour
// silently; ASan sees it on the simulator, but only in ASan builds. So in
// the checking mode every gpuMalloc block lies between 64 guard bytes of a
// known value (0xFD) on each side (sim_guard.cc), checked
// - after every kernel (when it runs: at the launch, or when a deferred
//   stream is forced): every live guarded block; a changed guard throws
//   bp::Error from the launch, or from the call that forced it, naming the
//   kernel (by its type: "void (*)(float*, int)"; the simulator has no
//   symbol names), the block, its size and the offsets written (negative: before
//   the block), so the op fails instead of passing; the guards are then
//   restored, so one bad write is reported once;
// - when the block is freed (gpuFree): its own guards, in case something
//   other than a kernel wrote them.
// Checking after every kernel makes a synchronize check redundant. The
// limits: a write more than 64 bytes away is not seen, nor one into the
// slack the caching allocator leaves between a tensor's bytes and its size
// class (runtime.cu rounds to multiples of 512 bytes), nor a read; with
// several host threads launching at once, the kernel named is the first to
// finish after the write. The mode is on by default except in ASan builds
// (ASan reports the same writes, and reads, with a stack; turning the mode
// on there is harmless): BACKPLANE_GPUSIM_CHECK_BOUNDS=0 in the environment
// turns it off, =1 on. It costs one check of 128 bytes per live block after
// each kernel (sim_guard.h).
//
// Only the simulator build includes this header (through gpu_port.h).

#include <cstddef>
#include <cstdint>
#include <functional>

enum gpuError_t : int {
  gpuSuccess = 0,
  gpuErrorInvalidValue = 1,
  gpuErrorMemoryAllocation = 2,
  gpuErrorInvalidConfiguration = 9,
  gpuErrorNoDevice = 100,
  gpuErrorInvalidDevice = 101,
  gpuErrorInvalidResourceHandle = 400,
  gpuErrorNotReady = 600,
  gpuErrorStreamCaptureUnsupported = 900,  // as cudaErrorStreamCaptureUnsupported
  gpuErrorStreamCaptureInvalidated = 901,
  gpuErrorInjectedFault = 10000,  // Note [Fault injection in the simulator] (sim_faults.h)
};

enum gpuMemcpyKind : int {
  gpuMemcpyHostToDevice = 1,
  gpuMemcpyDeviceToHost = 2,
  gpuMemcpyDeviceToDevice = 3,
};

inline constexpr unsigned gpuStreamNonBlocking = 1;
inline constexpr unsigned gpuEventDefault = 0;
inline constexpr unsigned gpuEventDisableTiming = 2;
// Simulator only: a stream whose work waits until forced (Note [Deferred
// streams in the simulator]).
inline constexpr unsigned gpusimStreamDeferred = 0x100;

// Opaque handles (defined in sim_runtime.cc).
struct GpuSimStream;
struct GpuSimEvent;
struct GpuSimGraph;
using gpuStream_t = GpuSimStream*;  // nullptr is the default stream, as in CUDA
using gpuEvent_t = GpuSimEvent*;
using gpuGraph_t = GpuSimGraph*;
using gpuGraphExec_t = GpuSimGraph*;

// The fields of cudaDeviceProp that the plugins read.
struct gpuDeviceProp_t {
  char name[256];
  size_t totalGlobalMem;
  int major;
  int minor;
  int multiProcessorCount;
  int maxThreadsPerBlock;
  size_t sharedMemPerBlock;
};

// Bytes of "device memory" the simulated device has.
inline constexpr size_t kSimDeviceMemory = size_t{1} << 30;

gpuError_t gpuGetDeviceCount(int* count);
gpuError_t gpuGetDeviceProperties(gpuDeviceProp_t* prop, int device);
gpuError_t gpuSetDevice(int device);
gpuError_t gpuGetDevice(int* device);
gpuError_t gpuMalloc(void** ptr, size_t nbytes);
gpuError_t gpuFree(void* ptr);
gpuError_t gpuHostAlloc(void** ptr, size_t nbytes);
gpuError_t gpuFreeHost(void* ptr);
// Host memory kernels may write (mapped): in the simulator any host memory,
// so the device pointer is the host pointer.
gpuError_t gpuHostAllocMapped(void** ptr, size_t nbytes);
gpuError_t gpuHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned flags);
gpuError_t gpuMemcpyAsync(void* dst, const void* src, size_t nbytes, gpuMemcpyKind kind, gpuStream_t stream);
gpuError_t gpuMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t nbytes,
                              gpuStream_t stream);
gpuError_t gpuMemsetAsync(void* dst, int value, size_t nbytes, gpuStream_t stream);
gpuError_t gpuMemGetInfo(size_t* free_bytes, size_t* total_bytes);
gpuError_t gpuStreamCreateWithFlags(gpuStream_t* stream, unsigned flags);
gpuError_t gpuStreamDestroy(gpuStream_t stream);
gpuError_t gpuStreamSynchronize(gpuStream_t stream);
gpuError_t gpuStreamWaitEvent(gpuStream_t stream, gpuEvent_t event, unsigned flags);
gpuError_t gpuEventCreateWithFlags(gpuEvent_t* event, unsigned flags);
gpuError_t gpuEventRecord(gpuEvent_t event, gpuStream_t stream);
gpuError_t gpuEventSynchronize(gpuEvent_t event);
gpuError_t gpuEventQuery(gpuEvent_t event);
gpuError_t gpuEventDestroy(gpuEvent_t event);
// Note [Event timing in the simulator]
// An event made without gpuEventDisableTiming takes the host's steady clock
// when its record is reached: at once on a stream that is idle (every
// synchronous stream), else when a deferred stream's work before it runs.
// So on a deferred stream the time between two events is the time the work
// between them took when it was forced, as on a GPU it is the time the
// device spent. The milliseconds are a float, as in CUDA.
gpuError_t gpuEventElapsedTime(float* ms, gpuEvent_t start, gpuEvent_t end);
// Note [Graphs in the simulator]
// Between gpuStreamBeginCapture and gpuStreamEndCapture a stream records
// its work (kernels with a copy of their arguments, device-to-device copies,
// fills) instead of running it; gpuGraphLaunch queues the recorded work on
// a stream again, in order, as a deferred stream would run it (at once on a
// synchronous one). What a GPU refuses in a capture the simulator refuses
// too, with gpuErrorStreamCaptureUnsupported: copies to or from the host,
// synchronizing, recording or waiting for an event on the capturing
// stream, synchronizing the device from the capturing thread (CUDA's
// thread-local capture mode). The default (null) stream cannot be
// captured, as CUDA's legacy stream cannot.
gpuError_t gpuStreamBeginCapture(gpuStream_t stream);
gpuError_t gpuStreamEndCapture(gpuStream_t stream, gpuGraph_t* graph);
gpuError_t gpuGraphInstantiate(gpuGraphExec_t* exec, gpuGraph_t graph);
gpuError_t gpuGraphLaunch(gpuGraphExec_t exec, gpuStream_t stream);
gpuError_t gpuGraphExecDestroy(gpuGraphExec_t exec);
gpuError_t gpuGraphDestroy(gpuGraph_t graph);
gpuError_t gpuDeviceSynchronize();
gpuError_t gpuGetLastError();
const char* gpuGetErrorName(gpuError_t error);
const char* gpuGetErrorString(gpuError_t error);

namespace bp_gpu::sim {
// Whether `stream` keeps its work until forced.
bool deferred(gpuStream_t stream);
// Whether `stream` records its work into a graph (Note [Graphs in the simulator]).
bool capturing(gpuStream_t stream);
// Work for `stream`: runs `work` now when the stream is synchronous (or
// null), else appends it to the stream's queue (Note [Deferred streams in
// the simulator]). Exceptions from `work` propagate from whichever call runs it.
void enqueue(gpuStream_t stream, std::function<void()> work);
}  // namespace bp_gpu::sim
