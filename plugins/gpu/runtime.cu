// The GPU plugins' device API: the DeviceBackend the host sees (device
// count and properties, the caching allocator, copies, memset, synchronize)
// and the helpers kernels use (runtime.h). One source for CUDA, HIP and the
// simulator through gpu_port.h.
#include "runtime.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#if !defined(BP_GPU_SIM)
#include <cxxabi.h>

#include <cstdlib>
#endif

#include "device_errors.h"

namespace bp_gpu {

// ------------------------------------------------------------------- errors

void check(gpuError_t e, const char* what) {
  if (e == gpuSuccess) return;
  (void)gpuGetLastError();  // clear a non-sticky error so that the next call does not report it again
  bp::fail(e == gpuErrorMemoryAllocation ? BP_RESOURCE_EXHAUSTED : BP_INTERNAL,
           bp::detail::concat(what, ": ", gpuGetErrorName(e), ": ", gpuGetErrorString(e)));
}

namespace detail {
[[noreturn]] void launchFailed(gpuError_t error, const void* kernel, std::string_view signature) {
  std::string name;
#if defined(BP_GPU_CUDA) && CUDART_VERSION >= 12030
  const char* mangled = nullptr;
  if (cudaFuncGetName(&mangled, kernel) == cudaSuccess && mangled != nullptr) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    name = status == 0 && demangled ? demangled : mangled;
    std::free(demangled);
  }
#endif
  (void)kernel;
  if (name.empty()) name = signature;  // the kernel's type: better than nothing
  check(error, ("launching kernel " + name).c_str());
  bp::fail(BP_INTERNAL, "launching kernel " + name + " failed");  // unreachable: check throws
}
}  // namespace detail

// ------------------------------------------------------------------ devices

DeviceGuard::DeviceGuard(int device) : previous_(device) {
  check(gpuGetDevice(&previous_), BP_GPU_RUNTIME_PREFIX "GetDevice");
  if (previous_ != device) check(gpuSetDevice(device), BP_GPU_RUNTIME_PREFIX "SetDevice");
}

DeviceGuard::~DeviceGuard() {
  int now = previous_;
  if (gpuGetDevice(&now) == gpuSuccess && now != previous_) (void)gpuSetDevice(previous_);
}

