/* tp_wd_kernel: a plain-C plugin that implements, on cpu, an operator that
 * another plugin (tp_wd_definer) defines, through BP_HostApi.impl_when_defined
 * (ABI 1.4), so that it may load before or after the definer:
 *   tpwd::scale(Tensor self, float factor) -> Tensor: self * factor
 *   (float32, contiguous).
 * Build variants:
 *   TP_SIGNATURE   the cpp_signature it declares (default the schema's,
 *                  "(Tensor, float) -> Tensor"; TP_NO_SIGNATURE: none)
 *   TP_ABI_MINOR   the minor it reports. A plugin that reports an older minor
 *                  (so that older hosts load it too) must check that the host
 *                  table has the slot before using it; this one then falls
 *                  back to impl, which needs the op defined first. */
#include "tp_common.h"

#ifndef TP_NAME
#define TP_NAME "tp_wd_kernel"
#endif
#ifndef TP_ABI_MINOR
#define TP_ABI_MINOR BP_ABI_MINOR
#endif
#ifndef TP_SIGNATURE
#define TP_SIGNATURE "(Tensor, float) -> Tensor"
#endif

static const BP_PluginInfo tp_info = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, TP_ABI_MINOR, TP_NAME, "0.0.1"};

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

static BP_Error* tp_scale_kernel(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  if (call->num_args != 2 || call->args[0].tag != BP_VALUE_TENSOR || call->args[1].tag != BP_VALUE_DOUBLE ||
      call->num_returns != 1)
    return tp_host->error_new(BP_INVALID_ARGUMENT, TP_NAME ": scale expects (Tensor, float) and one return");
  BP_TensorInfo in;
  memset(&in, 0, sizeof in);
  in.struct_size = BP_TensorInfo_STRUCT_SIZE;
  tp_host->tensor_info(call->args[0].u.tensor, &in);
  if (in.dtype != BP_FLOAT32 || !in.is_contiguous || in.device.type != 0)
    return tp_host->error_new(BP_INVALID_ARGUMENT, TP_NAME ": scale needs a contiguous float32 cpu tensor");
  BP_Tensor* out_tensor = NULL;
  BP_Error* err = tp_host->tensor_empty(in.sizes, (size_t)in.dim, NULL, BP_FLOAT32, in.device, &out_tensor);
  if (err) return err;
  BP_TensorInfo out;
  memset(&out, 0, sizeof out);
  out.struct_size = BP_TensorInfo_STRUCT_SIZE;
  tp_host->tensor_info(out_tensor, &out);
  const float* x = (const float*)in.data;
  float* y = (float*)out.data;
  for (int64_t i = 0; i < in.numel; ++i) y[i] = x[i] * (float)call->args[1].u.d;
  call->returns[0].tag = BP_VALUE_TENSOR;
  call->returns[0].u.tensor = out_tensor;
  return NULL;
}

/* The pattern for a slot newer than the minor a plugin reports. */
#define TP_HOST_HAS(host, field) ((host)->struct_size >= BP_STRUCT_SIZE(BP_HostApi, field) && (host)->field != NULL)

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  tp_host = host;
  BP_KernelDesc k = tp_kernel_desc(tp_scale_kernel);
#ifndef TP_NO_SIGNATURE
  k.cpp_signature = TP_SIGNATURE;
#endif
  if (TP_HOST_HAS(host, impl_when_defined)) return host->impl_when_defined(plugin, "tpwd::scale", 0, &k);
  return host->impl(plugin, "tpwd::scale", 0, &k);
}
