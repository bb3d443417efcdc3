#include "meta.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "structured.h"

namespace backplane::ops {

std::string shapeString(IntArrayRef sizes) { return strCat(sizes); }

Shape broadcastShapes(std::string_view op, IntArrayRef a, IntArrayRef b) {
  if (a == b) return Shape(a.begin(), a.end());  // the common case
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    BP_CHECK(x == y || x == 1 || y == 1, op, ": the shapes ", shapeString(a), " and ", shapeString(b),
             " cannot be broadcast together: dimension ", static_cast<int64_t>(i) - static_cast<int64_t>(n), " is ", x,
             " in one and ", y, " in the other (sizes must be equal or 1)");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

namespace {

bool isCpuScalar(const Tensor& t) { return t.dim() == 0 && t.device().isCpu(); }

}  // namespace

Device commonDevice(std::string_view op, std::initializer_list<Arg> args, CpuScalars cpu_scalars) {
  const Arg* first = nullptr;
  const Arg* cpu_scalar = nullptr;
  for (const Arg& a : args) {
    if (!a.tensor->defined()) continue;
    if (cpu_scalars == CpuScalars::kJoin && isCpuScalar(*a.tensor)) {
      if (!cpu_scalar) cpu_scalar = &a;
      continue;
    }
    if (!first) {
      first = &a;
      continue;
    }
    const Tensor& t = *a.tensor;
    const Tensor& f = *first->tensor;
    if (t.device() == f.device()) continue;
    const bool scalar_mixed_in = cpu_scalars == CpuScalars::kRefuseInOut && (isCpuScalar(t) || isCpuScalar(f));
    BP_THROW(kInvalidArgument, op, ": expected all tensors on one device, but argument '", first->name, "' is on ",
             f.device(), " and argument '", a.name, "' is on ", t.device(),
             scalar_mixed_in ? "; this out= form takes its 0-d operands on that device too: move it with .to(), or "
                               "call the functional form (or the in-place one), which moves a 0-d cpu tensor itself"
                             : "; move one with .to() first");
  }
  if (first) return first->tensor->device();
  BP_CHECK(cpu_scalar != nullptr, op, ": no tensor argument is defined");
  return cpu_scalar->tensor->device();
}

void checkNormalizedShape(const std::string& op, const Tensor& input, IntArrayRef normalized_shape,
                          std::initializer_list<std::pair<const Tensor*, const char*>> params, double eps) {
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  BP_CHECK(nd >= 1, op, ": normalized_shape must have at least one dimension");
  bool matches = input.dim() >= nd;
  for (int64_t i = 0; matches && i < nd; ++i) matches = input.size(input.dim() - nd + i) == normalized_shape[i];
  BP_CHECK(matches, op, ": given normalized_shape=", shapeString(normalized_shape),
           ", expected input whose trailing dimensions are ", shapeString(normalized_shape), ", but got input of size ",
           shapeString(input.sizes()));
  for (const auto& [t, name] : params) {
    if (!t->defined()) continue;
    BP_CHECK(t->sizes() == normalized_shape, op, ": expected '", name, "' of size ", shapeString(normalized_shape),
             " (normalized_shape), but got ", shapeString(t->sizes()));
  }
  BP_CHECK(eps >= 0, op, ": eps must be non-negative, but got ", eps);
}

const Tensor& onDevice(const Tensor& t, Device device, Tensor& moved, const OperatorHandle& consumer) {
  if (device.isCpu() || !isCpuScalar(t)) [[likely]]
    return t;
  if (consumer.takesCpuScalars(backendKey(device.type))) return t;
  return onDevice(t, device, moved);
}

const Tensor& onDevice(const Tensor& t, Device device, Tensor& moved) {
  if (device.isCpu() || !isCpuScalar(t)) [[likely]]
    return t;
  moved = emptyTensor({}, t.dtype(), device);
  // The value travels as the argument of the device's own fill_ kernel when
  // it has one, so no byte crosses between host and device; else as a copy.
  using FillSig = Tensor(const Tensor&, const Scalar&);
  const auto& fill = BP_STANDARD_OP("fill_.Scalar", FillSig);
  if (fill.kernelKind(backendKey(device.type)) == KernelKind::Native) {
    const Scalar value = visitScalarType(t.dtype(), [&]<typename S>() { return Scalar(*t.data_ptr<const S>()); });
    fill.callSkippingMeta(moved, value);
  } else {
    detail::fillFromHost(moved, t.data_ptr(), t.itemsize());
  }
  return moved;
}

namespace {

std::optional<ScalarType> promote(std::optional<ScalarType> a, ScalarType b) { return a ? promoteTypes(*a, b) : b; }

// PyTorch's combine_categories: the higher-priority result wins unless the
// lower one is of a higher category.
std::optional<ScalarType> combine(std::optional<ScalarType> higher, std::optional<ScalarType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (isFloatingType(*higher)) return higher;
  if (*higher == ScalarType::Bool || isFloatingType(*lower)) return promoteTypes(*higher, *lower);
  return higher;
}
}  // namespace

void ResultTypeState::add(const Tensor& t) {
  if (!t.defined()) return;
  if (t.dim() > 0)
    dim_result = promote(dim_result, t.dtype());
  else
    zero_dim_result = promote(zero_dim_result, t.dtype());
}

void ResultTypeState::add(const Scalar& s) {
  ScalarType t = s.isBool() ? ScalarType::Bool : s.isIntegral() ? ScalarType::Int64 : ScalarType::Float32;
  scalar_result = promote(scalar_result, t);
}

ScalarType ResultTypeState::result() const {
  std::optional<ScalarType> r = combine(dim_result, combine(zero_dim_result, scalar_result));
  return r ? *r : ScalarType::Float32;
}

ScalarType resultType(const Tensor& a, const Tensor& b) {
  // Equal dtypes promote to themselves whatever the dimensions.
  if (a.defined() && b.defined() && a.dtype() == b.dtype()) return a.dtype();
  ResultTypeState s;
  s.add(a);
  s.add(b);
  return s.result();
}

ScalarType resultType(const Tensor& a, const Scalar& b) {
  ResultTypeState s;
  s.add(a);
  s.add(b);
  return s.result();
}

namespace {
// The largest finite value of floating dtype t.
double floatingMax(ScalarType t) {
  switch (t) {
    case ScalarType::Float16: return 65504.0;
    case ScalarType::BFloat16: return 3.3895313892515355e38;  // 0x7f7f
    case ScalarType::Float32: return static_cast<double>(std::numeric_limits<float>::max());
    default: return std::numeric_limits<double>::max();
  }
}

// The range of integral dtype t (bool is 0 to 1), within a Scalar's int64:
// uint64's upper end is int64's (an integral Scalar is an int64).
std::pair<int64_t, int64_t> integralRange(ScalarType t) {
  return visitScalarType(t, [&]<typename T>() -> std::pair<int64_t, int64_t> {
    if constexpr (std::is_same_v<T, uint64_t>)
      return {0, std::numeric_limits<int64_t>::max()};
    else if constexpr (std::is_integral_v<T>)
      return {static_cast<int64_t>(std::numeric_limits<T>::lowest()),
              static_cast<int64_t>(std::numeric_limits<T>::max())};
    else
      return {0, 0};
  });
}
}  // namespace

namespace {
[[noreturn]] void throwScalarOverflow(std::string_view op, const char* what, const Scalar& value, ScalarType dtype,
                                      const std::string& range) {
  BP_THROW(kInvalidArgument, op, ": ", what, " ", value, " cannot be converted to dtype ", dtype,
           " without overflow (its range is ", range, "); pass a value in that range, or convert the tensor to a ",
           "wider dtype first");
}
}  // namespace

void checkScalarConverts(std::string_view op, const char* what, const Scalar& value, ScalarType dtype) {
  // A bool fits every dtype; float64 holds every number; into bool any
  // number converts (non-zero, NaN included, is true), as c10's.
  if (value.isBool() || dtype == ScalarType::Float64 || dtype == ScalarType::Bool) return;
  // Every call of an op with a Scalar runs this: the range's text is made
  // only for the error (it cost add.Scalar's tiny calls a fifth of their time).
  if (isFloatingType(dtype)) {
    const double hi = floatingMax(dtype);
    const double v = value.toDouble();  // an int64 is within every floating range but float16's
    if (!std::isfinite(v) || (v >= -hi && v <= hi)) return;
    throwScalarOverflow(op, what, value, dtype, strCat(-hi, " to ", hi, ", or an infinity or NaN"));
  }
  const auto [lo, hi] = integralRange(dtype);
  if (value.isIntegral()) {
    const int64_t v = value.toInt();
    // c10: into an unsigned dtype (bool too) a negative value wraps, down
    // to -max; into uint64 every int64 does.
    const int64_t low = dtype == ScalarType::UInt64 ? std::numeric_limits<int64_t>::min() : lo == 0 ? -hi : lo;
    if (v >= low && v <= hi) return;
    throwScalarOverflow(
        op, what, value, dtype,
        lo == 0 ? strCat("integers ", low, " to ", hi, "; negative ones wrap around") : strCat(lo, " to ", hi));
  }
  // c10 compares the double with the range's ends; int64's upper end is
  // 2^63 as a double, which is itself refused (its conversion would overflow).
  const double v = value.toDouble();
  const double top = static_cast<double>(hi);
  if (v >= static_cast<double>(lo) && (dtype == ScalarType::Int64 || dtype == ScalarType::UInt64 ? v < top : v <= top))
    return;
  throwScalarOverflow(op, what, value, dtype, strCat(lo, " to ", hi, ", not NaN or infinite"));
}

void checkAlpha(std::string_view op, ScalarType common, const Scalar& alpha) {
  BP_CHECK(!alpha.isBool() || common == ScalarType::Bool, op, ": a boolean alpha is only accepted for boolean ",
           "results (here ", common, "); pass an integer or floating alpha");
  BP_CHECK(isFloatingType(common) || !alpha.isFloatingPoint(), op, ": for integral inputs (here ", common,
           "), alpha must be an integer, but got ", alpha.toDouble());
  checkScalarConverts(op, "alpha", alpha, common);
}

void checkDefined(std::string_view op, const Tensor& t, const char* name) {
  BP_CHECK(t.defined(), op, ": argument '", name, "' is undefined; pass a tensor");
}

int64_t wrapDim(std::string_view op, int64_t dim, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  // kOutOfRange: Python's IndexError, as PyTorch raises for a dim out of range.
  if (dim < -n || dim >= n)
    BP_THROW(kOutOfRange, op, ": dimension ", dim, " is out of range for a tensor with ", ndim,
             " dimensions (expected ", -n, " to ", n - 1, ")");
  return dim < 0 ? dim + n : dim;
}

namespace {
bool sameLayout(const Tensor& a, const Tensor& b) {
  return a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.dtype() == b.dtype();
}

// The bytes of its storage a tensor's elements lie in: [begin, end).
std::pair<int64_t, int64_t> byteRange(const Tensor& t) {
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  const int64_t item = static_cast<int64_t>(t.itemsize());
  return {t.storage_offset() * item, (t.storage_offset() + last + 1) * item};
}
}  // namespace

void checkNoInternalOverlap(std::string_view op, const Tensor& t, const char* name) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    BP_CHECK(t.size(d) <= 1 || t.stride(d) != 0, op, ": argument '", name, "' (sizes ", shapeString(t.sizes()),
             ", strides ", shapeString(t.strides()), ") has several elements at one memory location (dimension ", d,
             " is expanded); write into a tensor of its own, e.g. .clone() it first");
  }
}

