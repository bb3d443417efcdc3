/* A plugin whose device type "tpabsentdev" has no devices present: it loads,
 * and allocating on it fails with the reason. */
#include "tp_common.h"

static const BP_PluginInfo tp_info = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR, "tp_absent", "0.0.1"};

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  tp_host = host;
  tp_null_count_value = 0;
  tp_null_reason_value = "no toy hardware attached";
  BP_DeviceTypeDesc desc = tp_null_device_desc("tpabsentdev");
  return host->register_device_type(plugin, &desc, NULL);
}
