#pragma once
// The simulator's runtime API: the subset of the CUDA runtime that the GPU
// plugins use, under the gpu* names of gpu_port.h, on the host. One device
// ("gpusim:0") whose memory is host memory from malloc, so AddressSanitizer
// sees every out-of-bounds access a kernel makes. Streams and events exist
// (the plugin code that uses them runs unchanged) but all work runs
// synchronously when it is queued, so a stream is always idle and an event
// always complete. The device has a fixed capacity (kSimDeviceMemory) so
// that out-of-memory paths can be tested. Thread-safe.
//
// Only the simulator build includes this header (through gpu_port.h).

#include <cstddef>
#include <cstdint>

enum gpuError_t : int {
  gpuSuccess = 0,
  gpuErrorInvalidValue = 1,
  gpuErrorMemoryAllocation = 2,
  gpuErrorInvalidConfiguration = 9,
  gpuErrorNoDevice = 100,
  gpuErrorInvalidDevice = 101,
  gpuErrorNotReady = 600,
};

enum gpuMemcpyKind : int {
  gpuMemcpyHostToDevice = 1,
  gpuMemcpyDeviceToHost = 2,
  gpuMemcpyDeviceToDevice = 3,
};

inline constexpr unsigned gpuStreamNonBlocking = 1;
inline constexpr unsigned gpuEventDisableTiming = 2;

// Opaque handles (defined in sim_runtime.cc).
struct GpuSimStream;
struct GpuSimEvent;
using gpuStream_t = GpuSimStream*;  // nullptr is the default stream, as in CUDA
using gpuEvent_t = GpuSimEvent*;

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
gpuError_t gpuDeviceSynchronize();
gpuError_t gpuGetLastError();
const char* gpuGetErrorName(gpuError_t error);
const char* gpuGetErrorString(gpuError_t error);
