/*
 * BP_KernelDesc.dtypes (ABI 1.5) at the ABI boundary, plain C against
 * plugin_api.h. By compile definition TP_MODE:
 *   TP_DT_V1_4         a 1.4 plugin: abi_minor 4, its BP_KernelDesc's
 *                      struct_size ends at cpp_signature and the bytes after
 *                      it (where 1.5 put dtypes) hold garbage. Its kernels
 *                      must serve every dtype of ABI 1.4 and never see a
 *                      later one (Note [Dtypes of older plugins]). Defines
 *                      TP_NAME::echo(Tensor self) -> Tensor (cpu and its
 *                      device "abidtfbdev" (the name TP_DT_FALLBACK's
 *                      device has: the two share one of the process's 16
 *                      dynamic device type slots), whose memory is the heap:
 *                      returns self, counts), TP_NAME::make(ScalarType
 *                      dtype) -> Tensor (cpu: an empty [2] tensor of that
 *                      dtype, counts), TP_NAME::make_like(Tensor self,
 *                      ScalarType? dtype, Device? device) -> Tensor (the
 *                      same, float32 for None: a signature the host calls
 *                      unboxed, with a dtype argument), TP_NAME::other(Tensor self) -> Tensor
 *                      (no kernel: on its device the plugin's fallback
 *                      returns self and counts) and TP_NAME::info(int
 *                      which) -> int (0: echo calls, 1: make calls, 2:
 *                      fallback calls).
 *   TP_DT_UNKNOWN_BIT  an impl declaring float32 and dtype number 40, which
 *                      no host knows: the registration, and so the load,
 *                      fails.
 *   TP_DT_FALLBACK     a fallback declaring float32: refused (a fallback
 *                      serves every dtype).
 * BP_KernelDesc.flags (ABI 1.13), the same way:
 *   TP_FL_UNKNOWN_BIT  an impl on its device "abidtfbdev" with
 *                      BP_KERNEL_CPU_SCALARS and bit 9, which no host knows:
 *                      refused.
 *   TP_FL_FALLBACK     a fallback with BP_KERNEL_CPU_SCALARS: refused (the
 *                      flag is for a device's own kernels).
 *   TP_FL_CPU          TP_NAME::echo's cpu kernel with BP_KERNEL_CPU_SCALARS:
 *                      refused (a cpu kernel's tensors are all on the cpu).
 *   TP_FL_V1_12        a 1.12 plugin whose full-sized BP_KernelDesc holds
 *                      garbage in flags: loads, the garbage ignored (its
 *                      echo kernel on "abidtfbdev" takes no CPU scalars).
 */
#include <string.h>

#include "abi_common.h"

#define TP_DT_V1_4 1
#define TP_DT_UNKNOWN_BIT 2
#define TP_DT_FALLBACK 3
#define TP_FL_UNKNOWN_BIT 4
#define TP_FL_FALLBACK 5
#define TP_FL_CPU 6
#define TP_FL_V1_12 7

#if TP_MODE == TP_DT_V1_4
#define TP_ABI_MINOR 4
#elif TP_MODE == TP_FL_V1_12
#define TP_ABI_MINOR 12
#else
#define TP_ABI_MINOR BP_ABI_MINOR
#endif

static const BP_PluginInfo tp_info = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, TP_ABI_MINOR, TP_NAME, "0.0.1"};
BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

static int64_t tp_echo_calls = 0;

static BP_Error* tp_echo(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  ++tp_echo_calls;
  call->returns[0].tag = BP_VALUE_TENSOR;
  call->returns[0].u.tensor = abi_host->tensor_retain(call->args[0].u.tensor);
  return NULL;
}

#if TP_MODE == TP_DT_V1_4
static int64_t tp_make_calls = 0;
static int64_t tp_fallback_calls = 0;

static BP_Error* tp_info_kernel(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  const int64_t which = call->args[0].u.i;
  call->returns[0].tag = BP_VALUE_INT;
  call->returns[0].u.i = which == 0 ? tp_echo_calls : which == 1 ? tp_make_calls : which == 2 ? tp_fallback_calls : -1;
  return NULL;
}

/* An empty [2] cpu tensor of `dtype` as the call's return; counts. */
static BP_Error* tp_return_empty(const BP_KernelCall* call, BP_ScalarType dtype) {
  ++tp_make_calls;
  const int64_t size = 2;
  BP_Device cpu = {0, 0};
  BP_Tensor* t = NULL;
  BP_Error* e = abi_host->tensor_empty(&size, 1, NULL, dtype, cpu, &t);
  if (e) return e;
  call->returns[0].tag = BP_VALUE_TENSOR;
  call->returns[0].u.tensor = t;
  return NULL;
}

static BP_Error* tp_make(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  return tp_return_empty(call, call->args[0].u.scalar_type);
}

static BP_Error* tp_make_like(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  return tp_return_empty(call, call->args[1].tag == BP_VALUE_SCALAR_TYPE ? call->args[1].u.scalar_type : BP_FLOAT32);
}

static BP_Error* tp_fallback(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  ++tp_fallback_calls;
  call->returns[0].tag = BP_VALUE_TENSOR;
  call->returns[0].u.tensor = abi_host->tensor_retain(call->args[0].u.tensor);
  return NULL;
}

#endif

