// tp_good: a well-behaved test plugin. It registers device type "tpdev"
// (two devices) whose memory lives in a host-side arena that the host can
// reach only through the copy functions: the addresses it hands out are
// offsets from a non-canonical base, so any host dereference faults. It
// defines tp::twice(Tensor self) -> Tensor and implements it for tpdev and
// for cpu (float32, contiguous). It registers nothing else.
//
// tpdev reports properties ("tp good device N", total_memory = the nominal
// arena size) and has trivial streams and events: objects the plugin
// allocates and validates, with nothing to wait for. As a test hook its
// multiprocessor_count is the number of streams and events alive now (for
// device_api_test.cc).
//
// Written against plugin_api.h only (no C++ SDK layer); no exception leaves
// an entry point.
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <vector>

#include "backplane/plugin_api.h"

namespace {

const BP_PluginInfo kInfo = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR, "tp_good", "1.0.0"};

const BP_HostApi* g_host = nullptr;
int32_t g_tpdev = -1;

constexpr int32_t kNumDevices = 2;
// What get_properties reports as each device's memory (not enforced).
constexpr uint64_t kArenaBytes = uint64_t{1} << 30;
// Not a canonical x86-64/AArch64 address: dereferencing it faults.
constexpr uint64_t kBase = 0xBEEF000000000000ull;

// printf-style. (No std::to_string here: it would put a STB_GNU_UNIQUE symbol
// in the library, which makes dlclose a no-op, and the unload tests want the
// library really unmapped.)
__attribute__((format(printf, 2, 3))) BP_Error* error(BP_ErrorCode code, const char* format, ...) {
  char buf[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return g_host->error_new(code, buf);
}

// The device memory: blocks at offsets from kBase, never reused.
class Arena {
 public:
  BP_Error* allocate(int32_t device, size_t nbytes, void** out) {
    if (device < 0 || device >= kNumDevices) return error(BP_INVALID_ARGUMENT, "tpdev: no device %d", device);
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
    if (it != blocks_.end() && it->second.device == device)
      blocks_.erase(it);
    else
      bad_frees_++;
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
    return error(BP_OUT_OF_RANGE, "tpdev %s: [0x%llx, +%zu) on tpdev:%d is not inside one live allocation", what,
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
  size_t bad_frees_ = 0;
};

Arena* g_arena = nullptr;

// ------------------------------------------------------------ device table

int32_t deviceCount(void*) { return kNumDevices; }
const char* unavailableReason(void*) { return nullptr; }

int liveHandles();

BP_Error* getProperties(void*, int32_t device, BP_DeviceProperties* out) {
  if (device < 0 || device >= kNumDevices) return error(BP_INVALID_ARGUMENT, "tpdev: no such device");
  std::snprintf(out->name, sizeof out->name, "tp good device %d", device);
  out->total_memory = kArenaBytes;
  out->multiprocessor_count = liveHandles();
  return nullptr;
}

// --------------------------------------------------- streams and events

// A stream or event: an object of the plugin's, known by its address. A null
// stream is the default stream.
struct Handle {
  int32_t device;
  bool is_event;
};

class Handles {
 public:
  BP_Error* create(int32_t device, bool is_event, void** out) {
    if (device < 0 || device >= kNumDevices) return error(BP_INVALID_ARGUMENT, "tpdev: no device %d", device);
    std::unique_ptr<Handle> h(new Handle{device, is_event});  // bad_alloc: the caller's catch
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(h.get());
    *out = h.release();
    return nullptr;
  }
  void destroy(int32_t device, void* p, bool is_event) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!valid(device, p, is_event)) return;  // nothing to report it to
    live_.erase(static_cast<Handle*>(p));
    for (void*& current : current_)
      if (current == p) current = nullptr;
    delete static_cast<Handle*>(p);
  }
  // An error unless `p` is a live handle of the kind on `device` (or, with
  // `null_ok`, the default stream).
  BP_Error* check(int32_t device, const void* p, bool is_event, const char* what, bool null_ok = false) {
    if (device < 0 || device >= kNumDevices) return error(BP_INVALID_ARGUMENT, "tpdev %s: no device %d", what, device);
    if (null_ok && !p) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    if (valid(device, p, is_event)) return nullptr;
    return error(BP_INVALID_ARGUMENT, "tpdev %s: %p is not a live %s of tpdev:%d", what, p,
                 is_event ? "event" : "stream", device);
  }
  void* current(int32_t device) {
    std::lock_guard<std::mutex> lock(mu_);
    return current_[device];
  }
  void setCurrent(int32_t device, void* stream) {
    std::lock_guard<std::mutex> lock(mu_);
    current_[device] = stream;
  }
  int live() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(live_.size());
  }

 private:
  bool valid(int32_t device, const void* p, bool is_event) {
    auto it = live_.find(static_cast<Handle*>(const_cast<void*>(p)));
    return it != live_.end() && (*it)->device == device && (*it)->is_event == is_event;
  }
  std::mutex mu_;
  std::set<Handle*> live_;
  void* current_[kNumDevices] = {};
};

Handles* g_handles = nullptr;

