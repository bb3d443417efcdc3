/* tp_wd_definer: defines operators that other test plugins implement with
 * impl_when_defined (Note [Kernels for operators defined later]), and no
 * kernel for them:
 *   tpwd::scale(Tensor self, float factor) -> Tensor   (tp_wd_kernel*)
 *   tpwd::shift(Tensor self, float amount) -> Tensor   (tp_wd_sdk)
 * TP_SCALE_SCHEMA replaces the first: a definition that the kernels do not
 * fit. */
#include "tp_common.h"

#ifndef TP_NAME
#define TP_NAME "tp_wd_definer"
#endif
#ifndef TP_SCALE_SCHEMA
#define TP_SCALE_SCHEMA "tpwd::scale(Tensor self, float factor) -> Tensor"
#endif

static const BP_PluginInfo tp_info = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR, TP_NAME, "0.0.1"};

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  tp_host = host;
  BP_Error* err = host->def(plugin, TP_SCALE_SCHEMA);
  if (err) return err;
  return host->def(plugin, "tpwd::shift(Tensor self, float amount) -> Tensor");
}
