// tp_abi_null_slots: a device type whose optional slots are all NULL
// (Note [ABI rules]: a NULL function slot means "not implemented" and is
// never called). "abinulldev" has only the required slots: name,
// device_count, allocate, deallocate, copy_host_to_device and
// copy_device_to_host; unavailable_reason, get_properties,
// copy_device_to_device, memset, synchronize and every stream and event
// slot are NULL. The host must fall back (device-to-device copies and memset
// through a host buffer, synchronize a no-op) or do without.
//
//   abi_null_slots::twice(Tensor self) -> Tensor on abinulldev and cpu.
//   abi_null_slots::info(int which) -> int on cpu: 0 the abinulldev number;
//     counters (kCounterBase + Counter).
//   abi_null_slots::set_device_count(int n) -> int on cpu: what device_count()
//     reports from now on; returns the previous count.
#include "abi_plugin.hpp"

namespace {

const BP_PluginInfo kInfo = {BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR,
                             "tp_abi_null_slots",       "1.0.0"};

int32_t g_dev = -1;
std::atomic<int32_t> g_device_count{kNumDevices};
const int32_t kCpuType = 0;
const TwiceCtx kOnCpu{&kCpuType}, kOnDev{&g_dev};

int32_t deviceCount(void*) { return g_device_count.load(); }

BP_Error* setDeviceCountKernel(void*, const BP_KernelCall* call) {
  if (call->num_args != 1 || call->args[0].tag != BP_VALUE_INT || call->num_returns != 1)
    return error(BP_INTERNAL, "set_device_count: expected one int argument and one return");
  const int64_t n = call->args[0].u.i;
  if (n < 0 || n > kNumDevices) return error(BP_OUT_OF_RANGE, "set_device_count: %lld", static_cast<long long>(n));
  call->returns[0].tag = BP_VALUE_INT;
  call->returns[0].u.i = g_device_count.exchange(static_cast<int32_t>(n));
  return nullptr;
}

BP_Error* init(const BP_HostApi* host, BP_Plugin* plugin) {
  saveHostFns(host);
  arenaInit();

  BP_DeviceTypeDesc dev = deviceDesc("abinulldev", /*with_optional_slots=*/false);
  dev.device_count = &deviceCount;
  if (BP_Error* e = host->register_device_type(plugin, &dev, &g_dev)) return e;
  g_info[0] = g_dev;

  if (BP_Error* e = host->def(plugin, "abi_null_slots::twice(Tensor self) -> Tensor")) return e;
  BP_KernelDesc k = kernelDesc(&twiceKernel, const_cast<TwiceCtx*>(&kOnDev), "(Tensor) -> Tensor");
  if (BP_Error* e = host->impl(plugin, "abi_null_slots::twice", g_dev, &k)) return e;
  k.ctx = const_cast<TwiceCtx*>(&kOnCpu);
  if (BP_Error* e = host->impl(plugin, "abi_null_slots::twice", 0, &k)) return e;

  if (BP_Error* e = host->def(plugin, "abi_null_slots::info(int which) -> int")) return e;
  BP_KernelDesc info = kernelDesc(&infoKernel, nullptr, nullptr);
  if (BP_Error* e = host->impl(plugin, "abi_null_slots::info", 0, &info)) return e;
  if (BP_Error* e = host->def(plugin, "abi_null_slots::set_device_count(int n) -> int")) return e;
  BP_KernelDesc set = kernelDesc(&setDeviceCountKernel, nullptr, nullptr);
  if (BP_Error* e = host->impl(plugin, "abi_null_slots::set_device_count", 0, &set)) return e;
  return nullptr;
}

}  // namespace

extern "C" BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &kInfo; }

extern "C" BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  try {
    return init(host, plugin);
  } catch (...) {
    return host->error_new(BP_INTERNAL, "tp_abi_null_slots: init failed with an exception");
  }
}

extern "C" BP_EXPORT void backplane_plugin_shutdown(BP_Plugin*) {
  arenaShutdown();
  g_dev = -1;
  g_device_count = kNumDevices;
}
