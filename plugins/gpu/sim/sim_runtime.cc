// The simulator's runtime API (sim_runtime.h): one device whose memory is
// host memory, and streams and events over work that runs when queued.
#include "sim_runtime.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

struct GpuSimStream {
  unsigned flags;
};
struct GpuSimEvent {
  unsigned flags;
};

namespace {

// Device memory in use, to enforce kSimDeviceMemory. Device allocations are
// rare (the plugin's caching allocator sits in front), so one lock is fine.
struct DeviceMemory {
  std::mutex mutex;
  std::unordered_map<void*, size_t> sizes;
  size_t in_use = 0;
};
DeviceMemory& deviceMemory() {
  static DeviceMemory* memory = new DeviceMemory;  // leaked: frees may come from static destructors
  return *memory;
}

thread_local int t_device = 0;

}  // namespace

gpuError_t gpuGetDeviceCount(int* count) {
  *count = 1;
  return gpuSuccess;
}

gpuError_t gpuGetDeviceProperties(gpuDeviceProp_t* prop, int device) {
  if (device != 0) return gpuErrorInvalidDevice;
  std::memset(prop, 0, sizeof *prop);
  std::strncpy(prop->name, "Backplane GPU simulator", sizeof prop->name - 1);
  prop->totalGlobalMem = kSimDeviceMemory;
  prop->multiProcessorCount = 4;
  prop->maxThreadsPerBlock = 1024;
  prop->sharedMemPerBlock = 48 * 1024;
  return gpuSuccess;
}

gpuError_t gpuSetDevice(int device) {
  if (device != 0) return gpuErrorInvalidDevice;
  t_device = device;
  return gpuSuccess;
}

gpuError_t gpuGetDevice(int* device) {
  *device = t_device;
  return gpuSuccess;
}

gpuError_t gpuMalloc(void** ptr, size_t nbytes) {
  *ptr = nullptr;
  DeviceMemory& m = deviceMemory();
  std::lock_guard<std::mutex> lock(m.mutex);
  if (nbytes > kSimDeviceMemory - m.in_use) return gpuErrorMemoryAllocation;
  void* p = std::malloc(nbytes == 0 ? 1 : nbytes);
  if (p == nullptr) return gpuErrorMemoryAllocation;
  m.sizes.emplace(p, nbytes);
  m.in_use += nbytes;
  *ptr = p;
  return gpuSuccess;
}

gpuError_t gpuFree(void* ptr) {
  if (ptr == nullptr) return gpuSuccess;
  DeviceMemory& m = deviceMemory();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.sizes.find(ptr);
  if (it == m.sizes.end()) return gpuErrorInvalidValue;
  m.in_use -= it->second;
  m.sizes.erase(it);
  std::free(ptr);
  return gpuSuccess;
}

gpuError_t gpuHostAlloc(void** ptr, size_t nbytes) {
  *ptr = std::malloc(nbytes == 0 ? 1 : nbytes);
  return *ptr ? gpuSuccess : gpuErrorMemoryAllocation;
}

gpuError_t gpuFreeHost(void* ptr) {
  std::free(ptr);
  return gpuSuccess;
}

gpuError_t gpuMemcpyAsync(void* dst, const void* src, size_t nbytes, gpuMemcpyKind, gpuStream_t) {
  if (nbytes != 0) std::memmove(dst, src, nbytes);
  return gpuSuccess;
}

gpuError_t gpuMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t nbytes,
                              gpuStream_t stream) {
  if (dst_device != 0 || src_device != 0) return gpuErrorInvalidDevice;
  return gpuMemcpyAsync(dst, src, nbytes, gpuMemcpyDeviceToDevice, stream);
}

gpuError_t gpuMemsetAsync(void* dst, int value, size_t nbytes, gpuStream_t) {
  if (nbytes != 0) std::memset(dst, value, nbytes);
  return gpuSuccess;
}

gpuError_t gpuMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  DeviceMemory& m = deviceMemory();
  std::lock_guard<std::mutex> lock(m.mutex);
  *free_bytes = kSimDeviceMemory - m.in_use;
  *total_bytes = kSimDeviceMemory;
  return gpuSuccess;
}

gpuError_t gpuStreamCreateWithFlags(gpuStream_t* stream, unsigned flags) {
  *stream = new GpuSimStream{flags};
  return gpuSuccess;
}

gpuError_t gpuStreamDestroy(gpuStream_t stream) {
  delete stream;
  return gpuSuccess;
}

gpuError_t gpuStreamSynchronize(gpuStream_t) { return gpuSuccess; }
gpuError_t gpuStreamWaitEvent(gpuStream_t, gpuEvent_t, unsigned) { return gpuSuccess; }

gpuError_t gpuEventCreateWithFlags(gpuEvent_t* event, unsigned flags) {
  *event = new GpuSimEvent{flags};
  return gpuSuccess;
}

gpuError_t gpuEventRecord(gpuEvent_t, gpuStream_t) { return gpuSuccess; }
gpuError_t gpuEventSynchronize(gpuEvent_t) { return gpuSuccess; }
gpuError_t gpuEventQuery(gpuEvent_t) { return gpuSuccess; }

gpuError_t gpuEventDestroy(gpuEvent_t event) {
  delete event;
  return gpuSuccess;
}

gpuError_t gpuDeviceSynchronize() { return gpuSuccess; }
gpuError_t gpuGetLastError() { return gpuSuccess; }

const char* gpuGetErrorName(gpuError_t error) {
  switch (error) {
    case gpuSuccess: return "gpusimSuccess";
    case gpuErrorInvalidValue: return "gpusimErrorInvalidValue";
    case gpuErrorMemoryAllocation: return "gpusimErrorMemoryAllocation";
    case gpuErrorInvalidConfiguration: return "gpusimErrorInvalidConfiguration";
    case gpuErrorNoDevice: return "gpusimErrorNoDevice";
    case gpuErrorInvalidDevice: return "gpusimErrorInvalidDevice";
    case gpuErrorNotReady: return "gpusimErrorNotReady";
  }
  return "gpusimErrorUnknown";
}

const char* gpuGetErrorString(gpuError_t error) {
  switch (error) {
    case gpuSuccess: return "no error";
    case gpuErrorInvalidValue: return "invalid argument";
    case gpuErrorMemoryAllocation: return "out of memory";
    case gpuErrorInvalidConfiguration: return "invalid configuration argument";
    case gpuErrorNoDevice: return "no simulated device";
    case gpuErrorInvalidDevice: return "invalid device ordinal";
    case gpuErrorNotReady: return "device not ready";
  }
  return "unknown error";
}
