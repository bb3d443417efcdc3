/*
 * Backplane plugin ABI: the stable C interface between the host (the
 * dispatcher) and a device plugin shared library.
 *
 * Note [ABI rules]
 * - Plain C: no exceptions, STL types or RTTI cross this boundary; memory is
 *   freed by the side that allocated it. Errors are opaque BP_Error objects
 *   made and freed through the host's table (error_new / error_free): the
 *   host owns every error, whichever side created it.
 * - A plugin exports two entry points: backplane_plugin_query() (cheap, no
 *   side effects) and backplane_plugin_init(). backplane_plugin_shutdown()
 *   is optional and runs before the library is closed.
 * - Versioning: BP_ABI_MAJOR must match exactly. A plugin built against an
 *   older BP_ABI_MINOR loads into a newer host; one built against a newer
 *   minor than the host's is refused (it may call slots the host lacks). A
 *   plugin may build against a newer header for an older minor (Note [The
 *   ABI a plugin's source targets]).
 * - Every struct begins with `struct_size`, set by its producer to the end
 *   of the last field it knows: BP_STRUCT_SIZE(type, last_field), which for
 *   this header is BP_<type>_STRUCT_SIZE (BP_DeviceTypeDesc_STRUCT_SIZE,
 *   ...). Not sizeof: sizeof counts tail padding (BP_TensorInfo ends in a
 *   uint8 at byte 68 and is 72 bytes long), and a field appended later
 *   would land in an older producer's padding, which C leaves undefined.
 *   A receiver reads a field only if struct_size covers its end: fields
 *   past (or cut by) a smaller struct_size read as zero/NULL. It accepts a
 *   larger struct (ignoring fields it does not know) and rejects 0 or sizes
 *   over BP_MAX_STRUCT_SIZE.
 * - Producers built against ABI 1.0-1.2 (and 1.3 before BP_STRUCT_SIZE) set
 *   sizeof(the struct); receivers accept those sizes as well. So that their
 *   padding is never taken for a field, a field appended to a struct starts
 *   at or after sizeof(the struct as of 1.3): automatic for the structs that
 *   end in a pointer; BP_TensorInfo (72 bytes) and BP_DeviceProperties (160)
 *   have tail padding and must grow past it.
 * - Tables (BP_HostApi, BP_DeviceTypeDesc) are append-only: new minors only
 *   add fields at the end (and point BP_<type>_STRUCT_SIZE at the new last
 *   field). A NULL function slot means "not implemented" and is never called.
 * - Stable prefixes: in every major, BP_PluginInfo starts with {struct_size,
 *   magic, abi_major, abi_minor} and BP_HostApi with {struct_size, abi_major,
 *   abi_minor, error_new, error_free, error_code, error_message}, so either
 *   side can read the other's version and report a mismatch.
 * - Out-structs (BP_TensorInfo, BP_DeviceProperties): the caller sets
 *   struct_size to the size of its buffer (BP_<type>_STRUCT_SIZE for this
 *   header's struct) and the callee writes at most that many bytes.
 * - Lifetimes: the host table passed to init stays valid, unchanged, until
 *   the plugin's shutdown returns; a plugin may keep the pointer (copying
 *   it is allowed, never needed). Every struct a plugin passes to the host
 *   (BP_DeviceTypeDesc, BP_KernelDesc) is copied during the call, together
 *   with the strings it points to (name, cpp_signature): the plugin may
 *   reuse or free them once the call returns. What the copies point to
 *   stays the plugin's: the function pointers and ctx values must stay
 *   valid until the plugin is unloaded. BP_PluginInfo is the exception: it
 *   and its strings are static (the host reads them without a call).
 * - Threads: every host function may be called from any thread, except the
 *   registration functions, which are valid only inside init. Plugin kernels
 *   and device functions may be called from several threads at once.
 * - Unknown enum values (a dtype, a value tag, an error code from a newer
 *   peer) are rejected with BP_INVALID_ARGUMENT, never guessed at.
 * - History: 1.0 the first table; 1.1 added BP_HostApi.device_type_name;
 *   1.2 added BP_DeviceTypeDesc.dlpack_device_type; 1.3 added
 *   BP_DeviceTypeDesc.event_query, and struct_size became the end of the
 *   last field (BP_STRUCT_SIZE) instead of sizeof; 1.4 added
 *   BP_HostApi.impl_when_defined; 1.5 added BP_KernelDesc.dtypes and the
 *   dtypes BP_INT16, BP_UINT16, BP_UINT32 and BP_UINT64 (Note [Dtypes of
 *   older plugins]); 1.6 added BP_HostApi.derivative; 1.7 added
 *   BP_DECLINED (Note [Declined calls]); 1.8 added
 *   BP_DeviceTypeDesc.event_wait_device; 1.9 added BP_HostApi.meta,
 *   BP_HostApi.spec, BP_HostApi.derive_forms and impl's BP_ANY_DEVICE_TYPE
 *   (a composite) (Note [A plugin's own operators]); 1.10 added
 *   BP_HostApi.group_info and BP_GroupInfo (Note [Collective engines]);
 *   1.11 added BP_HostApi.store_set and store_get (Note [Collective
 *   engines]); 1.12 added BP_DeviceTypeDesc.event_create_timed and
 *   event_elapsed_ms; 1.13 added BP_KernelDesc.flags and
 *   BP_KERNEL_CPU_SCALARS (Note [CPU scalars as kernel arguments]), and
 *   BP_DeviceTypeDesc.graph_capture_begin, graph_capture_end, graph_replay
 *   and graph_destroy (Note [Graphs]); 1.14 added BP_KernelDesc.typed_fn
 *   and BP_TypedKernelFn (Note [Typed kernel entries]).
 * - Strings passed in are borrowed for the duration of the call unless a
 *   field says otherwise; strings returned are owned by their producer.
 */