int liveHandles() { return g_handles ? g_handles->live() : 0; }

BP_Error* streamCreate(void*, int32_t device, BP_Stream** out) try {
  void* p = nullptr;
  BP_Error* e = g_handles->create(device, false, &p);
  *out = static_cast<BP_Stream*>(p);
  return e;
} catch (const std::bad_alloc&) {
  return error(BP_RESOURCE_EXHAUSTED, "tpdev: out of memory");
}
void streamDestroy(void*, int32_t device, BP_Stream* s) { g_handles->destroy(device, s, false); }
BP_Error* streamSynchronize(void*, int32_t device, BP_Stream* s) {
  return g_handles->check(device, s, false, "stream_synchronize", /*null_ok=*/true);
}
BP_Error* getCurrentStream(void*, int32_t device, BP_Stream** out) {
  if (BP_Error* e = g_handles->check(device, nullptr, false, "get_current_stream", true)) return e;
  *out = static_cast<BP_Stream*>(g_handles->current(device));
  return nullptr;
}
BP_Error* setCurrentStream(void*, int32_t device, BP_Stream* s) {
  if (BP_Error* e = g_handles->check(device, s, false, "set_current_stream", true)) return e;
  g_handles->setCurrent(device, s);
  return nullptr;
}
BP_Error* eventCreate(void*, int32_t device, BP_Event** out) try {
  void* p = nullptr;
  BP_Error* e = g_handles->create(device, true, &p);
  *out = static_cast<BP_Event*>(p);
  return e;
} catch (const std::bad_alloc&) {
  return error(BP_RESOURCE_EXHAUSTED, "tpdev: out of memory");
}
void eventDestroy(void*, int32_t device, BP_Event* e) { g_handles->destroy(device, e, true); }
BP_Error* eventRecord(void*, int32_t device, BP_Event* e, BP_Stream* s) {
  if (BP_Error* err = g_handles->check(device, e, true, "event_record")) return err;
  return g_handles->check(device, s, false, "event_record", true);
}
BP_Error* eventWait(void*, int32_t device, BP_Event* e, BP_Stream* s) {
  if (BP_Error* err = g_handles->check(device, e, true, "event_wait")) return err;
  return g_handles->check(device, s, false, "event_wait", true);
}
// ABI 1.8: an event of one tpdev orders a stream of the other; each handle
// must be live on its own device.
BP_Error* eventWaitDevice(void*, int32_t event_device, BP_Event* e, int32_t stream_device, BP_Stream* s) {
  if (event_device == stream_device)
    return error(BP_INVALID_ARGUMENT, "tpdev event_wait_device: both on tpdev:%d (the host calls event_wait then)",
                 event_device);
  if (BP_Error* err = g_handles->check(event_device, e, true, "event_wait_device")) return err;
  return g_handles->check(stream_device, s, false, "event_wait_device", true);
}
BP_Error* eventSynchronize(void*, int32_t device, BP_Event* e) {
  return g_handles->check(device, e, true, "event_synchronize");
}

BP_Error* allocate(void*, int32_t device, size_t nbytes, void** out) try {
  return g_arena->allocate(device, nbytes, out);
} catch (const std::bad_alloc&) {
  return error(BP_RESOURCE_EXHAUSTED, "tpdev: out of memory");
}

void deallocate(void*, int32_t device, void* ptr) { g_arena->deallocate(device, ptr); }

BP_Error* copyHostToDevice(void*, int32_t device, void* dst, const void* src, size_t n) {
  if (n == 0) return nullptr;
  unsigned char* d = nullptr;
  if (BP_Error* e = g_arena->resolve(device, dst, n, "copy_host_to_device", &d)) return e;
  std::memcpy(d, src, n);
  return nullptr;
}

BP_Error* copyDeviceToHost(void*, int32_t device, void* dst, const void* src, size_t n) {
  if (n == 0) return nullptr;
  unsigned char* s = nullptr;
  if (BP_Error* e = g_arena->resolve(device, src, n, "copy_device_to_host", &s)) return e;
  std::memcpy(dst, s, n);
  return nullptr;
}

BP_Error* copyDeviceToDevice(void*, int32_t dst_device, void* dst, int32_t src_device, const void* src, size_t n) {
  if (n == 0) return nullptr;
  unsigned char *d = nullptr, *s = nullptr;
  if (BP_Error* e = g_arena->resolve(dst_device, dst, n, "copy_device_to_device", &d)) return e;
  if (BP_Error* e = g_arena->resolve(src_device, src, n, "copy_device_to_device", &s)) return e;
  std::memmove(d, s, n);
  return nullptr;
}

BP_Error* memsetDevice(void*, int32_t device, void* dst, uint8_t value, size_t n) {
  if (n == 0) return nullptr;
  unsigned char* d = nullptr;
  if (BP_Error* e = g_arena->resolve(device, dst, n, "memset", &d)) return e;
  std::memset(d, value, n);
  return nullptr;
}

// ----------------------------------------------------------------- kernels

// ctx: &kCpu or &kTpdev, the device type this instance serves.
const int kCpu = 0, kTpdev = 1;

