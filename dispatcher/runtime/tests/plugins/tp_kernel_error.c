/* Defines tp_kernel_error::fail(Tensor self) -> Tensor with a cpu kernel that
 * always returns an error. */
#include "tp_common.h"

static const BP_PluginInfo tp_info = {BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR,
                                      "tp_kernel_error",         "0.0.1"};

static BP_Error* fail_kernel(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  if (call->num_args != 1 || call->args[0].tag != BP_VALUE_TENSOR)
    return tp_host->error_new(BP_INTERNAL, "tp_kernel_error::fail: unexpected arguments");
  return tp_host->error_new(BP_OUT_OF_RANGE, "toy kernel refuses: value out of range");
}

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  tp_host = host;
  BP_Error* err = host->def(plugin, "tp_kernel_error::fail(Tensor self) -> Tensor");
  if (err) return err;
  BP_KernelDesc k = tp_kernel_desc(fail_kernel);
  return host->impl(plugin, "tp_kernel_error::fail", 0, &k);
}
