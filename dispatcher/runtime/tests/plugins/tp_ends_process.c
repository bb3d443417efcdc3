/*
 * Plugins that end the process while they load (Note [Plugin load
 * breadcrumb]): TP_NAME, and TP_END, the statement that ends it (exit(0),
 * abort(), a write to an unmapped address), run by init or, with
 * TP_IN_CONSTRUCTOR, by a static constructor during dlopen().
 */
#include <stdint.h>
#include <stdlib.h>

#include "tp_common.h"

static const BP_PluginInfo tp_info = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR, TP_NAME, "0.0.1"};

/* An address no process maps (the store faults: SIGSEGV), read from a
 * volatile so the compiler cannot see it. */
static volatile uintptr_t tp_unmapped_address = 16;
static volatile int* tp_unmapped(void) { return (volatile int*)tp_unmapped_address; }

static void tp_end(void) { TP_END; }

#ifdef TP_IN_CONSTRUCTOR
__attribute__((constructor)) static void tp_constructor(void) { tp_end(); }
#endif

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  (void)plugin;
  (void)tp_unmapped;
  tp_end();
  return host->error_new(BP_INTERNAL, "the process of " TP_NAME " should have ended in its init");
}
