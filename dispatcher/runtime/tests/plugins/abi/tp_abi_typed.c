/*
 * BP_KernelDesc.typed_fn (ABI 1.14) at the ABI boundary, plain C against
 * plugin_api.h (Note [Typed kernel entries]). Every kernel is a cpu kernel
 * with both entries; fn and typed_fn tell apart which one ran. By compile
 * definition TP_MODE:
 *   TP_TY_V1_14     a plugin of this header's ABI. TP_NAME:: ...
 *     which(Tensor self) -> int          fn returns 1, typed_fn 2
 *     echo_ib(Tensor self, int n, bool b) -> Tensor
 *     echo_d(Tensor self, float f) -> Tensor
 *     echo_s(Tensor self, Scalar s) -> Tensor
 *     echo_l(Tensor self, int[] dims) -> Tensor
 *     echo_tl(Tensor[] tensors, int dim) -> Tensor
 *                                        each fails with BP_INVALID_ARGUMENT,
 *                                        its message the arguments it got
 *                                        ("typed: ..." or "boxed: ...")
 *     pair(Tensor self, int n, bool b) -> (Tensor, Tensor)
 *                                        self twice
 *     store_then_fail(Tensor self) -> Tensor
 *                                        typed_fn stores a new reference to
 *                                        self, then fails (the host must
 *                                        release it)
 *     no_return(Tensor self) -> Tensor   typed_fn succeeds without a return
 *     bool_seven(Tensor self) -> bool    typed_fn stores 7 (true, as through fn)
 *     pick(Tensor self) -> Tensor        two kernels: the first returns self;
 *                                        the second, registered after it,
 *                                        declines through typed_fn
 *     echo_tt(Tensor a, Tensor b) -> Tensor
 *                                        fails with whether each tensor arrived
 *     pair_half_fail(Tensor self, int n, bool b) -> (Tensor, Tensor)
 *                                        typed_fn stores self in the first
 *                                        return, then fails
 *     echo_lists(Tensor self, int[]? dims, Scalar? correction, bool keepdim, Tensor out) -> Tensor
 *     echo_types(Tensor self, ScalarType? dtype, Device? device) -> Tensor
 *     echo_mode(Tensor self, Tensor other, str? mode, Tensor out) -> Tensor
 *     echo_dim(Tensor self, int? dim, bool keepdim) -> Tensor
 *     echo_bias(Tensor input, Tensor weight, Tensor? bias) -> Tensor
 *     echo_nan(Tensor self, float? nan, float? posinf, float? neginf) -> Tensor
 *     echo_sort(Tensor self, bool? stable, int dim, bool descending) -> (Tensor, Tensor)
 *                                        signatures of standard ops with
 *                                        optional arguments; each fails
 *                                        with the values it got, written
 *                                        alike by fn ("boxed: ...") and
 *                                        typed_fn ("typed: ..."). Each also
 *                                        as <name>_fn, with fn only.
 *     composite_which(Tensor self) -> int
 *                                        which(), as a composite (impl with
 *                                        BP_ANY_DEVICE_TYPE)
 *     later(Tensor self) -> int          which(), through impl_when_defined
 *                                        before the def
 *     info(int which) -> int             0: typed_fn calls, 1: fn calls
 *   TP_TY_V1_13     TP_NAME::which only, built as a 1.13 plugin whose
 *                   typed_fn field holds a function that must never run (a
 *                   1.13 plugin's field is not read)
 *   TP_TY_NO_SIG    an impl with typed_fn and no cpp_signature (refused)
 *   TP_TY_META      a rule (meta) with typed_fn (refused)
 *   TP_TY_REFERENCE a conformance reference with typed_fn (refused)
 *   TP_TY_FALLBACK  a fallback with typed_fn (refused), on device "abidtfbdev"
 *                   (the name tp_abi_dtypes's device has: one dynamic slot)
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_common.h"

#define TP_TY_V1_14 1
#define TP_TY_V1_13 2
#define TP_TY_NO_SIG 3
#define TP_TY_FALLBACK 4
#define TP_TY_META 5
#define TP_TY_REFERENCE 6

#if TP_MODE == TP_TY_V1_13
#define TP_ABI_MINOR 13
#elif TP_MODE == TP_TY_V1_14 || TP_MODE == TP_TY_NO_SIG || TP_MODE == TP_TY_FALLBACK || TP_MODE == TP_TY_META || \
    TP_MODE == TP_TY_REFERENCE
#define TP_ABI_MINOR BP_ABI_MINOR
#else
#error "TP_MODE must be TP_TY_V1_14, TP_TY_V1_13, TP_TY_NO_SIG, TP_TY_FALLBACK, TP_TY_META or TP_TY_REFERENCE"
#endif

static const BP_PluginInfo tp_info = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, TP_ABI_MINOR, TP_NAME, "0.0.1"};
BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &tp_info; }

static int64_t tp_calls[2]; /* 0: typed_fn, 1: fn */

