/* A shared library that exports backplane_plugin_init but no
 * backplane_plugin_query: not a Backplane plugin. Its constructor leaves a
 * mark in the environment, so a test can tell whether the loader ran any of
 * its code (Note [Plugin file checks]: it must not). */
#include <stdlib.h>

#include "tp_common.h"

__attribute__((constructor)) static void tp_no_entry_constructor(void) {
  setenv("TP_NO_ENTRY_CONSTRUCTOR_RAN", "1", 1);
}

BP_EXPORT int tp_no_entry_answer(void) { return 42; }

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  (void)plugin;
  return host->error_new(BP_INTERNAL, "init of tp_no_entry must never run");
}
