// toyaccel: a sample vendor device plugin for Backplane, built out of tree
// against an installed Backplane SDK (see README.md next to this file).
//
// It is written to be read. It shows the three things every device plugin
// does, on a "device" simple enough to fit in one file:
//
//   1. A device type. "toyaccel" has two devices (toyaccel:0, toyaccel:1).
//      Each device's memory is an arena owned by this plugin, and the host
//      only ever sees opaque *handles* to it, never real pointers: a handle
//      is a non-canonical 64-bit address that faults if dereferenced (see
//      Note [toyaccel handles]). Every byte the host moves goes through the
//      copy functions below, which resolve the handle and bounds-check it.
//      That is exactly the contract of a real accelerator, whose memory the
//      host cannot read either.
//   2. Native kernels for a few operators: add.Tensor, mul.Tensor and relu,
//      float32, with PyTorch's broadcasting and arbitrary strides. Kernels
//      run "on the device", so they may read device memory directly; here
//      that means resolving handles to arena pointers.
//   3. Nothing else. Every other standard operator (sub, neg, div, sum, ...)
//      still works on toyaccel tensors: the host's CPU fallback copies the
//      inputs to the host through this plugin's copy functions, runs the CPU
//      kernel, and copies the results back. A vendor starts with a few hot
//      kernels and adds more as they matter.
//
// The only Backplane header is <backplane/plugin.hpp> (the C++ layer over the
// stable C ABI in plugin_api.h). Nothing here depends on the host's C++
// headers or its standard library, so this plugin may be built with another
// compiler or standard library than the host (the test builds it with
// clang++ -stdlib=libc++ and loads it into a g++/libstdc++ host).

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
    BP_PLUGIN_CHECK_CODE(device == device_, BP_INVALID_ARGUMENT, name(), ": ", what, ": ", hex(handle),
                         " belongs to ", kTypeName, ":", device, ", not to this device");
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

  // For kernels: the arena pointer behind a toyaccel address.
  std::byte* resolve(int device, const void* p, uint64_t nbytes, const char* what) {
    return arena(device).resolve(bits(p), nbytes, what);
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

// The device type number the host gave "toyaccel" at registration.
int32_t g_toyaccel = -1;

std::string deviceName(bp::Device d) {
  if (d.type == 0) return "cpu";
  if (d.type == g_toyaccel) return std::string(kTypeName) + ":" + std::to_string(d.index);
  return "device type " + std::to_string(d.type) + ":" + std::to_string(d.index);
}

// A float32 operand as a kernel reads it: a host-usable pointer to its first
// element and its strides, in elements, aligned to the output's shape (0
// where the operand is broadcast).
struct Operand {
  const float* data = nullptr;
  std::vector<int64_t> strides;
};

// Resolves `t` (on toyaccel, or a 0-d tensor on the cpu) for reading as an
// operand of an output of shape `shape`. The whole range of elements the
// view can touch is bounds-checked once, here.
Operand operand(const bp::Tensor& t, const std::vector<int64_t>& shape, const char* what) {
  Operand o;
  o.strides.assign(shape.size(), 0);
  const size_t lead = shape.size() - static_cast<size_t>(t.dim());
  int64_t last = 0;  // offset of the last element, in elements
  for (int64_t i = 0; i < t.dim(); ++i) {
    BP_PLUGIN_CHECK(t.stride(i) >= 0, what, ": negative strides are not supported, got ", t.strides());
    last += (t.size(i) - 1) * t.stride(i);
    if (t.size(i) != 1) o.strides[lead + static_cast<size_t>(i)] = t.stride(i);
  }
  if (t.numel() == 0) return o;  // nothing will be read (and there may be no memory)
  if (t.device().type == 0) {
    o.data = t.data_ptr<const float>();  // cpu memory is host memory
  } else {
    const uint64_t span = static_cast<uint64_t>(last + 1) * sizeof(float);
    o.data = reinterpret_cast<const float*>(backend().resolve(t.device().index, t.data_ptr(), span, what));
  }
  return o;
}

// Checks dtypes and devices of a kernel's tensor arguments; returns the
// toyaccel device the output goes to. As in PyTorch, every tensor must be on
// one device, except that a 0-d cpu tensor may join in as a scalar.
bp::Device checkInputs(const char* op, std::initializer_list<std::pair<const char*, const bp::Tensor*>> args) {
  std::optional<bp::Device> device;
  for (const auto& [name, t] : args) {
    BP_PLUGIN_CHECK(t->dtype() == ScalarType::Float32, op, " on ", kTypeName, ": argument '", name,
                    "' has dtype ", t->dtype(), "; the toyaccel kernels support float32 only (convert the ",
                    "tensor to float32, or compute on the cpu)");
    const bp::Device d = t->device();
    if (d.type == g_toyaccel) {
      BP_PLUGIN_CHECK(!device || *device == d, op, ": expected all tensors on one device, but argument '", name,
                      "' is on ", deviceName(d), " and another is on ", deviceName(*device),
                      "; copy one of them to the other device first");
      device = d;
    } else {
      BP_PLUGIN_CHECK(d.type == 0 && t->dim() == 0, op, ": expected all tensors on one device, but argument '",
                      name, "' is a ", t->dim(), "-d tensor on ", deviceName(d),
                      " (only 0-d cpu tensors mix with toyaccel tensors); copy it to toyaccel first");
    }
  }
  BP_PLUGIN_CHECK_CODE(device.has_value(), BP_INTERNAL, op, ": the toyaccel kernel was called without a toyaccel "
                       "tensor");
  return *device;
}

std::vector<int64_t> broadcastShapes(const char* op, bp::IntList a, bp::IntList b) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    BP_PLUGIN_CHECK(x == y || x == 1 || y == 1, op, ": shapes ", a, " and ", b,
                    " cannot be broadcast: dimension ", i, " is ", x, " in one and ", y, " in the other");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// Runs body(i, offsets) for every element i of a row-major walk over
// `shape`, where offsets[k] is the element offset of that element in
// operand k (from its strides).
template <size_t K, class Body>
void forEachElement(const std::vector<int64_t>& shape, const std::array<const std::vector<int64_t>*, K>& strides,
                    Body&& body) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  std::vector<int64_t> index(shape.size(), 0);
  std::array<int64_t, K> offsets{};
  for (int64_t i = 0; i < numel; ++i) {
    body(i, offsets);
    // Step the index like an odometer, updating every operand's offset.
    for (size_t d = shape.size(); d-- > 0;) {
      for (size_t k = 0; k < K; ++k) offsets[k] += (*strides[k])[d];
      if (++index[d] < shape[d]) break;
      for (size_t k = 0; k < K; ++k) offsets[k] -= (*strides[k])[d] * shape[d];
      index[d] = 0;
    }
  }
}