/* Each mode uses some of the functions below. */
#define TP_FN static __attribute__((unused))

/* ------------------------------------------------------------- which */

TP_FN BP_Error* tp_which(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  ++tp_calls[1];
  call->returns[0].tag = BP_VALUE_INT;
  call->returns[0].u.i = 1;
  return NULL;
}
TP_FN BP_Error* tp_which_typed(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, int64_t* out) {
  (void)ctx, (void)op, (void)keys, (void)self;
  ++tp_calls[0];
  *out = 2;
  return NULL;
}
#if TP_MODE == TP_TY_V1_13
TP_FN BP_Error* tp_never(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, int64_t* out) {
  (void)ctx, (void)op, (void)keys, (void)self, (void)out;
  abort(); /* a 1.13 plugin's typed_fn was called */
}
#endif

/* -------------------------------------------------------------- echoes */

TP_FN BP_Error* tp_echo(const char* text) { return abi_host->error_new(BP_INVALID_ARGUMENT, text); }
TP_FN const char* tp_defined(const BP_Tensor* t) { return t ? "defined" : "undefined"; }

/* Every echo's fn: the boxed call's argument tags. */
TP_FN BP_Error* tp_echo_boxed(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  char text[128];
  ++tp_calls[1];
  snprintf(text, sizeof text, "boxed: %zu arguments", call->num_args);
  return tp_echo(text);
}

TP_FN BP_Error* tp_echo_ib(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, int64_t n, uint8_t b,
                           BP_Tensor** out) {
  char text[128];
  (void)ctx, (void)out;
  ++tp_calls[0];
  snprintf(text, sizeof text, "typed: %s self=%s n=%" PRId64 " b=%d keys=%s", abi_host->op_name(op), tp_defined(self),
           n, (int)b, keys != 0 ? "set" : "none");
  return tp_echo(text);
}

TP_FN BP_Error* tp_echo_d(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, double f, BP_Tensor** out) {
  char text[128];
  (void)ctx, (void)op, (void)keys, (void)out;
  ++tp_calls[0];
  snprintf(text, sizeof text, "typed: self=%s f=%g", tp_defined(self), f);
  return tp_echo(text);
}

TP_FN BP_Error* tp_echo_s(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, const BP_Value* s,
                          BP_Tensor** out) {
  char text[128];
  (void)ctx, (void)op, (void)keys, (void)out;
  ++tp_calls[0];
  if (s->tag == BP_VALUE_INT)
    snprintf(text, sizeof text, "typed: self=%s s=int %" PRId64, tp_defined(self), s->u.i);
  else if (s->tag == BP_VALUE_DOUBLE)
    snprintf(text, sizeof text, "typed: self=%s s=float %g", tp_defined(self), s->u.d);
  else if (s->tag == BP_VALUE_BOOL)
    snprintf(text, sizeof text, "typed: self=%s s=bool %d", tp_defined(self), (int)s->u.b);
  else
    snprintf(text, sizeof text, "typed: self=%s s=tag %d", tp_defined(self), (int)s->tag);
  return tp_echo(text);
}

TP_FN BP_Error* tp_echo_l(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, const BP_Value* dims,
                          BP_Tensor** out) {
  char text[128];
  size_t i, used;
  (void)ctx, (void)op, (void)keys, (void)out;
  ++tp_calls[0];
  if (dims->tag != BP_VALUE_INT_LIST) return tp_echo("typed: dims is not an int list");
  used = (size_t)snprintf(text, sizeof text, "typed: self=%s dims=[", tp_defined(self));
  for (i = 0; i < dims->u.int_list.size && used < sizeof text; ++i)
    used += (size_t)snprintf(text + used, sizeof text - used, i ? " %" PRId64 : "%" PRId64, dims->u.int_list.data[i]);
  if (used < sizeof text) snprintf(text + used, sizeof text - used, "]");
  return tp_echo(text);
}