void checkNoPartialOverlap(std::string_view op, const Tensor& out, const char* out_name, const Tensor& in,
                           const char* in_name) {
  if (!in.defined() || out.numel() == 0 || in.numel() == 0 || !out.is_alias_of(in)) return;
  const auto [a0, a1] = byteRange(out);
  const auto [b0, b1] = byteRange(in);
  if (a1 <= b0 || b1 <= a0) return;  // disjoint parts of one storage, e.g. x[1] and x[0]
  BP_CHECK(sameLayout(out, in), op, ": argument '", out_name, "' shares memory with input '", in_name,
           "' but not element for element; write into a separate tensor (or exactly in place), or .clone() the input");
}

void checkOut(std::string_view op, const Tensor& out, const OutputMeta& meta, std::initializer_list<Arg> inputs,
              const char* out_name) {
  BP_CHECK(out.defined(), op, ": argument '", out_name, "' is undefined; pass a tensor to write the result into");
  // In place, out is self: a 0-d cpu self among device operands gets here
  // (Note [CPU scalars]), so the message speaks of the result, not of inputs.
  BP_CHECK(out.device() == meta.device, op, ": argument '", out_name, "' is on ", out.device(),
           " but the result is computed on ", meta.device, ", the inputs' device; pass a tensor on that device");
  BP_CHECK(canCast(meta.dtype, out.dtype()), op, ": the result has dtype ", meta.dtype, ", which cannot be cast to ",
           "argument '", out_name, "' of dtype ", out.dtype(),
           " (floating to integral and non-bool to bool are "
           "refused); pass a tensor of dtype ",
           meta.dtype);
  if (IntArrayRef(meta.sizes.data(), meta.sizes.size()) != out.sizes()) {
    BP_CHECK(out.numel() == 0, op, ": argument '", out_name, "' has shape ", shapeString(out.sizes()),
             " but the result has shape ", shapeString(IntArrayRef(meta.sizes.data(), meta.sizes.size())),
             "; pass a tensor of that shape or an empty one (which is resized)");
    out.unsafeGetImpl()->resizeEmpty(IntArrayRef(meta.sizes.data(), meta.sizes.size()));
  }
  checkNoInternalOverlap(op, out, out_name);
  for (const Arg& in : inputs) checkNoPartialOverlap(op, out, out_name, *in.tensor, in.name);
}

