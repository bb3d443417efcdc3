#pragma once
// Building blocks of the standard operators' shape/dtype rules and
// composite kernels (Note [The standard operator table]). Errors are
// kInvalidArgument Errors that name the op and say what to change.

#include <array>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/inlined_vector.h"
#include "backplane/core/scalar.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/standard_ops.h"
#include "backplane/ops/tensor.h"

namespace backplane::ops {

using Shape = absl::InlinedVector<int64_t, 6>;

// What an op's output looks like.
struct OutputMeta {
  Shape sizes;
  ScalarType dtype;
  Device device;
};

// A named tensor argument, for messages ("argument 'other'").
struct Arg {
  const char* name;
  const Tensor* tensor;
};

// PyTorch's broadcasting of two shapes; throws naming the op and the
// dimension that does not match.
Shape broadcastShapes(std::string_view op, IntArrayRef a, IntArrayRef b);

// Note [CPU scalars]
// As in PyTorch, a 0-d CPU tensor (a number held as a tensor) may be an
// operand of a binary elementwise op or of where whose other operands are on
// a device: the device is theirs. The functional and in-place forms
// (add.Tensor, add_) put such an operand on the device before calling the
// out= kernel (onDevice), so no backend kernel ever sees two devices. The
// value travels as a kernel argument, not as a copy: a 0-d tensor on the
// device is filled by the device's fill_.Scalar kernel (a device without
// one gets the bytes copied, which the per-op report counts). A kernel that
// takes CPU scalars as they are (Note [CPU scalars as kernel arguments] in
// plugin_api.h: the GPU plugins' binary kernels) is handed the 0-d CPU
// tensor itself instead, which saves that allocation and fill. The
// out= forms themselves keep to one device, and their error says how to get
// there.
// A 0-d tensor on a device does not join CPU tensors: only CPU scalars move.
enum class CpuScalars {
  kRefuse,       // every tensor on one device
  kJoin,         // 0-d CPU tensors take the device of the others
  kRefuseInOut,  // kRefuse, for the out= form of an op whose other forms join
};

// An optional tensor argument as a reference: the tensor, or an undefined
// one (what commonDevice and checkDtypes skip).
inline const Tensor& orUndefined(const std::optional<Tensor>& t) {
  static const Tensor kUndefined;
  return t ? *t : kUndefined;
}

// layer_norm's shape rules, shared by layer_norm and layer_norm_backward:
// normalized_shape is not empty, it is input's trailing dimensions, each
// defined parameter (weight, bias) has exactly its shape, eps >= 0.
void checkNormalizedShape(const std::string& op, const Tensor& input, IntArrayRef normalized_shape,
                          std::initializer_list<std::pair<const Tensor*, const char*>> params, double eps);

// conv2d's and the 2-D pooling ops' argument and shape rules (nn.cc), shared
// with their backward ops: each checks the forward's arguments under `op`'s
// name and `rule`'s declared dtypes and returns the output's (height, width).
// conv2d's `bias` may be undefined.
std::array<int64_t, 2> conv2dOutputSize(const std::string& op, const StandardOp& rule, const Tensor& input,
                                        const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                                        IntArrayRef padding, IntArrayRef dilation, int64_t groups);
std::array<int64_t, 2> pool2dOutputSize(const std::string& op, const StandardOp& rule, const Tensor& self,
                                        IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                                        IntArrayRef dilation, bool ceil_mode);

// batch_norm's argument rules (nn.cc), shared with batch_norm_backward: the
// input has a channel dim (1), each defined per-channel tensor has one value
// per channel, evaluation has running statistics, training has more than one
// value per channel. Undefined tensors stand for absent ones.
void checkBatchNorm(const std::string& op, const StandardOp& rule, const Tensor& input, const Tensor& weight,
                    const Tensor& bias, const Tensor& running_mean, const Tensor& running_var, bool training,
                    double eps);

// The device every defined tensor argument is on (see CpuScalars); throws
// naming the op, the two arguments and their devices when they differ.
Device commonDevice(std::string_view op, std::initializer_list<Arg> args, CpuScalars cpu_scalars = CpuScalars::kRefuse);

// `t` (defined) itself, or, when `t` is a 0-d CPU tensor and `device`
// another one, its value on `device` kept in `moved` (Note [CPU scalars]). Costs nothing in
// the common case: no copy of `t`, so no reference count traffic.
const Tensor& onDevice(const Tensor& t, Device device, Tensor& moved);
// The same for an operand of `consumer`, the out= operator about to be
// called: `t` itself, unmoved, when consumer's kernel on `device` takes CPU
// scalars as they are (Note [CPU scalars as kernel arguments] in
// plugin_api.h): no allocation and no fill on the device.
const Tensor& onDevice(const Tensor& t, Device device, Tensor& moved, const OperatorHandle& consumer);

// PyTorch's result_type over tensors and Python-style scalars: tensors with
// dimensions take precedence over 0-d tensors, which take precedence over
// scalars, unless the lower-priority operand is of a higher category
// (bool < integral < floating). A floating scalar counts as float32, an
// integral one as int64.
struct ResultTypeState {
  std::optional<ScalarType> dim_result, zero_dim_result, scalar_result;
  void add(const Tensor& t);
  void add(const Scalar& s);
  ScalarType result() const;
};
ScalarType resultType(const Tensor& a, const Tensor& b);
ScalarType resultType(const Tensor& a, const Scalar& b);

// Note [Writing a Scalar into a tensor]
// Every op that writes a Scalar into a tensor of dtype `dtype` (fill_,
// full, full_like, masked_fill's value, clamp's bounds, add/sub's alpha)
// converts it as PyTorch's Scalar::to does, with c10's checked conversion,
// and refuses what it refuses: a value outside the dtype's finite range
// (float16 65510, float32 1e300, int8 300, NaN into an integral dtype, a
// double past an integer dtype's ends: int8 127.5). Infinity and NaN fit the
// floating dtypes. A negative integer wraps into an unsigned dtype (uint8
// -1 is 255; down to -255, as c10 allows). Every number converts to bool
// (non-zero, NaN included, is true: full(.., 2.5, dtype=bool), an alpha of
// 2 for bool operands). The
// kernels then convert with wrap-around (no saturation). One function, so
// that every such op agrees.
void checkScalarConverts(std::string_view op, const char* what, const Scalar& value, ScalarType dtype);

// PyTorch's alpha_check, then alpha converted to the result dtype as its
// kernels convert it (Note [Writing a Scalar into a tensor]): bool + alpha
// * bool takes any integer alpha (non-zero is true).
void checkAlpha(std::string_view op, ScalarType common, const Scalar& alpha);

// Throws naming the op and the argument when `t` is an undefined tensor.
void checkDefined(std::string_view op, const Tensor& t, const char* name);

// Every dtype but bool: what the arithmetic ops accept.
inline constexpr ScalarTypeSet kEveryDtypeButBool = ScalarTypeSet::allBut(ScalarType::Bool);

// Wraps a possibly negative dimension into [0, ndim); a 0-d tensor accepts
// dims -1 and 0 (as PyTorch).
int64_t wrapDim(std::string_view op, int64_t dim, int64_t ndim);

// Note [out= of another dtype]
// As PyTorch's elementwise ops do, an op given an `out` (or an in-place
// `self`) of another dtype than the one it computes in (its inputs'
// result_type; float32 for true division or a floating unary op of
// integers) computes in its own dtype and casts the result into `out`:
// add.out(int8, int8, out=float64) wraps in int8 first, and
// int8_tensor.add_(int32_tensor) adds in int32. The op's meta kernel (or
// in-place composite) does it with castIntoOut(): a temporary of the op's
// dtype, the op's own out= kernel called on it (callSkippingMeta), the
// temporary copied into `out` by copy_, and the call reported complete
// (Note [Meta kernels]). So every kernel, a plugin's included, only ever
// sees an `out` of the op's own dtype, and only a mixed-dtype call pays for
// the temporary. Ops whose result keeps its input's dtype (abs, neg, floor,
// clamp, hardtanh, ...) refuse such an `out` instead, as PyTorch does
// (checkOutDtype).
//
// If out's dtype is meta.dtype: false, nothing done. Otherwise calls
// compute(tmp) with a new tensor of meta's shape, dtype and device, copies
// tmp into `out` (converting) and returns true.
template <class F>
bool castIntoOut(const Tensor& out, const OutputMeta& meta, F&& compute);
// Refuses an `out` whose dtype is not `meta.dtype`, for the ops that
// PyTorch lets write only their own dtype (Note [out= of another dtype]).
void checkOutDtype(std::string_view op, const Tensor& out, const OutputMeta& meta, const char* out_name = "out");
// out = src, converting (copy_ without its meta: shapes match).
void copyInto(const Tensor& out, const Tensor& src);

// Checks an out= (or in-place self) tensor against the rule's result: same
// device, result dtype castable to out's dtype, and shape equal to `sizes`.
// An `out` with no elements is resized to `sizes`; a non-empty one of
// another shape is an error. Also rejects an `out` with internal overlap or
// that partially overlaps an input (checkNoPartialOverlap).
void checkOut(std::string_view op, const Tensor& out, const OutputMeta& meta, std::initializer_list<Arg> inputs,
              const char* out_name = "out");

// Rejects a tensor to be written whose elements share memory (an expanded
// dimension): the result would depend on the order of writes.
void checkNoInternalOverlap(std::string_view op, const Tensor& t, const char* name);

// Rejects writing into `out` from an input that shares some, but not all, of
// its memory. Disjoint parts of one storage, and exactly the same elements
// (in place), are fine.
void checkNoPartialOverlap(std::string_view op, const Tensor& out, const char* out_name, const Tensor& in,
                           const char* in_name);

// Note [Dtype rules live in metas]: refuses an argument of `args` whose
// dtype `rule`'s entry for it does not accept, naming the argument, its
// dtype, the accepted ones and what to do. Undefined tensors pass.
void checkDtypes(std::string_view op, const StandardOp& rule, std::initializer_list<Arg> args);
// The same for the "result" entry: the dtype the op computes in.
void checkResultDtype(std::string_view op, const StandardOp& rule, ScalarType result);

// A new tensor for the rule's result.
Tensor allocate(const OutputMeta& meta);

template <class F>
bool castIntoOut(const Tensor& out, const OutputMeta& meta, F&& compute) {
  if (out.dtype() == meta.dtype) [[likely]]
    return false;
  Tensor tmp = allocate(meta);
  compute(static_cast<const Tensor&>(tmp));
  copyInto(out, tmp);
  return true;
}

// "[2, 3]" for messages; a long list is elided (Note [Long lists in messages]).
std::string shapeString(IntArrayRef sizes);

}  // namespace backplane::ops