#ifndef BACKPLANE_PLUGIN_API_H_
#define BACKPLANE_PLUGIN_API_H_

#include <stddef.h>
#include <stdint.h>

#define BP_PLUGIN_MAGIC 0x4C504250u /* "BPPL" little-endian */
#define BP_ABI_MAJOR 1
/* This header's minor: the newest ABI it describes. */
#define BP_HEADER_ABI_MINOR 14

/* Note [The ABI a plugin's source targets]
 * BP_ABI_MINOR is the minor a plugin reports (BP_PluginInfo.abi_minor) and
 * builds its SDK for: this header's, unless the plugin's source states the
 * minor it was written for, once, before including this header (or with
 * backplane_add_plugin(... ABI 1.N)):
 *   #define BP_TARGET_ABI_MINOR 2
 * The host then treats the plugin exactly as one built against that minor's
 * header, however new the header it is built against: its kernels are handed
 * only the dtypes that minor has (a kernel that declares none serves those,
 * Note [Dtypes of older plugins]), an error code it does not know is an error
 * (BP_DECLINED before 1.7), and plugin.hpp offers only what that minor has.
 * So a plugin's source that passed conformance keeps passing when rebuilt
 * unchanged against a newer SDK. Without the statement a plugin targets the
 * header it is built against, and a newer header may hand its kernels
 * more (ABI 1.5 added four dtypes): state the target in a plugin whose
 * kernels do not declare their dtypes. */
#ifdef BP_TARGET_ABI_MINOR
#if BP_TARGET_ABI_MINOR < 0 || BP_TARGET_ABI_MINOR > BP_HEADER_ABI_MINOR
#error "BP_TARGET_ABI_MINOR is outside 0..BP_HEADER_ABI_MINOR: this plugin_api.h cannot build for that plugin ABI minor"
#endif
#define BP_ABI_MINOR BP_TARGET_ABI_MINOR
#else
#define BP_ABI_MINOR BP_HEADER_ABI_MINOR
#endif
#define BP_MAX_STRUCT_SIZE 65536u

/* The size of `type` up to the end of `field`: what a producer that knows
 * the struct up to `field` sets struct_size to (Note [ABI rules]). An
 * integer constant expression, usable in static initializers. */
#ifdef __cplusplus
#define BP_STRUCT_SIZE(type, field) (offsetof(type, field) + sizeof(static_cast<type*>(nullptr)->field))
#else
#define BP_STRUCT_SIZE(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))
#endif

#define BP_PLUGIN_QUERY_SYMBOL "backplane_plugin_query"
#define BP_PLUGIN_INIT_SYMBOL "backplane_plugin_init"
#define BP_PLUGIN_SHUTDOWN_SYMBOL "backplane_plugin_shutdown"

#if defined(__GNUC__)
#define BP_EXPORT __attribute__((visibility("default")))
#else
#define BP_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ basic types */

/* Error codes; the numbering is absl::StatusCode's. */
typedef int32_t BP_ErrorCode;
enum {
  BP_OK = 0,
  BP_CANCELLED = 1,
  BP_UNKNOWN = 2,
  BP_INVALID_ARGUMENT = 3,
  BP_DEADLINE_EXCEEDED = 4,
  BP_NOT_FOUND = 5,
  BP_ALREADY_EXISTS = 6,
  BP_PERMISSION_DENIED = 7,
  BP_RESOURCE_EXHAUSTED = 8,
  BP_FAILED_PRECONDITION = 9,
  BP_ABORTED = 10,
  BP_OUT_OF_RANGE = 11,
  BP_UNIMPLEMENTED = 12,
  BP_INTERNAL = 13,
  BP_UNAVAILABLE = 14,
  BP_DATA_LOSS = 15,
  /* Added in ABI 1.7; not a failure. Note [Declined calls]: an impl kernel
   * that returns an error of this code (made with error_new, its message
   * saying why) declines the call: the host sends the call, with the same
   * arguments, where it would have gone without this kernel (the impl
   * registered before it for the device type, a composite, the device's
   * fallback, the CPU fallback, or the missing-kernel error), and reports
   * (the profiler, conformance, BACKPLANE_FALLBACK) count it there. The
   * kernel must not have written any argument or queued work. A fallback
   * (BP_HostApi.fallback) cannot decline: from one, and from a plugin built
   * against ABI 1.0-1.6, the code is an error like any other. */
  BP_DECLINED = 64
};

/* Element types; the numbering is the host's ScalarType. New dtypes are
 * appended: 9-12 came in ABI 1.5.
 *
 * Note [Dtypes of older plugins]
 * A plugin built against ABI 1.0-1.4 knows only BP_BOOL..BP_FLOAT64, so the
 * host never hands it a tensor or a dtype argument of a later dtype: its
 * impl kernels serve exactly the dtypes 0-8 (as if they declared them in
 * BP_KernelDesc.dtypes), so a call with an int16 or uint16/32/64 tensor goes
 * where a declared set sends it (the CPU fallback for a device kernel, else
 * the missing-kernel error naming the dtype); a call that would still reach
 * such a plugin's kernel or fallback with a later dtype (a dtype argument,
 * or a tensor reaching its backend fallback) fails with
 * BP_INVALID_ARGUMENT naming the plugin, its ABI version and the dtype. A
 * 1.5 plugin sees every dtype its declared set allows. */