TP_FN BP_Error* tp_echo_tl(void* ctx, const BP_Operator* op, uint64_t keys, const BP_Value* tensors, int64_t dim,
                           BP_Tensor** out) {
  char text[128];
  (void)ctx, (void)op, (void)keys, (void)out;
  ++tp_calls[0];
  if (tensors->tag != BP_VALUE_TENSOR_LIST) return tp_echo("typed: tensors is not a tensor list");
  snprintf(text, sizeof text, "typed: %zu tensors dim=%" PRId64, tensors->u.tensor_list.size, dim);
  return tp_echo(text);
}

TP_FN BP_Error* tp_echo_tt(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* a, BP_Tensor* b,
                           BP_Tensor** out) {
  char text[128];
  (void)ctx, (void)op, (void)keys, (void)out;
  ++tp_calls[0];
  snprintf(text, sizeof text, "typed: a=%s b=%s", tp_defined(a), tp_defined(b));
  return tp_echo(text);
}

/* The values an echo got, one after another, written the same way from a
 * BP_Value (fn) and from a typed entry's C arguments. */
typedef struct TpText {
  char text[256];
  size_t used;
} TpText;
TP_FN void tp_put(TpText* t, const char* format, ...) __attribute__((format(printf, 2, 3)));
TP_FN void tp_put(TpText* t, const char* format, ...) {
  va_list args;
  int n;
  if (t->used >= sizeof t->text) return;
  va_start(args, format);
  n = vsnprintf(t->text + t->used, sizeof t->text - t->used, format, args);
  va_end(args);
  if (n > 0) t->used += (size_t)n;
}
TP_FN void tp_put_tensor(TpText* t, const BP_Tensor* v) { tp_put(t, " %s", v ? "tensor" : "none"); }
TP_FN void tp_put_value(TpText* t, const BP_Value* v) {
  size_t i;
  switch (v->tag) {
    case BP_VALUE_NONE: tp_put(t, " none"); break;
    case BP_VALUE_TENSOR: tp_put_tensor(t, v->u.tensor); break;
    case BP_VALUE_INT: tp_put(t, " int %" PRId64, v->u.i); break;
    case BP_VALUE_DOUBLE: tp_put(t, " float %g", v->u.d); break;
    case BP_VALUE_BOOL: tp_put(t, " bool %d", (int)v->u.b); break;
    case BP_VALUE_STRING: tp_put(t, " str '%.*s'", (int)v->u.str.size, v->u.str.data); break;
    case BP_VALUE_SCALAR_TYPE: tp_put(t, " dtype %d", (int)v->u.scalar_type); break;
    case BP_VALUE_DEVICE: tp_put(t, " device %d:%d", (int)v->u.device.type, (int)v->u.device.index); break;
    case BP_VALUE_INT_LIST:
      tp_put(t, " ints [");
      for (i = 0; i < v->u.int_list.size; ++i) tp_put(t, i ? " %" PRId64 : "%" PRId64, v->u.int_list.data[i]);
      tp_put(t, "]");
      break;
    default: tp_put(t, " tag %d", (int)v->tag); break;
  }
}
TP_FN void tp_put_int(TpText* t, int64_t i) { tp_put(t, " int %" PRId64, i); }
TP_FN void tp_put_bool(TpText* t, uint8_t b) { tp_put(t, " bool %d", (int)b); }
TP_FN BP_Error* tp_values_boxed(void* ctx, const BP_KernelCall* call) {
  TpText t = {"boxed:", 6};
  size_t i;
  (void)ctx;
  ++tp_calls[1];
  for (i = 0; i < call->num_args; ++i) tp_put_value(&t, &call->args[i]);
  return tp_echo(t.text);
}
TP_FN BP_Error* tp_echo_lists(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, const BP_Value* dims,
                              const BP_Value* correction, uint8_t keepdim, BP_Tensor* out, BP_Tensor** result) {
  TpText t = {"typed:", 6};
  (void)ctx, (void)op, (void)keys, (void)result;
  ++tp_calls[0];
  tp_put_tensor(&t, self);
  tp_put_value(&t, dims);
  tp_put_value(&t, correction);
  tp_put_bool(&t, keepdim);
  tp_put_tensor(&t, out);
  return tp_echo(t.text);
}
TP_FN BP_Error* tp_echo_types(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, const BP_Value* dtype,
                              const BP_Value* device, BP_Tensor** result) {
  TpText t = {"typed:", 6};
  (void)ctx, (void)op, (void)keys, (void)result;
  ++tp_calls[0];
  tp_put_tensor(&t, self);
  tp_put_value(&t, dtype);
  tp_put_value(&t, device);
  return tp_echo(t.text);
}
TP_FN BP_Error* tp_echo_mode(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, BP_Tensor* other,
                             const BP_Value* mode, BP_Tensor* out, BP_Tensor** result) {
  TpText t = {"typed:", 6};
  (void)ctx, (void)op, (void)keys, (void)result;
  ++tp_calls[0];
  tp_put_tensor(&t, self);
  tp_put_tensor(&t, other);
  tp_put_value(&t, mode);
  tp_put_tensor(&t, out);
  return tp_echo(t.text);
}
TP_FN BP_Error* tp_echo_dim(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, const BP_Value* dim,
                            uint8_t keepdim, BP_Tensor** result) {
  TpText t = {"typed:", 6};
  (void)ctx, (void)op, (void)keys, (void)result;
  ++tp_calls[0];
  tp_put_tensor(&t, self);
  tp_put_value(&t, dim);
  tp_put_bool(&t, keepdim);
  return tp_echo(t.text);
}
TP_FN BP_Error* tp_echo_bias(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* input, BP_Tensor* weight,
                             BP_Tensor* bias, BP_Tensor** result) {
  TpText t = {"typed:", 6};
  (void)ctx, (void)op, (void)keys, (void)result;
  ++tp_calls[0];
  tp_put_tensor(&t, input);
  tp_put_tensor(&t, weight);
  tp_put_tensor(&t, bias);
  return tp_echo(t.text);
}