namespace {

int32_t g_device_type = -1;

// What the runtime reports once: devices do not come and go while a process
// runs, and asking again costs a driver call on every tensor allocation.
struct Devices {
  int count = 0;
  std::string unavailable_reason;  // set when count is 0
  std::vector<DeviceLimits> limits;
  std::vector<gpuDeviceProp_t> properties;
};

const Devices& devices() {
  static const Devices d = [] {
    Devices r;
    const gpuError_t e = gpuGetDeviceCount(&r.count);
    if (e != gpuSuccess) {
      (void)gpuGetLastError();
      r.count = 0;
      r.unavailable_reason = bp::detail::concat(BP_GPU_RUNTIME_PREFIX "GetDeviceCount failed: ", gpuGetErrorName(e),
                                                ": ", gpuGetErrorString(e));
    } else if (r.count == 0) {
      r.unavailable_reason = BP_GPU_RUNTIME_PREFIX "GetDeviceCount reports no devices";
    }
    for (int i = 0; i < r.count; ++i) {
      gpuDeviceProp_t p;
      check(gpuGetDeviceProperties(&p, i), BP_GPU_RUNTIME_PREFIX "GetDeviceProperties");
      r.properties.push_back(p);
      r.limits.push_back(DeviceLimits{p.multiProcessorCount, p.maxThreadsPerBlock, p.sharedMemPerBlock});
    }
    return r;
  }();
  return d;
}

void checkDevice(int device) {
  const Devices& d = devices();
  if (device >= 0 && device < d.count) return;
  if (d.count == 0) {
    bp::fail(BP_INVALID_ARGUMENT,
             bp::detail::concat(BP_GPU_NAME ":", device, " does not exist: there are no " BP_GPU_NAME " devices (",
                                d.unavailable_reason, ")"));
  }
  bp::fail(BP_INVALID_ARGUMENT,
           bp::detail::concat(BP_GPU_NAME ":", device, " does not exist: there are ", d.count,
                              " " BP_GPU_NAME " devices (" BP_GPU_NAME ":0 to " BP_GPU_NAME ":", d.count - 1, ")"));
}

// ------------------------------------------------------ the caching allocator

// Note [Streams and the caching allocator]
// Every kernel and copy a host thread queues on a device goes to that
// thread's current stream of the device (currentStream()): the device's
// default stream, one non-blocking stream per device made on first use and
// shared by all threads, unless the thread made a stream of its own
// current (set_current_stream: per host thread and device, as in CUDA's
// c10::cuda::setCurrentCUDAStream). Device memory is expensive to get
// (cudaMalloc synchronizes the device) and tensors come and go at every op,
// so freed memory is cached, as PyTorch's CUDACachingAllocator does, in a
// simpler form:
// - Requests are rounded up to a size class: multiples of 512 bytes up to
//   1 MiB, then four classes per power of two (at most 25% waste). A cached
//   block serves only requests of its own class: blocks are never split or
//   merged, which keeps the bookkeeping to one map and makes reuse
//   predictable (the tests rely on it).
// - The rule for several streams: a block is never handed to work on one
//   stream while work queued on another stream may still use it.
//   * A block belongs to its allocation stream (the current stream of the
//     thread that allocated it). Reuse on that stream needs nothing: the
//     next user is queued behind every earlier user.
//   * Freed from another current stream (the tensor was used there: made
//     on the default stream, consumed on a side stream), the allocation
//     stream is made to wait for an event recorded on the freeing stream,
//     so the allocation stream's order covers both. (PyTorch asks for
//     record_stream instead; the wait can delay the allocation stream's
//     later work, never break it.)
//   * While any app stream exists, every free records an event on the
//     block's stream. A request from another stream takes, in this order: a
//     block of its own stream, an idle block (its stream was destroyed
//     after synchronizing), a block whose event has completed, and else the
//     most recently freed block, after making the requesting stream wait for
//     its event (the host never blocks; cudaMalloc would synchronize the
//     whole device). A block freed before any app stream existed has no
//     event: one is recorded on its stream then.
//   * Work queued on a third stream (neither the allocation nor the freeing
//     stream) is the application's to order: keep the tensor alive until
//     that stream is waited for, as with PyTorch without record_stream.
//   * Destroying an app stream synchronizes it first; its cached blocks
//     become idle and its live blocks move to the default stream.
//   With only default streams nothing of this costs a driver call. Events
//   come from a per-device pool, so the multi-stream path does not create
//   one per free once warm.
// - When the driver is out of memory, every cached block of the device is
//   returned to it (after a device synchronize) and the request retried once
//   (when anything was cached); then the error is BP_RESOURCE_EXHAUSTED
//   naming the device, the request, its block size, the device's free
//   bytes and the statistics. A failed request changes nothing else: the
//   statistics after it are those of the live tensors, plus the retries
//   and errors counted (gpusim_memory_exhaustion_test.cc).
// - Statistics (runtime.h MemoryStats) count in class sizes.
// - Bookkeeping allocates no host memory once warm: live blocks sit in an
//   open-addressing table keyed by pointer, cached ones in one list per
//   size class; both only grow, to the most blocks the device has held.
// One mutex per device guards its cache; driver calls are made under it,
// which serializes allocation misses but keeps every invariant local. A
// hit costs the uncontended lock and two table operations (tens of ns),
// against microseconds for the kernel launch that uses the block; kernel
// launches themselves read the current stream without it (a thread-local
// slot, then the default stream's atomic).
constexpr size_t kSmallLimit = size_t{1} << 20;
constexpr size_t kSmallGranule = 512;

size_t sizeClass(size_t n) {
  if (n <= kSmallLimit) return (n + kSmallGranule - 1) / kSmallGranule * kSmallGranule;
  // Four classes per power of two: round up to a multiple of 2^(floor(log2 n) - 2).
  int log2 = 63 - __builtin_clzll(static_cast<unsigned long long>(n - 1));
  const size_t step = size_t{1} << (log2 - 2);
  return (n + step - 1) / step * step;
}

struct Block {
  void* ptr;
  size_t size;         // its size class
  gpuStream_t stream;  // the stream it was allocated for; nullptr: idle, usable on any stream (cached only)
  gpuEvent_t freed;    // recorded on `stream` when it was freed, or nullptr
};

// The live blocks by pointer: linear probing, at most half full, deletion
// by shifting the rest of a probe run back (no tombstones), so lookups stay
// short however many blocks come and go. Only reserve() allocates.
class LiveBlocks {
 public:
  LiveBlocks() { rehash(64); }
  // Makes room for one more block; the only call that may throw.
  void reserve() {
    if (2 * (size_ + 1) > slots_.size()) rehash(2 * slots_.size());
  }
  void insert(const Block& b) {  // after reserve()
    place(b);
    ++size_;
  }
  template <class F>
  void forEach(F f) {  // f(Block&) for every live block
    for (Block& b : slots_)
      if (b.ptr != nullptr) f(b);
  }
  Block* find(void* ptr) {
    for (size_t i = home(ptr);; i = next(i)) {
      if (slots_[i].ptr == ptr) return &slots_[i];
      if (slots_[i].ptr == nullptr) return nullptr;
    }
  }
  // Removes the block find(ptr) found.
  void erase(Block* found) {
    size_t hole = static_cast<size_t>(found - slots_.data());
    // Move back each later entry of the probe run whose home is not in
    // (hole, j]: lookups for it would otherwise stop at the hole.
    for (size_t j = next(hole); slots_[j].ptr != nullptr; j = next(j)) {
      if (((j - home(slots_[j].ptr)) & mask_) >= ((j - hole) & mask_)) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = Block{};
    --size_;
  }

 private:
  size_t home(void* ptr) const {  // Fibonacci hashing: the product's top bits
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(ptr) * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  size_t next(size_t i) const { return (i + 1) & mask_; }
  void place(const Block& b) {
    size_t i = home(b.ptr);
    while (slots_[i].ptr != nullptr) i = next(i);
    slots_[i] = b;
  }
  void rehash(size_t capacity) {  // a power of two
    std::vector<Block> old(capacity);
    old.swap(slots_);
    mask_ = capacity - 1;
    shift_ = 64 - __builtin_ctzll(static_cast<unsigned long long>(capacity));
    for (const Block& b : old)
      if (b.ptr != nullptr) place(b);
  }
  std::vector<Block> slots_;  // ptr == nullptr marks a free slot
  size_t size_ = 0, mask_ = 0;
  int shift_ = 0;
};

// Appends to a cached list, reserving first so that a failure changes nothing.
void reserveOneMore(std::vector<Block>& list) {
  if (list.size() == list.capacity()) list.reserve(std::max<size_t>(8, 2 * list.capacity()));
}

// Pinned staging buffers for host-to-device copies (Note [Pinned staging]).
constexpr size_t kStagingSlotBytes = size_t{2} << 20;
constexpr int kStagingSlots = 4;

struct StagingSlot {
  void* host = nullptr;       // kStagingSlotBytes, pinned
  gpuEvent_t done = nullptr;  // recorded after the copy out of it was queued
};

// Note [Graph capture and memory]
// While a stream captures a graph (Note [Graphs] in plugin_api.h), the work
// it records will run again at every replay, reading and writing the same
// addresses. So the blocks allocated by the capturing thread on the device
// come from the graph's own pool: one driver allocation of pool_bytes made
// at capture_begin, carved by size class (a block freed during the capture
// is reused by a later allocation of the capture, which replays after the
// freed block's last use, in stream order); an allocation the pool cannot
// hold fails, naming the pool's size and the option that sets it. The
// pool's blocks never reach the caching allocator, and the pool is freed
// when the graph is destroyed and every tensor allocated from it is gone.
// A block from outside the pool freed during the capture is freed after
// it (its free would record an event on the capturing stream), and so is
// another graph's pool that its last tensor leaves during the capture (the
// release synchronizes the device, which the capturing thread may not). What cannot
// be captured is refused first (refuseWhileCapturing), so a failed call
// leaves the capture valid.
struct GraphPool {
  void* base = nullptr;
  size_t size = 0, used = 0;
  std::unordered_map<size_t, std::vector<void*>> free;  // reusable during the capture, by size class
  std::unordered_map<void*, size_t> live;               // block -> size class
  bool capturing = true;
  bool graph_alive = true;
};
// A captured graph: what graph_capture_end hands out as a BP_Graph*.
struct GpuGraph {
  gpuGraph_t graph;
  gpuGraphExec_t exec;
  std::shared_ptr<GraphPool> pool;
};
struct Capture {
  gpuStream_t stream;
  std::shared_ptr<GraphPool> pool;
  std::vector<void*> deferred_frees;  // blocks from outside the pool, freed after the capture
  // Pools of other graphs that became free during the capture: released
  // after it (their release synchronizes the device, which a capture forbids).
  std::vector<std::shared_ptr<GraphPool>> deferred_pools;
};

// Events kept for reuse per device (Note [Streams and the caching allocator]).
constexpr size_t kSpareEvents = 64;

struct DeviceState {
  DeviceState() { spare_events.reserve(kSpareEvents); }
  // The default stream, created on first use under `mutex` and never
  // changed after: kernel launches read it without the lock.
  std::atomic<gpuStream_t> stream{nullptr};
  std::mutex mutex;  // guards everything below
  // Streams and events made by create_stream / create_event and not yet
  // destroyed: handles from the host are checked against them.
  std::unordered_set<gpuStream_t> app_streams;
  std::unordered_set<gpuEvent_t> app_events;
  std::unordered_set<gpuEvent_t> timed_events;  // the app events made by createTimedEvent
  std::vector<gpuEvent_t> spare_events;         // capacity kSpareEvents, never grown
  LiveBlocks live;
  // Cached blocks per size class, the most recently freed last; a list
  // keeps its capacity when emptied.
  std::unordered_map<size_t, std::vector<Block>> cached;
  MemoryStats stats{};
  std::array<StagingSlot, kStagingSlots> staging;
  int next_slot = 0;
  std::mutex staging_mutex;  // guards staging and next_slot; taken without `mutex`
  // Note [Deferred device errors]: the slot as the host reads it (set once,
  // under `mutex`; read without it) and as kernels address it.
  std::atomic<DeviceErrorSlot*> error_slot{nullptr};
  DeviceErrorSlot* error_slot_device = nullptr;
  // Note [Graph capture and memory]: the capture in progress (at most one
  // per device) and the pools of graphs whose memory is still in use.
  std::unique_ptr<Capture> capture;  // null when none
  // capture->stream, or null: written under `mutex`, read without it by the
  // checks on every synchronisation (refuseOnCapturingStream).
  std::atomic<gpuStream_t> capturing_stream{nullptr};
  std::vector<std::shared_ptr<GraphPool>> pools;
  std::unordered_set<const void*> graphs;  // the live GpuGraph handles
};

// The current stream of this host thread per device, nullptr for the
// default stream. Devices past kMaxStreamDevices always use the default.
constexpr int kMaxStreamDevices = 64;
thread_local std::array<gpuStream_t, kMaxStreamDevices> t_current_stream{};

DeviceState& state(int device) {
  static std::vector<std::unique_ptr<DeviceState>>* states = [] {
    auto* v = new std::vector<std::unique_ptr<DeviceState>>;  // leaked: tensors may die after static destructors
    for (int i = 0; i < devices().count; ++i) v->push_back(std::make_unique<DeviceState>());
    return v;
  }();
  checkDevice(device);
  return *(*states)[device];
}

// Throws when `stream` of `device` is the one capturing a graph: `what`
// cannot be captured (Note [Graph capture and memory]). The capture stays
// valid. refuseIfCapturing: for this thread's current stream.
void refuseOnCapturingStream(int device, gpuStream_t stream, const char* what) {
  // No lock (this runs at every synchronisation): the answer is as current
  // as a locked read's, which a capture begun by another thread just after
  // would outdate too.
  if (state(device).capturing_stream.load(std::memory_order_acquire) != stream) return;
  bp::fail(BP_FAILED_PRECONDITION,
           bp::detail::concat(BP_GPU_NAME ":", device, ": ", what,
                              " cannot be captured in a graph (the stream is capturing a graph); do it before or "
                              "after the capture (a graph replays device work only: kernels, device-to-device "
                              "copies, fills)"));
}
void refuseIfCapturing(int device, const char* what) { refuseOnCapturingStream(device, currentStream(device), what); }

gpuStream_t streamLocked(DeviceState& s, int device) {
  gpuStream_t stream = s.stream.load(std::memory_order_relaxed);  // only written under s.mutex
  if (stream == nullptr) {
    DeviceGuard guard(device);
    check(gpuStreamCreateWithFlags(&stream, gpuStreamNonBlocking), BP_GPU_RUNTIME_PREFIX "StreamCreateWithFlags");
    s.stream.store(stream, std::memory_order_release);
  }
  return stream;
}

// The device's default stream; no lock once it exists (every launch).
gpuStream_t defaultStream(DeviceState& s, int device) {
  if (gpuStream_t stream = s.stream.load(std::memory_order_acquire)) return stream;
  std::lock_guard<std::mutex> lock(s.mutex);
  return streamLocked(s, device);
}

// The flags of streams made for the app: on the simulator they defer their
// work (Note [Deferred streams in the simulator], sim/sim_runtime.h), so a
// missing synchronisation shows.
#if defined(BP_GPU_SIM)
constexpr unsigned kAppStreamFlags = gpuStreamNonBlocking | gpusimStreamDeferred;
#else
constexpr unsigned kAppStreamFlags = gpuStreamNonBlocking;
#endif

// An event from the pool, or a new one. The caller holds s.mutex and is on `device`.
gpuEvent_t takeEventLocked(DeviceState& s) {
  if (!s.spare_events.empty()) {
    const gpuEvent_t e = s.spare_events.back();
    s.spare_events.pop_back();
    return e;
  }
  gpuEvent_t e = nullptr;
  check(gpuEventCreateWithFlags(&e, gpuEventDisableTiming), BP_GPU_RUNTIME_PREFIX "EventCreateWithFlags");
  return e;
}

// Back to the pool (never grown: a full pool destroys the event). A
// recorded event may be reused at once: waits already queued on it keep
// the point they were queued for, as in CUDA.
void giveEventLocked(DeviceState& s, gpuEvent_t e) {
  if (e == nullptr) return;
  if (s.spare_events.size() < s.spare_events.capacity()) {
    s.spare_events.push_back(e);
  } else {
    (void)gpuEventDestroy(e);
  }
}

// A new pooled event recorded on `stream` now.
gpuEvent_t recordLocked(DeviceState& s, gpuStream_t stream) {
  const gpuEvent_t e = takeEventLocked(s);
  const gpuError_t err = gpuEventRecord(e, stream);
  if (err != gpuSuccess) giveEventLocked(s, e);
  check(err, BP_GPU_RUNTIME_PREFIX "EventRecord");
  return e;
}

// Returns every cached block of the device to the driver; whether there was any.
bool freeCachedLocked(DeviceState& s, int device) {
  bool any = false;
  for (const auto& [size, blocks] : s.cached) any = any || !blocks.empty();
  if (!any) return false;
  DeviceGuard guard(device);
  check(gpuDeviceSynchronize(), BP_GPU_RUNTIME_PREFIX "DeviceSynchronize");
  for (auto& [size, blocks] : s.cached) {
    while (!blocks.empty()) {  // one at a time, so that a failing gpuFree leaves the rest accounted for
      const Block block = blocks.back();
      blocks.pop_back();
      giveEventLocked(s, block.freed);
      s.stats.reserved_bytes -= static_cast<int64_t>(size);
      check(gpuFree(block.ptr), BP_GPU_RUNTIME_PREFIX "Free");
    }
  }
  return true;
}

// A cached block of class `size` that work on `stream` may use now, or
// nullopt when none is cached (the order of Note [Streams and the caching
// allocator]). The caller holds s.mutex and is on the device.
std::optional<Block> takeCachedLocked(DeviceState& s, int device, size_t size, gpuStream_t stream) {
  const auto it = s.cached.find(size);
  if (it == s.cached.end() || it->second.empty()) return std::nullopt;
  std::vector<Block>& blocks = it->second;
  auto takeAt = [&](size_t i) {
    const Block b = blocks[i];
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));  // keeps the order; no allocation
    return b;
  };
  for (size_t i = blocks.size(); i-- > 0;)
    if (blocks[i].stream == stream || blocks[i].stream == nullptr) return takeAt(i);
  DeviceGuard guard(device);  // only now: the common path makes no driver call
  for (size_t i = blocks.size(); i-- > 0;) {
    if (blocks[i].freed != nullptr && gpuEventQuery(blocks[i].freed) == gpuSuccess) return takeAt(i);
  }
  (void)gpuGetLastError();  // a pending event answers "not ready", which some runtimes also keep as last error
  // The most recently freed block of another stream: `stream` waits for
  // the work queued on the block's stream before its free.
  Block& b = blocks.back();
  if (b.freed == nullptr) b.freed = recordLocked(s, b.stream);
  check(gpuStreamWaitEvent(stream, b.freed, 0), BP_GPU_RUNTIME_PREFIX "StreamWaitEvent");
  return takeAt(blocks.size() - 1);
}

// A block of `size` (a size class) from the capturing graph's pool (Note
// [Graph capture and memory]).
void* allocateFromPoolLocked(GraphPool& pool, int device, size_t size) {
  std::vector<void*>& reusable = pool.free[size];
  void* p = nullptr;
  if (!reusable.empty()) {
    p = reusable.back();
    reusable.pop_back();
  } else {
    if (size > pool.size - pool.used) {
      bp::fail(BP_RESOURCE_EXHAUSTED,
               bp::detail::concat("graph capture on " BP_GPU_NAME ":", device, ": an allocation of ", size,
                                  " bytes outgrows the graph's memory pool (", pool.size, " bytes, ", pool.used,
                                  " in use by the captured work); capture with a larger pool "
                                  "(GraphOptions::pool_bytes in C++, pool_bytes= in Python)"));
    }
    p = static_cast<char*>(pool.base) + pool.used;
    pool.used += size;
  }
  pool.live.emplace(p, size);
  return p;
}

// Frees `pool` once its graph is gone and no block of it is left. Under
// the device's mutex.
void releasePoolIfUnusedLocked(DeviceState& s, int device, const std::shared_ptr<GraphPool>& pool) {
  if (pool->graph_alive || !pool->live.empty()) return;
  if (s.capture != nullptr) {  // after the capture (Capture::deferred_pools)
    s.capture->deferred_pools.push_back(pool);
    return;
  }
  // A replay may still be queued: its work ends before the pool goes (as
  // cudaFree waits; the simulator's deferred streams would not).
  DeviceGuard guard(device);
  (void)gpuDeviceSynchronize();
  (void)gpuFree(pool->base);
  s.stats.reserved_bytes -= static_cast<int64_t>(pool->size);
  s.pools.erase(std::find(s.pools.begin(), s.pools.end(), pool));
}

// Returns a pool block: reusable while the graph is being captured, else
// the pool goes with its last block once the graph is gone.
void freeToPoolLocked(DeviceState& s, int device, const std::shared_ptr<GraphPool>& pool, void* ptr) {
  const auto it = pool->live.find(ptr);
  const size_t size = it->second;
  pool->live.erase(it);
  if (pool->capturing) {
    pool->free[size].push_back(ptr);
    return;
  }
  releasePoolIfUnusedLocked(s, device, pool);
}

void* allocateBlock(int device, size_t nbytes) {
  DeviceState& s = state(device);
  if (nbytes > (size_t{1} << 62)) {
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      ++s.stats.out_of_memory_errors;
    }
    bp::fail(BP_RESOURCE_EXHAUSTED, bp::detail::concat("out of memory on " BP_GPU_NAME ":", device, ": ", nbytes,
                                                       " bytes requested, more than any device has"));
  }
  const size_t size = sizeClass(nbytes);
  const gpuStream_t stream = currentStream(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.capture != nullptr && s.capture->stream == stream)
    return allocateFromPoolLocked(*s.capture->pool, device, size);
  s.live.reserve();  // before a block is taken, so that recording it cannot fail
  Block block;
  if (std::optional<Block> cached = takeCachedLocked(s, device, size, stream)) {
    block = *cached;
    giveEventLocked(s, block.freed);
    block.freed = nullptr;
    block.stream = stream;
    ++s.stats.cache_hits;
  } else {
    DeviceGuard guard(device);
    void* p = nullptr;
    gpuError_t e = gpuMalloc(&p, size);
    bool retried = false;
    if (e == gpuErrorMemoryAllocation) {
      (void)gpuGetLastError();
      if (freeCachedLocked(s, device)) {  // nothing cached: the answer would be the same
        retried = true;
        ++s.stats.allocation_retries;
        e = gpuMalloc(&p, size);
      }
    }
    if (e == gpuErrorMemoryAllocation) {
      (void)gpuGetLastError();
      ++s.stats.out_of_memory_errors;
      size_t free_bytes = 0, total_bytes = 0;
      (void)gpuMemGetInfo(&free_bytes, &total_bytes);
      bp::fail(BP_RESOURCE_EXHAUSTED,
               bp::detail::concat("out of memory on " BP_GPU_NAME ":", device, ": tried to allocate ", nbytes,
                                  " bytes (a block of ", size, "); the device has ", total_bytes, " bytes, ",
                                  free_bytes, " free; ", s.stats.allocated_bytes,
                                  " bytes are allocated by live tensors of this process, ",
                                  s.stats.reserved_bytes - s.stats.allocated_bytes, " cached",
                                  retried ? " (the cache was emptied and the request retried)" : "",
                                  "; free tensors or use smaller ones"));
    }
    check(e, BP_GPU_RUNTIME_PREFIX "Malloc");
    block = Block{p, size, stream, nullptr};
    ++s.stats.cache_misses;
    s.stats.reserved_bytes += static_cast<int64_t>(size);
  }
  ++s.stats.allocations;
  s.stats.allocated_bytes += static_cast<int64_t>(size);
  s.stats.peak_allocated_bytes = std::max(s.stats.peak_allocated_bytes, s.stats.allocated_bytes);
  s.live.insert(block);
  return block.ptr;
}