typedef int32_t BP_ScalarType;
enum {
  BP_BOOL = 0,
  BP_UINT8 = 1,
  BP_INT8 = 2,
  BP_INT32 = 3,
  BP_INT64 = 4,
  BP_FLOAT16 = 5,
  BP_BFLOAT16 = 6,
  BP_FLOAT32 = 7,
  BP_FLOAT64 = 8,
  /* Added in ABI 1.5. */
  BP_INT16 = 9,
  BP_UINT16 = 10,
  BP_UINT32 = 11,
  BP_UINT64 = 12
};

typedef int32_t BP_LogLevel;
enum { BP_LOG_DEBUG = 0, BP_LOG_INFO = 1, BP_LOG_WARNING = 2, BP_LOG_ERROR = 3 };

/* A device: a device type number (from register_device_type or
 * device_type_find; 0 is cpu) and an index within the type. */
typedef struct BP_Device {
  int32_t type;
  int32_t index;
} BP_Device;

typedef struct BP_Error BP_Error;       /* opaque, host-owned */
typedef struct BP_Tensor BP_Tensor;     /* opaque, reference-counted, host-owned */
typedef struct BP_Operator BP_Operator; /* opaque; valid for the life of the process */
typedef struct BP_Plugin BP_Plugin;     /* opaque: the host's record of one plugin */
typedef struct BP_Stream BP_Stream;     /* opaque, plugin-owned */
typedef struct BP_Event BP_Event;       /* opaque, plugin-owned */
typedef struct BP_Graph BP_Graph;       /* opaque, plugin-owned (ABI 1.13) */

/* ------------------------------------------------------------------ values */

/* The kind of a BP_Value. Scalar arguments arrive as INT, DOUBLE or BOOL. */
typedef int32_t BP_ValueTag;
enum {
  BP_VALUE_NONE = 0,
  BP_VALUE_TENSOR = 1,
  BP_VALUE_INT = 2,
  BP_VALUE_DOUBLE = 3,
  BP_VALUE_BOOL = 4,
  BP_VALUE_STRING = 5,
  BP_VALUE_SCALAR_TYPE = 6,
  BP_VALUE_DEVICE = 7,
  BP_VALUE_INT_LIST = 8,
  BP_VALUE_DOUBLE_LIST = 9,
  BP_VALUE_BOOL_LIST = 10,
  BP_VALUE_TENSOR_LIST = 11,         /* entries never NULL */
  BP_VALUE_OPTIONAL_TENSOR_LIST = 12 /* NULL entries are None */
};

/* One argument or return. In arguments everything is borrowed for the call.
 * In returns, a TENSOR is a new reference the receiver now owns; returns
 * may only be NONE, TENSOR, INT, DOUBLE or BOOL in ABI 1.0. */
typedef struct BP_Value {
  BP_ValueTag tag;
  int32_t reserved; /* 0 */
  union {
    BP_Tensor* tensor;
    int64_t i;
    double d;
    uint8_t b;
    BP_ScalarType scalar_type;
    BP_Device device;
    struct {
      const char* data;
      size_t size;
    } str;
    struct {
      const int64_t* data;
      size_t size;
    } int_list;
    struct {
      const double* data;
      size_t size;
    } double_list;
    struct {
      const uint8_t* data;
      size_t size;
    } bool_list;
    struct {
      BP_Tensor* const* data;
      size_t size;
    } tensor_list;
  } u;
} BP_Value;

/* ----------------------------------------------------------------- kernels */

/* What a kernel receives. `returns` has num_returns entries set to NONE by
 * the host; the kernel fills them, each of the kind its schema's return
 * says (TENSOR for Tensor, INT for int, DOUBLE or INT for float, BOOL for
 * bool, any of INT, DOUBLE and BOOL for Scalar, NONE only where optional):
 * a value of another kind fails the call, naming the kernel. `dispatch_keys` is the call's key set, to
 * pass to op_redispatch when a kernel wraps lower keys. */
typedef struct BP_KernelCall {
  size_t struct_size;
  const BP_Operator* op;
  uint64_t dispatch_keys;
  const BP_Value* args;
  size_t num_args;
  BP_Value* returns;
  size_t num_returns;
} BP_KernelCall;
#define BP_KernelCall_STRUCT_SIZE BP_STRUCT_SIZE(BP_KernelCall, num_returns)

/* A kernel: returns NULL on success or an error made with error_new. It
 * must not let a C++ exception escape. */
typedef BP_Error* (*BP_KernelFn)(void* kernel_ctx, const BP_KernelCall* call);

/* Note [Typed kernel entries]
 * fn receives a call's arguments as BP_Values in a BP_KernelCall, which the
 * host fills and the kernel reads back. A kernel may also give a typed entry
 * (BP_KernelDesc.typed_fn, ABI 1.14) that takes them as C arguments, with a
 * pointer for each return: no BP_Value array and no call struct, so a call
 * costs little more than a native one. Its C type follows from the kernel's
 * cpp_signature "(A1, ..., An) -> R", which must be given with it:
 *   BP_Error* typed_fn(void* kernel_ctx, const BP_Operator* op,
 *                      uint64_t dispatch_keys, C(A1) a1, ..., C(An) an,
 *                      Out(R0) r0, ..., Out(Rm-1) r_m-1);
 * - arguments: Tensor and Tensor? are BP_Tensor* (borrowed; NULL for an
 *   undefined tensor or None), int an int64_t, float a double, bool a
 *   uint8_t (0 or 1), and every other type a const BP_Value* (borrowed,
 *   tagged as in a BP_KernelCall: NONE for a None);
 * - returns R0..Rm-1 of R ("Tensor", "int", "(Tensor, Tensor)", "()"), Out(Ri)
 *   each: a Tensor is a BP_Tensor** the host sets to NULL and the kernel to
 *   a new reference, int an int64_t*, float a double*, bool a uint8_t*
 *   (nonzero is true), and every other type a BP_Value* set to NONE by the
 *   host. The host sets int, float and bool returns to 0 before the call and
 *   cannot tell one the kernel left unset (through fn that is an error): a
 *   kernel sets every return it has.
 * The rules of fn hold: the op and dispatch_keys are the call's, an error or
 * BP_DECLINED is returned (the host then releases any tensor the kernel
 * stored), a Tensor return may be left NULL only where fn may leave it NONE.
 * The host calls typed_fn where it has compiled a typed call for the
 * signature (every op's of the host, see docs/plugins.md) and fn everywhere else
 * (boxed callers, other signatures), so fn stays required and the two must
 * do the same (`backplane conformance` calls each op's functional, in-place
 * and out= forms both ways and fails a kernel whose entries disagree). The
 * C++ SDK gives every bp::kernel() both. */
