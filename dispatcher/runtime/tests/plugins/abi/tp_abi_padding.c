/*
 * A plain-C plugin that is hostile to padding (Note [ABI rules]: a struct's
 * size is the end of its last field, and a receiver reads a field only if
 * struct_size covers its end). Every struct it hands the host, and the
 * BP_TensorInfo buffer it hands tensor_info, is first filled with 0xA5
 * bytes, padding included, and only then are its fields assigned: a host
 * that read padding, a field past struct_size or a field that struct_size
 * cuts in two would see 0xA5 garbage (a negative dlpack_device_type, a
 * pointer to nowhere). Where event_query lies past struct_size it holds a
 * trap that counts its calls instead.
 *
 * Its device type TP_DEV holds host memory (host_accessible 1, DLPack
 * device type kDLCPU), one device, with events whose query says "complete".
 * Its op TP_NAME::info(Tensor self, int which) -> int, on cpu and on TP_DEV,
 * reports what tensor_info wrote and what the host called:
 *   0 the struct_size tensor_info wrote; 1 the number of bytes of the
 *   buffer past that struct_size that it changed (must be 0); 2 dim; 3 numel;
 *   4 dtype; 5 device type; 6 is_contiguous; 7 calls of event_query;
 *   8 calls of the trap past struct_size; 9 and 10 as 0 and 1 for a buffer
 *   whose struct_size ends 4 bytes into BP_TensorInfo.device.
 *
 * TP_LAYOUT, by compile definition:
 *   TP_FIELD_END     this header's sizes, BP_<type>_STRUCT_SIZE, for every
 *                    struct (and the tensor_info buffer).
 *   TP_SIZEOF_1_2    what a plugin built against ABI 1.2 sent: abi_minor 2,
 *                    every struct_size sizeof(the struct as 1.2 knew it),
 *                    tail padding included; BP_DeviceTypeDesc then ends
 *                    after dlpack_device_type's padding, before event_query.
 *   TP_CUT_OPTIONAL  BP_DeviceTypeDesc.struct_size ends 2 bytes into
 *                    dlpack_device_type and BP_KernelDesc's 4 bytes into
 *                    cpp_signature: both fields read as 0/NULL.
 *   TP_CUT_REQUIRED  BP_DeviceTypeDesc.struct_size ends 4 bytes into
 *                    copy_device_to_host, a required slot: the registration
 *                    (and so the load) fails.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/plugin_api.h"

#define TP_FIELD_END 1
#define TP_SIZEOF_1_2 2
#define TP_CUT_OPTIONAL 3
#define TP_CUT_REQUIRED 4

#define TP_GARBAGE 0xA5

/* Rounds n up to the alignment of BP_DeviceTypeDesc, as sizeof does. */
#define TP_ROUND_UP(n, a) (((n) + (a)-1) / (a) * (a))
/* sizeof(BP_DeviceTypeDesc) in ABI 1.2, whose last field was dlpack_device_type. */
#define TP_DEVICE_DESC_SIZEOF_1_2 \
  TP_ROUND_UP(BP_STRUCT_SIZE(BP_DeviceTypeDesc, dlpack_device_type), _Alignof(BP_DeviceTypeDesc))
_Static_assert(TP_DEVICE_DESC_SIZEOF_1_2 > BP_STRUCT_SIZE(BP_DeviceTypeDesc, dlpack_device_type),
               "BP_DeviceTypeDesc of ABI 1.2 ends in tail padding");
_Static_assert(TP_DEVICE_DESC_SIZEOF_1_2 < BP_STRUCT_SIZE(BP_DeviceTypeDesc, event_query),
               "ABI 1.2's sizeof does not reach event_query's end");
_Static_assert(sizeof(BP_TensorInfo) > BP_TensorInfo_STRUCT_SIZE, "BP_TensorInfo ends in tail padding");
_Static_assert(offsetof(BP_DeviceTypeDesc, device_count) > BP_STRUCT_SIZE(BP_DeviceTypeDesc, host_accessible),
               "padding follows host_accessible");