const StandardOp& standardOpEntry(std::string_view name) {
  const StandardOp* s = findStandardOp(name);
  BP_CHECK(s != nullptr, "the standard operator table has no entry '", name, "'");
  return *s;
}

namespace {
[[noreturn]] void refuseDtype(std::string_view op, const ArgumentDtypes& rule, ScalarType given, bool result) {
  const std::string what = result ? strCat("the inputs compute in dtype ", given)
                                  : strCat("argument '", rule.argument, "' has dtype ", given);
  BP_THROW(kInvalidArgument, op, ": ", what, ", which this op does not accept (accepted",
           result ? " result dtypes" : "", ": ", rule.accepted.toString(), "); ", rule.instead,
           *rule.instead ? "or convert " : "convert ", result ? "the inputs" : "it",
           " to an accepted dtype first (e.g. with .to())");
}
}  // namespace

void checkDtypes(std::string_view op, const StandardOp& rule, std::initializer_list<Arg> args) {
  for (const ArgumentDtypes& d : rule.dtypes) {
    for (const Arg& a : args) {
      if (std::string_view(a.name) != d.argument || !a.tensor->defined()) continue;
      if (!d.accepted.contains(a.tensor->dtype())) [[unlikely]]
        refuseDtype(op, d, a.tensor->dtype(), false);
    }
  }
}

