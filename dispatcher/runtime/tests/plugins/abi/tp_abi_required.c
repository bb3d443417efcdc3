/*
 * A plugin that leaves a required slot NULL (Note [ABI rules]: only optional
 * slots may be NULL), after registrations that must then be rolled back. Set
 * by compile definitions:
 *   TP_NAME        the plugin's name; its op is TP_NAME::probe(Tensor self) -> Tensor
 *   TP_DEV         the name of its device type
 *   TP_NULL_FIELD  a BP_DeviceTypeDesc field set to NULL (name, device_count,
 *                  allocate, deallocate, copy_host_to_device, copy_device_to_host)
 *   or TP_NULL_KERNEL_FN  the device type is complete; the kernel for
 *                  TP_NAME::probe on it has fn NULL
 *   or TP_ONLY_TIMING_FIELD  one of the pair event_create_timed and
 *                  event_elapsed_ms (ABI 1.12: both or neither) is set
 *   or TP_ONLY_GRAPH_FIELD  graph_replay alone of the four graph slots
 *                  (ABI 1.13: all four or none) is set
 * Init returns what the host returned for the bad registration.
 */
#include "abi_common.h"

static const BP_PluginInfo tp_info = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR, TP_NAME, "0.0.1"};

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

#if defined(TP_ONLY_TIMING_FIELD)
#define TP_PASTE(a, b) a##b
#define TP_TIMING_FN(field) TP_PASTE(tp_, field)
__attribute__((unused)) static BP_Error* tp_event_create_timed(void* ctx, int32_t device, BP_Event** out) {
  (void)ctx, (void)device, (void)out;
  return abi_host->error_new(BP_INTERNAL, "this test device must never be asked for an event");
}
__attribute__((unused)) static BP_Error* tp_event_elapsed_ms(void* ctx, int32_t device, BP_Event* start, BP_Event* end,
                                                             double* out_ms) {
  (void)ctx, (void)device, (void)start, (void)end, (void)out_ms;
  return abi_host->error_new(BP_INTERNAL, "this test device must never be asked for a time");
}
#endif

#if defined(TP_ONLY_GRAPH_FIELD)
static BP_Error* tp_graph_replay(void* ctx, int32_t device, BP_Graph* graph, BP_Stream* stream) {
  (void)ctx, (void)device, (void)graph, (void)stream;
  return abi_host->error_new(BP_INTERNAL, "this test device must never be asked to replay a graph");
}
#endif

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  BP_Error* e;
  int32_t dev = -1;
  BP_DeviceTypeDesc d;
  BP_KernelDesc k;
  abi_host = host;

  /* Registrations that succeed, to be undone when init fails. */
  if ((e = host->def(plugin, TP_NAME "::probe(Tensor self) -> Tensor"))) return e;
  k = abi_kernel_desc(abi_unreachable_kernel);
  if ((e = host->impl(plugin, TP_NAME "::probe", 0, &k))) return e;

  d = abi_null_device_desc(TP_DEV);
#if defined(TP_NULL_FIELD)
  d.TP_NULL_FIELD = NULL;
  return host->register_device_type(plugin, &d, &dev);
#elif defined(TP_ONLY_TIMING_FIELD)
  d.TP_ONLY_TIMING_FIELD = TP_TIMING_FN(TP_ONLY_TIMING_FIELD);
  return host->register_device_type(plugin, &d, &dev);
#elif defined(TP_ONLY_GRAPH_FIELD)
  d.graph_replay = tp_graph_replay;
  return host->register_device_type(plugin, &d, &dev);
#elif defined(TP_NULL_KERNEL_FN)
  if ((e = host->register_device_type(plugin, &d, &dev))) return e;
  k.fn = NULL;
  return host->impl(plugin, TP_NAME "::probe", dev, &k);
#else
#error "define TP_NULL_FIELD, TP_ONLY_TIMING_FIELD, TP_ONLY_GRAPH_FIELD or TP_NULL_KERNEL_FN"
#endif
}
