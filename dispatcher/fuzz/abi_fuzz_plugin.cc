// The fake plugin of fuzz_plugin_abi (plugin_abi_fuzzer.cc): a plugin
// library whose BP_PluginInfo, init script, device tables and kernel tables
// come from the fuzz input. The target dlopens it first and hands it the
// input with fuzz_abi_plugin_set_script() (exported besides the entry
// points, which is why it is not built with backplane_add_plugin, whose
// version script exports the entry points only), then loads it through the
// plugin registry as any plugin. Everything it sends is what a plugin may
// send: sizes, versions, NULL slots, bad names, schemas, signatures and
// dtype masks, too-large counts, errors with any code, kernels that return
// nothing, the wrong kind of value or errors, allocators that fail. It does
// not lie about memory it hands over (a buffer shorter than its
// struct_size, an unretained tensor): the host cannot tell those from
// valid ones.
#include <backplane/plugin_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "abi_fuzz_plugin.h"
#include "field_reader.h"

using backplane::fuzz::FieldReader;

namespace {

// What the script decides for one device type or kernel; static, so the
// host may keep the ctx pointers until the plugin unloads.
struct DeviceBehaviour {
  int32_t count = 1;
  uint8_t allocate = 0;  // 0: malloc, 1: an error, 2: "success" without memory
  bool has_reason = false;
};
struct KernelBehaviour {
  uint8_t action = 0;
  int32_t error_code = BP_INVALID_ARGUMENT;
  bool null_message = false;
};
constexpr int kMaxDevices = 4, kMaxKernels = 16;
DeviceBehaviour g_devices[kMaxDevices];
KernelBehaviour g_kernels[kMaxKernels];

struct State {
  std::vector<uint8_t> script;
  std::vector<std::string> strings;  // the target's table (schemas, op names, signatures)
  bool good = false;
  std::vector<uint8_t> info;      // the BP_PluginInfo as sent: exactly struct_size bytes
  std::deque<std::string> arena;  // raw strings, alive until the next script
  const BP_HostApi* host = nullptr;
  int init_calls = 0, shutdown_calls = 0;
  int64_t live_allocations = 0;
};
State& state() {
  static State* s = new State();
  return *s;
}

// ------------------------------------------------------- device functions

DeviceBehaviour& dev(void* ctx) { return *static_cast<DeviceBehaviour*>(ctx); }
int32_t deviceCount(void* ctx) { return dev(ctx).count; }
const char* unavailableReason(void* ctx) { return dev(ctx).has_reason ? "fuzz: no such hardware" : nullptr; }
BP_Error* getProperties(void*, int32_t, BP_DeviceProperties* out) {
  BP_DeviceProperties p;
  std::memset(&p, 0, sizeof p);
  std::memset(p.name, 'A', sizeof p.name);  // no NUL: the host must stop at 128
  p.total_memory = 1 << 20;
  const size_t n = out->struct_size < sizeof p ? out->struct_size : sizeof p;
  p.struct_size = n;
  std::memcpy(out, &p, n);
  return nullptr;
}
BP_Error* allocate(void* ctx, int32_t, size_t nbytes, void** out) {
  switch (dev(ctx).allocate) {
    case 1: return state().host->error_new(BP_RESOURCE_EXHAUSTED, "fuzz: allocation refused");
    case 2: *out = nullptr; return nullptr;
    default: break;
  }
  *out = nbytes == 0 ? nullptr : std::malloc(nbytes);
  if (*out != nullptr) ++state().live_allocations;
  return nullptr;
}
void deallocate(void*, int32_t, void* p) {
  if (p != nullptr) --state().live_allocations;
  std::free(p);
}
BP_Error* copy(void*, int32_t, void* dst, const void* src, size_t n) {
  if (n != 0) std::memcpy(dst, src, n);
  return nullptr;
}
BP_Error* copyD2D(void*, int32_t, void* dst, int32_t, const void* src, size_t n) {
  if (n != 0) std::memcpy(dst, src, n);
  return nullptr;
}
BP_Error* memsetFn(void*, int32_t, void* dst, uint8_t v, size_t n) {
  if (n != 0) std::memset(dst, v, n);
  return nullptr;
}
BP_Error* synchronize(void*, int32_t) { return nullptr; }
int g_handle;  // what streams and events point to
BP_Error* streamCreate(void*, int32_t, BP_Stream** out) {
  *out = reinterpret_cast<BP_Stream*>(&g_handle);
  return nullptr;
}
void streamDestroy(void*, int32_t, BP_Stream*) {}
BP_Error* streamSync(void*, int32_t, BP_Stream*) { return nullptr; }
BP_Error* getStream(void*, int32_t, BP_Stream** out) {
  *out = nullptr;
  return nullptr;
}
BP_Error* setStream(void*, int32_t, BP_Stream*) { return nullptr; }
BP_Error* eventCreate(void*, int32_t, BP_Event** out) {
  *out = reinterpret_cast<BP_Event*>(&g_handle);
  return nullptr;
}
void eventDestroy(void*, int32_t, BP_Event*) {}
BP_Error* eventRecord(void*, int32_t, BP_Event*, BP_Stream*) { return nullptr; }
BP_Error* eventWait(void*, int32_t, BP_Event*, BP_Stream*) { return nullptr; }
BP_Error* eventSync(void*, int32_t, BP_Event*) { return nullptr; }
BP_Error* eventQuery(void*, int32_t, BP_Event*, uint8_t* done) {
  *done = 1;
  return nullptr;
}

// ----------------------------------------------------------------- kernels

thread_local int t_depth = 0;

// The first tensor argument, or NULL.
BP_Tensor* firstTensor(const BP_KernelCall* call) {
  for (size_t i = 0; i < call->num_args; ++i)
    if (call->args[i].tag == BP_VALUE_TENSOR && call->args[i].u.tensor) return call->args[i].u.tensor;
  return nullptr;
}

BP_Error* kernel(void* ctx, const BP_KernelCall* call) {
  const KernelBehaviour& k = *static_cast<const KernelBehaviour*>(ctx);
  const BP_HostApi& host = *state().host;
  BP_Tensor* x = firstTensor(call);
  switch (k.action % 7) {
    case 0:  // the identity, as well as the returns allow
      for (size_t j = 0; j < call->num_returns; ++j) {
        if (x) {
          call->returns[j].tag = BP_VALUE_TENSOR;
          call->returns[j].u.tensor = host.tensor_retain(x);
        } else {
          call->returns[j].tag = BP_VALUE_INT;
          call->returns[j].u.i = 0;
        }
      }
      return nullptr;
    case 1:  // an error with any code (also none of BP_ErrorCode's)
      return host.error_new(k.error_code, k.null_message ? nullptr : "fuzz kernel error");
    case 2:  // no returns set
      return nullptr;
    case 3:  // the wrong kind of value
      for (size_t j = 0; j < call->num_returns; ++j) {
        call->returns[j].tag = BP_VALUE_INT;
        call->returns[j].u.i = 7;
      }
      return nullptr;
    case 4: {  // a new tensor from tensor_empty with odd arguments
      const int64_t sizes[2] = {2, k.error_code % 64};
      BP_Tensor* t = nullptr;
      BP_Error* e =
          host.tensor_empty(k.null_message ? nullptr : sizes, 2, nullptr, k.error_code % 16, BP_Device{0, 0}, &t);
      if (e) return e;
      for (size_t j = 0; j < call->num_returns; ++j) {
        call->returns[j].tag = BP_VALUE_TENSOR;
        call->returns[j].u.tensor = j == 0 ? t : host.tensor_retain(t);
      }
      if (call->num_returns == 0) host.tensor_release(t);
      return nullptr;
    }
    case 5: {  // calls an operator through the host, re-entrantly
      if (t_depth > 2) return host.error_new(BP_ABORTED, "fuzz kernel: too deep");
      const BP_Operator* op = nullptr;
      if (BP_Error* e = host.op_find(k.null_message ? "fuzzabi::unary" : "neg", &op)) return e;
      BP_Value ret{};
      ++t_depth;
      BP_Error* e = host.op_call(op, call->args, call->num_args, &ret, 1);
      --t_depth;
      if (e) return e;
      if (call->num_returns > 0) {
        call->returns[0] = ret;
      } else if (ret.tag == BP_VALUE_TENSOR) {
        host.tensor_release(ret.u.tensor);
      }
      return nullptr;
    }
    default:  // more returns than asked: a second tensor, then an error (the host releases what was set)
      for (size_t j = 0; j < call->num_returns; ++j) {
        call->returns[j].tag = BP_VALUE_TENSOR;
        call->returns[j].u.tensor = x ? host.tensor_retain(x) : nullptr;
      }
      return host.error_new(BP_INTERNAL, "fuzz kernel: failed after setting its returns");
  }
}

// The same kernel's typed entry (Note [Typed kernel entries]) for the one
// signature it is registered with, "(Tensor) -> Tensor": its behaviours
// through a call of one argument and one return. A return of another kind
// than a tensor cannot pass through the pointer: it is left NULL (missing).
BP_Error* typedKernel(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* x, BP_Tensor** out) {
  BP_Value arg{};
  if (x) {
    arg.tag = BP_VALUE_TENSOR;
    arg.u.tensor = x;
  }
  BP_Value ret{};
  const BP_KernelCall call{BP_KernelCall_STRUCT_SIZE, op, keys, &arg, 1, &ret, 1};
  BP_Error* e = kernel(ctx, &call);
  if (ret.tag == BP_VALUE_TENSOR) *out = ret.u.tensor;
  return e;
}
constexpr const char* kTypedSignature = "(Tensor) -> Tensor";

// ------------------------------------------------------------------ script

// A string: one of the target's table, NULL, or raw bytes.
const char* takeString(FieldReader& in) {
  State& s = state();
  const uint8_t b = in.take<uint8_t>();
  if (b == 0xFF) return nullptr;
  if (b < 0xE0 && !s.strings.empty()) return s.strings[b % s.strings.size()].c_str();
  const size_t n = in.take<uint8_t>() % 48;
  std::string raw;
  for (size_t i = 0; i < n; ++i) raw.push_back(static_cast<char>(in.take<uint8_t>()));
  s.arena.push_back(std::move(raw));
  return s.arena.back().c_str();
}

// A struct_size for a struct whose current size is `current`, whose
// sizeof is `full` and whose older sizes are `older`.
size_t takeStructSize(FieldReader& in, size_t current, size_t full, size_t older) {
  switch (in.take<uint8_t>() % 8) {
    case 0:
    case 1: return current;
    case 2: return full;
    case 3: return older;
    case 4: return in.take<uint16_t>() % 320;
    case 5: return 0;
    case 6: return BP_MAX_STRUCT_SIZE + in.take<uint8_t>();
    default: return current + 8 * (in.take<uint8_t>() % 4);
  }
}

// `full` (a complete struct) sent as exactly `size` bytes: cut, or with
// non-zero bytes after it. The host reads at most `size` bytes; sizes it
// must refuse (over BP_MAX_STRUCT_SIZE) get a buffer of the real struct.
std::vector<uint8_t> asSent(const void* full, size_t full_size, size_t size) {
  std::vector<uint8_t> bytes(size > 4096 ? full_size : (size < sizeof(size_t) ? sizeof(size_t) : size), 0xA5);
  std::memcpy(bytes.data(), full, bytes.size() < full_size ? bytes.size() : full_size);
  std::memcpy(bytes.data(), &size, sizeof size);  // struct_size itself
  return bytes;
}

int g_next_device = 0, g_next_kernel = 0, g_last_device_type = -1;

BP_Error* registerDevice(FieldReader& in, BP_Plugin* plugin) {
  const BP_HostApi& host = *state().host;
  DeviceBehaviour& b = g_devices[g_next_device++ % kMaxDevices];
  static constexpr int32_t kCounts[] = {0, 1, 2, -5, 1000, INT32_MAX, 256, 3};
  b.count = kCounts[in.take<uint8_t>() % 8];
  b.allocate = in.take<uint8_t>() % 3;
  b.has_reason = in.flag();
  BP_DeviceTypeDesc d;
  std::memset(&d, 0, sizeof d);
  d.name = takeString(in);
  d.ctx = &b;
  d.host_accessible = in.take<uint8_t>() % 3;
  const uint32_t nulls = in.take<uint32_t>();
  auto slot = [&](int i, auto fn) { return (nulls >> i) & 1 ? nullptr : fn; };
  d.device_count = slot(0, &deviceCount);
  d.unavailable_reason = slot(1, &unavailableReason);
  d.get_properties = slot(2, &getProperties);
  d.allocate = slot(3, &allocate);
  d.deallocate = slot(4, &deallocate);
  d.copy_host_to_device = slot(5, &copy);
  d.copy_device_to_host = slot(6, &copy);
  d.copy_device_to_device = slot(7, &copyD2D);
  d.memset = slot(8, &memsetFn);
  d.synchronize = slot(9, &synchronize);
  d.stream_create = slot(10, &streamCreate);
  d.stream_destroy = slot(11, &streamDestroy);
  d.stream_synchronize = slot(12, &streamSync);
  d.get_current_stream = slot(13, &getStream);
  d.set_current_stream = slot(14, &setStream);
  d.event_create = slot(15, &eventCreate);
  d.event_destroy = slot(16, &eventDestroy);
  d.event_record = slot(17, &eventRecord);
  d.event_wait = slot(18, &eventWait);
  d.event_synchronize = slot(19, &eventSync);
  d.event_query = slot(20, &eventQuery);
  static constexpr int32_t kDlpack[] = {0, 2, 10, 12, -1, 1};
  const uint8_t dl = in.take<uint8_t>();
  d.dlpack_device_type = dl < 0xF0 ? kDlpack[dl % 6] : in.take<int32_t>();
  const size_t size =
      takeStructSize(in, BP_DeviceTypeDesc_STRUCT_SIZE, sizeof d, offsetof(BP_DeviceTypeDesc, dlpack_device_type));
  d.struct_size = size;
  std::vector<uint8_t> sent = asSent(&d, sizeof d, size);
  int32_t type = -1;
  BP_Error* e = host.register_device_type(
      plugin, in.take<uint8_t>() == 0xFF ? nullptr : reinterpret_cast<const BP_DeviceTypeDesc*>(sent.data()),
      in.flag() ? nullptr : &type);
  if (!e && type >= 0) g_last_device_type = type;
  return e;
}

int32_t takeDeviceType(FieldReader& in) {
  const BP_HostApi& host = *state().host;
  switch (in.take<uint8_t>() % 6) {
    case 0:
    case 1: return 0;
    case 2: return g_last_device_type;
    case 3: {
      int32_t t = -1;
      if (BP_Error* e = host.device_type_find(takeString(in), &t)) host.error_free(e);
      return t;
    }
    case 4: return 63 + in.take<uint8_t>() % 4;
    default: return in.take<int32_t>();
  }
}

BP_Error* registerKernel(FieldReader& in, BP_Plugin* plugin, int which) {
  const BP_HostApi& host = *state().host;
  KernelBehaviour& b = g_kernels[g_next_kernel++ % kMaxKernels];
  b.action = in.take<uint8_t>();
  static constexpr int32_t kCodes[] = {BP_INVALID_ARGUMENT, BP_OK, -1, 99, BP_INTERNAL, BP_UNAVAILABLE};
  const uint8_t c = in.take<uint8_t>();
  b.error_code = c < 0xF0 ? kCodes[c % 6] : in.take<int32_t>();
  b.null_message = in.flag();
  const char* op = which == 2 ? nullptr : takeString(in);
  const int32_t type = takeDeviceType(in);
  BP_KernelDesc k;
  std::memset(&k, 0, sizeof k);
  k.fn = in.take<uint8_t>() == 0xFF ? nullptr : &kernel;
  k.ctx = &b;
  k.cpp_signature = takeString(in);
  static constexpr uint64_t kMasks[] = {0,
                                        BP_DTYPE_BIT(BP_FLOAT32),
                                        BP_DTYPE_BIT(BP_FLOAT32) | BP_DTYPE_BIT(BP_INT64),
                                        BP_DTYPE_BIT(BP_UINT64 + 1),
                                        ~uint64_t{0},
                                        BP_DTYPE_BIT(BP_INT16)};
  const uint8_t m = in.take<uint8_t>();
  k.dtypes = m < 0xF0 ? kMasks[m % 6] : in.take<uint64_t>();
  // A typed entry (ABI 1.14) where its C type is the one it has, where the
  // host must refuse it (no cpp_signature, a fallback), or none: a typed
  // entry of another C type than its signature says is the plugin's bug,
  // which the host cannot see.
  if (in.flag() && (k.cpp_signature == nullptr || which == 2 || std::strcmp(k.cpp_signature, kTypedSignature) == 0))
    k.typed_fn = reinterpret_cast<BP_TypedKernelFn>(&typedKernel);
  const size_t size = takeStructSize(in, BP_KernelDesc_STRUCT_SIZE, sizeof k, offsetof(BP_KernelDesc, dtypes));
  k.struct_size = size;
  std::vector<uint8_t> sent = asSent(&k, sizeof k, size);
  const auto* desc = in.take<uint8_t>() == 0xFF ? nullptr : reinterpret_cast<const BP_KernelDesc*>(sent.data());
  switch (which) {
    case 0: return host.impl(plugin, op, type, desc);
    case 1: return host.impl_when_defined(plugin, op, type, desc);
    default: return host.fallback(plugin, type, desc);
  }
}

BP_Error* runScript(BP_Plugin* plugin) {
  State& s = state();
  const BP_HostApi& host = *s.host;
  FieldReader in(s.script.data(), s.script.size());
  g_next_device = g_next_kernel = 0;
  g_last_device_type = -1;
  const int actions = in.take<uint8_t>() % 10;
  for (int a = 0; a < actions; ++a) {
    BP_Error* e = nullptr;
    switch (in.take<uint8_t>() % 8) {
      case 0: e = registerDevice(in, plugin); break;
      case 1:
      case 2: e = host.def(plugin, takeString(in)); break;
      case 3:
      case 4: e = registerKernel(in, plugin, 0); break;
      case 5: e = registerKernel(in, plugin, 1); break;
      case 6: e = registerKernel(in, plugin, 2); break;
      default: host.log(plugin, in.take<uint8_t>() % 6 - 1, takeString(in)); break;
    }
    if (e && in.flag()) return e;  // give up: the host must undo everything so far
    if (e) host.error_free(e);
  }
  switch (in.take<uint8_t>() % 8) {
    case 0: {
      const uint8_t c = in.take<uint8_t>();
      return host.error_new(c < 0xF0 ? BP_INTERNAL : in.take<int32_t>(), "fuzz: init failed at the end");
    }
    case 1: throw std::runtime_error("fuzz: init threw");
    default: return nullptr;
  }
}

// The plugin the target loads between fuzzed ones, which must always work.
BP_Error* runGood(BP_Plugin* plugin) {
  const BP_HostApi& host = *state().host;
  g_devices[0] = DeviceBehaviour{};
  BP_DeviceTypeDesc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = BP_DeviceTypeDesc_STRUCT_SIZE;
  d.name = "fuzzgooddev";
  d.ctx = &g_devices[0];
  d.device_count = &deviceCount;
  d.allocate = &allocate;
  d.deallocate = &deallocate;
  d.copy_host_to_device = &copy;
  d.copy_device_to_host = &copy;
  int32_t type = -1;
  if (BP_Error* e = host.register_device_type(plugin, &d, &type)) return e;
  if (BP_Error* e = host.def(plugin, "fuzzgood::id(Tensor x) -> Tensor")) return e;
  g_kernels[0] = KernelBehaviour{};
  BP_KernelDesc k;
  std::memset(&k, 0, sizeof k);
  k.struct_size = BP_KernelDesc_STRUCT_SIZE;
  k.fn = &kernel;
  k.ctx = &g_kernels[0];
  if (BP_Error* e = host.impl(plugin, "fuzzgood::id", 0, &k)) return e;
  return host.impl(plugin, "fuzzgood::id", type, &k);
}

}  // namespace

