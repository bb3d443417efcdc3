// toyaccel: a sample vendor device plugin for Backplane, built out of tree
// against an installed Backplane SDK (see README.md next to this file).
//
// It is written to be read. It shows what a device plugin does, on a
// "device" simple enough to fit in one file:
//
//   1. A device type. "toyaccel" has two devices (toyaccel:0, toyaccel:1).
//      Each device's memory is an arena owned by this plugin, and the host
//      only ever sees opaque *handles* to it, never real pointers: a handle
//      is a non-canonical 64-bit address that faults if dereferenced (see
//      Note [toyaccel handles]). Every byte the host moves goes through the
//      copy functions below, which resolve the handle and bounds-check it.
//      That is exactly the contract of a real accelerator, whose memory the
//      host cannot read either.
//   2. Native kernels for five standard operators, in their `.out` forms
//      (the forms a plugin implements: the functional and in-place forms
//      are composites over them): add.out, mul.out, relu.out, mm.out and
//      sum.IntList_out. Each is registered for the dtypes it serves
//      (bp::Dtypes: float32; add.out float16 too), so it is written for
//      those and never sees another dtype. The
//      host has run the op's shape rule first: `out` has the result's shape
//      and every tensor is on one toyaccel device. Kernels run "on the
//      device", so they may read device memory directly; here that means
//      resolving handles to arena pointers (operand() below), after which
//      bp::forEach walks any strides, views and broadcasting.
//   3. An operator of its own, toyaccel::bias_relu, with its rule, kernels,
//      derivative and conformance samples (Note [toyaccel::bias_relu]).
//   4. Streams and events (Note [toyaccel streams]), a kernel declaring two
//      dtypes that gets mixed calls (add.out: float16 and float32), and a
//      kernel that declines what its device cannot do (mm.out).
//   5. Nothing else. Every other standard operator (sub, neg, div, ...), and
//      these five for every dtype but float32, still works on toyaccel
//      tensors: the host's CPU fallback copies the inputs to the host
//      through this plugin's copy functions, runs the CPU kernel, and copies
//      the results back. A vendor starts with a few hot kernels and adds more
//      as they matter.
//
// The only Backplane header is <backplane/plugin.hpp> (the C++ layer over the
// stable C ABI in plugin_api.h). Nothing here depends on the host's C++
// headers or its standard library, so this plugin may be built with another
// compiler or standard library than the host (the test builds it with
// clang++ -stdlib=libc++ and loads it into a g++/libstdc++ host).
//
// Build with -DTOYACCEL_MUTANT to get a deliberately wrong mul.out (it adds)
// and bias_relu (it subtracts): the conformance test builds that too and
// requires `backplane conformance` to fail and name each.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backplane/plugin.hpp"

namespace {

using bp::ScalarType;

constexpr const char* kTypeName = "toyaccel";
constexpr int kNumDevices = 2;

// ===================================================================== memory

// Note [toyaccel handles]
// allocate() returns a handle, not a pointer. Its bits are
//
//   63..48  0x70A0: a tag ("TOA", toy accelerator). It makes the address
//           non-canonical on x86-64 (bits 63..47 differ) and outside the
//           user address space on AArch64, so a host that dereferences a
//           toyaccel address crashes at once instead of reading garbage.
//   47..44  the device index.
//   43..0   a byte offset into that device's arena.
//
// The host may add byte offsets to a handle (a view's data pointer is its
// storage's handle plus the view's offset) and hand the result back; that is
// all it may do. resolve() turns a handle plus a length into a real pointer
// after checking that the whole range lies inside one live allocation of the
// right device. A real plugin would translate to a device virtual address
// instead, but the checks are the same.
constexpr uint64_t kTag = uint64_t{0x70A0} << 48;
constexpr uint64_t kTagMask = uint64_t{0xFFFF} << 48;
constexpr int kDeviceShift = 44;
constexpr uint64_t kOffsetMask = (uint64_t{1} << kDeviceShift) - 1;

// Each device has 256 MiB of "device memory". The arena is reserved with
// operator new[] on the first allocation; the OS commits pages only when
// they are touched, so an idle device costs nothing.
constexpr uint64_t kArenaBytes = uint64_t{256} << 20;
// Allocations are aligned as a GPU allocator would align them.
constexpr uint64_t kAlignment = 256;

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// One device's memory: a first-fit allocator over a private arena. Thread-
// safe: the host allocates, frees and copies from any thread.
class Arena {
 public:
  explicit Arena(int device) : device_(device) {}