#if TP_LAYOUT == TP_FIELD_END
#define TP_ABI_MINOR BP_ABI_MINOR
#define TP_INFO_SIZE BP_PluginInfo_STRUCT_SIZE
#define TP_DEVICE_SIZE BP_DeviceTypeDesc_STRUCT_SIZE
#define TP_KERNEL_SIZE BP_KernelDesc_STRUCT_SIZE
#define TP_TENSOR_INFO_SIZE BP_TensorInfo_STRUCT_SIZE
#elif TP_LAYOUT == TP_SIZEOF_1_2
#define TP_ABI_MINOR 2
#define TP_INFO_SIZE sizeof(BP_PluginInfo)
#define TP_DEVICE_SIZE TP_DEVICE_DESC_SIZEOF_1_2
/* BP_KernelDesc ended in cpp_signature (a pointer, so no tail padding)
 * until 1.5 added dtypes. */
#define TP_KERNEL_SIZE BP_STRUCT_SIZE(BP_KernelDesc, cpp_signature)
#define TP_TENSOR_INFO_SIZE sizeof(BP_TensorInfo)
#elif TP_LAYOUT == TP_CUT_OPTIONAL
#define TP_ABI_MINOR BP_ABI_MINOR
#define TP_INFO_SIZE BP_PluginInfo_STRUCT_SIZE
#define TP_DEVICE_SIZE (offsetof(BP_DeviceTypeDesc, dlpack_device_type) + 2)
#define TP_KERNEL_SIZE (offsetof(BP_KernelDesc, cpp_signature) + 4)
#define TP_TENSOR_INFO_SIZE BP_TensorInfo_STRUCT_SIZE
#elif TP_LAYOUT == TP_CUT_REQUIRED
#define TP_ABI_MINOR BP_ABI_MINOR
#define TP_INFO_SIZE BP_PluginInfo_STRUCT_SIZE
#define TP_DEVICE_SIZE (offsetof(BP_DeviceTypeDesc, copy_device_to_host) + 4)
#define TP_KERNEL_SIZE BP_KernelDesc_STRUCT_SIZE
#define TP_TENSOR_INFO_SIZE BP_TensorInfo_STRUCT_SIZE
#else
#error "TP_LAYOUT must be TP_FIELD_END, TP_SIZEOF_1_2, TP_CUT_OPTIONAL or TP_CUT_REQUIRED"
#endif

static const BP_HostApi* tp_host = NULL;
static BP_PluginInfo tp_info;
static BP_DeviceTypeDesc tp_dev;
static BP_KernelDesc tp_kernel;
static int32_t tp_dev_type = -1;
static int64_t tp_event_queries = 0;
static int64_t tp_trap_calls = 0;
static const char tp_kernel_ctx[] = "tp_abi_padding kernel ctx";

static BP_Error* tp_error(BP_ErrorCode code, const char* message) { return tp_host->error_new(code, message); }

BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) {
  memset(&tp_info, TP_GARBAGE, sizeof tp_info); /* padding after abi_minor included */
  tp_info.struct_size = TP_INFO_SIZE;
  tp_info.magic = BP_PLUGIN_MAGIC;
  tp_info.abi_major = BP_ABI_MAJOR;
  tp_info.abi_minor = TP_ABI_MINOR;
  tp_info.name = TP_NAME;
  tp_info.version = "0.0.1";
  return &tp_info;
}

/* ------------------------------------------------------- the device: host memory */

static int32_t tp_device_count(void* ctx) {
  (void)ctx;
  return 1;
}
static BP_Error* tp_allocate(void* ctx, int32_t device, size_t nbytes, void** out) {
  (void)ctx, (void)device;
  *out = NULL;
  if (nbytes == 0) return NULL;
  *out = malloc(nbytes);
  return *out ? NULL : tp_error(BP_RESOURCE_EXHAUSTED, "tp_abi_padding: out of memory");
}
static void tp_deallocate(void* ctx, int32_t device, void* ptr) {
  (void)ctx, (void)device;
  free(ptr);
}
static BP_Error* tp_copy(void* ctx, int32_t device, void* dst, const void* src, size_t nbytes) {
  (void)ctx, (void)device;
  if (nbytes) memcpy(dst, src, nbytes);
  return NULL;
}
static BP_Error* tp_copy_d2d(void* ctx, int32_t dst_device, void* dst, int32_t src_device, const void* src,
                             size_t nbytes) {
  (void)ctx, (void)dst_device, (void)src_device;
  if (nbytes) memcpy(dst, src, nbytes);
  return NULL;
}
static BP_Error* tp_get_properties(void* ctx, int32_t device, BP_DeviceProperties* out) {
  /* Garbage over everything the host's buffer holds, then the fields. */
  (void)ctx, (void)device;
  const size_t size = out->struct_size;
  if (size < BP_DeviceProperties_STRUCT_SIZE) return tp_error(BP_INVALID_ARGUMENT, "get_properties: buffer too small");
  memset(out, TP_GARBAGE, size);
  out->struct_size = size;
  snprintf(out->name, sizeof out->name, "%s", "padding-hostile device");
  out->total_memory = 12345;
  out->compute_major = 7;
  out->compute_minor = 5;
  out->multiprocessor_count = 3;
  return NULL;
}