// out = f(self, other), broadcast, into a new contiguous tensor on the
// inputs' toyaccel device (the host adopts the returned reference).
template <class F>
bp::Tensor binary(const char* op, const bp::Tensor& self, const bp::Tensor& other, F f) {
  const bp::Device device = checkInputs(op, {{"self", &self}, {"other", &other}});
  const std::vector<int64_t> shape = broadcastShapes(op, self.sizes(), other.sizes());
  bp::Tensor out = bp::Tensor::empty(shape, ScalarType::Float32, device);
  if (out.numel() == 0) return out;
  const Operand a = operand(self, shape, op);
  const Operand b = operand(other, shape, op);
  float* z = reinterpret_cast<float*>(
      backend().resolve(device.index, out.data_ptr(), static_cast<uint64_t>(out.numel()) * sizeof(float), op));
  forEachElement<2>(shape, {&a.strides, &b.strides}, [&](int64_t i, const std::array<int64_t, 2>& off) {
    z[i] = f(a.data[off[0]], b.data[off[1]]);
  });
  return out;
}

template <class F>
bp::Tensor unary(const char* op, const bp::Tensor& self, F f) {
  const bp::Device device = checkInputs(op, {{"self", &self}});
  const std::vector<int64_t> shape = self.sizes().vec();
  bp::Tensor out = bp::Tensor::empty(shape, ScalarType::Float32, device);
  if (out.numel() == 0) return out;
  const Operand a = operand(self, shape, op);
  float* z = reinterpret_cast<float*>(
      backend().resolve(device.index, out.data_ptr(), static_cast<uint64_t>(out.numel()) * sizeof(float), op));
  forEachElement<1>(shape, {&a.strides}, [&](int64_t i, const std::array<int64_t, 1>& off) { z[i] = f(a.data[off[0]]); });
  return out;
}

// bp::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor.
// The kernel's C++ signature must match the schema: the SDK derives
// "(Tensor, Tensor, Scalar) -> Tensor" from it and the host checks it.
bp::Tensor add(const bp::Tensor& self, const bp::Tensor& other, const bp::Scalar& alpha) {
  const float a = alpha.to<float>();
  return binary("bp::add.Tensor", self, other, [a](float x, float y) { return x + a * y; });
}

// bp::mul.Tensor(Tensor self, Tensor other) -> Tensor
bp::Tensor mul(const bp::Tensor& self, const bp::Tensor& other) {
  return binary("bp::mul.Tensor", self, other, [](float x, float y) { return x * y; });
}

// bp::relu(Tensor self) -> Tensor. NaN stays NaN, as in PyTorch.
bp::Tensor relu(const bp::Tensor& self) {
  return unary("bp::relu", self, [](float x) { return x < 0.0f ? 0.0f : x; });
}

// ======================================================================= init

// Called once by the host when it loads the library. Everything registered
// here is undone when the plugin is unloaded (or if init throws).
void init(bp::Library& m) {
  g_toyaccel = m.registerDevice(kTypeName, &backend());
  // Standard operators live in the "bp" namespace; "add.Tensor" is short
  // for "bp::add.Tensor".
  m.impl("add.Tensor", g_toyaccel, &add);
  m.impl("mul.Tensor", g_toyaccel, &mul);
  m.impl("relu", g_toyaccel, &relu);
  // No m.fallback(): operators without a toyaccel kernel use the host's CPU
  // fallback, which needs nothing from us but the copy functions above.
}

// Called before the library is closed, after the host has checked that no
// toyaccel tensor is alive.
void shutdown() { backend().shutdown(); }

}  // namespace

BACKPLANE_PLUGIN("toyaccel", "1.0.0", init)
BACKPLANE_PLUGIN_SHUTDOWN(shutdown)