  // A handle to `nbytes` (> 0) bytes, or nullopt when the arena is full.
  std::optional<uint64_t> allocate(uint64_t nbytes) {
    if (nbytes > kArenaBytes) return std::nullopt;
    const uint64_t size = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    std::lock_guard<std::mutex> lock(mu_);
    if (!memory_) {
      memory_.reset(new std::byte[kArenaBytes]);  // uninitialized: pages are committed on first touch
      free_ = {{0, kArenaBytes}};
    }
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < size) continue;
      const uint64_t offset = it->first;
      const uint64_t rest = it->second - size;
      free_.erase(it);
      if (rest > 0) free_[offset + size] = rest;
      live_[offset] = Block{size, nbytes};
      return handleOf(offset);
    }
    return std::nullopt;
  }

  // Frees the allocation that starts at `handle` (what allocate returned).
  void deallocate(uint64_t handle) {
    const uint64_t offset = offsetOf(handle, "deallocate");
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(offset);
    BP_PLUGIN_CHECK_CODE(it != live_.end(), BP_INVALID_ARGUMENT, name(), ": deallocate(", hex(handle),
                         ") is not the start of a live allocation");
    uint64_t start = offset, size = it->second.reserved;
    live_.erase(it);
    // Give the block back and merge it with free neighbours.
    auto next = free_.lower_bound(start);
    if (next != free_.end() && start + size == next->first) {
      size += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == start) {
        start = prev->first;
        size += prev->second;
        free_.erase(prev);
      }
    }
    free_[start] = size;
  }

  // The arena pointer for [handle, handle + nbytes), which must lie inside
  // one live allocation of this device. Throws bp::Error otherwise: a bad
  // handle is reported, never followed.
  std::byte* resolve(uint64_t handle, uint64_t nbytes, const char* what) {
    const uint64_t offset = offsetOf(handle, what);
    std::lock_guard<std::mutex> lock(mu_);
    // The allocation that starts at or before `offset`.
    auto it = live_.upper_bound(offset);
    BP_PLUGIN_CHECK_CODE(it != live_.begin(), BP_OUT_OF_RANGE, name(), ": ", what, ": address ", hex(handle),
                         " is not inside any live allocation");
    --it;
    const uint64_t start = it->first, size = it->second.requested;
    BP_PLUGIN_CHECK_CODE(offset < start + size, BP_OUT_OF_RANGE, name(), ": ", what, ": address ", hex(handle),
                         " is not inside any live allocation (the nearest one below is ", size, " bytes at ",
                         hex(handleOf(start)), ")");
    BP_PLUGIN_CHECK_CODE(nbytes <= start + size - offset, BP_OUT_OF_RANGE, name(), ": ", what, " of ", nbytes,
                         " bytes at ", hex(handle), " runs past the end of its allocation (", size, " bytes at ",
                         hex(handleOf(start)), ")");
    return memory_.get() + offset;
  }

  // Allocations not yet freed.
  size_t liveAllocations() {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }

  // Frees the arena itself (at plugin shutdown, when nothing is live).
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!live_.empty()) return;  // keep memory that tensors still point at
    memory_.reset();
    free_.clear();
  }

 private:
  struct Block {
    uint64_t reserved;   // bytes taken from the arena (aligned)
    uint64_t requested;  // bytes asked for: the bounds every access is checked against
  };

  std::string name() const { return std::string(kTypeName) + ":" + std::to_string(device_); }
  uint64_t handleOf(uint64_t offset) const { return kTag | (uint64_t(device_) << kDeviceShift) | offset; }

  // Checks that `handle` is a toyaccel address of this device; returns its offset.
  uint64_t offsetOf(uint64_t handle, const char* what) const {
    BP_PLUGIN_CHECK_CODE((handle & kTagMask) == kTag, BP_INVALID_ARGUMENT, name(), ": ", what, ": ", hex(handle),
                         " is not a toyaccel address (memory of another device, or of the host?)");
    const int device = static_cast<int>((handle & ~kTagMask) >> kDeviceShift);
    BP_PLUGIN_CHECK_CODE(device == device_, BP_INVALID_ARGUMENT, name(), ": ", what, ": ", hex(handle), " belongs to ",
                         kTypeName, ":", device, ", not to this device");
    return handle & kOffsetMask;
  }

  const int device_;
  std::mutex mu_;
  std::unique_ptr<std::byte[]> memory_;  // kArenaBytes once the first allocation is made
  std::map<uint64_t, uint64_t> free_;    // offset -> size of each free block, in address order
  std::map<uint64_t, Block> live_;       // offset -> block, for every live allocation
};

