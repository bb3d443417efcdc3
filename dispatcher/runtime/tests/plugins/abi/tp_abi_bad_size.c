/*
 * A plugin that hands the host a BP_DeviceTypeDesc or BP_KernelDesc with a
 * struct_size no receiver may accept (Note [ABI rules]: a receiver rejects 0
 * and sizes over BP_MAX_STRUCT_SIZE), after registrations that must then be
 * rolled back. Set by compile definitions:
 *   TP_NAME  the plugin's name; its op is TP_NAME::probe(Tensor self) -> Tensor
 *   TP_DEV   the name of its (valid) device type
 *   TP_WHAT  TP_BAD_DEVICE: register_device_type(a desc of TP_SIZE)
 *            TP_BAD_IMPL: impl(TP_NAME::probe, TP_DEV, a kernel of TP_SIZE)
 *            TP_BAD_FALLBACK: fallback(TP_DEV, a kernel of TP_SIZE)
 *   TP_SIZE  the struct_size
 * Init returns what the host returned for the bad registration: the load
 * succeeds only if the host wrongly accepted it.
 */
#include "abi_common.h"

#define TP_BAD_DEVICE 1
#define TP_BAD_IMPL 2
#define TP_BAD_FALLBACK 3

static const BP_PluginInfo tp_info = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR, TP_NAME, "0.0.1"};

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  BP_Error* e;
  int32_t dev = -1;
  BP_DeviceTypeDesc good_dev, bad_dev;
  BP_KernelDesc good_kernel, bad_kernel;
  abi_host = host;

  /* Registrations that succeed, to be undone when init fails. */
  if ((e = host->def(plugin, TP_NAME "::probe(Tensor self) -> Tensor"))) return e;
  good_dev = abi_null_device_desc(TP_DEV);
  if ((e = host->register_device_type(plugin, &good_dev, &dev))) return e;
  good_kernel = abi_kernel_desc(abi_unreachable_kernel);
  if ((e = host->impl(plugin, TP_NAME "::probe", 0, &good_kernel))) return e;

    /* The bad one. */
#if TP_WHAT == TP_BAD_DEVICE
  (void)bad_kernel;
  bad_dev = abi_null_device_desc(TP_DEV "_bad");
  bad_dev.struct_size = TP_SIZE;
  return host->register_device_type(plugin, &bad_dev, &dev);
#else
  (void)bad_dev;
  bad_kernel = abi_kernel_desc(abi_unreachable_kernel);
  bad_kernel.struct_size = TP_SIZE;
#if TP_WHAT == TP_BAD_IMPL
  return host->impl(plugin, TP_NAME "::probe", dev, &bad_kernel);
#elif TP_WHAT == TP_BAD_FALLBACK
  return host->fallback(plugin, dev, &bad_kernel);
#else
#error "TP_WHAT must be TP_BAD_DEVICE, TP_BAD_IMPL or TP_BAD_FALLBACK"
#endif
#endif
}
