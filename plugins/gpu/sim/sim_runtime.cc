// The simulator's runtime API (sim_runtime.h): one device whose memory is
// host memory, and streams and events over work that runs when queued or,
// on a deferred stream, when forced (Note [Deferred streams in the simulator]).
#include "sim_runtime.h"

#include "sim_faults.h"
#include "sim_guard.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace {

// A deferred stream's queue. Positions count the work ever queued: work
// number i (1-based) has run when completed >= i. Guarded by queueMutex().
struct StreamQueue {
  std::deque<std::function<void()>> pending;  // work completed + 1, completed + 2, ...
  uint64_t queued = 0;
  uint64_t completed = 0;
};

// One lock for every queue, held while forced work runs: forcing one stream
// may force another (an event wait), and the simulator runs one thing at a
// time anyway. Recursive because running work may force other queues.
std::recursive_mutex& queueMutex() {
  static auto* m = new std::recursive_mutex;  // leaked, like deviceMemory()
  return *m;
}

}  // namespace

struct GpuSimStream {
  unsigned flags;
  std::shared_ptr<StreamQueue> queue;  // null for a synchronous stream
  // The work recorded while capturing (Note [Graphs in the simulator]);
  // null otherwise. Guarded by queueMutex().
  std::shared_ptr<std::vector<std::function<void()>>> capture;
  // Set when the capturing thread did what a capture forbids (CUDA then
  // fails the capture's end with cudaErrorStreamCaptureInvalidated).
  bool capture_invalidated = false;
};
// A captured graph, and an instantiated one (the same recorded work).
struct GpuSimGraph {
  std::shared_ptr<const std::vector<std::function<void()>>> work;
};
// Where an event was recorded: (queue, position), or no queue when its work
// has all run (recorded on a synchronous stream, or never recorded). The
// queue is shared so that an event may outlive its stream.
// A timed event (made without gpuEventDisableTiming) also has the steady
// clock's time at which its last record was reached: stamped at the record
// on a stream that is idle, else by a marker queued after the work before it
// (Note [Event timing in the simulator] in sim_runtime.h).
struct GpuSimEvent {
  unsigned flags;
  std::shared_ptr<StreamQueue> queue;
  uint64_t position = 0;
  struct Stamp {
    bool reached = false;
    std::chrono::steady_clock::time_point at;
  };
  std::shared_ptr<Stamp> stamp;  // null until recorded, or without timing; guarded by queueMutex()
};

namespace {

std::unordered_set<GpuSimStream*>& deferredStreams() {  // guarded by queueMutex()
  static auto* streams = new std::unordered_set<GpuSimStream*>;
  return *streams;
}

bool syncStreamsForced() {
  static const bool forced = [] {
    const char* v = std::getenv("BACKPLANE_GPUSIM_SYNC_STREAMS");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return forced;
}

// Runs `q`'s work up to `position`. The work is removed before it runs, so
// an exception leaves the queue consistent and is reported once.
void runUpTo(StreamQueue& q, uint64_t position) {
  std::lock_guard<std::recursive_mutex> lock(queueMutex());
  while (q.completed < position && !q.pending.empty()) {
    std::function<void()> work = std::move(q.pending.front());
    q.pending.pop_front();
    ++q.completed;
    work();
  }
}

void runAll(StreamQueue& q) {
  std::lock_guard<std::recursive_mutex> lock(queueMutex());
  runUpTo(q, q.queued);
}

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
  if (bp_gpu::sim::injectFault(bp_gpu::sim::FaultPoint::kMalloc)) return gpuErrorMemoryAllocation;
  DeviceMemory& m = deviceMemory();
  std::lock_guard<std::mutex> lock(m.mutex);
  if (nbytes > kSimDeviceMemory - m.in_use) return gpuErrorMemoryAllocation;
  void* p = bp_gpu::sim::allocateDeviceBytes(nbytes);  // Note [Guard bytes in the simulator]
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
  bp_gpu::sim::freeDeviceBytes(ptr);  // throws if its guard bytes were written
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

gpuError_t gpuHostAllocMapped(void** ptr, size_t nbytes) { return gpuHostAlloc(ptr, nbytes); }

gpuError_t gpuHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned /*flags*/) {
  *device_ptr = host_ptr;
  return gpuSuccess;
}

namespace bp_gpu::sim {
bool deferred(gpuStream_t stream) { return stream != nullptr && stream->queue != nullptr; }

bool capturing(gpuStream_t stream) {
  if (stream == nullptr) return false;
  std::lock_guard<std::recursive_mutex> lock(queueMutex());
  return stream->capture != nullptr;
}

void enqueue(gpuStream_t stream, std::function<void()> work) {
  if (stream != nullptr) {
    std::lock_guard<std::recursive_mutex> lock(queueMutex());
    if (stream->capture != nullptr) {
      stream->capture->push_back(std::move(work));
      return;
    }
  }
  if (stream == nullptr || stream->queue == nullptr) {
    work();
    return;
  }
  std::lock_guard<std::recursive_mutex> lock(queueMutex());
  stream->queue->pending.push_back(std::move(work));
  ++stream->queue->queued;
}
}  // namespace bp_gpu::sim

gpuError_t gpuMemcpyAsync(void* dst, const void* src, size_t nbytes, gpuMemcpyKind kind, gpuStream_t stream) {
  // A replay would read (or write) the host buffer again: not capturable here.
  if (kind != gpuMemcpyDeviceToDevice && bp_gpu::sim::capturing(stream)) return gpuErrorStreamCaptureUnsupported;
  if (bp_gpu::sim::injectFault(bp_gpu::sim::FaultPoint::kMemcpy)) return gpuErrorInjectedFault;
  if (nbytes != 0) bp_gpu::sim::enqueue(stream, [=] { std::memmove(dst, src, nbytes); });
  return gpuSuccess;
}

gpuError_t gpuMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t nbytes,
                              gpuStream_t stream) {
  if (dst_device != 0 || src_device != 0) return gpuErrorInvalidDevice;
  return gpuMemcpyAsync(dst, src, nbytes, gpuMemcpyDeviceToDevice, stream);
}

