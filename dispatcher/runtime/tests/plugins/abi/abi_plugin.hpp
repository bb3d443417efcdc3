// Helpers shared by the C++ test plugins of abi_rules_test.cc (Note [ABI
// rules] in plugin_api.h). Written against plugin_api.h only, not
// plugin.hpp. Each plugin is one source file built into its own shared
// library, and everything here sits in an anonymous namespace, so all of
// this state is per plugin.
//
// - HostFns: the few host functions the helpers call. Each plugin's init
//   copies them from the host table it was given (tp_abi_v1_0 reads them from
//   its own 1.0 layout of that table).
// - Arena: device memory handed out at non-canonical addresses, so any host
//   dereference faults; reachable only through the device functions, each of
//   which counts its calls (g_counts).
// - deviceDesc(): a BP_DeviceTypeDesc over the arena (2 devices).
// - twiceKernel: ns::twice(Tensor self) -> Tensor for float32 contiguous
//   tensors, on cpu or on the arena device (ctx: a TwiceCtx).
// - infoKernel: ns::info(int which) -> int, which < kMaxInfo: g_info[which];
//   kCounterBase + c: g_counts[c].
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "backplane/plugin_api.h"

namespace {

struct HostFns {
  BP_Error* (*error_new)(BP_ErrorCode code, const char* message) = nullptr;
  void (*tensor_info)(const BP_Tensor* tensor, BP_TensorInfo* out) = nullptr;
  void (*tensor_release)(BP_Tensor* tensor) = nullptr;
  BP_Error* (*tensor_empty)(const int64_t* sizes, size_t ndim, const int64_t* strides, BP_ScalarType dtype,
                            BP_Device device, BP_Tensor** out) = nullptr;
};
HostFns g_fns;

template <typename HostTable>
void saveHostFns(const HostTable* host) {
  g_fns.error_new = host->error_new;
  g_fns.tensor_info = host->tensor_info;
  g_fns.tensor_release = host->tensor_release;
  g_fns.tensor_empty = host->tensor_empty;
}

// printf-style. (No std::string or std::to_string: a STB_GNU_UNIQUE symbol
// would keep the library mapped after dlclose.)
inline __attribute__((format(printf, 2, 3))) BP_Error* error(BP_ErrorCode code, const char* format, ...) {
  char buf[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return g_fns.error_new(code, buf);
}

// ------------------------------------------------------------------ counts

enum Counter { kAllocate, kDeallocate, kH2D, kD2H, kD2D, kMemset, kSynchronize, kTrap, kNumCounters };
std::atomic<int64_t> g_counts[kNumCounters];
inline void count(Counter c) { g_counts[c].fetch_add(1, std::memory_order_relaxed); }

constexpr int kMaxInfo = 16;
constexpr int64_t kCounterBase = 100;
int64_t g_info[kMaxInfo];

// ------------------------------------------------------------------ arena

constexpr int32_t kNumDevices = 2;
// Not a canonical x86-64/AArch64 address: dereferencing it faults.
constexpr uint64_t kBase = 0xABE0000000000000ull;

class Arena {
 public:
  BP_Error* allocate(int32_t device, size_t nbytes, void** out) {
    if (device < 0 || device >= kNumDevices) return error(BP_INVALID_ARGUMENT, "arena: no device %d", device);
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t offset = next_;
    next_ += (nbytes + 127) / 64 * 64;  // a gap after every block catches overruns
    blocks_.emplace(offset, Block{device, std::vector<unsigned char>(nbytes)});
    *out = reinterpret_cast<void*>(kBase + offset);
    return nullptr;
  }
  void deallocate(int32_t device, void* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(reinterpret_cast<uint64_t>(ptr) - kBase);
    if (it != blocks_.end() && it->second.device == device) blocks_.erase(it);
  }
  // The host bytes behind device address [p, p + n) on `device`, or an error.
  BP_Error* resolve(int32_t device, const void* p, size_t n, const char* what, unsigned char** out) {
    uint64_t a = reinterpret_cast<uint64_t>(p);
    std::lock_guard<std::mutex> lock(mu_);
    if (a >= kBase) {
      uint64_t off = a - kBase;
      auto it = blocks_.upper_bound(off);
      if (it != blocks_.begin()) {
        --it;
        Block& b = it->second;
        if (b.device == device && off + n <= it->first + b.bytes.size()) {
          *out = b.bytes.data() + (off - it->first);
          return nullptr;
        }
      }
    }
    return error(BP_OUT_OF_RANGE, "arena %s: [0x%llx, +%zu) on device %d is not inside one live allocation", what,
                 static_cast<unsigned long long>(a), n, device);
  }
  size_t live() {
    std::lock_guard<std::mutex> lock(mu_);
    return blocks_.size();
  }

 private:
  struct Block {
    int32_t device;
    std::vector<unsigned char> bytes;
  };
  std::mutex mu_;
  std::map<uint64_t, Block> blocks_;
  uint64_t next_ = 0x1000;
};

Arena* g_arena = nullptr;

inline void arenaInit() {
  if (!g_arena) g_arena = new Arena();
}
// From backplane_plugin_shutdown: the host unloads only when no allocation
// is alive, so the arena is empty.
inline void arenaShutdown() {
  if (g_arena && g_arena->live() == 0) {
    delete g_arena;
    g_arena = nullptr;
  }
}

// --------------------------------------------------------- device functions

inline int32_t arenaDeviceCount(void*) { return kNumDevices; }
inline const char* arenaUnavailableReason(void*) { return nullptr; }

inline BP_Error* arenaAllocate(void*, int32_t device, size_t nbytes, void** out) try {
  count(kAllocate);
  return g_arena->allocate(device, nbytes, out);
} catch (const std::bad_alloc&) {
  return error(BP_RESOURCE_EXHAUSTED, "arena: out of memory");
}

inline void arenaDeallocate(void*, int32_t device, void* ptr) {
  count(kDeallocate);
  g_arena->deallocate(device, ptr);
}

inline BP_Error* arenaCopyHostToDevice(void*, int32_t device, void* dst, const void* src, size_t n) {
  count(kH2D);
  if (n == 0) return nullptr;
  unsigned char* d = nullptr;
  if (BP_Error* e = g_arena->resolve(device, dst, n, "copy_host_to_device", &d)) return e;
  std::memcpy(d, src, n);
  return nullptr;
}

inline BP_Error* arenaCopyDeviceToHost(void*, int32_t device, void* dst, const void* src, size_t n) {
  count(kD2H);
  if (n == 0) return nullptr;
  unsigned char* s = nullptr;
  if (BP_Error* e = g_arena->resolve(device, src, n, "copy_device_to_host", &s)) return e;
  std::memcpy(dst, s, n);
  return nullptr;
}

inline BP_Error* arenaCopyDeviceToDevice(void*, int32_t dst_device, void* dst, int32_t src_device, const void* src,
                                         size_t n) {
  count(kD2D);
  if (n == 0) return nullptr;
  unsigned char *d = nullptr, *s = nullptr;
  if (BP_Error* e = g_arena->resolve(dst_device, dst, n, "copy_device_to_device", &d)) return e;
  if (BP_Error* e = g_arena->resolve(src_device, src, n, "copy_device_to_device", &s)) return e;
  std::memmove(d, s, n);
  return nullptr;
}

inline BP_Error* arenaMemset(void*, int32_t device, void* dst, uint8_t value, size_t n) {
  count(kMemset);
  if (n == 0) return nullptr;
  unsigned char* d = nullptr;
  if (BP_Error* e = g_arena->resolve(device, dst, n, "memset", &d)) return e;
  std::memset(d, value, n);
  return nullptr;
}

inline BP_Error* arenaSynchronize(void*, int32_t device) {
  count(kSynchronize);
  if (device < 0 || device >= kNumDevices) return error(BP_INVALID_ARGUMENT, "arena: no device %d", device);
  return nullptr;
}

// A complete device table over the arena; with_optional_slots = false leaves
// every optional slot NULL.
inline BP_DeviceTypeDesc deviceDesc(const char* name, bool with_optional_slots) {
  BP_DeviceTypeDesc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = BP_DeviceTypeDesc_STRUCT_SIZE;
  d.name = name;
  d.host_accessible = 0;
  d.device_count = &arenaDeviceCount;
  d.allocate = &arenaAllocate;
  d.deallocate = &arenaDeallocate;
  d.copy_host_to_device = &arenaCopyHostToDevice;
  d.copy_device_to_host = &arenaCopyDeviceToHost;
  if (with_optional_slots) {
    d.unavailable_reason = &arenaUnavailableReason;
    d.copy_device_to_device = &arenaCopyDeviceToDevice;
    d.memset = &arenaMemset;
    d.synchronize = &arenaSynchronize;
  }
  return d;
}

// ----------------------------------------------------------------- kernels

// What one twice kernel instance serves: *device_type is 0 (cpu) or the
// arena device type the plugin registered.
struct TwiceCtx {
  const int32_t* device_type;
};

inline BP_Error* twiceKernel(void* ctx, const BP_KernelCall* call) {
  if (ctx == nullptr) return error(BP_INTERNAL, "twice: the kernel's ctx is NULL");
  const int32_t want_type = *static_cast<const TwiceCtx*>(ctx)->device_type;
  const bool on_arena = want_type != 0;
  if (call->num_args != 1 || call->args[0].tag != BP_VALUE_TENSOR || call->num_returns != 1)
    return error(BP_INTERNAL, "twice: expected one tensor argument and one return");
  BP_TensorInfo in;
  std::memset(&in, 0, sizeof in);
  in.struct_size = BP_TensorInfo_STRUCT_SIZE;
  g_fns.tensor_info(call->args[0].u.tensor, &in);
  if (in.dtype != BP_FLOAT32) return error(BP_INVALID_ARGUMENT, "twice supports float32 only");
  if (!in.is_contiguous) return error(BP_UNIMPLEMENTED, "twice supports contiguous tensors only");
  if (in.device.type != want_type)
    return error(BP_INTERNAL, "twice: the kernel for device type %d got a tensor on device type %d", want_type,
                 in.device.type);
  BP_Tensor* out_t = nullptr;
  if (BP_Error* e = g_fns.tensor_empty(in.sizes, static_cast<size_t>(in.dim), nullptr, BP_FLOAT32, in.device, &out_t))
    return e;
  BP_TensorInfo out;
  std::memset(&out, 0, sizeof out);
  out.struct_size = BP_TensorInfo_STRUCT_SIZE;
  g_fns.tensor_info(out_t, &out);
  const size_t n = static_cast<size_t>(in.numel), bytes = n * sizeof(float);
  if (n > 0) {
    const float* src = nullptr;
    float* dst = nullptr;
    if (on_arena) {  // "device code": reaches the arena directly
      unsigned char *s = nullptr, *d = nullptr;
      BP_Error* e = g_arena->resolve(in.device.index, in.data, bytes, "twice input", &s);
      if (!e) e = g_arena->resolve(out.device.index, out.data, bytes, "twice output", &d);
      if (e) {
        g_fns.tensor_release(out_t);
        return e;
      }
      src = reinterpret_cast<const float*>(s);
      dst = reinterpret_cast<float*>(d);
    } else {
      src = static_cast<const float*>(in.data);
      dst = static_cast<float*>(out.data);
    }
    for (size_t i = 0; i < n; ++i) dst[i] = 2.0f * src[i];
  }
  call->returns[0].tag = BP_VALUE_TENSOR;
  call->returns[0].u.tensor = out_t;
  return nullptr;
}

inline BP_Error* infoKernel(void*, const BP_KernelCall* call) {
  if (call->num_args != 1 || call->args[0].tag != BP_VALUE_INT || call->num_returns != 1)
    return error(BP_INTERNAL, "info: expected one int argument and one return");
  const int64_t which = call->args[0].u.i;
  int64_t value;
  if (which >= 0 && which < kMaxInfo) {
    value = g_info[which];
  } else if (which >= kCounterBase && which < kCounterBase + kNumCounters) {
    value = g_counts[which - kCounterBase].load();
  } else {
    return error(BP_OUT_OF_RANGE, "info: no entry %lld", static_cast<long long>(which));
  }
  call->returns[0].tag = BP_VALUE_INT;
  call->returns[0].u.i = value;
  return nullptr;
}

inline BP_KernelDesc kernelDesc(BP_KernelFn fn, void* ctx, const char* cpp_signature) {
  BP_KernelDesc k;
  std::memset(&k, 0, sizeof k);
  k.struct_size = BP_KernelDesc_STRUCT_SIZE;
  k.fn = fn;
  k.ctx = ctx;
  k.cpp_signature = cpp_signature;
  return k;
}

}  // namespace