TP_FN BP_Error* tp_echo_nan(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, const BP_Value* nan,
                            const BP_Value* posinf, const BP_Value* neginf, BP_Tensor** result) {
  TpText t = {"typed:", 6};
  (void)ctx, (void)op, (void)keys, (void)result;
  ++tp_calls[0];
  tp_put_tensor(&t, self);
  tp_put_value(&t, nan);
  tp_put_value(&t, posinf);
  tp_put_value(&t, neginf);
  return tp_echo(t.text);
}
TP_FN BP_Error* tp_echo_sort(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, const BP_Value* stable,
                             int64_t dim, uint8_t descending, BP_Tensor** values, BP_Tensor** indices) {
  TpText t = {"typed:", 6};
  (void)ctx, (void)op, (void)keys, (void)values, (void)indices;
  ++tp_calls[0];
  tp_put_tensor(&t, self);
  tp_put_value(&t, stable);
  tp_put_int(&t, dim);
  tp_put_bool(&t, descending);
  return tp_echo(t.text);
}

/* ----------------------------------------------------- returns, errors */

TP_FN BP_Error* tp_pair_half_fail(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, int64_t n,
                                  uint8_t b, BP_Tensor** out0, BP_Tensor** out1) {
  (void)ctx, (void)op, (void)keys, (void)n, (void)b, (void)out1;
  ++tp_calls[0];
  *out0 = abi_host->tensor_retain(self);
  return abi_host->error_new(BP_DATA_LOSS, "typed: failed after storing one of two returns");
}

TP_FN BP_Error* tp_pair(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  ++tp_calls[1];
  call->returns[0].tag = call->returns[1].tag = BP_VALUE_TENSOR;
  call->returns[0].u.tensor = abi_host->tensor_retain(call->args[0].u.tensor);
  call->returns[1].u.tensor = abi_host->tensor_retain(call->args[0].u.tensor);
  return NULL;
}
TP_FN BP_Error* tp_pair_typed(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, int64_t n, uint8_t b,
                              BP_Tensor** out0, BP_Tensor** out1) {
  (void)ctx, (void)op, (void)keys, (void)n, (void)b;
  ++tp_calls[0];
  *out0 = abi_host->tensor_retain(self);
  *out1 = abi_host->tensor_retain(self);
  return NULL;
}