gpuError_t gpuMemsetAsync(void* dst, int value, size_t nbytes, gpuStream_t stream) {
  if (bp_gpu::sim::injectFault(bp_gpu::sim::FaultPoint::kMemset)) return gpuErrorInjectedFault;
  if (nbytes != 0) bp_gpu::sim::enqueue(stream, [=] { std::memset(dst, value, nbytes); });
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
  auto* s = new GpuSimStream{flags, nullptr, nullptr};
  if ((flags & gpusimStreamDeferred) != 0 && !syncStreamsForced()) {
    s->queue = std::make_shared<StreamQueue>();
    std::lock_guard<std::recursive_mutex> lock(queueMutex());
    deferredStreams().insert(s);
  }
  *stream = s;
  return gpuSuccess;
}

// As in CUDA, queued work still runs: here, before the call returns.
gpuError_t gpuStreamDestroy(gpuStream_t stream) {
  if (stream == nullptr) return gpuErrorInvalidValue;
  if (stream->queue != nullptr) {
    std::lock_guard<std::recursive_mutex> lock(queueMutex());
    deferredStreams().erase(stream);
    runAll(*stream->queue);
  }
  delete stream;
  return gpuSuccess;
}

gpuError_t gpuStreamSynchronize(gpuStream_t stream) {
  if (bp_gpu::sim::capturing(stream)) return gpuErrorStreamCaptureUnsupported;
  if (stream != nullptr && stream->queue != nullptr) runAll(*stream->queue);
  return gpuSuccess;
}

// The streams this host thread is capturing: as in CUDA's thread-local
// capture mode, the thread may not synchronize the device meanwhile
// (gpuDeviceSynchronize refuses, and the captures are invalidated).
thread_local std::vector<gpuStream_t> t_capturing;

gpuError_t gpuStreamBeginCapture(gpuStream_t stream) {
  if (stream == nullptr) return gpuErrorStreamCaptureUnsupported;
  std::lock_guard<std::recursive_mutex> lock(queueMutex());
  if (stream->capture != nullptr) return gpuErrorInvalidValue;  // already capturing
  stream->capture = std::make_shared<std::vector<std::function<void()>>>();
  stream->capture_invalidated = false;
  t_capturing.push_back(stream);
  return gpuSuccess;
}

gpuError_t gpuStreamEndCapture(gpuStream_t stream, gpuGraph_t* graph) {
  if (stream == nullptr || graph == nullptr) return gpuErrorInvalidValue;
  std::lock_guard<std::recursive_mutex> lock(queueMutex());
  if (stream->capture == nullptr) return gpuErrorInvalidValue;  // not capturing
  t_capturing.erase(std::remove(t_capturing.begin(), t_capturing.end(), stream), t_capturing.end());
  if (stream->capture_invalidated) {
    stream->capture = nullptr;
    *graph = nullptr;
    return gpuErrorStreamCaptureInvalidated;
  }
  *graph = new GpuSimGraph{std::move(stream->capture)};
  stream->capture = nullptr;
  return gpuSuccess;
}

gpuError_t gpuGraphInstantiate(gpuGraphExec_t* exec, gpuGraph_t graph) {
  if (exec == nullptr || graph == nullptr) return gpuErrorInvalidValue;
  *exec = new GpuSimGraph{graph->work};
  return gpuSuccess;
}

gpuError_t gpuGraphLaunch(gpuGraphExec_t exec, gpuStream_t stream) {
  if (exec == nullptr) return gpuErrorInvalidValue;
  if (bp_gpu::sim::capturing(stream)) return gpuErrorStreamCaptureUnsupported;
  if (bp_gpu::sim::injectFault(bp_gpu::sim::FaultPoint::kLaunch)) return gpuErrorInjectedFault;
  for (const std::function<void()>& work : *exec->work) bp_gpu::sim::enqueue(stream, work);
  return gpuSuccess;
}

gpuError_t gpuGraphExecDestroy(gpuGraphExec_t exec) {
  delete exec;
  return gpuSuccess;
}

gpuError_t gpuGraphDestroy(gpuGraph_t graph) {
  delete graph;
  return gpuSuccess;
}