uint64_t bits(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// The device type, as the host sees it: bp::DeviceBackend turns these
// virtual functions into the C function table of plugin_api.h and turns
// exceptions (bp::Error from the checks above) into host errors.
class ToyAccelBackend final : public bp::DeviceBackend {
 public:
  int deviceCount() override { return kNumDevices; }
  // The default, spelled out: the host must never dereference our memory.
  bool hostAccessible() override { return false; }

  void properties(int device, BP_DeviceProperties& out) override {
    std::snprintf(out.name, sizeof out.name, "ToyAccel virtual accelerator #%d", device);
    out.total_memory = kArenaBytes;
  }

  void* allocate(int device, size_t nbytes) override {
    std::optional<uint64_t> h = arena(device).allocate(nbytes);
    // nullptr tells the host "out of memory"; it reports BP_RESOURCE_EXHAUSTED.
    return h ? reinterpret_cast<void*>(static_cast<uintptr_t>(*h)) : nullptr;
  }
  void deallocate(int device, void* p) override { arena(device).deallocate(bits(p)); }

  void copyHostToDevice(int device, void* dst, const void* src, size_t n) override {
    std::memcpy(arena(device).resolve(bits(dst), n, "copy_host_to_device"), src, n);
  }
  void copyDeviceToHost(int device, void* dst, const void* src, size_t n) override {
    std::memcpy(dst, arena(device).resolve(bits(src), n, "copy_device_to_host"), n);
  }
  void copyDeviceToDevice(int dst_device, void* dst, int src_device, const void* src, size_t n) override {
    std::byte* d = arena(dst_device).resolve(bits(dst), n, "copy_device_to_device (destination)");
    const std::byte* s = arena(src_device).resolve(bits(src), n, "copy_device_to_device (source)");
    std::memmove(d, s, n);  // the ranges may overlap within one device
  }
  void memset(int device, void* dst, uint8_t value, size_t n) override {
    std::memset(arena(device).resolve(bits(dst), n, "memset"), value, n);
  }
  // toyaccel computes synchronously: nothing to wait for (the default).

  // ------------------------------------------------ streams and events
  // Note [toyaccel streams]
  // toyaccel runs every kernel and copy at once, on the calling thread, in
  // the order they are issued, so each stream is trivially in order and an
  // event is complete as soon as it is recorded: there is never anything to
  // wait for. What the functions below keep is the contract a real device's
  // queues have, checked: streams and events are objects of one device
  // (used with another, or after destroyStream, they are an error, not a
  // crash); each thread has a current stream per device (nullptr: the
  // default stream), set for that device alone; an event of one device may
  // order a stream of the other (hasEventWaitDevice). A device with real
  // queues enqueues its kernels on currentStream(device) and does the
  // waiting here; `backplane conformance` checks both kinds the same way
  // (device.streams, device.events).
  bool hasStreams() override { return true; }
  BP_Stream* createStream(int device) override {
    return reinterpret_cast<BP_Stream*>(queues_.create(checkedDevice(device), /*event=*/false));
  }
  void destroyStream(int device, BP_Stream* stream) override {
    queues_.destroy(device, stream, /*event=*/false);
    if (device >= 0 && device < kNumDevices && currentStreams()[static_cast<size_t>(device)] == stream)
      currentStreams()[static_cast<size_t>(device)] = nullptr;  // this thread's; others find it dead
  }
  void synchronizeStream(int device, BP_Stream* stream) override {
    queues_.check(device, stream, false, "synchronizeStream", /*null_ok=*/true);  // nothing queued: done
  }
  BP_Stream* currentStream(int device) override {
    return static_cast<BP_Stream*>(currentStreams()[static_cast<size_t>(checkedDevice(device))]);
  }
  void setCurrentStream(int device, BP_Stream* stream) override {
    queues_.check(device, stream, false, "setCurrentStream", /*null_ok=*/true);
    currentStreams()[static_cast<size_t>(device)] = stream;
  }
  bool hasEvents() override { return true; }
  BP_Event* createEvent(int device) override {
    return reinterpret_cast<BP_Event*>(queues_.create(checkedDevice(device), /*event=*/true));
  }
  void destroyEvent(int device, BP_Event* event) override { queues_.destroy(device, event, /*event=*/true); }
  void recordEvent(int device, BP_Event* event, BP_Stream* stream) override {
    queues_.check(device, event, true, "recordEvent");
    queues_.check(device, stream, false, "recordEvent", /*null_ok=*/true);
  }
  void waitEvent(int device, BP_Event* event, BP_Stream* stream) override {
    queues_.check(device, event, true, "waitEvent");
    queues_.check(device, stream, false, "waitEvent", /*null_ok=*/true);
  }
  void synchronizeEvent(int device, BP_Event* event) override {
    queues_.check(device, event, true, "synchronizeEvent");
  }
  bool queryEvent(int device, BP_Event* event) override {
    queues_.check(device, event, true, "queryEvent");
    return true;  // recorded work is done when it is issued
  }
  bool hasEventWaitDevice() override { return true; }
  void waitEventOnDevice(int event_device, BP_Event* event, int stream_device, BP_Stream* stream) override {
    queues_.check(event_device, event, true, "waitEventOnDevice");
    queues_.check(stream_device, stream, false, "waitEventOnDevice", /*null_ok=*/true);
  }

  // For kernels: the arena pointer behind toyaccel address `handle`, whose
  // `nbytes` bytes must lie inside one live allocation of `device`.
  std::byte* resolveHandle(int device, uint64_t handle, uint64_t nbytes, const char* what) {
    return arena(device).resolve(handle, nbytes, what);
  }

  void shutdown() {
    for (size_t d = 0; d < arenas_.size(); ++d) {
      if (size_t n = arenas_[d].liveAllocations()) {
        bp::logMessage(BP_LOG_WARNING, std::string(kTypeName) + ":" + std::to_string(d) + ": " + std::to_string(n) +
                                           " allocations still live at shutdown; keeping their memory");
      }
      arenas_[d].release();
    }
  }

 private:
  // The live streams and events (Note [toyaccel streams]). A handle is a
  // number, never reused, not an address: a stream destroyed while another
  // thread still holds it as current is an error there, and can never come
  // back to life as a new stream at the same address.
  class Queues {
   public:
    void* create(int device, bool event) {
      std::lock_guard<std::mutex> lock(mu_);
      const uintptr_t id = next_++;
      live_.emplace(id, Queue{device, event});
      return reinterpret_cast<void*>(id);
    }
    void destroy(int device, void* p, bool event) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = live_.find(reinterpret_cast<uintptr_t>(p));
      if (it == live_.end() || it->second.device != device || it->second.event != event)
        return;  // nothing to report to
      live_.erase(it);
    }
    // Throws unless `device` is a toyaccel device and `p` a live stream
    // (event) of it, or with `null_ok` the default stream.
    void check(int device, const void* p, bool event, const char* what, bool null_ok = false) {
      checkedDevice(device);
      if (null_ok && p == nullptr) return;
      std::lock_guard<std::mutex> lock(mu_);
      auto it = live_.find(reinterpret_cast<uintptr_t>(p));
      BP_PLUGIN_CHECK(it != live_.end() && it->second.device == device && it->second.event == event, kTypeName, ":",
                      device, " ", what, ": ", p, " is not a live ", event ? "event" : "stream", " of this device");
    }

   private:
    struct Queue {
      int device;
      bool event;
    };
    std::mutex mu_;
    std::map<uintptr_t, Queue> live_;
    uintptr_t next_ = 1;
  };
  // This thread's current stream on each device (nullptr: the default one).
  static std::array<void*, kNumDevices>& currentStreams() {
    thread_local std::array<void*, kNumDevices> current{};
    return current;
  }
  static int checkedDevice(int device) {
    BP_PLUGIN_CHECK_CODE(device >= 0 && device < kNumDevices, BP_OUT_OF_RANGE, kTypeName, " has devices 0 to ",
                         kNumDevices - 1, ", not ", device);
    return device;
  }
  Queues queues_;

  Arena& arena(int device) {
    BP_PLUGIN_CHECK_CODE(device >= 0 && device < kNumDevices, BP_OUT_OF_RANGE, kTypeName, " has devices 0 to ",
                         kNumDevices - 1, ", not ", device);
    return arenas_[static_cast<size_t>(device)];
  }

  static_assert(kNumDevices == 2, "one Arena(i) below per device");
  std::array<Arena, kNumDevices> arenas_{Arena(0), Arena(1)};  // Arena is not movable: built in place
};

