/* init registers a device type, an op and a kernel for it, then a kernel for
 * an op nobody defined (bp::sum.dim_IntList_out, a misspelling of
 * bp::sum.IntList_out): the load fails, naming the op it meant, and every
 * registration before it is undone. */
#include "tp_common.h"

static const BP_PluginInfo tp_info = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR, "tp_rollback", "0.0.1"};

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  tp_host = host;
  BP_DeviceTypeDesc desc = tp_null_device_desc("tprbdev");
  int32_t type = -1;
  BP_Error* err = host->register_device_type(plugin, &desc, &type);
  if (err) return err;
  if ((err = host->def(plugin, "tp_rollback::thing(Tensor self) -> Tensor"))) return err;
  BP_KernelDesc k = tp_kernel_desc(tp_unreachable_kernel);
  if ((err = host->impl(plugin, "tp_rollback::thing", type, &k))) return err;
  if ((err = host->impl(plugin, "tp_rollback::thing", 0, &k))) return err;
  /* Not defined by anyone: fails. */
  return host->impl(plugin, "bp::sum.dim_IntList_out", type, &k);
}