void checkResultDtype(std::string_view op, const StandardOp& rule, ScalarType result) {
  for (const ArgumentDtypes& d : rule.dtypes)
    if (std::string_view(d.argument) == "result" && !d.accepted.contains(result)) [[unlikely]]
      refuseDtype(op, d, result, true);
}

void checkOutDtype(std::string_view op, const Tensor& out, const OutputMeta& meta, const char* out_name) {
  BP_CHECK(out.defined(), op, ": argument '", out_name, "' is undefined; pass a tensor to write the result into");
  BP_CHECK(out.dtype() == meta.dtype, op, ": argument '", out_name, "' has dtype ", out.dtype(),
           " but the result has dtype ", meta.dtype, ", and this op writes only its result's dtype (as PyTorch); ",
           "pass a tensor of dtype ", meta.dtype, " and convert it afterwards with .to() if needed");
}

void copyInto(const Tensor& out, const Tensor& src) {
  BP_STANDARD_OP("copy_", Tensor(const Tensor&, const Tensor&, bool)).callSkippingMeta(out, src, false);
}

Tensor allocate(const OutputMeta& meta) {
  return emptyTensor(IntArrayRef(meta.sizes.data(), meta.sizes.size()), meta.dtype, meta.device);
}

}  // namespace backplane::ops
