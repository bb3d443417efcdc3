// tp_abi_v1_0: a plugin as built against the ABI 1.0 SDK, loaded into a
// newer (1.1) host (Note [ABI rules]: an older minor loads into a newer
// host). It reports abi_minor 0 and knows the host table only in its 1.0
// layout (BP_HostApi_1_0 from host_api_1_0.h): it never touches a field 1.1
// appended. Like any plugin, it checks that the table it gets is at least
// as large as the one it knows.
//
// Registers device type "abiv10dev" (the arena of abi_plugin.hpp), defines
// abi_v1_0::twice(Tensor self) -> Tensor for abiv10dev and cpu, and
// abi_v1_0::info(int which) -> int on cpu; info: 0 the host table's
// struct_size, 1 its abi_major, 2 its abi_minor, 3 sizeof(BP_HostApi_1_0),
// 4 the device type number register_device_type returned.
#include "abi_plugin.hpp"
#include "host_api_1_0.h"

namespace {

constexpr uint32_t kMyAbiMajor = 1, kMyAbiMinor = 0;
const BP_PluginInfo kInfo = {sizeof(BP_PluginInfo), BP_PLUGIN_MAGIC, kMyAbiMajor, kMyAbiMinor, "tp_abi_v1_0", "1.0.0"};

int32_t g_device_type = -1;
const int32_t kCpuType = 0;
const TwiceCtx kOnCpu{&kCpuType}, kOnDevice{&g_device_type};

BP_Error* init(const BP_HostApi_1_0* host, BP_Plugin* plugin) {
  // A host of this major has every 1.0 slot; error_new, the first one, is
  // there in any case.
  if (host->struct_size < sizeof(BP_HostApi_1_0))
    return host->error_new(BP_FAILED_PRECONDITION, "tp_abi_v1_0: the host table is smaller than ABI 1.0's");
  if (host->abi_major != kMyAbiMajor)
    return host->error_new(BP_FAILED_PRECONDITION, "tp_abi_v1_0: the host speaks another ABI major");
  saveHostFns(host);
  g_info[0] = static_cast<int64_t>(host->struct_size);
  g_info[1] = host->abi_major;
  g_info[2] = host->abi_minor;
  g_info[3] = static_cast<int64_t>(sizeof(BP_HostApi_1_0));
  arenaInit();

  BP_DeviceTypeDesc dev = deviceDesc("abiv10dev", /*with_optional_slots=*/true);
  if (BP_Error* e = host->register_device_type(plugin, &dev, &g_device_type)) return e;
  g_info[4] = g_device_type;

  if (BP_Error* e = host->def(plugin, "abi_v1_0::twice(Tensor self) -> Tensor")) return e;
  BP_KernelDesc k = kernelDesc(&twiceKernel, const_cast<TwiceCtx*>(&kOnDevice), "(Tensor) -> Tensor");
  if (BP_Error* e = host->impl(plugin, "abi_v1_0::twice", g_device_type, &k)) return e;
  k.ctx = const_cast<TwiceCtx*>(&kOnCpu);
  if (BP_Error* e = host->impl(plugin, "abi_v1_0::twice", 0, &k)) return e;

  if (BP_Error* e = host->def(plugin, "abi_v1_0::info(int which) -> int")) return e;
  BP_KernelDesc info = kernelDesc(&infoKernel, nullptr, nullptr);
  if (BP_Error* e = host->impl(plugin, "abi_v1_0::info", 0, &info)) return e;
  return nullptr;
}

}  // namespace

extern "C" BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &kInfo; }

// The 1.0 SDK's signature, with the table as 1.0 knew it.
extern "C" BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi_1_0* host, BP_Plugin* plugin) {
  try {
    return init(host, plugin);
  } catch (...) {
    return host->error_new(BP_INTERNAL, "tp_abi_v1_0: init failed with an exception");
  }
}

extern "C" BP_EXPORT void backplane_plugin_shutdown(BP_Plugin*) {
  arenaShutdown();
  g_device_type = -1;
}