gpuError_t gpuStreamWaitEvent(gpuStream_t stream, gpuEvent_t event, unsigned) {
  if (event == nullptr) return gpuErrorInvalidValue;
  if (bp_gpu::sim::capturing(stream)) return gpuErrorStreamCaptureUnsupported;
  std::shared_ptr<StreamQueue> queue = event->queue;
  if (queue == nullptr) return gpuSuccess;  // nothing left to wait for
  const uint64_t position = event->position;
  bp_gpu::sim::enqueue(stream, [queue, position] { runUpTo(*queue, position); });
  return gpuSuccess;
}

gpuError_t gpuEventCreateWithFlags(gpuEvent_t* event, unsigned flags) {
  *event = new GpuSimEvent{flags, nullptr, 0, nullptr};
  return gpuSuccess;
}

gpuError_t gpuEventRecord(gpuEvent_t event, gpuStream_t stream) {
  if (event == nullptr) return gpuErrorInvalidValue;
  if (bp_gpu::sim::capturing(stream)) return gpuErrorStreamCaptureUnsupported;
  std::lock_guard<std::recursive_mutex> lock(queueMutex());
  const bool timed = (event->flags & gpuEventDisableTiming) == 0;
  if (timed) event->stamp = std::make_shared<GpuSimEvent::Stamp>();
  if (stream == nullptr || stream->queue == nullptr || stream->queue->completed == stream->queue->queued) {
    event->queue = nullptr;  // everything before it has run
    event->position = 0;
    if (timed) *event->stamp = {true, std::chrono::steady_clock::now()};
  } else {
    if (timed) {
      bp_gpu::sim::enqueue(stream, [stamp = event->stamp] { *stamp = {true, std::chrono::steady_clock::now()}; });
    }
    event->queue = stream->queue;
    event->position = stream->queue->queued;
  }
  return gpuSuccess;
}

gpuError_t gpuEventElapsedTime(float* ms, gpuEvent_t start, gpuEvent_t end) {
  if (ms == nullptr || start == nullptr || end == nullptr) return gpuErrorInvalidValue;
  std::lock_guard<std::recursive_mutex> lock(queueMutex());
  // As CUDA: an event without timing or never recorded is an invalid handle.
  if (start->stamp == nullptr || end->stamp == nullptr) return gpuErrorInvalidResourceHandle;
  if (!start->stamp->reached || !end->stamp->reached) return gpuErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(end->stamp->at - start->stamp->at).count();
  return gpuSuccess;
}

gpuError_t gpuEventSynchronize(gpuEvent_t event) {
  if (event == nullptr) return gpuErrorInvalidValue;
  std::lock_guard<std::recursive_mutex> lock(queueMutex());
  if (event->queue != nullptr) runUpTo(*event->queue, event->position);
  return gpuSuccess;
}

gpuError_t gpuEventQuery(gpuEvent_t event) {
  if (event == nullptr) return gpuErrorInvalidValue;
  std::lock_guard<std::recursive_mutex> lock(queueMutex());
  return event->queue == nullptr || event->queue->completed >= event->position ? gpuSuccess : gpuErrorNotReady;
}

gpuError_t gpuEventDestroy(gpuEvent_t event) {
  delete event;
  return gpuSuccess;
}

gpuError_t gpuDeviceSynchronize() {
  std::lock_guard<std::recursive_mutex> lock(queueMutex());
  if (!t_capturing.empty()) {
    for (gpuStream_t s : t_capturing) s->capture_invalidated = true;
    return gpuErrorStreamCaptureUnsupported;
  }
  // Running work queues none, so one pass empties every queue.
  for (GpuSimStream* s : deferredStreams()) runAll(*s->queue);
  return gpuSuccess;
}

gpuError_t gpuGetLastError() { return gpuSuccess; }

const char* gpuGetErrorName(gpuError_t error) {
  switch (error) {
    case gpuSuccess: return "gpusimSuccess";
    case gpuErrorInvalidValue: return "gpusimErrorInvalidValue";
    case gpuErrorMemoryAllocation: return "gpusimErrorMemoryAllocation";
    case gpuErrorInvalidConfiguration: return "gpusimErrorInvalidConfiguration";
    case gpuErrorNoDevice: return "gpusimErrorNoDevice";
    case gpuErrorInvalidDevice: return "gpusimErrorInvalidDevice";
    case gpuErrorInvalidResourceHandle: return "gpusimErrorInvalidResourceHandle";
    case gpuErrorNotReady: return "gpusimErrorNotReady";
    case gpuErrorStreamCaptureUnsupported: return "gpusimErrorStreamCaptureUnsupported";
    case gpuErrorStreamCaptureInvalidated: return "gpusimErrorStreamCaptureInvalidated";
    case gpuErrorInjectedFault: return "gpusimErrorInjectedFault";
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
    case gpuErrorInvalidResourceHandle: return "invalid resource handle";
    case gpuErrorNotReady: return "device not ready";
    case gpuErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case gpuErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case gpuErrorInjectedFault: return "fault injected by the test (gpusim::inject_fault)";
  }
  return "unknown error";
}