typedef void (*BP_TypedKernelFn)(void);

typedef struct BP_KernelDesc {
  size_t struct_size;
  BP_KernelFn fn;
  void* ctx; /* passed to fn; owned by the plugin, must outlive the plugin's registration */
  /* Optional: the kernel's C++ signature in the host's notation, e.g.
   * "(Tensor, Tensor, Scalar) -> Tensor"; when given, the host checks it
   * against the schema at registration. */
  const char* cpp_signature;
  /* Added in ABI 1.5. The dtypes the kernel serves: bit i set = BP_ScalarType
   * value i (bit BP_FLOAT32 for float32); 0 = every dtype, which is what a
   * plugin built against 1.0-1.4 (whose struct_size ends before this field)
   * declares. A call reaches the kernel only if every tensor argument's
   * dtype is declared (inputs and outputs, each element of a tensor list,
   * optional tensors that are present); the host sends every other call to
   * what would serve it without this kernel: a composite, the device's
   * fallback, the CPU fallback (copy to the host, run the CPU kernel), or
   * the missing-kernel error. So a kernel handles only the dtypes it
   * declares. Bits for dtypes the host does not know are rejected with
   * BP_INVALID_ARGUMENT. impl and impl_when_defined read it; fallback
   * rejects a nonzero mask (a fallback serves every op and dtype). */
  uint64_t dtypes;
  /* Added in ABI 1.13. BP_KERNEL_* bits; 0 for a plugin built against an
   * older header (the host reads the field only from a plugin of ABI 1.13
   * or newer). Unknown bits are rejected with BP_INVALID_ARGUMENT. */
  uint64_t flags;
  /* Added in ABI 1.14. Optional (NULL): the kernel's typed entry, cast to
   * BP_TypedKernelFn (Note [Typed kernel entries]); needs cpp_signature.
   * impl, impl_when_defined and composites (impl with BP_ANY_DEVICE_TYPE)
   * read it; a fallback, a rule (meta) and a conformance reference are
   * always called through fn and reject a non-NULL one. The host reads it
   * only from a plugin of ABI 1.14 or newer. */
  BP_TypedKernelFn typed_fn;
} BP_KernelDesc;
#define BP_KernelDesc_STRUCT_SIZE BP_STRUCT_SIZE(BP_KernelDesc, typed_fn)

/* Note [Graphs]
 * Launch-bound work (many small kernels: an encoder layer at batch 1)
 * costs the host more than the device. A graph captures the work a stream
 * is given once and replays it as one launch (CUDA graphs, HIP graphs; the
 * simulator records and replays the same calls). Replays read and write
 * the addresses the capture used: an app refills the capture's input
 * tensors in place and reads its output tensors after each replay. So the
 * memory the captured work allocates must stay the graph's: it comes from a
 * pool set aside at capture_begin (reused within the capture in allocation
 * order, never given to work outside the graph) and lives until the graph
 * and every tensor allocated from it are gone. What a replay cannot repeat
 * is refused during capture: reading device memory on the host (t.cpu(),
 * item(), a data-dependent size such as nonzero's), copying from the host
 * (the graph would read the host buffer again at each replay), any
 * synchronization, recording or waiting for events, and an allocation the
 * pool cannot hold. One capture per device at a time. */

/* Note [CPU scalars as kernel arguments]
 * BP_KernelDesc.flags bit (ABI 1.13; impl and impl_when_defined at a
 * device's key only). As in PyTorch, a 0-d CPU tensor may be an operand of a
 * binary elementwise op or of where whose other operands are on a device.
 * Without this bit the host puts such an operand on the device before
 * calling the out= kernel (an allocation and a fill there), so the kernel
 * sees one device only. With it, the kernel declares that it takes such an
 * operand as it is: a tensor argument may then be a 0-d tensor on the cpu
 * (read its one element on the host and pass the value to the device, as
 * PyTorch's TensorIterator passes CPU scalars), and the call costs nothing
 * more than with a Scalar. The host passes one only to the out= kernels of
 * the ops that take CPU scalars (the binary arithmetic, comparison, bitwise
 * and logical ops, where), only in the operand positions, and only to a
 * kernel that declares no dtypes (one that does gets the operand on the
 * device, as without the bit); out is always on the device. */
#define BP_KERNEL_CPU_SCALARS (UINT64_C(1) << 0)
/* The bit of BP_KernelDesc.dtypes for BP_ScalarType `t`. */
#define BP_DTYPE_BIT(t) (UINT64_C(1) << (t))

/* Conformance samples for an operator a plugin defines (BP_HostApi.spec,
 * ABI 1.9; Note [A plugin's own operators]). */