// The backend must outlive every registration: a function-local static lives
// until the library is closed, and the host closes it only after shutdown.
ToyAccelBackend& backend() {
  static ToyAccelBackend b;
  return b;
}

// ==================================================================== kernels

// The kernels' view of a float32 tensor on toyaccel: its elements as a
// bp::StridedSpan over arena memory. The whole range of bytes the view can
// touch is resolved, and so bounds-checked, once, here: a tensor whose
// handle or strides reach outside its allocation is an error, never a stray
// read. An empty tensor has no memory to resolve.
template <class T>
bp::StridedSpan<T> operand(const bp::Tensor& t, const char* what) {
  if (t.numel() == 0) return bp::spanAt<T>(t, nullptr);
  int64_t lo = 0, hi = 0;  // the lowest and highest element offsets the view reaches
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.size(d) - 1) * t.stride(d);
    (reach < 0 ? lo : hi) += reach;
  }
  const int64_t size = static_cast<int64_t>(sizeof(T));
  const uint64_t first = bits(t.device_ptr<T>());  // a handle: integer arithmetic only
  std::byte* low = backend().resolveHandle(t.device().index, first - static_cast<uint64_t>(-lo * size),
                                           static_cast<uint64_t>((hi - lo + 1) * size), what);
  return bp::spanAt<T>(t, reinterpret_cast<T*>(low - lo * size));
}

