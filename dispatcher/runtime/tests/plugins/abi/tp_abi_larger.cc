// tp_abi_larger: hands the host structs LARGER than the host knows, as a
// plugin built against a future minor would (Note [ABI rules]: a receiver
// accepts a larger struct, ignoring the fields it does not know). Each
// struct is today's struct embedded at the start of a larger one whose extra
// fields hold garbage (0xFF bytes); struct_size counts them all.
//
//   "abilargedev":    BP_DeviceTypeDesc, struct_size sizeof + 64.
//   "abilargemaxdev": BP_DeviceTypeDesc, struct_size BP_MAX_STRUCT_SIZE (the
//                     largest size a receiver accepts).
//   abi_larger::twice(Tensor self) -> Tensor: on abilargedev and cpu through
//     a BP_KernelDesc of sizeof + 64, on abilargemaxdev through one of
//     BP_MAX_STRUCT_SIZE.
//   abi_larger::info(int which) -> int on cpu (sizeof + 64): 0 the
//     abilargedev number, 1 the abilargemaxdev number; counters.
#include "abi_plugin.hpp"

namespace {

const BP_PluginInfo kInfo = {BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR,
                             "tp_abi_larger",           "1.0.0"};

// As a future SDK might declare them: today's fields, then new ones.
struct FutureDeviceTypeDesc {
  BP_DeviceTypeDesc base;
  unsigned char added_later[64];
};
struct FutureKernelDesc {
  BP_KernelDesc base;
  unsigned char added_later[64];
};
static_assert(sizeof(FutureDeviceTypeDesc) == sizeof(BP_DeviceTypeDesc) + 64);
static_assert(sizeof(FutureKernelDesc) == sizeof(BP_KernelDesc) + 64);

// Storage for the largest structs a receiver accepts.
union MaxDeviceTypeDesc {
  BP_DeviceTypeDesc desc;
  unsigned char bytes[BP_MAX_STRUCT_SIZE];
};
union MaxKernelDesc {
  BP_KernelDesc desc;
  unsigned char bytes[BP_MAX_STRUCT_SIZE];
};
MaxDeviceTypeDesc* g_max_dev = nullptr;
MaxKernelDesc* g_max_kernel = nullptr;

int32_t g_dev = -1, g_max_dev_type = -1;
const int32_t kCpuType = 0;
const TwiceCtx kOnCpu{&kCpuType}, kOnDev{&g_dev}, kOnMaxDev{&g_max_dev_type};

FutureDeviceTypeDesc futureDevice(const char* name) {
  FutureDeviceTypeDesc d;
  std::memset(&d, 0xFF, sizeof d);
  d.base = deviceDesc(name, /*with_optional_slots=*/true);
  d.base.struct_size = sizeof d;
  return d;
}

FutureKernelDesc futureKernel(BP_KernelFn fn, const void* ctx, const char* cpp_signature) {
  FutureKernelDesc k;
  std::memset(&k, 0xFF, sizeof k);
  k.base = kernelDesc(fn, const_cast<void*>(ctx), cpp_signature);
  k.base.struct_size = sizeof k;
  return k;
}

void freeMaxStructs() {
  delete g_max_dev;
  delete g_max_kernel;
  g_max_dev = nullptr;
  g_max_kernel = nullptr;
}

BP_Error* init(const BP_HostApi* host, BP_Plugin* plugin) {
  saveHostFns(host);
  arenaInit();

  FutureDeviceTypeDesc dev = futureDevice("abilargedev");
  if (BP_Error* e = host->register_device_type(plugin, &dev.base, &g_dev)) return e;
  g_info[0] = g_dev;

  g_max_dev = new MaxDeviceTypeDesc;
  std::memset(g_max_dev->bytes, 0xFF, sizeof g_max_dev->bytes);
  g_max_dev->desc = deviceDesc("abilargemaxdev", /*with_optional_slots=*/true);
  g_max_dev->desc.struct_size = BP_MAX_STRUCT_SIZE;
  if (BP_Error* e = host->register_device_type(plugin, &g_max_dev->desc, &g_max_dev_type)) return e;
  g_info[1] = g_max_dev_type;

  if (BP_Error* e = host->def(plugin, "abi_larger::twice(Tensor self) -> Tensor")) return e;
  FutureKernelDesc k = futureKernel(&twiceKernel, &kOnDev, "(Tensor) -> Tensor");
  if (BP_Error* e = host->impl(plugin, "abi_larger::twice", g_dev, &k.base)) return e;
  k = futureKernel(&twiceKernel, &kOnCpu, "(Tensor) -> Tensor");
  if (BP_Error* e = host->impl(plugin, "abi_larger::twice", 0, &k.base)) return e;

  g_max_kernel = new MaxKernelDesc;
  std::memset(g_max_kernel->bytes, 0xFF, sizeof g_max_kernel->bytes);
  g_max_kernel->desc = kernelDesc(&twiceKernel, const_cast<TwiceCtx*>(&kOnMaxDev), "(Tensor) -> Tensor");
  g_max_kernel->desc.struct_size = BP_MAX_STRUCT_SIZE;
  if (BP_Error* e = host->impl(plugin, "abi_larger::twice", g_max_dev_type, &g_max_kernel->desc)) return e;

  if (BP_Error* e = host->def(plugin, "abi_larger::info(int which) -> int")) return e;
  FutureKernelDesc info = futureKernel(&infoKernel, nullptr, nullptr);
  if (BP_Error* e = host->impl(plugin, "abi_larger::info", 0, &info.base)) return e;
  // The host copied what it needs: the structs need not outlive the calls.
  freeMaxStructs();
  return nullptr;
}

}  // namespace

extern "C" BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &kInfo; }

extern "C" BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  try {
    BP_Error* e = init(host, plugin);
    freeMaxStructs();
    return e;
  } catch (...) {
    freeMaxStructs();
    return host->error_new(BP_INTERNAL, "tp_abi_larger: init failed with an exception");
  }
}

extern "C" BP_EXPORT void backplane_plugin_shutdown(BP_Plugin*) {
  arenaShutdown();
  g_dev = g_max_dev_type = -1;
}