typedef struct BP_SpecDesc {
  size_t struct_size;
  /* The sample calls, one per line, in the host's sample notation
   * (docs/conformance.md "Samples of a plugin's own operator"), e.g.
   *   dtypes: float32, float16
   *   rows: T[4,8], T[8]
   *   transposed: T[8,4].T, T[4]
   *   raises bias on the host: T[4,8], T[8]@cpu
   * Copied during the call. */
  const char* samples;
  /* What each sample must return: a kernel with the operator's signature,
   * called with the samples' host tensors. NULL: the operator's cpu kernel
   * is the reference (the reports say which). */
  const BP_KernelDesc* reference;
  /* Tolerance for floating results, |actual - expected| <= atol + rtol *
   * |expected|; 0 and 0: the result dtype's default (PyTorch's). */
  double atol;
  double rtol;
} BP_SpecDesc;
#define BP_SpecDesc_STRUCT_SIZE BP_STRUCT_SIZE(BP_SpecDesc, rtol)

/* ----------------------------------------------------------------- devices */

typedef struct BP_DeviceProperties {
  size_t struct_size;
  char name[128];        /* "NVIDIA H100 80GB HBM3" */
  uint64_t total_memory; /* bytes; 0 if unknown */
  int32_t compute_major; /* vendor-defined capability, 0 if none */
  int32_t compute_minor;
  int32_t multiprocessor_count;
} BP_DeviceProperties;
#define BP_DeviceProperties_STRUCT_SIZE BP_STRUCT_SIZE(BP_DeviceProperties, multiprocessor_count)

/* A device type: everything the host needs to hold tensors on it. `ctx` is
 * passed back to every function. Functions after `synchronize` are
 * optional (NULL when the device has no streams or events). Streams and
 * events: handles are made and owned by the plugin; a NULL BP_Stream* is the
 * device's default stream; the current stream (get/set_current_stream) is
 * per host thread and device, and every kernel and copy the plugin queues
 * for the calling thread goes to it; event_wait makes later work on the
 * stream wait for the event without blocking the host. */
typedef struct BP_DeviceTypeDesc {
  size_t struct_size;
  const char* name; /* lowercase [a-z][a-z0-9_]*, at most 31 characters */
  void* ctx;
  uint8_t host_accessible; /* 1 if the host may dereference this device's memory */
  int32_t (*device_count)(void* ctx);
  /* Why device_count() is 0 (no driver, no hardware); NULL when devices exist.
   * The string is owned by the plugin and must live as long as the plugin. */
  const char* (*unavailable_reason)(void* ctx);
  BP_Error* (*get_properties)(void* ctx, int32_t device, BP_DeviceProperties* out);
  /* nbytes may be 0 (then *out may be NULL); otherwise success must set
   * *out to the memory (the host refuses a NULL with an error naming the
   * plugin). */
  BP_Error* (*allocate)(void* ctx, int32_t device, size_t nbytes, void** out);
  void (*deallocate)(void* ctx, int32_t device, void* ptr);
  BP_Error* (*copy_host_to_device)(void* ctx, int32_t device, void* dst, const void* src, size_t nbytes);
  BP_Error* (*copy_device_to_host)(void* ctx, int32_t device, void* dst, const void* src, size_t nbytes);
  BP_Error* (*copy_device_to_device)(void* ctx, int32_t dst_device, void* dst, int32_t src_device, const void* src,
                                     size_t nbytes);
  BP_Error* (*memset)(void* ctx, int32_t device, void* dst, uint8_t value, size_t nbytes);
  BP_Error* (*synchronize)(void* ctx, int32_t device);
  BP_Error* (*stream_create)(void* ctx, int32_t device, BP_Stream** out);
  void (*stream_destroy)(void* ctx, int32_t device, BP_Stream* stream);
  BP_Error* (*stream_synchronize)(void* ctx, int32_t device, BP_Stream* stream);
  BP_Error* (*get_current_stream)(void* ctx, int32_t device, BP_Stream** out);
  BP_Error* (*set_current_stream)(void* ctx, int32_t device, BP_Stream* stream);
  BP_Error* (*event_create)(void* ctx, int32_t device, BP_Event** out);
  void (*event_destroy)(void* ctx, int32_t device, BP_Event* event);
  BP_Error* (*event_record)(void* ctx, int32_t device, BP_Event* event, BP_Stream* stream);
  BP_Error* (*event_wait)(void* ctx, int32_t device, BP_Event* event, BP_Stream* stream);
  BP_Error* (*event_synchronize)(void* ctx, int32_t device, BP_Event* event);

  /* --- Added in ABI 1.2 (a host reads it only when struct_size covers it). */

  /* The DLPack DLDeviceType (dlpack.h: kDLCUDA = 2, kDLROCM = 10, ...) whose
   * consumers can use this device's addresses as they are: then the host
   * exports and imports tensors of this type through DLPack without a copy,
   * with DLDevice.device_id = the device index. 0: none, the addresses mean
   * nothing outside this plugin (export is refused). Negative values are
   * refused at registration. */
  int32_t dlpack_device_type;

  /* --- Added in ABI 1.3 (a host reads it only when struct_size covers it). */

  /* Optional (NULL: the device cannot say without blocking): sets
   * *out_complete to 1 when all work before the event's last record has
   * finished (or it was never recorded), else 0; never blocks. */
  BP_Error* (*event_query)(void* ctx, int32_t device, BP_Event* event, uint8_t* out_complete);

  /* --- Added in ABI 1.8 (a host reads it only when struct_size covers it). */

  /* Optional (NULL: an event orders the streams of its own device only):
   * makes later work on `stream` of device `stream_device` wait for `event`,
   * made on device `event_device` of the same type (event_device !=
   * stream_device), without blocking the host, as cudaStreamWaitEvent does
   * across devices. */
  BP_Error* (*event_wait_device)(void* ctx, int32_t event_device, BP_Event* event, int32_t stream_device,
                                 BP_Stream* stream);

  /* --- Added in ABI 1.12 (a host reads them only when struct_size covers them). */

  /* Optional, both or neither (NULL: the device's events carry no time).
   * event_create_timed makes an event like event_create (destroyed with
   * event_destroy, usable with every event function) that also takes the
   * time at which the device reaches each record of it. event_elapsed_ms
   * sets *out_ms to the device's time in milliseconds from `start` to `end`
   * (negative when `end` was reached first), as cudaEventElapsedTime does:
   * both made by event_create_timed on `device`, recorded, and complete
   * (an error otherwise, BP_FAILED_PRECONDITION for one not yet complete).
   * The profiler uses them for a timeline track per stream (Note
   * [Timelines] in the host's profiler.h). */
  BP_Error* (*event_create_timed)(void* ctx, int32_t device, BP_Event** out);
  BP_Error* (*event_elapsed_ms)(void* ctx, int32_t device, BP_Event* start, BP_Event* end, double* out_ms);

  /* --- Added in ABI 1.13 (a host reads them only when struct_size covers them). */

  /* Optional, all four or none (NULL: work on the device cannot be captured;
   * Note [Graphs]). graph_capture_begin starts capturing the work the
   * calling thread queues on `stream` (kernels, device-to-device copies,
   * fills) into a graph instead of running it; the memory the captured work
   * allocates comes from a pool of `pool_bytes` set aside for the graph.
   * graph_capture_end stops it and sets *out to the graph, ready to replay.
   * graph_replay queues the captured work again, on `stream`, reading and
   * writing the same addresses; graph_destroy releases the graph (its pool
   * once no tensor of it is left). While capturing, what cannot be captured
   * fails with an error that says so, and the capture stays valid: a read
   * of device memory on the host, a copy from the host, a synchronization,
   * an allocation that outgrows the pool. */
  BP_Error* (*graph_capture_begin)(void* ctx, int32_t device, BP_Stream* stream, size_t pool_bytes);
  BP_Error* (*graph_capture_end)(void* ctx, int32_t device, BP_Stream* stream, BP_Graph** out);
  BP_Error* (*graph_replay)(void* ctx, int32_t device, BP_Graph* graph, BP_Stream* stream);
  void (*graph_destroy)(void* ctx, int32_t device, BP_Graph* graph);
} BP_DeviceTypeDesc;
#define BP_DeviceTypeDesc_STRUCT_SIZE BP_STRUCT_SIZE(BP_DeviceTypeDesc, graph_destroy)

