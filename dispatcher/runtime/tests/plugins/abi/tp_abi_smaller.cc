// tp_abi_smaller: hands the host structs SMALLER than the host knows, as a
// plugin built against an older minor would (Note [ABI rules]: a receiver
// treats fields past a smaller struct_size as zero/NULL). The memory past
// each struct_size is garbage the host must not read: 0xFF bytes, or where a
// mistaken call would be worth a clear message, functions that count the
// call and fail (kTrap).
//
//   "abismalldev":    BP_DeviceTypeDesc ending before stream_create (every
//                     slot it has is set); 0xFF bytes after.
//   "abismallolddev": BP_DeviceTypeDesc ending before copy_device_to_device:
//                     the host must treat copy_device_to_device, memset and
//                     synchronize as NULL (and fall back); they hold traps,
//                     0xFF bytes after them.
//   abi_smaller::twice(Tensor self) -> Tensor: for abismalldev and cpu
//     through a BP_KernelDesc ending before cpp_signature, which holds a
//     garbage pointer (reading it faults); for abismallolddev through one
//     ending before cpp_signature, which holds a valid but WRONG signature
//     (reading it makes registration fail).
//   abi_smaller::info(int which) -> int on cpu, through a BP_KernelDesc
//     ending before ctx (0xFF bytes there): the kernel fails unless ctx
//     arrives as NULL. 0 the abismalldev number, 1 the abismallolddev
//     number; counters.
#include "abi_plugin.hpp"

namespace {

const BP_PluginInfo kInfo = {BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR,
                             "tp_abi_smaller",          "1.0.0"};

int32_t g_small = -1, g_old = -1;
const int32_t kCpuType = 0;
const TwiceCtx kOnCpu{&kCpuType}, kOnSmall{&g_small}, kOnOld{&g_old};

union DeviceStorage {
  BP_DeviceTypeDesc desc;
  unsigned char bytes[sizeof(BP_DeviceTypeDesc)];
};
union KernelStorage {
  BP_KernelDesc desc;
  unsigned char bytes[sizeof(BP_KernelDesc)];
};

BP_Error* trapCopyDeviceToDevice(void*, int32_t, void*, int32_t, const void*, size_t) {
  count(kTrap);
  return error(BP_INTERNAL, "the host called copy_device_to_device, which lies past the table's struct_size");
}
BP_Error* trapMemset(void*, int32_t, void*, uint8_t, size_t) {
  count(kTrap);
  return error(BP_INTERNAL, "the host called memset, which lies past the table's struct_size");
}
BP_Error* trapSynchronize(void*, int32_t) {
  count(kTrap);
  return error(BP_INTERNAL, "the host called synchronize, which lies past the table's struct_size");
}

// The full arena table's first `size` bytes; 0xFF bytes after them.
DeviceStorage truncatedDevice(const char* name, size_t size) {
  DeviceStorage s;
  std::memset(s.bytes, 0xFF, sizeof s.bytes);
  BP_DeviceTypeDesc full = deviceDesc(name, /*with_optional_slots=*/true);
  std::memcpy(s.bytes, &full, size);
  s.desc.struct_size = size;
  return s;
}

KernelStorage truncatedKernel(BP_KernelFn fn, const void* ctx, size_t size) {
  KernelStorage s;
  std::memset(s.bytes, 0xFF, sizeof s.bytes);
  BP_KernelDesc full = kernelDesc(fn, const_cast<void*>(ctx), nullptr);
  std::memcpy(s.bytes, &full, size);
  s.desc.struct_size = size;
  return s;
}

BP_Error* infoIfCtxIsNull(void* ctx, const BP_KernelCall* call) {
  if (ctx != nullptr)
    return error(BP_INTERNAL, "info: ctx is %p, not NULL: the host read BP_KernelDesc.ctx past struct_size", ctx);
  return infoKernel(ctx, call);
}

BP_Error* init(const BP_HostApi* host, BP_Plugin* plugin) {
  saveHostFns(host);
  arenaInit();

  DeviceStorage small = truncatedDevice("abismalldev", offsetof(BP_DeviceTypeDesc, stream_create));
  if (BP_Error* e = host->register_device_type(plugin, &small.desc, &g_small)) return e;
  g_info[0] = g_small;

  DeviceStorage old = truncatedDevice("abismallolddev", offsetof(BP_DeviceTypeDesc, copy_device_to_device));
  old.desc.copy_device_to_device = &trapCopyDeviceToDevice;
  old.desc.memset = &trapMemset;
  old.desc.synchronize = &trapSynchronize;
  if (BP_Error* e = host->register_device_type(plugin, &old.desc, &g_old)) return e;
  g_info[1] = g_old;

  if (BP_Error* e = host->def(plugin, "abi_smaller::twice(Tensor self) -> Tensor")) return e;
  // cpp_signature: 0xFF..FF, a pointer that faults.
  KernelStorage k = truncatedKernel(&twiceKernel, &kOnSmall, offsetof(BP_KernelDesc, cpp_signature));
  if (BP_Error* e = host->impl(plugin, "abi_smaller::twice", g_small, &k.desc)) return e;
  k = truncatedKernel(&twiceKernel, &kOnCpu, offsetof(BP_KernelDesc, cpp_signature));
  if (BP_Error* e = host->impl(plugin, "abi_smaller::twice", 0, &k.desc)) return e;
  // cpp_signature: readable, and wrong for the schema.
  k = truncatedKernel(&twiceKernel, &kOnOld, offsetof(BP_KernelDesc, cpp_signature));
  k.desc.cpp_signature = "(Tensor, Tensor, Scalar) -> Tensor";
  if (BP_Error* e = host->impl(plugin, "abi_smaller::twice", g_old, &k.desc)) return e;

  if (BP_Error* e = host->def(plugin, "abi_smaller::info(int which) -> int")) return e;
  // ctx (0xFF..FF) and cpp_signature lie past struct_size.
  KernelStorage info = truncatedKernel(&infoIfCtxIsNull, nullptr, offsetof(BP_KernelDesc, ctx));
  if (BP_Error* e = host->impl(plugin, "abi_smaller::info", 0, &info.desc)) return e;
  return nullptr;
}

}  // namespace

extern "C" BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &kInfo; }

extern "C" BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  try {
    return init(host, plugin);
  } catch (...) {
    return host->error_new(BP_INTERNAL, "tp_abi_smaller: init failed with an exception");
  }
}

extern "C" BP_EXPORT void backplane_plugin_shutdown(BP_Plugin*) {
  arenaShutdown();
  g_small = g_old = -1;
}