/* Garbage in every byte, then the fields a producer of `size` bytes sets. */
static BP_KernelDesc tp_desc;
static const BP_KernelDesc* tp_kernel_desc(BP_KernelFn fn, const char* sig, size_t size) {
  memset(&tp_desc, 0xA5, sizeof tp_desc);
  tp_desc.struct_size = size;
  tp_desc.fn = fn;
  tp_desc.ctx = NULL;
  tp_desc.cpp_signature = sig;
  /* No typed entry (ABI 1.14), where the size covers the field. */
  if (size >= BP_STRUCT_SIZE(BP_KernelDesc, typed_fn)) tp_desc.typed_fn = NULL;
  return &tp_desc;
}

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  BP_Error* e;
  abi_host = host;
#if TP_MODE == TP_DT_V1_4
  const size_t size_1_4 = BP_STRUCT_SIZE(BP_KernelDesc, cpp_signature);
  if ((e = host->def(plugin, TP_NAME "::echo(Tensor self) -> Tensor"))) return e;
  if ((e = host->def(plugin, TP_NAME "::info(int which) -> int"))) return e;
  if ((e = host->impl(plugin, TP_NAME "::echo", 0, tp_kernel_desc(tp_echo, "(Tensor) -> Tensor", size_1_4)))) return e;
  if ((e = host->impl(plugin, TP_NAME "::info", 0, tp_kernel_desc(tp_info_kernel, "(int) -> int", size_1_4)))) return e;
  if ((e = host->def(plugin, TP_NAME "::make(ScalarType dtype) -> Tensor"))) return e;
  if ((e = host->impl(plugin, TP_NAME "::make", 0, tp_kernel_desc(tp_make, NULL, size_1_4)))) return e;
  if ((e = host->def(plugin, TP_NAME "::make_like(Tensor self, ScalarType? dtype, Device? device) -> Tensor")))
    return e;
  if ((e = host->impl(plugin, TP_NAME "::make_like", 0,
                      tp_kernel_desc(tp_make_like, "(Tensor, ScalarType?, Device?) -> Tensor", size_1_4))))
    return e;
  if ((e = host->def(plugin, TP_NAME "::other(Tensor self) -> Tensor"))) return e;
  BP_DeviceTypeDesc d = abi_heap_device_desc("abidtfbdev");
  int32_t type = -1;
  if ((e = host->register_device_type(plugin, &d, &type))) return e;
  if ((e = host->impl(plugin, TP_NAME "::echo", type, tp_kernel_desc(tp_echo, "(Tensor) -> Tensor", size_1_4))))
    return e;
  if ((e = host->fallback(plugin, type, tp_kernel_desc(tp_fallback, NULL, size_1_4)))) return e;
#elif TP_MODE == TP_DT_UNKNOWN_BIT
  BP_KernelDesc* k = (BP_KernelDesc*)tp_kernel_desc(tp_echo, "(Tensor) -> Tensor", BP_KernelDesc_STRUCT_SIZE);
  if ((e = host->def(plugin, TP_NAME "::echo(Tensor self) -> Tensor"))) return e;
  k->dtypes = BP_DTYPE_BIT(BP_FLOAT32) | (UINT64_C(1) << 40);
  if ((e = host->impl(plugin, TP_NAME "::echo", 0, k))) return e;
#elif TP_MODE == TP_DT_FALLBACK
  BP_DeviceTypeDesc d = abi_null_device_desc("abidtfbdev");
  int32_t type = -1;
  BP_KernelDesc* k = (BP_KernelDesc*)tp_kernel_desc(tp_echo, NULL, BP_KernelDesc_STRUCT_SIZE);
  if ((e = host->register_device_type(plugin, &d, &type))) return e;
  k->dtypes = BP_DTYPE_BIT(BP_FLOAT32);
  if ((e = host->fallback(plugin, type, k))) return e;
#else
  /* The flags modes: echo on a device of its own (or the cpu). */
  BP_DeviceTypeDesc d = abi_heap_device_desc("abidtfbdev");
  int32_t type = -1;
  if ((e = host->register_device_type(plugin, &d, &type))) return e;
  if ((e = host->def(plugin, TP_NAME "::echo(Tensor self) -> Tensor"))) return e;
  BP_KernelDesc* k = (BP_KernelDesc*)tp_kernel_desc(tp_echo, "(Tensor) -> Tensor", BP_KernelDesc_STRUCT_SIZE);
  k->dtypes = 0;
#if TP_MODE == TP_FL_UNKNOWN_BIT
  k->flags = BP_KERNEL_CPU_SCALARS | (UINT64_C(1) << 9);
  if ((e = host->impl(plugin, TP_NAME "::echo", type, k))) return e;
#elif TP_MODE == TP_FL_FALLBACK
  k->cpp_signature = NULL;
  k->flags = BP_KERNEL_CPU_SCALARS;
  if ((e = host->fallback(plugin, type, k))) return e;
#elif TP_MODE == TP_FL_CPU
  k->flags = BP_KERNEL_CPU_SCALARS;
  if ((e = host->impl(plugin, TP_NAME "::echo", 0, k))) return e;
#elif TP_MODE == TP_FL_V1_12
  /* k->flags keeps tp_kernel_desc's garbage: a 1.12 plugin never set it. */
  if ((e = host->impl(plugin, TP_NAME "::echo", type, k))) return e;
#else
#error "TP_MODE must be TP_DT_V1_4, TP_DT_UNKNOWN_BIT, TP_DT_FALLBACK or a TP_FL_ mode"
#endif
#endif
  return NULL;
}