TP_FN BP_Error* tp_store_then_fail(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, BP_Tensor** out) {
  (void)ctx, (void)op, (void)keys;
  ++tp_calls[0];
  *out = abi_host->tensor_retain(self);
  return abi_host->error_new(BP_DATA_LOSS, "typed: failed after storing a return");
}

TP_FN BP_Error* tp_no_return(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, BP_Tensor** out) {
  (void)ctx, (void)op, (void)keys, (void)self, (void)out;
  ++tp_calls[0];
  return NULL;
}

TP_FN BP_Error* tp_bool_seven(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, uint8_t* out) {
  (void)ctx, (void)op, (void)keys, (void)self;
  ++tp_calls[0];
  *out = 7;
  return NULL;
}

TP_FN BP_Error* tp_return_self(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  ++tp_calls[1];
  call->returns[0].tag = BP_VALUE_TENSOR;
  call->returns[0].u.tensor = abi_host->tensor_retain(call->args[0].u.tensor);
  return NULL;
}
TP_FN BP_Error* tp_return_self_typed(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self,
                                     BP_Tensor** out) {
  (void)ctx, (void)op, (void)keys;
  ++tp_calls[0];
  *out = abi_host->tensor_retain(self);
  return NULL;
}
TP_FN BP_Error* tp_decline(void* ctx, const BP_KernelCall* call) {
  (void)ctx, (void)call;
  ++tp_calls[1];
  return abi_host->error_new(BP_DECLINED, "boxed: declined");
}
TP_FN BP_Error* tp_decline_typed(void* ctx, const BP_Operator* op, uint64_t keys, BP_Tensor* self, BP_Tensor** out) {
  (void)ctx, (void)op, (void)keys, (void)self, (void)out;
  ++tp_calls[0];
  return abi_host->error_new(BP_DECLINED, "typed: declined");
}

TP_FN BP_Error* tp_info_kernel(void* ctx, const BP_KernelCall* call) {
  (void)ctx;
  const int64_t which = call->args[0].u.i;
  call->returns[0].tag = BP_VALUE_INT;
  call->returns[0].u.i = which >= 0 && which < 2 ? tp_calls[which] : -1;
  return NULL;
}

/* ---------------------------------------------------------------- init */

TP_FN BP_KernelDesc tp_typed_desc(BP_KernelFn fn, BP_TypedKernelFn typed_fn, const char* cpp_signature) {
  BP_KernelDesc k = abi_kernel_desc(fn);
  k.typed_fn = typed_fn;
  k.cpp_signature = cpp_signature;
  return k;
}

TP_FN BP_Error* tp_impl(BP_Plugin* plugin, const char* schema, const char* op, BP_KernelFn fn,
                        BP_TypedKernelFn typed_fn, const char* cpp_signature) {
  BP_Error* e;
  BP_KernelDesc k = tp_typed_desc(fn, typed_fn, cpp_signature);
  if (schema && (e = abi_host->def(plugin, schema))) return e;
  return abi_host->impl(plugin, op, 0, &k);
}

#define TP_TYPED(f) ((BP_TypedKernelFn)(f))

BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  BP_Error* e;
  abi_host = host;