void freeBlock(int device, void* ptr) {
  DeviceState& s = state(device);
  const gpuStream_t current = currentStream(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  Block* live = s.live.find(ptr);
  if (live == nullptr) {
    for (const std::shared_ptr<GraphPool>& pool : s.pools) {
      if (pool->live.count(ptr) != 0) {
        freeToPoolLocked(s, device, pool, ptr);
        return;
      }
    }
    bp::fail(BP_INVALID_ARGUMENT,
             bp::detail::concat(BP_GPU_NAME ":", device, ": deallocate of a pointer this allocator did not return"));
  }
  if (s.capture != nullptr) {  // Note [Graph capture and memory]: after the capture
    s.capture->deferred_frees.push_back(ptr);
    return;
  }
  // What can fail comes first, while the block is still live.
  std::vector<Block>& list = s.cached[live->size];
  reserveOneMore(list);
  gpuEvent_t freed = nullptr;
  if (!s.app_streams.empty()) {  // Note [Streams and the caching allocator]
    DeviceGuard guard(device);
    if (current != live->stream) {
      const gpuEvent_t used = recordLocked(s, current);
      const gpuError_t e = gpuStreamWaitEvent(live->stream, used, 0);
      giveEventLocked(s, used);
      check(e, BP_GPU_RUNTIME_PREFIX "StreamWaitEvent");
    }
    freed = recordLocked(s, live->stream);
  }
  Block b = *live;
  s.live.erase(live);
  b.freed = freed;
  s.stats.allocated_bytes -= static_cast<int64_t>(b.size);
  list.push_back(b);
}

// ------------------------------------------------------------------- copies

// Note [Pinned staging]
// A host-to-device copy from pageable memory cannot be asynchronous: the
// driver may read the host buffer after the call returns. The caller may
// reuse its buffer at once, so each copy goes through a small ring of
// pinned buffers: the bytes are copied into a free slot on the host, the
// slot is queued for copying on the current stream, and an event marks when
// the slot may be written again. Large copies stream through the ring in
// slot-sized pieces; the host waits only when it laps the ring.
void copyHostToDeviceStaged(int device, void* dst, const void* src, size_t n) {
  refuseIfCapturing(device, "a copy from the host (the graph would read the host buffer again at every replay)");
  DeviceState& s = state(device);
  gpuStream_t stream = currentStream(device);
  DeviceGuard guard(device);
  std::lock_guard<std::mutex> lock(s.staging_mutex);
  size_t done = 0;
  while (done < n) {
    StagingSlot& slot = s.staging[s.next_slot];
    s.next_slot = (s.next_slot + 1) % kStagingSlots;
    if (slot.host == nullptr) {
      check(gpuHostAlloc(&slot.host, kStagingSlotBytes), BP_GPU_RUNTIME_PREFIX "HostAlloc");
      check(gpuEventCreateWithFlags(&slot.done, gpuEventDisableTiming), BP_GPU_RUNTIME_PREFIX "EventCreateWithFlags");
    } else {
      check(gpuEventSynchronize(slot.done), BP_GPU_RUNTIME_PREFIX "EventSynchronize");
    }
    const size_t piece = std::min(kStagingSlotBytes, n - done);
    std::memcpy(slot.host, static_cast<const char*>(src) + done, piece);
    check(gpuMemcpyAsync(static_cast<char*>(dst) + done, slot.host, piece, gpuMemcpyHostToDevice, stream),
          BP_GPU_RUNTIME_PREFIX "MemcpyAsync (host to device)");
    check(gpuEventRecord(slot.done, stream), BP_GPU_RUNTIME_PREFIX "EventRecord");
    done += piece;
  }
}

class GpuBackend final : public bp::DeviceBackend {
 public:
  int deviceCount() override { return devices().count; }
  const char* unavailableReason() override {
    return devices().count == 0 ? devices().unavailable_reason.c_str() : nullptr;
  }
  int32_t dlpackDeviceType() override {
#if defined(BP_GPU_CUDA)
    return 2;  // kDLCUDA
#elif defined(BP_GPU_HIP)
    return 10;  // kDLROCM
#else
    return 0;  // simulator addresses mean nothing to other libraries
#endif
  }
  void properties(int device, BP_DeviceProperties& out) override {
    checkDevice(device);
    const gpuDeviceProp_t& p = devices().properties[device];
    const size_t n = std::min(strnlen(p.name, sizeof p.name), sizeof out.name - 1);  // the name may be longer
    std::memcpy(out.name, p.name, n);
    out.name[n] = '\0';
    out.total_memory = p.totalGlobalMem;
    out.compute_major = p.major;
    out.compute_minor = p.minor;
    out.multiprocessor_count = p.multiProcessorCount;
  }
  void* allocate(int device, size_t nbytes) override { return allocateBlock(device, nbytes); }
  void deallocate(int device, void* p) override { freeBlock(device, p); }
  void copyHostToDevice(int device, void* dst, const void* src, size_t n) override {
    copyHostToDeviceStaged(device, dst, src, n);
  }
  void copyDeviceToHost(int device, void* dst, const void* src, size_t n) override {
    refuseIfCapturing(device, "a copy to the host");
    gpuStream_t stream = bp_gpu::currentStream(device);
    DeviceGuard guard(device);
    check(gpuMemcpyAsync(dst, src, n, gpuMemcpyDeviceToHost, stream),
          BP_GPU_RUNTIME_PREFIX "MemcpyAsync (device to host)");
    check(gpuStreamSynchronize(stream), BP_GPU_RUNTIME_PREFIX "StreamSynchronize");
    reportDeviceErrors(device);
  }
  void copyDeviceToDevice(int dst_device, void* dst, int src_device, const void* src, size_t n) override {
    gpuStream_t stream = bp_gpu::currentStream(dst_device);
    DeviceGuard guard(dst_device);
    if (dst_device == src_device) {
      check(gpuMemcpyAsync(dst, src, n, gpuMemcpyDeviceToDevice, stream),
            BP_GPU_RUNTIME_PREFIX "MemcpyAsync (device to device)");
      return;
    }
    // Across devices: the source's queued work must finish first, and the
    // source may be freed (and reused on its own stream) once this returns,
    // so the copy is complete before returning.
    synchronize(src_device);
    check(gpuMemcpyPeerAsync(dst, dst_device, src, src_device, n, stream), BP_GPU_RUNTIME_PREFIX "MemcpyPeerAsync");
    check(gpuStreamSynchronize(stream), BP_GPU_RUNTIME_PREFIX "StreamSynchronize");
    reportDeviceErrors(dst_device);
  }
  void memset(int device, void* dst, uint8_t value, size_t n) override {
    gpuStream_t stream = bp_gpu::currentStream(device);
    DeviceGuard guard(device);
    check(gpuMemsetAsync(dst, value, n, stream), BP_GPU_RUNTIME_PREFIX "MemsetAsync");
  }
  void synchronize(int device) override { bp_gpu::synchronize(device); }

  // Streams and events (Note [Streams and the caching allocator]). A null
  // BP_Stream* is the device's default stream; other handles are the
  // gpuStream_t / gpuEvent_t themselves, checked against the device's live
  // ones, so a stale or foreign handle is an error, not a crash.
  bool hasStreams() override { return true; }
  bool hasEvents() override { return true; }

  BP_Stream* createStream(int device) override {
    DeviceState& s = state(device);
    DeviceGuard guard(device);
    gpuStream_t stream = nullptr;
    check(gpuStreamCreateWithFlags(&stream, kAppStreamFlags), BP_GPU_RUNTIME_PREFIX "StreamCreateWithFlags");
    try {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.app_streams.insert(stream);
    } catch (...) {
      (void)gpuStreamDestroy(stream);
      throw;
    }
    return reinterpret_cast<BP_Stream*>(stream);
  }

  void destroyStream(int device, BP_Stream* handle) override {
    if (handle == nullptr) bp::fail(BP_INVALID_ARGUMENT, "stream_destroy: the default stream cannot be destroyed");
    const gpuStream_t stream = appStream(device, handle, "stream_destroy");
    DeviceState& s = state(device);
    const gpuStream_t fallback = defaultStream(s, device);
    DeviceGuard guard(device);
    // Its blocks become usable on any stream only once its work is done.
    check(gpuStreamSynchronize(stream), BP_GPU_RUNTIME_PREFIX "StreamSynchronize");
    if (device < kMaxStreamDevices && t_current_stream[device] == stream) t_current_stream[device] = nullptr;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.app_streams.erase(stream);
      for (auto& [size, blocks] : s.cached) {
        for (Block& b : blocks) {
          if (b.stream != stream) continue;
          giveEventLocked(s, b.freed);
          b.freed = nullptr;
          b.stream = nullptr;  // idle
        }
      }
      s.live.forEach([&](Block& b) {
        if (b.stream == stream) b.stream = fallback;
      });
    }
    check(gpuStreamDestroy(stream), BP_GPU_RUNTIME_PREFIX "StreamDestroy");
  }

  void synchronizeStream(int device, BP_Stream* handle) override {
    const gpuStream_t stream = streamOf(device, handle, "stream_synchronize");
    refuseOnCapturingStream(device, stream, "synchronizing the stream");
    DeviceGuard guard(device);
    check(gpuStreamSynchronize(stream), BP_GPU_RUNTIME_PREFIX "StreamSynchronize");
    reportDeviceErrors(device);
  }

  BP_Stream* currentStream(int device) override {
    (void)state(device);  // checks the device
    return device < kMaxStreamDevices ? reinterpret_cast<BP_Stream*>(t_current_stream[device]) : nullptr;
  }

  void setCurrentStream(int device, BP_Stream* handle) override {
    (void)state(device);
    const gpuStream_t stream = handle == nullptr ? nullptr : appStream(device, handle, "set_current_stream");
    if (device >= kMaxStreamDevices) {
      if (stream != nullptr) {
        bp::fail(BP_UNIMPLEMENTED, bp::detail::concat("set_current_stream: " BP_GPU_NAME ":", device,
                                                      " uses its default stream only (app streams are supported "
                                                      "on the first ",
                                                      kMaxStreamDevices, " devices)"));
      }
      return;
    }
    t_current_stream[device] = stream;
  }

  BP_Event* createEvent(int device) override { return makeEvent(device, /*timed=*/false); }

  void destroyEvent(int device, BP_Event* handle) override {
    const gpuEvent_t event = appEvent(device, handle, "event_destroy");
    DeviceState& s = state(device);
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.app_events.erase(event);
      s.timed_events.erase(event);
    }
    DeviceGuard guard(device);
    check(gpuEventDestroy(event), BP_GPU_RUNTIME_PREFIX "EventDestroy");
  }

  void recordEvent(int device, BP_Event* event, BP_Stream* stream) override {
    const gpuEvent_t e = appEvent(device, event, "event_record");
    const gpuStream_t st = streamOf(device, stream, "event_record");
    refuseOnCapturingStream(device, st, "recording an event");
    DeviceGuard guard(device);
    check(gpuEventRecord(e, st), BP_GPU_RUNTIME_PREFIX "EventRecord");
  }

  void waitEvent(int device, BP_Event* event, BP_Stream* stream) override {
    const gpuEvent_t e = appEvent(device, event, "event_wait");
    const gpuStream_t st = streamOf(device, stream, "event_wait");
    refuseOnCapturingStream(device, st, "waiting for an event");
    DeviceGuard guard(device);
    check(gpuStreamWaitEvent(st, e, 0), BP_GPU_RUNTIME_PREFIX "StreamWaitEvent");
  }

  // An event of one device orders a stream of another, as the runtime's
  // StreamWaitEvent allows (the simulator has one device: never called).
  bool hasEventWaitDevice() override { return true; }
  void waitEventOnDevice(int event_device, BP_Event* event, int stream_device, BP_Stream* stream) override {
    const gpuEvent_t e = appEvent(event_device, event, "event_wait_device");
    const gpuStream_t st = streamOf(stream_device, stream, "event_wait_device");
    DeviceGuard guard(stream_device);
    check(gpuStreamWaitEvent(st, e, 0), BP_GPU_RUNTIME_PREFIX "StreamWaitEvent");
  }

  // Timed events, for the profiler's stream tracks (ABI 1.12). Events for
  // ordering stay without timing, which makes them cheaper to record.
  bool hasEventTiming() override { return true; }
  BP_Event* createTimedEvent(int device) override { return makeEvent(device, /*timed=*/true); }
  double eventElapsedMs(int device, BP_Event* start, BP_Event* end) override {
    const gpuEvent_t a = timedEvent(device, start);
    const gpuEvent_t b = timedEvent(device, end);
    DeviceGuard guard(device);
    float ms = 0;
    const gpuError_t r = gpuEventElapsedTime(&ms, a, b);
    if (r == gpuErrorNotReady) {
      (void)gpuGetLastError();
      bp::fail(BP_FAILED_PRECONDITION, "event_elapsed_ms: an event has not completed yet (synchronize both first)");
    }
    if (r == gpuErrorInvalidResourceHandle) {
      (void)gpuGetLastError();
      bp::fail(BP_FAILED_PRECONDITION, "event_elapsed_ms: an event was never recorded (record both first)");
    }
    check(r, BP_GPU_RUNTIME_PREFIX "EventElapsedTime");
    return ms;
  }

  void synchronizeEvent(int device, BP_Event* event) override {
    const gpuEvent_t e = appEvent(device, event, "event_synchronize");
    refuseIfCapturing(device, "synchronizing an event");
    DeviceGuard guard(device);
    check(gpuEventSynchronize(e), BP_GPU_RUNTIME_PREFIX "EventSynchronize");
    reportDeviceErrors(device);
  }

  bool queryEvent(int device, BP_Event* event) override {
    const gpuEvent_t e = appEvent(device, event, "event_query");
    DeviceGuard guard(device);
    const gpuError_t r = gpuEventQuery(e);
    if (r == gpuErrorNotReady) {
      (void)gpuGetLastError();
      return false;
    }
    check(r, BP_GPU_RUNTIME_PREFIX "EventQuery");
    reportDeviceErrors(device);
    return true;
  }

  // Graphs (Note [Graphs] in plugin_api.h, Note [Graph capture and memory]).
  bool hasGraphs() override { return true; }

  void beginGraphCapture(int device, BP_Stream* handle, size_t pool_bytes) override {
    const gpuStream_t stream = streamOf(device, handle, "graph_capture_begin");
    BP_PLUGIN_CHECK(pool_bytes > 0, "graph_capture_begin: the graph's memory pool must be larger than 0 bytes");
    DeviceState& s = state(device);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.capture != nullptr) {
      bp::fail(BP_FAILED_PRECONDITION,
               bp::detail::concat("graph_capture_begin: " BP_GPU_NAME ":", device,
                                  " is already capturing a graph; end that capture first (one per device at a time)"));
    }
    auto pool = std::make_shared<GraphPool>();
    pool->size = sizeClass(pool_bytes);
    DeviceGuard guard(device);
    gpuError_t e = gpuMalloc(&pool->base, pool->size);
    if (e == gpuErrorMemoryAllocation) {
      (void)gpuGetLastError();
      bp::fail(BP_RESOURCE_EXHAUSTED,
               bp::detail::concat("graph_capture_begin: out of memory on " BP_GPU_NAME ":", device,
                                  " for a graph memory pool of ", pool->size, " bytes; capture with a smaller pool"));
    }
    check(e, BP_GPU_RUNTIME_PREFIX "Malloc (graph pool)");
    e = gpuStreamBeginCapture(stream);
    if (e != gpuSuccess) {
      (void)gpuFree(pool->base);
      check(e, BP_GPU_RUNTIME_PREFIX "StreamBeginCapture");
    }
    s.stats.reserved_bytes += static_cast<int64_t>(pool->size);
    s.pools.push_back(pool);
    s.capture = std::make_unique<Capture>(Capture{stream, std::move(pool), {}, {}});
    s.capturing_stream.store(stream, std::memory_order_release);
  }

  BP_Graph* endGraphCapture(int device, BP_Stream* handle) override {
    const gpuStream_t stream = streamOf(device, handle, "graph_capture_end");
    DeviceState& s = state(device);
    std::unique_ptr<Capture> capture;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      if (s.capture == nullptr || s.capture->stream != stream) {
        bp::fail(BP_FAILED_PRECONDITION,
                 bp::detail::concat("graph_capture_end: this stream of " BP_GPU_NAME ":", device,
                                    " is not capturing a graph (graph_capture_begin first)"));
      }
      capture = std::move(s.capture);
      s.capturing_stream.store(nullptr, std::memory_order_release);
      capture->pool->capturing = false;
    }
    auto graph = std::make_unique<GpuGraph>(GpuGraph{nullptr, nullptr, capture->pool});
    DeviceGuard guard(device);
    const gpuError_t ended = gpuStreamEndCapture(stream, &graph->graph);
    // The frees the capture put off, now that the stream runs its work again.
    for (void* p : capture->deferred_frees) freeBlock(device, p);
    for (const std::shared_ptr<GraphPool>& pool : capture->deferred_pools) {
      std::lock_guard<std::mutex> lock(s.mutex);
      releasePoolIfUnusedLocked(s, device, pool);
    }
    gpuError_t e = ended == gpuSuccess ? gpuGraphInstantiate(&graph->exec, graph->graph) : ended;
    if (e != gpuSuccess) {
      if (graph->graph != nullptr) (void)gpuGraphDestroy(graph->graph);
      releaseGraphPool(device, graph->pool);
      check(e,
            ended == gpuSuccess ? BP_GPU_RUNTIME_PREFIX "GraphInstantiate" : BP_GPU_RUNTIME_PREFIX "StreamEndCapture");
    }
    std::lock_guard<std::mutex> lock(s.mutex);
    s.graphs.insert(graph.get());
    return reinterpret_cast<BP_Graph*>(graph.release());
  }

  void replayGraph(int device, BP_Graph* handle, BP_Stream* stream_handle) override {
    GpuGraph& graph = liveGraph(device, handle, "graph_replay");
    const gpuStream_t stream = streamOf(device, stream_handle, "graph_replay");
    refuseOnCapturingStream(device, stream, "replaying a graph");
    g_activity.graph_launches.fetch_add(1, std::memory_order_relaxed);  // Note [Launch counters]
    DeviceGuard guard(device);
    check(gpuGraphLaunch(graph.exec, stream), BP_GPU_RUNTIME_PREFIX "GraphLaunch");
  }

  void destroyGraph(int device, BP_Graph* handle) override {
    GpuGraph* graph = &liveGraph(device, handle, "graph_destroy");
    {
      DeviceState& s = state(device);
      std::lock_guard<std::mutex> lock(s.mutex);
      s.graphs.erase(graph);
    }
    DeviceGuard guard(device);
    (void)gpuGraphExecDestroy(graph->exec);
    (void)gpuGraphDestroy(graph->graph);
    releaseGraphPool(device, graph->pool);
    delete graph;
  }

 private:
  // A graph of `device` made by endGraphCapture and not destroyed.
  static GpuGraph& liveGraph(int device, BP_Graph* handle, const char* what) {
    DeviceState& s = state(device);
    std::lock_guard<std::mutex> lock(s.mutex);
    BP_PLUGIN_CHECK(s.graphs.count(handle) != 0, what, ": not a live graph of " BP_GPU_NAME ":", device,
                    " (destroyed already, or made on another device)");
    return *reinterpret_cast<GpuGraph*>(handle);
  }
  // The graph no longer needs its pool: freed now if no tensor holds a block of it.
  static void releaseGraphPool(int device, const std::shared_ptr<GraphPool>& pool) {
    DeviceState& s = state(device);
    std::lock_guard<std::mutex> lock(s.mutex);
    pool->graph_alive = false;
    releasePoolIfUnusedLocked(s, device, pool);
  }

  // An app stream of `device` (not the default one); fails naming `what`.
  static gpuStream_t appStream(int device, BP_Stream* handle, const char* what) {
    DeviceState& s = state(device);
    const auto stream = reinterpret_cast<gpuStream_t>(handle);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.app_streams.count(stream) == 0) {
      bp::fail(
          BP_INVALID_ARGUMENT,
          bp::detail::concat(what, ": ", static_cast<const void*>(handle), " is not a live stream of " BP_GPU_NAME ":",
                             device, " (make one with stream_create on this device; destroyed ones are gone)"));
    }
    return stream;
  }
  // The stream a handle names: the default stream for nullptr.
  static gpuStream_t streamOf(int device, BP_Stream* handle, const char* what) {
    return handle == nullptr ? defaultStream(state(device), device) : appStream(device, handle, what);
  }
  static BP_Event* makeEvent(int device, bool timed) {
    DeviceState& s = state(device);
    DeviceGuard guard(device);
    gpuEvent_t event = nullptr;
    check(gpuEventCreateWithFlags(&event, timed ? gpuEventDefault : gpuEventDisableTiming),
          BP_GPU_RUNTIME_PREFIX "EventCreateWithFlags");
    try {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.app_events.insert(event);
      if (timed) s.timed_events.insert(event);
    } catch (...) {
      (void)gpuEventDestroy(event);
      throw;
    }
    return reinterpret_cast<BP_Event*>(event);
  }
  // An event made by createTimedEvent; fails naming what else it is.
  static gpuEvent_t timedEvent(int device, BP_Event* handle) {
    const gpuEvent_t event = appEvent(device, handle, "event_elapsed_ms");
    DeviceState& s = state(device);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.timed_events.count(event) == 0) {
      bp::fail(BP_INVALID_ARGUMENT, bp::detail::concat("event_elapsed_ms: ", static_cast<const void*>(handle),
                                                       " was made by event_create, which takes no time (make it "
                                                       "with event_create_timed on " BP_GPU_NAME ":",
                                                       device, ")"));
    }
    return event;
  }
  static gpuEvent_t appEvent(int device, BP_Event* handle, const char* what) {
    DeviceState& s = state(device);
    const auto event = reinterpret_cast<gpuEvent_t>(handle);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.app_events.count(event) == 0) {
      bp::fail(BP_INVALID_ARGUMENT, bp::detail::concat(what, ": ", static_cast<const void*>(handle),
                                                       " is not a live event of " BP_GPU_NAME ":", device,
                                                       " (make one with event_create on this device)"));
    }
    return event;
  }
};

}  // namespace