/* Events: every event is complete; record and synchronize have nothing to do. */
static BP_Error* tp_event_create(void* ctx, int32_t device, BP_Event** out) {
  (void)ctx, (void)device;
  *out = (BP_Event*)malloc(1);
  return *out ? NULL : tp_error(BP_RESOURCE_EXHAUSTED, "tp_abi_padding: out of memory");
}
static void tp_event_destroy(void* ctx, int32_t device, BP_Event* event) {
  (void)ctx, (void)device;
  free(event);
}
static BP_Error* tp_event_record(void* ctx, int32_t device, BP_Event* event, BP_Stream* stream) {
  (void)ctx, (void)device, (void)event, (void)stream;
  return NULL;
}
static BP_Error* tp_event_synchronize(void* ctx, int32_t device, BP_Event* event) {
  (void)ctx, (void)device, (void)event;
  return NULL;
}
static BP_Error* tp_event_query(void* ctx, int32_t device, BP_Event* event, uint8_t* out_complete) {
  (void)ctx, (void)device, (void)event;
  ++tp_event_queries;
  *out_complete = 1;
  return NULL;
}
/* In event_query's place when event_query lies past struct_size. */
static BP_Error* tp_event_query_trap(void* ctx, int32_t device, BP_Event* event, uint8_t* out_complete) {
  (void)ctx, (void)device, (void)event, (void)out_complete;
  ++tp_trap_calls;
  return tp_error(BP_INTERNAL, "tp_abi_padding: the host called event_query, which lies past struct_size");
}

/* ------------------------------------------------------------------ the op */

static BP_Error* tp_info_kernel(void* ctx, const BP_KernelCall* call) {
  BP_TensorInfo buf;
  const unsigned char* bytes = (const unsigned char*)&buf;
  int64_t which, changed = 0, value;
  size_t i;
  if (ctx != (void*)tp_kernel_ctx) return tp_error(BP_INTERNAL, "info: the kernel's ctx is not the one registered");
  if (call->num_args != 2 || call->args[0].tag != BP_VALUE_TENSOR || call->args[1].tag != BP_VALUE_INT ||
      call->num_returns != 1)
    return tp_error(BP_INTERNAL, "info: expected (Tensor, int) -> int");
  which = call->args[1].u.i;

  memset(&buf, TP_GARBAGE, sizeof buf);
  buf.struct_size = which == 9 || which == 10 ? offsetof(BP_TensorInfo, device) + 4 : TP_TENSOR_INFO_SIZE;
  tp_host->tensor_info(call->args[0].u.tensor, &buf);
  if (buf.struct_size > sizeof buf) return tp_error(BP_INTERNAL, "info: tensor_info wrote past the buffer");
  for (i = buf.struct_size; i < sizeof buf; ++i) changed += bytes[i] != TP_GARBAGE;

  switch (which) {
    case 0:
    case 9: value = (int64_t)buf.struct_size; break;
    case 1:
    case 10: value = changed; break;
    case 2: value = buf.dim; break;
    case 3: value = buf.numel; break;
    case 4: value = buf.dtype; break;
    case 5: value = buf.device.type; break;
    case 6: value = buf.is_contiguous; break;
    case 7: value = tp_event_queries; break;
    case 8: value = tp_trap_calls; break;
    default: return tp_error(BP_INVALID_ARGUMENT, "info: which must be 0..10");
  }
  call->returns[0].tag = BP_VALUE_INT;
  call->returns[0].u.i = value;
  return NULL;
}