#if TP_MODE == TP_TY_V1_14
  if ((e = tp_impl(plugin, TP_NAME "::which(Tensor self) -> int", TP_NAME "::which", tp_which, TP_TYPED(tp_which_typed),
                   "(Tensor) -> int")))
    return e;
  if ((e = tp_impl(plugin, TP_NAME "::echo_ib(Tensor self, int n, bool b) -> Tensor", TP_NAME "::echo_ib",
                   tp_echo_boxed, TP_TYPED(tp_echo_ib), "(Tensor, int, bool) -> Tensor")))
    return e;
  if ((e = tp_impl(plugin, TP_NAME "::echo_d(Tensor self, float f) -> Tensor", TP_NAME "::echo_d", tp_echo_boxed,
                   TP_TYPED(tp_echo_d), "(Tensor, float) -> Tensor")))
    return e;
  if ((e = tp_impl(plugin, TP_NAME "::echo_s(Tensor self, Scalar s) -> Tensor", TP_NAME "::echo_s", tp_echo_boxed,
                   TP_TYPED(tp_echo_s), "(Tensor, Scalar) -> Tensor")))
    return e;
  if ((e = tp_impl(plugin, TP_NAME "::echo_l(Tensor self, int[] dims) -> Tensor", TP_NAME "::echo_l", tp_echo_boxed,
                   TP_TYPED(tp_echo_l), "(Tensor, int[]) -> Tensor")))
    return e;
  if ((e = tp_impl(plugin, TP_NAME "::echo_tl(Tensor[] tensors, int dim) -> Tensor", TP_NAME "::echo_tl", tp_echo_boxed,
                   TP_TYPED(tp_echo_tl), "(Tensor[], int) -> Tensor")))
    return e;
  if ((e = tp_impl(plugin, TP_NAME "::pair(Tensor self, int n, bool b) -> (Tensor, Tensor)", TP_NAME "::pair", tp_pair,
                   TP_TYPED(tp_pair_typed), "(Tensor, int, bool) -> (Tensor, Tensor)")))
    return e;
  if ((e = tp_impl(plugin, TP_NAME "::store_then_fail(Tensor self) -> Tensor", TP_NAME "::store_then_fail",
                   abi_unreachable_kernel, TP_TYPED(tp_store_then_fail), "(Tensor) -> Tensor")))
    return e;
  if ((e = tp_impl(plugin, TP_NAME "::no_return(Tensor self) -> Tensor", TP_NAME "::no_return", abi_unreachable_kernel,
                   TP_TYPED(tp_no_return), "(Tensor) -> Tensor")))
    return e;
  if ((e = tp_impl(plugin, TP_NAME "::bool_seven(Tensor self) -> bool", TP_NAME "::bool_seven", abi_unreachable_kernel,
                   TP_TYPED(tp_bool_seven), "(Tensor) -> bool")))
    return e;
  if ((e = tp_impl(plugin, TP_NAME "::pick(Tensor self) -> Tensor", TP_NAME "::pick", tp_return_self,
                   TP_TYPED(tp_return_self_typed), "(Tensor) -> Tensor")))
    return e;
  if ((e = tp_impl(plugin, NULL, TP_NAME "::pick", tp_decline, TP_TYPED(tp_decline_typed), "(Tensor) -> Tensor")))
    return e;
  if ((e = tp_impl(plugin, TP_NAME "::echo_tt(Tensor a, Tensor b) -> Tensor", TP_NAME "::echo_tt", tp_echo_boxed,
                   TP_TYPED(tp_echo_tt), "(Tensor, Tensor) -> Tensor")))
    return e;
  if ((e = tp_impl(plugin, TP_NAME "::pair_half_fail(Tensor self, int n, bool b) -> (Tensor, Tensor)",
                   TP_NAME "::pair_half_fail", abi_unreachable_kernel, TP_TYPED(tp_pair_half_fail),
                   "(Tensor, int, bool) -> (Tensor, Tensor)")))
    return e;
  {
    /* The echoes of optional arguments: each op, and its twin <name>_fn
     * with fn only (a typed call of it reaches fn through BP_Values). */
    static const struct {
      const char* name;
      const char* args;
      const char* returns;
      BP_TypedKernelFn typed_fn;
      const char* cpp_signature;
    } echoes[] = {
        {"echo_lists", "(Tensor self, int[]? dims, Scalar? correction, bool keepdim, Tensor out)", "Tensor",
         TP_TYPED(tp_echo_lists), "(Tensor, int[]?, Scalar?, bool, Tensor) -> Tensor"},
        {"echo_types", "(Tensor self, ScalarType? dtype, Device? device)", "Tensor", TP_TYPED(tp_echo_types),
         "(Tensor, ScalarType?, Device?) -> Tensor"},
        {"echo_mode", "(Tensor self, Tensor other, str? mode, Tensor out)", "Tensor", TP_TYPED(tp_echo_mode),
         "(Tensor, Tensor, str?, Tensor) -> Tensor"},
        {"echo_dim", "(Tensor self, int? dim, bool keepdim)", "Tensor", TP_TYPED(tp_echo_dim),
         "(Tensor, int?, bool) -> Tensor"},
        {"echo_bias", "(Tensor input, Tensor weight, Tensor? bias)", "Tensor", TP_TYPED(tp_echo_bias),
         "(Tensor, Tensor, Tensor?) -> Tensor"},
        {"echo_nan", "(Tensor self, float? nan, float? posinf, float? neginf)", "Tensor", TP_TYPED(tp_echo_nan),
         "(Tensor, float?, float?, float?) -> Tensor"},
        {"echo_sort", "(Tensor self, bool? stable, int dim, bool descending)", "(Tensor, Tensor)",
         TP_TYPED(tp_echo_sort), "(Tensor, bool?, int, bool) -> (Tensor, Tensor)"},
    };
    size_t i;
    char schema[256], op[96];
    for (i = 0; i < sizeof echoes / sizeof echoes[0]; ++i) {
      snprintf(schema, sizeof schema, TP_NAME "::%s%s -> %s", echoes[i].name, echoes[i].args, echoes[i].returns);
      snprintf(op, sizeof op, TP_NAME "::%s", echoes[i].name);
      if ((e = tp_impl(plugin, schema, op, tp_values_boxed, echoes[i].typed_fn, echoes[i].cpp_signature))) return e;
      snprintf(schema, sizeof schema, TP_NAME "::%s_fn%s -> %s", echoes[i].name, echoes[i].args, echoes[i].returns);
      snprintf(op, sizeof op, TP_NAME "::%s_fn", echoes[i].name);
      if ((e = tp_impl(plugin, schema, op, tp_values_boxed, NULL, echoes[i].cpp_signature))) return e;
    }
  }
  {
    BP_KernelDesc k = tp_typed_desc(tp_which, TP_TYPED(tp_which_typed), "(Tensor) -> int");
    if ((e = host->def(plugin, TP_NAME "::composite_which(Tensor self) -> int"))) return e;
    if ((e = host->impl(plugin, TP_NAME "::composite_which", BP_ANY_DEVICE_TYPE, &k))) return e;
    /* Registered before its def: it waits for it (impl_when_defined). */
    if ((e = host->impl_when_defined(plugin, TP_NAME "::later", 0, &k))) return e;
    if ((e = host->def(plugin, TP_NAME "::later(Tensor self) -> int"))) return e;
  }
