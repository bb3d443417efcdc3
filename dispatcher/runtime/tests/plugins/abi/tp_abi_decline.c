/*
 * BP_DECLINED (ABI 1.7) at the ABI boundary, plain C against plugin_api.h
 * (Note [Declined calls]). By compile definition TP_MODE:
 *   TP_DC_V1_7  a plugin of this header's ABI. Device "abidtfbdev" (heap
 *               memory; the name TP_DT_V1_4's device has, sharing one of the
 *               process's dynamic device type slots). Defines
 *               TP_NAME::pick(Tensor self) -> Tensor: its cpu kernel returns
 *               self; its device kernel returns self for an even number of
 *               elements and declines an odd one. The device's fallback
 *               returns self, except for 5 elements, which it "declines" (a
 *               fallback may not). TP_NAME::info(int which) -> int: 0 device
 *               kernel calls served, 1 cpu kernel calls, 2 fallback calls
 *               served.
 *   TP_DC_V1_6  the same built as a 1.6 plugin (abi_minor 6), to which
 *               code 64 means nothing: an error like any other.
 */
#include <string.h>

#include "abi_common.h"

#define TP_DC_V1_7 1
#define TP_DC_V1_6 2

#if TP_MODE == TP_DC_V1_7
#define TP_ABI_MINOR BP_ABI_MINOR
#elif TP_MODE == TP_DC_V1_6
#define TP_ABI_MINOR 6
#else
#error "TP_MODE must be TP_DC_V1_7 or TP_DC_V1_6"
#endif

static const BP_PluginInfo tp_info = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, TP_ABI_MINOR, TP_NAME, "0.0.1"};
BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

static int64_t tp_calls[3];

static int64_t tp_numel(const BP_Value* v) {
  BP_TensorInfo info;
  memset(&info, 0, sizeof info);
  info.struct_size = BP_TensorInfo_STRUCT_SIZE;
  abi_host->tensor_info(v->u.tensor, &info);
  return info.numel;
}

static BP_Error* tp_return_self(const BP_KernelCall* call, int counter) {
  ++tp_calls[counter];
  call->returns[0].tag = BP_VALUE_TENSOR;
  call->returns[0].u.tensor = abi_host->tensor_retain(call->args[0].u.tensor);
  return NULL;
}

static BP_Error* tp_pick_device(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  if (tp_numel(&call->args[0]) % 2 != 0) return abi_host->error_new(BP_DECLINED, "odd sizes are not served here");
  return tp_return_self(call, 0);
}

static BP_Error* tp_pick_cpu(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  return tp_return_self(call, 1);
}

static BP_Error* tp_fallback(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  if (tp_numel(&call->args[0]) == 5) return abi_host->error_new(BP_DECLINED, "the fallback declines 5 elements");
  return tp_return_self(call, 2);
}

static BP_Error* tp_info_kernel(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  const int64_t which = call->args[0].u.i;
  call->returns[0].tag = BP_VALUE_INT;
  call->returns[0].u.i = which >= 0 && which < 3 ? tp_calls[which] : -1;
  return NULL;
}

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  BP_Error* e;
  abi_host = host;
  BP_DeviceTypeDesc d = abi_heap_device_desc("abidtfbdev");
  int32_t type = -1;
  if ((e = host->register_device_type(plugin, &d, &type))) return e;
  if ((e = host->def(plugin, TP_NAME "::pick(Tensor self) -> Tensor"))) return e;
  if ((e = host->def(plugin, TP_NAME "::info(int which) -> int"))) return e;
  BP_KernelDesc k = abi_kernel_desc(tp_pick_cpu);
  if ((e = host->impl(plugin, TP_NAME "::pick", 0, &k))) return e;
  k = abi_kernel_desc(tp_pick_device);
  if ((e = host->impl(plugin, TP_NAME "::pick", type, &k))) return e;
  k = abi_kernel_desc(tp_info_kernel);
  if ((e = host->impl(plugin, TP_NAME "::info", 0, &k))) return e;
  k = abi_kernel_desc(tp_fallback);
  if ((e = host->fallback(plugin, type, &k))) return e;
  return NULL;
}