/* A BP_KernelDesc full of garbage but for the fields its struct_size covers. */
static const BP_KernelDesc* tp_kernel_desc(void) {
  memset(&tp_kernel, TP_GARBAGE, sizeof tp_kernel);
  tp_kernel.struct_size = TP_KERNEL_SIZE;
  tp_kernel.fn = tp_info_kernel;
  tp_kernel.ctx = (void*)tp_kernel_ctx;
#if TP_LAYOUT != TP_CUT_OPTIONAL
  /* Checked against the schema when given: a host that read a cut one would
   * read a garbage pointer. */
  tp_kernel.cpp_signature = "(Tensor, int) -> int";
#endif
#if TP_LAYOUT == TP_FIELD_END || TP_LAYOUT == TP_CUT_REQUIRED
  tp_kernel.dtypes = 0;      /* every dtype; a 1.2 plugin's struct ends before it */
  tp_kernel.flags = 0;       /* none (ABI 1.13) */
  tp_kernel.typed_fn = NULL; /* no typed entry (ABI 1.14) */
#endif
  return &tp_kernel;
}

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  BP_Error* e;
  tp_host = host;
  if ((e = host->def(plugin, TP_NAME "::info(Tensor self, int which) -> int"))) return e;
  if ((e = host->impl(plugin, TP_NAME "::info", 0, tp_kernel_desc()))) return e;

  memset(&tp_dev, TP_GARBAGE, sizeof tp_dev); /* padding after host_accessible and dlpack_device_type included */
  tp_dev.struct_size = TP_DEVICE_SIZE;
  tp_dev.name = TP_DEV;
  tp_dev.ctx = NULL;
  tp_dev.host_accessible = 1;
  tp_dev.device_count = tp_device_count;
  tp_dev.unavailable_reason = NULL;
  tp_dev.get_properties = tp_get_properties;
  tp_dev.allocate = tp_allocate;
  tp_dev.deallocate = tp_deallocate;
  tp_dev.copy_host_to_device = tp_copy;
  tp_dev.copy_device_to_host = tp_copy;
  tp_dev.copy_device_to_device = tp_copy_d2d;
  tp_dev.memset = NULL;
  tp_dev.synchronize = NULL;
  tp_dev.stream_create = NULL;
  tp_dev.stream_destroy = NULL;
  tp_dev.stream_synchronize = NULL;
  tp_dev.get_current_stream = NULL;
  tp_dev.set_current_stream = NULL;
  tp_dev.event_create = tp_event_create;
  tp_dev.event_destroy = tp_event_destroy;
  tp_dev.event_record = tp_event_record;
  tp_dev.event_wait = NULL;
  tp_dev.event_synchronize = tp_event_synchronize;
  /* Past struct_size, fields keep their garbage; event_query holds a trap. */
  if (TP_DEVICE_SIZE >= BP_STRUCT_SIZE(BP_DeviceTypeDesc, dlpack_device_type))
    tp_dev.dlpack_device_type = 1; /* kDLCPU */
  tp_dev.event_query =
      TP_DEVICE_SIZE >= BP_STRUCT_SIZE(BP_DeviceTypeDesc, event_query) ? tp_event_query : tp_event_query_trap;
  /* event_wait_device (1.8): NULL where struct_size covers it, else garbage. */
  if (TP_DEVICE_SIZE >= BP_STRUCT_SIZE(BP_DeviceTypeDesc, event_wait_device)) tp_dev.event_wait_device = NULL;
  /* event_create_timed and event_elapsed_ms (1.12): likewise. */
  if (TP_DEVICE_SIZE >= BP_STRUCT_SIZE(BP_DeviceTypeDesc, event_elapsed_ms)) {
    tp_dev.event_create_timed = NULL;
    tp_dev.event_elapsed_ms = NULL;
  }
  /* The graph slots (1.13): likewise. */
  if (TP_DEVICE_SIZE >= BP_STRUCT_SIZE(BP_DeviceTypeDesc, graph_destroy)) {
    tp_dev.graph_capture_begin = NULL;
    tp_dev.graph_capture_end = NULL;
    tp_dev.graph_replay = NULL;
    tp_dev.graph_destroy = NULL;
  }
  if ((e = host->register_device_type(plugin, &tp_dev, &tp_dev_type))) return e;
  return host->impl(plugin, TP_NAME "::info", tp_dev_type, tp_kernel_desc());
}