// Calls fn with a value of the C++ element type of `t`: bp::Half for a
// float16 tensor, float for float32 (the two dtypes add.out declares).
template <class Fn>
void withElementType(const bp::Tensor& t, Fn&& fn) {
  if (t.dtype() == ScalarType::Float16) {
    fn(bp::Half());
  } else {
    fn(0.0f);
  }
}

// bp::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)
// The kernel's C++ signature must match the schema: the SDK derives
// "(Tensor, Tensor, Scalar, Tensor) -> Tensor" from it and the host checks
// it at registration. `out` may be strided, and in place (add_) it is self.
// It declares float16 and float32, so it gets every mix of the two:
// add(float16, float32) into a float32 out, float32 + float16 into float16
// (an out= the caller chose), ... Each tensor is read in its own dtype
// (conformance sends such mixed calls to a kernel declaring several
// dtypes: one that assumed a single dtype would fail there, not in an app).
bp::Tensor addOut(const bp::Tensor& self, const bp::Tensor& other, const bp::Scalar& alpha, const bp::Tensor& out) {
  const double a = alpha.toDouble();  // x + a * y computed in double, rounded once
  withElementType(out, [&](auto o) {
    withElementType(self, [&](auto x) {
      withElementType(other, [&](auto y) {
        using O = decltype(o);
        using X = decltype(x);
        using Y = decltype(y);
        bp::forEach(operand<O>(out, "add.out"), operand<const X>(self, "add.out"), operand<const Y>(other, "add.out"),
                    [a](X u, Y v) {
                      return O(static_cast<float>(static_cast<double>(static_cast<float>(u)) +
                                                  a * static_cast<double>(static_cast<float>(v))));
                    });
      });
    });
  });
  return out;
}

// bp::mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)
bp::Tensor mulOut(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  bp::forEach(operand<float>(out, "mul.out"), operand<const float>(self, "mul.out"),
              operand<const float>(other, "mul.out"), [](float x, float y) {
#ifdef TOYACCEL_MUTANT
                return x + y;  // deliberately wrong: conformance must catch it
#else
                return x * y;
#endif
              });
  return out;
}

// bp::relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!). NaN stays NaN
// (NaN < 0 is false), as in PyTorch.
bp::Tensor reluOut(const bp::Tensor& self, const bp::Tensor& out) {
  bp::forEach(operand<float>(out, "relu.out"), operand<const float>(self, "relu.out"),
              [](float x) { return x < 0.0f ? 0.0f : x; });
  return out;
}

// bp::mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!):
// out[n, m] = self[n, k] @ mat2[k, m], any strides, accumulated in double
// (a real device would call its GEMM here). The shape rule has checked the
// ranks and that k matches; k == 0 gives zeros.
// toyaccel's matrix unit holds operands of at most kMaxMmDim rows or
// columns: a bigger call is declined (bp::decline), and the host serves it
// where it would have gone without this kernel, the CPU fallback. Decline
// before writing anything; reports count the call where it ran.
constexpr int64_t kMaxMmDim = 2048;

bp::Tensor mmOut(const bp::Tensor& self, const bp::Tensor& mat2, const bp::Tensor& out) {
  const int64_t n = self.size(0), k = self.size(1), m = mat2.size(1);
  if (n > kMaxMmDim || k > kMaxMmDim || m > kMaxMmDim) bp::decline("toyaccel's mm holds at most 2048 rows or columns");
  if (out.numel() == 0) return out;
  const bp::StridedSpan<const float> a = operand<const float>(self, "mm.out");
  const bp::StridedSpan<const float> b = operand<const float>(mat2, "mm.out");
  const bp::StridedSpan<float> c = operand<float>(out, "mm.out");
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = a.data[i * a.strides[0] + p * a.strides[1]];
        acc += x * b.data[p * b.strides[0] + j * b.strides[1]];
      }
      c.data[i * c.strides[0] + j * c.strides[1]] = static_cast<float>(acc);
    }
  }
  return out;
}