BP_Error* twice(void* ctx, const BP_KernelCall* call) {
  const bool on_tpdev = ctx == &kTpdev;
  const int32_t want_type = on_tpdev ? g_tpdev : 0;
  if (call->num_args != 1 || call->args[0].tag != BP_VALUE_TENSOR || call->num_returns != 1)
    return error(BP_INTERNAL, "tp::twice: expected one tensor argument and one return");
  BP_TensorInfo in{};
  in.struct_size = BP_TensorInfo_STRUCT_SIZE;
  g_host->tensor_info(call->args[0].u.tensor, &in);
  if (in.dtype != BP_FLOAT32) return error(BP_INVALID_ARGUMENT, "tp::twice supports float32 only");
  if (!in.is_contiguous) return error(BP_UNIMPLEMENTED, "tp::twice supports contiguous tensors only");
  if (in.device.type != want_type)
    return error(BP_INTERNAL, "tp::twice: the kernel for device type %d got a tensor on device type %d", want_type,
                 in.device.type);
  BP_Tensor* out_t = nullptr;
  if (BP_Error* e = g_host->tensor_empty(in.sizes, static_cast<size_t>(in.dim), nullptr, BP_FLOAT32, in.device, &out_t))
    return e;
  BP_TensorInfo out{};
  out.struct_size = BP_TensorInfo_STRUCT_SIZE;
  g_host->tensor_info(out_t, &out);
  const size_t n = static_cast<size_t>(in.numel), bytes = n * sizeof(float);
  if (n > 0) {
    const float* src = nullptr;
    float* dst = nullptr;
    if (on_tpdev) {  // "device code": reaches the arena directly
      unsigned char *s = nullptr, *d = nullptr;
      BP_Error* e = g_arena->resolve(in.device.index, in.data, bytes, "tp::twice input", &s);
      if (!e) e = g_arena->resolve(out.device.index, out.data, bytes, "tp::twice output", &d);
      if (e) {
        g_host->tensor_release(out_t);
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

BP_Error* init(const BP_HostApi* host, BP_Plugin* plugin) {
  if (host->struct_size < BP_STRUCT_SIZE(BP_HostApi, op_redispatch) || host->abi_major != BP_ABI_MAJOR)
    return host->error_new(BP_FAILED_PRECONDITION, "tp_good: the host table is too old");
  g_host = host;
  if (!g_arena) g_arena = new Arena();
  if (!g_handles) g_handles = new Handles();

  BP_DeviceTypeDesc dev{};
  dev.struct_size = BP_DeviceTypeDesc_STRUCT_SIZE;
  dev.name = "tpdev";
  dev.host_accessible = 0;
  dev.device_count = &deviceCount;
  dev.unavailable_reason = &unavailableReason;
  dev.get_properties = &getProperties;
  dev.allocate = &allocate;
  dev.deallocate = &deallocate;
  dev.copy_host_to_device = &copyHostToDevice;
  dev.copy_device_to_host = &copyDeviceToHost;
  dev.copy_device_to_device = &copyDeviceToDevice;
  dev.memset = &memsetDevice;
  dev.stream_create = &streamCreate;
  dev.stream_destroy = &streamDestroy;
  dev.stream_synchronize = &streamSynchronize;
  dev.get_current_stream = &getCurrentStream;
  dev.set_current_stream = &setCurrentStream;
  dev.event_create = &eventCreate;
  dev.event_destroy = &eventDestroy;
  dev.event_record = &eventRecord;
  dev.event_wait = &eventWait;
  dev.event_synchronize = &eventSynchronize;
  dev.event_wait_device = &eventWaitDevice;
  if (BP_Error* e = host->register_device_type(plugin, &dev, &g_tpdev)) return e;

  if (BP_Error* e = host->def(plugin, "tp::twice(Tensor self) -> Tensor")) return e;
  BP_KernelDesc k{};
  k.struct_size = BP_KernelDesc_STRUCT_SIZE;
  k.fn = &twice;
  k.cpp_signature = "(Tensor) -> Tensor";
  k.ctx = const_cast<int*>(&kTpdev);
  if (BP_Error* e = host->impl(plugin, "tp::twice", g_tpdev, &k)) return e;
  k.ctx = const_cast<int*>(&kCpu);
  if (BP_Error* e = host->impl(plugin, "tp::twice", 0, &k)) return e;
  return nullptr;
}

}  // namespace

extern "C" BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &kInfo; }

extern "C" BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  try {
    return init(host, plugin);
  } catch (...) {
    return host->error_new(BP_INTERNAL, "tp_good: init failed with an exception");
  }
}

extern "C" BP_EXPORT void backplane_plugin_shutdown(BP_Plugin*) {
  // The host unloads only when no allocation is alive, so the arena is empty.
  if (g_arena && g_arena->live() == 0) {
    delete g_arena;
    g_arena = nullptr;
  }
  if (g_handles && g_handles->live() == 0) {
    delete g_handles;
    g_handles = nullptr;
  }
  g_host = nullptr;
  g_tpdev = -1;
}