/* ----------------------------------------------------------------- tensors */

/* A tensor's metadata. Pointers are borrowed: valid while the tensor lives. */
typedef struct BP_TensorInfo {
  size_t struct_size;
  void* data; /* address of the first element (storage + offset) */
  const int64_t* sizes;
  const int64_t* strides; /* in elements */
  int64_t dim;
  int64_t numel;
  int64_t storage_offset; /* in elements */
  BP_ScalarType dtype;
  BP_Device device;
  uint8_t is_contiguous;
} BP_TensorInfo;
#define BP_TensorInfo_STRUCT_SIZE BP_STRUCT_SIZE(BP_TensorInfo, is_contiguous)

/* --------------------------------------------------------- process groups */

/* Note [Collective engines]
 * The collectives are host operators (comm::all_reduce_, comm::broadcast_,
 * comm::all_gather.out, comm::reduce_scatter.out, comm::all_to_all.out,
 * comm::send, comm::recv_, comm::barrier; the host's
 * backplane/runtime/collectives.h has their schemas). A plugin brings a
 * collective library for its device by registering kernels for them on its
 * device type with impl, as for any operator; a device without them runs
 * the CPU engine through the CPU fallback. Each takes `int group`, the id of
 * a process group, which the kernel turns into the group's members with
 * group_info. The host has already checked each rank's own arguments (the
 * group exists and this process is a member, ranks, tags, reductions,
 * out's shape); the engine checks that the ranks agree with each other, and
 * waits for them at most timeout_seconds before failing with
 * BP_DEADLINE_EXCEEDED. Groups are made by the application on every rank
 * in the same order, so an engine may make its communicator for a group
 * lazily, on the group's first collective. */
typedef struct BP_GroupInfo {
  size_t struct_size;
  int64_t id;   /* 0 is the world */
  int32_t rank; /* this process's rank in the group; -1 if it is not a member */
  int32_t size;
  /* `size` entries: the world rank of each group rank. Owned by the host,
   * valid for the life of the process. */
  const int32_t* world_ranks;
  int32_t world_rank; /* this process's rank in the world */
  int32_t world_size;
  /* How long a collective may wait for the other ranks (seconds > 0). */
  double timeout_seconds;
} BP_GroupInfo;
#define BP_GroupInfo_STRUCT_SIZE BP_STRUCT_SIZE(BP_GroupInfo, timeout_seconds)

/* ------------------------------------------------------------- host table */