gpuStream_t currentStream(int device) {
  DeviceState& s = state(device);
  if (device < kMaxStreamDevices) {
    if (gpuStream_t stream = t_current_stream[device]) return stream;  // an app stream
  }
  return defaultStream(s, device);
}

const DeviceLimits& limits(int device) {
  checkDevice(device);
  return devices().limits[device];
}

int32_t deviceType() { return g_device_type; }
void setDeviceType(int32_t type) { g_device_type = type; }

MemoryStats memoryStats(int device) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.stats;
}

void resetPeakMemoryStats(int device) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stats.peak_allocated_bytes = s.stats.allocated_bytes;
}

void emptyCache(int device) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  freeCachedLocked(s, device);
}

void synchronize(int device) {
  checkDevice(device);
  refuseIfCapturing(device, "synchronizing the device");
  DeviceGuard guard(device);
  check(gpuDeviceSynchronize(), BP_GPU_RUNTIME_PREFIX "DeviceSynchronize");
  reportDeviceErrors(device);
}

void refuseWhileCapturing(int device, const char* what) { refuseIfCapturing(device, what); }

// Note [Deferred device errors].
DeviceErrorSlot* deviceErrorSlot(int device) {
  DeviceState& s = state(device);
  if (s.error_slot.load(std::memory_order_acquire) != nullptr) return s.error_slot_device;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.error_slot.load(std::memory_order_relaxed) == nullptr) {
    DeviceGuard guard(device);
    void* host = nullptr;
    check(gpuHostAllocMapped(&host, sizeof(DeviceErrorSlot)), BP_GPU_RUNTIME_PREFIX "HostAlloc (mapped)");
    std::memset(host, 0, sizeof(DeviceErrorSlot));
    void* on_device = nullptr;
    const gpuError_t e = gpuHostGetDevicePointer(&on_device, host, 0);
    if (e != gpuSuccess) {
      (void)gpuFreeHost(host);
      check(e, BP_GPU_RUNTIME_PREFIX "HostGetDevicePointer");
    }
    s.error_slot_device = static_cast<DeviceErrorSlot*>(on_device);
    s.error_slot.store(static_cast<DeviceErrorSlot*>(host), std::memory_order_release);  // kept for the process
  }
  return s.error_slot_device;
}

void reportDeviceErrors(int device) {
  DeviceErrorSlot* slot = state(device).error_slot.load(std::memory_order_acquire);
  if (slot == nullptr || __atomic_load_n(&slot->raised, __ATOMIC_ACQUIRE) == 0) return;
  const auto* site = reinterpret_cast<const ErrorSite*>(static_cast<uintptr_t>(slot->site));
  int64_t values[4];
  for (int i = 0; i < 4; ++i) values[i] = slot->values[i];
  unsigned int expected = 1;
  // Another thread's synchronization may have reported it first.
  if (!__atomic_compare_exchange_n(&slot->raised, &expected, 0u, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
  bp::fail(site->code, site->describe(*site, values) + " (found by the kernel of " + site->op + " on " BP_GPU_NAME ":" +
                           std::to_string(device) +
                           " and reported at the first synchronization after it; that call's results are not "
                           "meaningful, the work before and after it is unaffected)");
}

bp::DeviceBackend& deviceBackend() {
  static GpuBackend backend;
  return backend;
}

}  // namespace bp_gpu