// bp::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *,
//                     ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)
// Sums over `dim` (None or empty: every dimension), in double, then rounds
// once into `out`. The shape rule has wrapped and checked `dim` and sized
// `out`; with float32 declared, `out` is float32 (dtype= is None or float32).
bp::Tensor sumOut(const bp::Tensor& self, std::optional<bp::IntList> dim, bool keepdim,
                  std::optional<bp::ScalarType> dtype, const bp::Tensor& out) {
  (void)dtype;
  const int64_t nd = self.dim();
  std::vector<bool> reduced(static_cast<size_t>(nd), !dim || dim->empty());
  if (dim) {
    for (int64_t d : *dim) {
      if (nd > 0) reduced[static_cast<size_t>(d < 0 ? d + nd : d)] = true;
    }
  }
  // One double per element of `out`, laid out contiguously in out's shape;
  // seen from self's shape, a reduced dimension has stride 0, so every
  // element of self adds into the sum it belongs to.
  std::vector<double> acc(static_cast<size_t>(out.numel()), 0.0);
  std::vector<int64_t> acc_out_strides(static_cast<size_t>(out.dim()));
  for (int64_t j = out.dim(), s = 1; j-- > 0; s *= out.size(j)) acc_out_strides[static_cast<size_t>(j)] = s;
  std::vector<int64_t> acc_strides(static_cast<size_t>(nd), 0);
  for (int64_t d = 0, j = 0; d < nd; ++d) {
    if (!reduced[static_cast<size_t>(d)]) acc_strides[static_cast<size_t>(d)] = acc_out_strides[static_cast<size_t>(j)];
    if (!reduced[static_cast<size_t>(d)] || keepdim) ++j;
  }
  bp::forEachElement(
      self.sizes(), [](double& sum, const float& x) { sum += x; },
      bp::StridedSpan<double>{acc.data(), self.sizes(), acc_strides}, operand<const float>(self, "sum.IntList_out"));
  bp::forEach(operand<float>(out, "sum.IntList_out"),
              bp::StridedSpan<const double>{acc.data(), out.sizes(), acc_out_strides},
              [](double sum) { return static_cast<float>(sum); });
  return out;
}

// ================================================= an operator of our own

// Note [toyaccel::bias_relu]
// toyaccel::bias_relu(Tensor x, Tensor bias) -> Tensor is relu(x + bias) for
// a bias along x's last dim: an operator of the plugin's own, defined as
// fully as a standard one (docs/plugins.md, "An operator of your own"):
//   - a rule (m.meta) the host runs before any kernel of it, on any device:
//     one device, one floating dtype, a bias of x.size(-1) elements;
//   - a toyaccel kernel (float32) and a cpu kernel (float32, float64), which
//     also serves toyaccel calls of float64 through the CPU fallback;
//   - a derivative (m.derivative) through a backward op of its own with a
//     cpu kernel, so training works on both devices;
//   - conformance samples (m.spec) with a reference function, so
//     `backplane conformance --native --strict` certifies it, its gradient
//     included, instead of listing it as uncertified;
//   - out= and in-place forms (bias_relu.out, bias_relu_) the host derives
//     from it (m.deriveForms), certified by the same samples.

// "toyaccel:1", "cpu:0": a device as messages name it.
std::string deviceName(bp::Device d) {
  const char* type = bp::deviceTypeName(d.type);
  return (type ? std::string(type) : "device type " + std::to_string(d.type)) + ":" + std::to_string(d.index);
}

// The rule: throws (bp::fail) with what is wrong and what to do.
void biasReluMeta(const bp::Tensor& x, const bp::Tensor& bias) {
  const char* op = "toyaccel::bias_relu";
  BP_PLUGIN_CHECK(x.device() == bias.device(), op, ": x is on ", deviceName(x.device()), " but bias is on ",
                  deviceName(bias.device()), "; move both to one device");
  BP_PLUGIN_CHECK(x.dtype() == bias.dtype(), op, ": x is ", bp::name(x.dtype()), " but bias is ",
                  bp::name(bias.dtype()), "; give both one dtype");
  BP_PLUGIN_CHECK(x.dtype() == ScalarType::Float32 || x.dtype() == ScalarType::Float64, op, " takes float32 or ",
                  "float64 tensors, not ", bp::name(x.dtype()));
  BP_PLUGIN_CHECK(x.dim() >= 1 && bias.dim() == 1 && bias.size(0) == x.size(x.dim() - 1), op,
                  ": bias must have one dim of x's last size (", x.dim() >= 1 ? x.size(x.dim() - 1) : 0,
                  "), but x has ", x.dim(), " dims and bias ", bias.dim(), " of ",
                  bias.dim() == 1 ? bias.size(0) : bias.numel(), " elements");
}

