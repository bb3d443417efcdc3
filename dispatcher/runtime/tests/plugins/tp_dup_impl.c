/* Implements tp::twice on cpu, which tp_good already implements: refused,
 * naming tp_good. */
#include "tp_common.h"

static const BP_PluginInfo tp_info = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR, "tp_dup_impl", "0.0.1"};

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  tp_host = host;
  BP_KernelDesc k = tp_kernel_desc(tp_unreachable_kernel);
  return host->impl(plugin, "tp::twice", 0 /* cpu */, &k);
}