#elif TP_MODE == TP_TY_V1_13
  if ((e = tp_impl(plugin, TP_NAME "::which(Tensor self) -> int", TP_NAME "::which", tp_which, TP_TYPED(tp_never),
                   "(Tensor) -> int")))
    return e;
#elif TP_MODE == TP_TY_NO_SIG
  if ((e = tp_impl(plugin, TP_NAME "::which(Tensor self) -> int", TP_NAME "::which", tp_which, TP_TYPED(tp_which_typed),
                   NULL)))
    return e;
#elif TP_MODE == TP_TY_META || TP_MODE == TP_TY_REFERENCE
  if ((e = tp_impl(plugin, TP_NAME "::pick(Tensor self) -> Tensor", TP_NAME "::pick", tp_return_self,
                   TP_TYPED(tp_return_self_typed), "(Tensor) -> Tensor")))
    return e;
  {
#if TP_MODE == TP_TY_META
    /* Refused before anything could call it. */
    BP_KernelDesc rule = tp_typed_desc(abi_unreachable_kernel, TP_TYPED(tp_no_return), "(Tensor) -> ()");
    if ((e = host->meta(plugin, TP_NAME "::pick", &rule))) return e;
#else
    BP_KernelDesc reference = tp_typed_desc(tp_return_self, TP_TYPED(tp_return_self_typed), "(Tensor) -> Tensor");
    BP_SpecDesc spec;
    memset(&spec, 0, sizeof spec);
    spec.struct_size = BP_SpecDesc_STRUCT_SIZE;
    spec.samples = "dtypes: float32\nrows: T[4]\n";
    spec.reference = &reference;
    if ((e = host->spec(plugin, TP_NAME "::pick", &spec))) return e;
#endif
  }
#elif TP_MODE == TP_TY_FALLBACK
  {
    BP_DeviceTypeDesc d = abi_heap_device_desc("abidtfbdev");
    int32_t type = -1;
    BP_KernelDesc k = tp_typed_desc(tp_return_self, TP_TYPED(tp_return_self_typed), NULL);
    if ((e = host->register_device_type(plugin, &d, &type))) return e;
    if ((e = host->fallback(plugin, type, &k))) return e;
  }
#endif
  if ((e = host->def(plugin, TP_NAME "::info(int which) -> int"))) return e;
  {
    BP_KernelDesc k = abi_kernel_desc(tp_info_kernel);
    if ((e = host->impl(plugin, TP_NAME "::info", 0, &k))) return e;
  }
  return NULL;
}
