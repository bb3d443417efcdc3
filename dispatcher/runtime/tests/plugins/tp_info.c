/*
 * A plugin whose BP_PluginInfo is set from compile definitions, to exercise
 * the loader's checks on it: TP_NAME, TP_MAGIC, TP_ABI_MAJOR, TP_ABI_MINOR,
 * TP_STRUCT_SIZE. Its init must never run: every such plugin is refused.
 */
#include "tp_common.h"

#ifndef TP_MAGIC
#define TP_MAGIC BP_PLUGIN_MAGIC
#endif
#ifndef TP_ABI_MAJOR
#define TP_ABI_MAJOR BP_ABI_MAJOR
#endif
#ifndef TP_ABI_MINOR
#define TP_ABI_MINOR BP_ABI_MINOR
#endif
#ifndef TP_STRUCT_SIZE
#define TP_STRUCT_SIZE BP_PluginInfo_STRUCT_SIZE
#endif

static const BP_PluginInfo tp_info = {TP_STRUCT_SIZE, TP_MAGIC, TP_ABI_MAJOR, TP_ABI_MINOR, TP_NAME, "0.0.1"};

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  (void)plugin;
  return host->error_new(BP_INTERNAL, "init of " TP_NAME " ran although its BP_PluginInfo should be refused");
}