extern "C" {

// abi_fuzz_plugin.h says what these do.
BP_EXPORT void fuzz_abi_plugin_set_script(const uint8_t* data, size_t size, const char* const* strings,
                                          size_t num_strings, int good) {
  State& s = state();
  s.script.assign(data, data + size);
  s.strings.assign(strings, strings + num_strings);
  s.arena.clear();
  s.good = good != 0;
  FieldReader in(data, size);
  BP_PluginInfo info;
  std::memset(&info, 0, sizeof info);
  info.magic = BP_PLUGIN_MAGIC;
  info.abi_major = BP_ABI_MAJOR;
  info.abi_minor = BP_ABI_MINOR;
  info.name = "fuzzgood";
  info.version = "1.0";
  size_t size_sent = BP_PluginInfo_STRUCT_SIZE;
  if (!s.good) {
    // The info's fields come after the script in the input: the script
    // reads from the front, so give the info its own reader on the tail.
    FieldReader tail(size >= 24 ? data + size - 24 : data, size >= 24 ? 24 : size);
    const uint8_t f = tail.take<uint8_t>();
    if (f & 1) info.magic = tail.take<uint32_t>();
    if (f & 2) info.abi_major = tail.take<uint8_t>() % 3;
    if (f & 4) info.abi_minor = tail.take<uint8_t>() % 8;
    info.name = (f & 8) ? takeString(tail) : "fuzzabi";
    info.version = (f & 16) ? nullptr : "0.0";
    if (f & 32) size_sent = takeStructSize(tail, BP_PluginInfo_STRUCT_SIZE, sizeof info, 16);
  }
  info.struct_size = size_sent;
  s.info = asSent(&info, sizeof info, size_sent);
}

BP_EXPORT FuzzAbiPluginCounts fuzz_abi_plugin_counts() {
  const State& s = state();
  return FuzzAbiPluginCounts{s.init_calls, s.shutdown_calls, s.live_allocations};
}

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) {
  return reinterpret_cast<const BP_PluginInfo*>(state().info.data());
}

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  State& s = state();
  s.host = host;
  ++s.init_calls;
  return s.good ? runGood(plugin) : runScript(plugin);
}

BP_EXPORT void backplane_plugin_shutdown(BP_Plugin*) { ++state().shutdown_calls; }

}  // extern "C"