// On toyaccel, float32: the rule has run, so both are float32 on one device.
bp::Tensor biasReluToyaccel(const bp::Tensor& x, const bp::Tensor& bias) {
  bp::Tensor out = bp::Tensor::empty(x.sizes(), ScalarType::Float32, x.device());
  bp::forEach(operand<float>(out, "bias_relu"), operand<const float>(x, "bias_relu"),
              operand<const float>(bias, "bias_relu"), [](float v, float b) {
#ifdef TOYACCEL_MUTANT
                const float y = v - b;  // deliberately wrong: its own samples must catch it
#else
                const float y = v + b;
#endif
                return y > 0 ? y : 0.0f;
              });
  return out;
}

// On the host, float32 or float64.
template <class T>
void biasReluHost(const bp::Tensor& x, const bp::Tensor& bias, const bp::Tensor& out) {
  bp::forEach<T>(out, x, bias, [](T v, T b) {
    const T y = v + b;
    return y > 0 ? y : T(0);
  });
}
bp::Tensor biasReluCpu(const bp::Tensor& x, const bp::Tensor& bias) {
  bp::Tensor out = bp::Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (x.dtype() == ScalarType::Float64) {
    biasReluHost<double>(x, bias, out);
  } else {
    biasReluHost<float>(x, bias, out);
  }
  return out;
}

// toyaccel::bias_relu_backward(Tensor grad, Tensor result) -> (Tensor, Tensor):
// the gradients of x (grad where the result is positive) and of bias (that,
// summed over every dim but the last). On the host; toyaccel tensors reach
// it through the CPU fallback.
template <class T>
void biasReluBackwardHost(const bp::Tensor& grad, const bp::Tensor& result, const bp::Tensor& grad_x,
                          const bp::Tensor& grad_bias) {
  bp::forEach<T>(grad_x, grad, result, [](T g, T r) { return r > 0 ? g : T(0); });
  const int64_t n = grad_bias.numel();
  std::vector<double> sums(static_cast<size_t>(n), 0.0);
  // grad_x is contiguous (made below): row-major rows of n elements.
  const T* gx = grad_x.data_ptr<T>();
  for (int64_t i = 0; i < grad_x.numel(); ++i) sums[static_cast<size_t>(i % n)] += static_cast<double>(gx[i]);
  T* gb = grad_bias.data_ptr<T>();
  for (int64_t j = 0; j < n; ++j) gb[j] = static_cast<T>(sums[static_cast<size_t>(j)]);
}
std::tuple<bp::Tensor, bp::Tensor> biasReluBackwardCpu(const bp::Tensor& grad, const bp::Tensor& result) {
  BP_PLUGIN_CHECK(grad.sizes() == result.sizes() && grad.dtype() == result.dtype() && result.dim() >= 1,
                  "toyaccel::bias_relu_backward: grad and result must have one shape and dtype");
  bp::Tensor grad_x = bp::Tensor::empty(grad.sizes(), grad.dtype(), grad.device());
  const int64_t n = result.size(result.dim() - 1);
  bp::Tensor grad_bias = bp::Tensor::empty({n}, grad.dtype(), grad.device());
  if (grad.dtype() == ScalarType::Float64) {
    biasReluBackwardHost<double>(grad, result, grad_x, grad_bias);
  } else {
    biasReluBackwardHost<float>(grad, result, grad_x, grad_bias);
  }
  return {grad_x, grad_bias};
}

// The conformance reference: relu(x + bias) in double, element by element,
// independent of the kernels above.
bp::Tensor biasReluReference(const bp::Tensor& x, const bp::Tensor& bias) {
  bp::Tensor out = bp::Tensor::empty(x.sizes(), x.dtype(), x.device());
  auto run = [&](auto zero) {
    using T = decltype(zero);
    bp::forEachElement(
        x.sizes(),
        [](T& o, const T& v, const T& b) {
          const double y = static_cast<double>(v) + static_cast<double>(b);
          o = static_cast<T>(y > 0 ? y : 0);
        },
        bp::hostSpan<T>(out), bp::hostSpan<const T>(x), bp::hostSpan<const T>(bias));
  };
  if (x.dtype() == ScalarType::Float64) {
    run(0.0);
  } else {
    run(0.0f);
  }
  return out;
}

