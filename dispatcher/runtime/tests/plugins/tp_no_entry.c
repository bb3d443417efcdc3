/* A shared library that exports backplane_plugin_init but no
 * backplane_plugin_query: not a Backplane plugin. */
#include "tp_common.h"

BP_EXPORT int tp_no_entry_answer(void) { return 42; }

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  (void)plugin;
  return host->error_new(BP_INTERNAL, "init of tp_no_entry must never run");
}
