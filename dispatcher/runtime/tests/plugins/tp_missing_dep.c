/* A plugin linked against libbp_missing_dep.so, which is not on its RPATH
 * nor the loader's path: dlopen fails naming that library. */
#include "tp_common.h"

int bp_missing_dep_value(void);

static const BP_PluginInfo tp_info = {BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR,
                                      "tp_missing_dep",          "0.0.1"};

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  (void)plugin;
  /* Referencing the dependency keeps it in DT_NEEDED. */
  if (bp_missing_dep_value() == 7) return host->error_new(BP_INTERNAL, "tp_missing_dep must never load");
  return NULL;
}