// The samples (docs/conformance.md, "Samples of a plugin's own operator"):
// each T sample runs in float32 and float64; .T is a transposed input;
// the `raises` samples must be refused on every backend (by the rule).
constexpr const char* kBiasReluSamples = R"(
dtypes: float32, float64
rows: T[4,8], T[8]
3-d: T[2,3,5], T[5]
transposed x: T[6,4].T, T[4]
one element: T[1], T[1]
raises bias of the wrong length: float32[4,8], float32[7]
raises bias of another dtype: float32[4,8], float64[8]
raises bias on another device: float32[4,8], float32[8]@cpu
raises int32 tensors: int32[4,8], int32[8]
)";
constexpr const char* kBiasReluBackwardSamples = R"(
dtypes: float32, float64
rows: T[4,8], T[4,8]
3-d: T[2,3,5], T[2,3,5]
)";

// The backward op's reference: each gradient element by element in double.
std::tuple<bp::Tensor, bp::Tensor> biasReluBackwardReference(const bp::Tensor& grad, const bp::Tensor& result) {
  const int64_t n = result.size(result.dim() - 1);
  bp::Tensor grad_x = bp::Tensor::empty(grad.sizes(), grad.dtype(), grad.device());
  bp::Tensor grad_bias = bp::Tensor::empty({n}, grad.dtype(), grad.device());
  std::vector<double> sums(static_cast<size_t>(n), 0.0);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    int64_t i = 0;  // forEachElement walks row-major: element i is in column i % n
    bp::forEachElement(
        grad.sizes(),
        [&](T& gx, const T& g, const T& r) {
          const double v = r > 0 ? static_cast<double>(g) : 0.0;
          gx = static_cast<T>(v);
          sums[static_cast<size_t>(i++ % n)] += v;
        },
        bp::hostSpan<T>(grad_x), bp::hostSpan<const T>(grad), bp::hostSpan<const T>(result));
    T* gb = grad_bias.data_ptr<T>();
    for (int64_t j = 0; j < n; ++j) gb[j] = static_cast<T>(sums[static_cast<size_t>(j)]);
  };
  if (grad.dtype() == ScalarType::Float64) {
    run(0.0);
  } else {
    run(0.0f);
  }
  return {grad_x, grad_bias};
}

// ======================================================================= init

// Called once by the host when it loads the library. Everything registered
// here is undone when the plugin is unloaded (or if init throws).
void init(bp::Library& m) {
  const int32_t toyaccel = m.registerDevice(kTypeName, &backend());
  // Standard operators live in the "bp" namespace; "add.out" is short for
  // "bp::add.out". Each kernel serves the dtypes it declares (float32; add.out
  // float16 too): a call with a tensor of another dtype (an argument or
  // `out`) goes to the CPU fallback, so the kernels need no code for it.
  const bp::Dtypes float32 = {bp::ScalarType::Float32};
  m.impl("add.out", toyaccel, &addOut, {ScalarType::Float16, ScalarType::Float32});
  m.impl("mul.out", toyaccel, &mulOut, float32);
  m.impl("relu.out", toyaccel, &reluOut, float32);
  m.impl("mm.out", toyaccel, &mmOut, float32);
  m.impl("sum.IntList_out", toyaccel, &sumOut, float32);
  // No m.fallback(): operators without a toyaccel kernel use the host's CPU
  // fallback, which needs nothing from us but the copy functions above.

  // An operator of our own (Note [toyaccel::bias_relu]).
  m.def("toyaccel::bias_relu(Tensor x, Tensor bias) -> Tensor");
  m.def("toyaccel::bias_relu_backward(Tensor grad, Tensor result) -> (Tensor, Tensor)");
  m.meta("toyaccel::bias_relu", &biasReluMeta);
  m.impl("toyaccel::bias_relu", toyaccel, &biasReluToyaccel, float32);
  const bp::Dtypes host_floats = {ScalarType::Float32, ScalarType::Float64};
  m.impl("toyaccel::bias_relu", /*cpu=*/0, &biasReluCpu, host_floats);
  m.impl("toyaccel::bias_relu_backward", /*cpu=*/0, &biasReluBackwardCpu, host_floats);
  m.derivative("toyaccel::bias_relu", "toyaccel::bias_relu_backward(grad, result) -> (x, bias)");
  m.spec("toyaccel::bias_relu", kBiasReluSamples, &biasReluReference);
  // bias_relu.out and bias_relu_, derived by the host from the functional
  // form (they call it and copy the result); the samples certify them too.
  m.deriveForms("toyaccel::bias_relu", BP_FORM_OUT | BP_FORM_INPLACE);
  m.spec("toyaccel::bias_relu_backward", kBiasReluBackwardSamples, &biasReluBackwardReference);
}

// Called before the library is closed, after the host has checked that no
// toyaccel tensor is alive.
void shutdown() { backend().shutdown(); }

}  // namespace

BACKPLANE_PLUGIN("toyaccel", "1.0.0", init)
BACKPLANE_PLUGIN_SHUTDOWN(shutdown)
