/* Registers device type "tpdupdev"; built twice (TP_NAME tp_dup_dev_a and
 * tp_dup_dev_b): the second one loaded is refused, naming the first. */
#include "tp_common.h"

static const BP_PluginInfo tp_info = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR, TP_NAME, "0.0.1"};

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  tp_host = host;
  BP_DeviceTypeDesc desc = tp_null_device_desc("tpdupdev");
  return host->register_device_type(plugin, &desc, NULL);
}
