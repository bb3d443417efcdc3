/* init defines an op, then fails with its own error: the load fails with the
 * message and the definition is undone. */
#include "tp_common.h"

static const BP_PluginInfo tp_info = {BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR,
                                      "tp_init_error",           "0.0.1"};

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  BP_Error* err = host->def(plugin, "tp_init_error::probe(Tensor self) -> Tensor");
  if (err) return err;
  return host->error_new(BP_UNAVAILABLE, "toy firmware blob tp_fw.bin not found");
}