typedef struct BP_HostApi {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;

  /* Errors. `message` is copied. */
  BP_Error* (*error_new)(BP_ErrorCode code, const char* message);
  void (*error_free)(BP_Error* error);
  BP_ErrorCode (*error_code)(const BP_Error* error);
  const char* (*error_message)(const BP_Error* error); /* valid until error_free */

  /* Logging, prefixed with the plugin's name. */
  void (*log)(BP_Plugin* plugin, BP_LogLevel level, const char* message);

  /* Registration (during init only). Each registration belongs to `plugin`
   * and is undone when the plugin is unloaded or its init fails. */
  BP_Error* (*register_device_type)(BP_Plugin* plugin, const BP_DeviceTypeDesc* desc, int32_t* out_device_type);
  BP_Error* (*def)(BP_Plugin* plugin, const char* schema);
  /* `op` is "ns::name.overload", or "name.overload" for the standard
   * namespace. device_type 0 is cpu; BP_ANY_DEVICE_TYPE (ABI 1.9) makes
   * the kernel the composite of an operator this plugin defines (Note [A
   * plugin's own operators]). `op` must be defined (by this plugin,
   * an earlier one or the host): an undefined name fails with
   * BP_NOT_FOUND. For another plugin's operators see impl_when_defined. */
  BP_Error* (*impl)(BP_Plugin* plugin, const char* op, int32_t device_type, const BP_KernelDesc* kernel);
  /* A boxed kernel for every operator on `device_type` that has no kernel.
   * kernel->dtypes must be 0 (every dtype): a fallback declares none. */
  BP_Error* (*fallback)(BP_Plugin* plugin, int32_t device_type, const BP_KernelDesc* kernel);

  /* Device types by name ("cpu", "cuda", "toyaccel"). */
  BP_Error* (*device_type_find)(const char* name, int32_t* out_device_type);

  /* Tensors. */
  void (*tensor_info)(const BP_Tensor* tensor, BP_TensorInfo* out);
  BP_Tensor* (*tensor_retain)(BP_Tensor* tensor); /* returns tensor, with a new reference */
  void (*tensor_release)(BP_Tensor* tensor);      /* NULL is allowed */
  /* A new tensor on `device` through that device's allocator; strides NULL
   * means contiguous. */
  BP_Error* (*tensor_empty)(const int64_t* sizes, size_t ndim, const int64_t* strides, BP_ScalarType dtype,
                            BP_Device device, BP_Tensor** out);
  /* A view of `base` (shares storage): as_strided. */
  BP_Error* (*tensor_view)(BP_Tensor* base, const int64_t* sizes, const int64_t* strides, size_t ndim,
                           int64_t storage_offset, BP_Tensor** out);

  /* Operators, called through the dispatcher (boxed). `returns` must have
   * room for the op's returns; returned tensors are owned by the caller
   * (tensor_release each). */
  BP_Error* (*op_find)(const char* qualified_name, const BP_Operator** out);
  const char* (*op_name)(const BP_Operator* op); /* "ns::name.overload"; lives with the process */
  BP_Error* (*op_call)(const BP_Operator* op, const BP_Value* args, size_t num_args, BP_Value* returns,
                       size_t num_returns);
  /* Calls the kernel for the highest key of `dispatch_keys`. Key layout:
   * bit 1 + t is the backend key of device type t; functionality keys (such
   * as tracing) use bits 40 and up. A kernel for device type t that wraps
   * the lower keys passes call->dispatch_keys & ((1ull << (1 + t)) - 1), the
   * keys below its own. On error, `returns` are released and set to NONE by the host
   * (the same holds for op_call). */
  BP_Error* (*op_redispatch)(const BP_Operator* op, uint64_t dispatch_keys, const BP_Value* args, size_t num_args,
                             BP_Value* returns, size_t num_returns);

  /* --- Added in ABI 1.1 (check struct_size before use when built for 1.0). */

  /* The name of a device type number ("cpu", "toyaccel"), or NULL if none is
   * registered under it. The string lives as long as the process. */
  const char* (*device_type_name)(int32_t device_type);

  /* --- Added in ABI 1.4 (check struct_size before use when built for an
   * older minor: struct_size >= BP_STRUCT_SIZE(BP_HostApi, impl_when_defined)
   * and the slot is not NULL). */

  /* impl for an operator that another plugin defines, possibly one that
   * loads later (plugins load in an order the application picks): a device
   * plugin implementing another plugin's operators. Registration only, like
   * impl. If `op` is defined this is exactly impl (a cpp_signature that does
   * not fit fails at once). If not, the kernel is kept, the operator stays
   * undefined (calls fail as for any undefined operator), and the kernel
   * enters the dispatch table when a def of `op` arrives. A kernel whose
   * cpp_signature does not fit that schema does not make the def fail: it
   * stays inactive, and the host logs a warning naming both. Removing the
   * def (its plugin unloaded) makes the kernel wait again; unloading this
   * plugin removes it. Give cpp_signature: the host checks it when the
   * definition arrives, and a kernel registered before its definition
   * without one is called boxed only. Opt-in, because a misspelled `op` is
   * not reported here: use impl for operators that are defined first. */
  BP_Error* (*impl_when_defined)(BP_Plugin* plugin, const char* op, int32_t device_type, const BP_KernelDesc* kernel);

  /* --- Added in ABI 1.6 (check struct_size >= BP_STRUCT_SIZE(BP_HostApi,
   * derivative) and the slot before use when built for an older minor). */

  /* Declares how `op` differentiates, as data (Note [Declared derivatives]
   * in the host's backplane/ops/derivatives.h; docs/plugins.md "Training").
   * Registration only, like def. `declaration` is "non_differentiable",
   * "not_implemented", or "ns::backward_op(a, grad, result, ...) -> (x, w)":
   * the backward op called with, per argument, one of `op`'s arguments by
   * name, `grad` / `gradN` (the gradient of result N) or `result` /
   * `resultN`; its results are the gradients of the named tensor arguments
   * of `op`, in order (`_`: none). Both ops must be defined.
   * `device_type`: BP_ANY_DEVICE_TYPE for every device (an op outside the
   * standard table), or a device type for that device's own declaration,
   * which replaces the general one for calls on it (a fused backward for a
   * standard op). Unloading the plugin removes its declarations. */
  BP_Error* (*derivative)(BP_Plugin* plugin, const char* op, int32_t device_type, const char* declaration);

  /* --- Added in ABI 1.9 (check struct_size >= BP_STRUCT_SIZE(BP_HostApi,
   * spec) and the slot before use when built for an older minor). */

  /* Note [A plugin's own operators]
   * A plugin's own operator (one it defs) gets what a standard one has:
   * - meta: its shape, dtype and device rule. `rule` is a kernel with the
   *   operator's parameters and no returns (cpp_signature "(Tensor, Tensor)
   *   -> ()"; dtypes 0) that the host runs before the operator's kernel on
   *   every call, whatever device serves it (the CPU fallback included), as
   *   for the standard ops. It returns an error naming what is wrong and
   *   what to do (BP_INVALID_ARGUMENT): an x on one device and a bias on
   *   another, a bias of the wrong length, a dtype the operator does not
   *   take. It must not write anything. One rule per operator; only for
   *   operators this plugin defines.
   * - spec: conformance samples (BP_SpecDesc), so `backplane conformance`
   *   certifies the operator on every backend that serves it (its
   *   gradient too when it has a derivative, and the mixed-dtype samples
   *   of a kernel declaring several dtypes) instead of listing it as
   *   uncertified. Only for operators this plugin defines; one per
   *   operator. The sample text is checked against the schema here: an
   *   error names the line.
   * - derive_forms: its out= and in-place forms (BP_FORM_OUT,
   *   BP_FORM_INPLACE), defined by the host with kernels that call the
   *   operator and copy its result: "ns::name.out" (or ".OVERLOAD_out") and
   *   "ns::name_" (Note [Derived forms] in the host's
   *   backplane/ops/derived_forms.h). The operator must return one Tensor
   *   and write no argument; for the in-place form its first argument is the
   *   tensor written. A spec of the operator certifies the forms too.
   * - a composite: impl with device_type BP_ANY_DEVICE_TYPE registers a
   *   kernel of the operator for every device that has none of its own,
   *   written with other operators (op_call). dtypes must be 0.
   * - derivative (above) and kernels for any device (impl). */
  BP_Error* (*meta)(BP_Plugin* plugin, const char* op, const BP_KernelDesc* rule);
  BP_Error* (*spec)(BP_Plugin* plugin, const char* op, const BP_SpecDesc* spec);
  BP_Error* (*derive_forms)(BP_Plugin* plugin, const char* op, uint32_t forms);

  /* --- Added in ABI 1.10 (check struct_size >= BP_STRUCT_SIZE(BP_HostApi,
   * group_info) and the slot before use when built for an older minor). */

  /* The process group with id `group` (Note [Collective engines]); the
   * caller sets out->struct_size. BP_NOT_FOUND for an id no group has, or
   * the launcher's error (BP_INVALID_ARGUMENT) when the world could not be
   * read from the environment. Any thread. */
  BP_Error* (*group_info)(int64_t group, BP_GroupInfo* out);

  /* --- Added in ABI 1.11 (check struct_size >= BP_STRUCT_SIZE(BP_HostApi,
   * store_get) and the slot before use when built for an older minor). */

  /* The world's key-value store (the host's Note [The world's store] in
   * backplane/runtime/store.h): what a group's ranks exchange before their
   * collective library can run (NCCL's unique id, an address), as PJRT's
   * client creation takes a key-value store. Keys are the group's own (the
   * host prefixes the group's id): name them after the plugin
   * ("mylib/unique_id"). The caller must be a member of `group`; keys are
   * at most 4096 bytes, values 64 MiB. Any thread; each call is a round
   * trip to world rank 0 in a world of two or more.
   * - store_set: sets `key` to the `size` bytes at `value` (NULL when size
   *   is 0), replacing what it held.
   * - store_get: waits at most the group's timeout_seconds for `key` to be
   *   set (BP_DEADLINE_EXCEEDED after), then sets *size to the value's
   *   length and copies it to `out` when it fits in `capacity`; when it does
   *   not, nothing is copied and the error is BP_OUT_OF_RANGE (the value
   *   stays: call again with a buffer of *size bytes).
   * BP_FAILED_PRECONDITION when the world has no store (a world of two or
   * more without BACKPLANE_MASTER_PORT; the message says what to set). */
  BP_Error* (*store_set)(int64_t group, const char* key, const void* value, size_t size);
  BP_Error* (*store_get)(int64_t group, const char* key, void* out, size_t capacity, size_t* size);
} BP_HostApi;
#define BP_HostApi_STRUCT_SIZE BP_STRUCT_SIZE(BP_HostApi, store_get)
/* BP_HostApi.derive_forms's forms. */
#define BP_FORM_OUT 1u
#define BP_FORM_INPLACE 2u
/* BP_HostApi.derivative's device_type for "every device". */
#define BP_ANY_DEVICE_TYPE (-1)

/* ------------------------------------------------------------ entry points */

typedef struct BP_PluginInfo {
  size_t struct_size;
  uint32_t magic; /* BP_PLUGIN_MAGIC */
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* name;    /* unique, [a-z][a-z0-9_]*; static lifetime */
  const char* version; /* free text, e.g. "1.2.0"; static lifetime */
} BP_PluginInfo;
#define BP_PluginInfo_STRUCT_SIZE BP_STRUCT_SIZE(BP_PluginInfo, version)

/* Cheap and free of side effects: may be called without init. */
typedef const BP_PluginInfo* (*BP_PluginQueryFn)(void);
/* Registers the plugin's device types and kernels through `host`; returns
 * NULL or an error (then every registration it made is undone). */
typedef BP_Error* (*BP_PluginInitFn)(const BP_HostApi* host, BP_Plugin* plugin);
/* Optional: releases the plugin's own resources before the library closes. */
typedef void (*BP_PluginShutdownFn)(BP_Plugin* plugin);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BACKPLANE_PLUGIN_API_H_ */
