// Elementwise kernels of the GPU plugins, the same operators as the CPU
// plugin's (plugins/cpu/elementwise.cc): binary arithmetic, comparisons, where and
// the unary ops, each computing into the `out` the host has sized and
// dtype-checked, in out's dtype (in float for float16/bfloat16). Inputs of
// another dtype are converted first (copyCast), as the CPU plugin does; a
// 0-d cpu tensor among the operands is read on the host and passed by
// value. Loops and instantiations: Note [GPU elementwise loops].
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "bp_common/arithmetic.h"
#include "bp_common/indexing.h"
#include "bp_common/registration.h"
#include "kernel_args.h"
#include "kernels.h"
#include "loops.cuh"

namespace bp_gpu {
namespace {

// A Scalar as compute type M, converted to storage type T first (scalarTo:
// with wrap-around for integers, as PyTorch converts a clamp bound, an
// alpha or a comparison operand; the host has range-checked the bounds and
// alpha) so that it rounds as a value of that dtype would.
template <class T, class M = opmath_t<T>>
M scalarAs(const bp::Scalar& s) {
  return static_cast<M>(load(scalarTo<T>(s)));
}

// Operand `t` of a call on `device` as storage type T (dtype `dtype`): a
// 0-d cpu tensor becomes a value (shape_of null: it broadcasts
// everywhere); a device tensor of another dtype is converted into `holder`.
template <class T>
Operand<T> stage(const char* op, const bp::Tensor& t, const char* arg, bp::Device device, ScalarType dtype,
                 bp::Tensor& holder, const bp::Tensor*& shape_of) {
  if (isCpuScalar(t)) {
    shape_of = nullptr;
    return {nullptr, cpuScalarAs<T>(t)};
  }
  checkOnDevice(op, t, arg, device);
  shape_of = &as(op, t, dtype, holder);
  return {static_cast<const T*>(shape_of->data_ptr()), {}};
}

// --- binary arithmetic

enum class BinaryOp : int32_t { Add, Sub, Mul, Div, Max, Min, Pow };

using bp_common::Cmp;

template <class M>
BP_GPU_HD M applyBinary(BinaryOp op, M x, M y, M alpha) {
  switch (op) {
    case BinaryOp::Add:
      if constexpr (std::is_same_v<M, bool>)
        return x || (alpha && y);  // bool + alpha * bool: a logical or
      else if constexpr (std::is_integral_v<M>)
        return bp_common::addWrap(x, bp_common::mulWrap(alpha, y));
      else
        return static_cast<M>(x + alpha * y);
    case BinaryOp::Sub:
      if constexpr (std::is_integral_v<M>)
        return bp_common::addWrap(x, bp_common::negWrap(bp_common::mulWrap(alpha, y)));
      else
        return static_cast<M>(x - alpha * y);
    case BinaryOp::Mul:
      if constexpr (std::is_same_v<M, bool>)
        return x && y;
      else
        return bp_common::mulWrap(x, y);
    case BinaryOp::Div:
      if constexpr (std::is_floating_point_v<M>)
        return x / y;  // the host's rule makes div's out floating
      else
        return x;
    case BinaryOp::Max:
    case BinaryOp::Min:
      if constexpr (std::is_floating_point_v<M>) {
        if (x != x) return x;  // NaN propagates, as PyTorch
        if (y != y) return y;
      }
      // std::max/std::min, as PyTorch's CPU kernel: of equal values (0.0
      // and -0.0) the first wins.
      return ((op == BinaryOp::Max) ? x < y : y < x) ? y : x;
    case BinaryOp::Pow: return bp_common::powOf<M>(x, y);
  }
  return x;
}

template <class T>
struct BinaryFn {
  BinaryOp op;
  opmath_t<T> alpha;
  BP_GPU_HD T operator()(T x, T y) const { return store<T>(applyBinary<opmath_t<T>>(op, load(x), load(y), alpha)); }
};

bp::Tensor binary(const char* op, const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out,
                  std::initializer_list<ScalarType> supported, BinaryOp kind, const bp::Scalar& alpha = bp::Scalar(1)) {
  const bp::Device device = callDevice(op, out, "out");
  checkDtype(op, out, "out", supported);
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    bp::Tensor a_holder, b_holder;
    const bp::Tensor *a_shape, *b_shape;
    const Operand<T> a = stage<T>(op, self, "self", device, out.dtype(), a_holder, a_shape);
    const Operand<T> b = stage<T>(op, other, "other", device, out.dtype(), b_holder, b_shape);
    launchElementwise(makeOffsetCalculator<3>(op, out.sizes(), {&out, a_shape, b_shape}), out.numel(), device.index,
                      static_cast<T*>(out.data_ptr()), BinaryFn<T>{kind, scalarAs<T>(alpha)}, a, b);
  });
  return out;
}

bp::Tensor add_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Scalar& alpha, const bp::Tensor& out) {
  return binary("bp::add.out", self, other, out, bp::kAllScalarTypes, BinaryOp::Add, alpha);
}
bp::Tensor sub_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Scalar& alpha, const bp::Tensor& out) {
  return binary("bp::sub.out", self, other, out, bp::kNumericScalarTypes, BinaryOp::Sub, alpha);
}
bp::Tensor mul_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return binary("bp::mul.out", self, other, out, bp::kAllScalarTypes, BinaryOp::Mul);
}
bp::Tensor div_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return binary("bp::div.out", self, other, out, bp::kFloatingScalarTypes, BinaryOp::Div);
}
bp::Tensor maximum_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return binary("bp::maximum.out", self, other, out, bp::kAllScalarTypes, BinaryOp::Max);
}
bp::Tensor minimum_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return binary("bp::minimum.out", self, other, out, bp::kAllScalarTypes, BinaryOp::Min);
}
bp::Tensor pow_tensor_out(const bp::Tensor& self, const bp::Tensor& exponent, const bp::Tensor& out) {
  return binary("bp::pow.Tensor_Tensor_out", self, exponent, out, bp::kNumericScalarTypes, BinaryOp::Pow);
}

// --- unary

enum class UnaryOp : int32_t {
  Neg,
  Abs,
  Relu,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Sigmoid,
  Silu,
  GeluErf,
  GeluTanh,
  ClampMin,
  ClampMax,
  Clamp,  // p = min, q = max
  Pow,    // p = exponent
  Square,
};

template <class M>
BP_GPU_HD M applyUnary(UnaryOp op, M x, M p, M q) {
  switch (op) {
    case UnaryOp::Neg: return bp_common::negWrap(x);
    case UnaryOp::Abs:
      if constexpr (std::is_same_v<M, bool> || std::is_unsigned_v<M>)
        return x;
      else if constexpr (std::is_floating_point_v<M>)
        return math::abs(x);  // abs(-0.0) is +0.0
      else
        return x < M(0) ? bp_common::negWrap(x) : x;
    case UnaryOp::Relu:
      if constexpr (std::is_unsigned_v<M>)
        return x;
      else
        return x < M(0) ? M(0) : x;  // keeps NaN, as PyTorch
    // NaN inputs stay NaN (no comparison is true); min > max gives max, as PyTorch.
    case UnaryOp::ClampMin: return x < p ? p : x;
    case UnaryOp::ClampMax: return x > q ? q : x;
    case UnaryOp::Clamp: x = x < p ? p : x; return x > q ? q : x;
    case UnaryOp::Pow: return bp_common::powOf<M>(x, p);
    case UnaryOp::Square: return bp_common::mulWrap(x, x);
    default: break;
  }
  if constexpr (std::is_floating_point_v<M>) {  // the host's rule makes these ops' out floating
    switch (op) {
      case UnaryOp::Exp: return math::exp(x);
      case UnaryOp::Log: return math::log(x);
      case UnaryOp::Sqrt: return math::sqrt(x);
      case UnaryOp::Rsqrt: return M(1) / math::sqrt(x);
      case UnaryOp::Sin: return math::sin(x);
      case UnaryOp::Cos: return math::cos(x);
      case UnaryOp::Tanh: return math::tanh(x);
      case UnaryOp::Sigmoid: return M(1) / (M(1) + math::exp(-x));
      case UnaryOp::Silu: return x / (M(1) + math::exp(-x));
      case UnaryOp::GeluErf: return M(0.5) * x * (M(1) + math::erf(x * M(0.7071067811865476)));
      case UnaryOp::GeluTanh: {
        const M k = M(0.7978845608028654);  // sqrt(2 / pi)
        return M(0.5) * x * (M(1) + math::tanh(k * (x + M(0.044715) * x * x * x)));
      }
      default: break;
    }
  }
  return x;
}

template <class T>
struct UnaryFn {
  UnaryOp op;
  opmath_t<T> p, q;
  BP_GPU_HD T operator()(T x) const { return store<T>(applyUnary<opmath_t<T>>(op, load(x), p, q)); }
};

// out = op(self) with parameters p, q given as Scalars (converted to out's
// dtype); `kind` may depend on out's compute type (pow's square).
template <class Choose>
bp::Tensor unary(const char* op, const bp::Tensor& self, const bp::Tensor& out,
                 std::initializer_list<ScalarType> supported, Choose choose) {
  const bp::Device device = callDevice(op, out, "out");
  checkDtype(op, out, "out", supported);
  checkOnDevice(op, self, "self", device);
  bp::Tensor holder;
  const bp::Tensor& a = as(op, self, out.dtype(), holder);
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    M p{}, q{};
    const UnaryOp kind = choose(T{}, p, q);
    launchElementwise(makeOffsetCalculator<2>(op, out.sizes(), {&out, &a}), out.numel(), device.index,
                      static_cast<T*>(out.data_ptr()), UnaryFn<T>{kind, p, q},
                      Operand<T>{static_cast<const T*>(a.data_ptr()), T{}});
  });
  return out;
}

bp::Tensor unaryOp(const char* op, const bp::Tensor& self, const bp::Tensor& out,
                   std::initializer_list<ScalarType> supported, UnaryOp kind) {
  return unary(op, self, out, supported, [kind](auto, auto&, auto&) { return kind; });
}

#define BP_GPU_UNARY(NAME, TYPES, KIND)                                  \
  bp::Tensor NAME##_out(const bp::Tensor& self, const bp::Tensor& out) { \
    return unaryOp("bp::" #NAME ".out", self, out, TYPES, KIND);         \
  }
BP_GPU_UNARY(neg, bp::kNumericScalarTypes, UnaryOp::Neg)
BP_GPU_UNARY(abs, bp::kAllScalarTypes, UnaryOp::Abs)
BP_GPU_UNARY(relu, bp::kNumericScalarTypes, UnaryOp::Relu)
BP_GPU_UNARY(exp, bp::kFloatingScalarTypes, UnaryOp::Exp)
BP_GPU_UNARY(log, bp::kFloatingScalarTypes, UnaryOp::Log)
BP_GPU_UNARY(sqrt, bp::kFloatingScalarTypes, UnaryOp::Sqrt)
BP_GPU_UNARY(rsqrt, bp::kFloatingScalarTypes, UnaryOp::Rsqrt)
BP_GPU_UNARY(sin, bp::kFloatingScalarTypes, UnaryOp::Sin)
BP_GPU_UNARY(cos, bp::kFloatingScalarTypes, UnaryOp::Cos)
BP_GPU_UNARY(tanh, bp::kFloatingScalarTypes, UnaryOp::Tanh)
BP_GPU_UNARY(sigmoid, bp::kFloatingScalarTypes, UnaryOp::Sigmoid)
BP_GPU_UNARY(silu, bp::kFloatingScalarTypes, UnaryOp::Silu)
#undef BP_GPU_UNARY

bp::Tensor gelu_out(const bp::Tensor& self, std::string_view approximate, const bp::Tensor& out) {
  // The host's rule has checked `approximate`; this guards direct callers.
  const bool tanh_form = approximate == "tanh";
  BP_PLUGIN_CHECK(tanh_form || approximate == "none",
                  "bp::gelu.out: approximate must be 'none' or 'tanh', but got '" + std::string(approximate) + "'");
  return unaryOp("bp::gelu.out", self, out, bp::kFloatingScalarTypes, tanh_form ? UnaryOp::GeluTanh : UnaryOp::GeluErf);
}

bp::Tensor clamp_out(const bp::Tensor& self, const std::optional<bp::Scalar>& min, const std::optional<bp::Scalar>& max,
                     const bp::Tensor& out) {
  BP_PLUGIN_CHECK(min.has_value() || max.has_value(), "bp::clamp.out: at least one of 'min' or 'max' must not be None");
  return unary("bp::clamp.out", self, out, bp::kNumericScalarTypes, [&](auto tag, auto& lo, auto& hi) {
    using T = decltype(tag);
    if (min) lo = scalarAs<T>(*min);
    if (max) hi = scalarAs<T>(*max);
    return min && max ? UnaryOp::Clamp : min ? UnaryOp::ClampMin : UnaryOp::ClampMax;
  });
}

bp::Tensor pow_scalar_out(const bp::Tensor& self, const bp::Scalar& exponent, const bp::Tensor& out) {
  return unary("bp::pow.Tensor_Scalar_out", self, out, bp::kNumericScalarTypes, [&](auto tag, auto& e, auto&) {
    using T = decltype(tag);
    e = scalarAs<T>(exponent);
    return e == opmath_t<T>(2) ? UnaryOp::Square : UnaryOp::Pow;  // the common square, without pow
  });
}

// --- comparisons: bool results, compared in PyTorch's result_type of the
// operands (Note [Comparison dtype] in bp_common/indexing.h). An out of another dtype receives the bools
// converted (through a bool temporary).

template <class T>
struct CompareFn {
  Cmp c;
  BP_GPU_HD bool operator()(T x, T y) const { return bp_common::compare(c, load(x), load(y)); }
};

// Runs fill(bool_out) into out, through a bool temporary when out is not bool.
template <class Fill>
bp::Tensor intoBoolOut(const char* op, const bp::Tensor& out, Fill fill) {
  if (out.dtype() == ScalarType::Bool) {
    fill(out);
  } else {
    bp::Tensor tmp = bp::Tensor::empty(out.sizes(), ScalarType::Bool, out.device());
    fill(tmp);
    copyCast(op, out, tmp);
  }
  return out;
}

// Compares self with other (a tensor, or the scalar `value` when other is
// null) in dtype `common`.
bp::Tensor compareOut(const char* op, const bp::Tensor& self, const bp::Tensor* other, const bp::Scalar& value,
                      ScalarType common, Cmp c, const bp::Tensor& out) {
  const bp::Device device = callDevice(op, out, "out");
  return intoBoolOut(op, out, [&](const bp::Tensor& res) {
    visitAnyDtype(common, [&](auto tag) {
      using T = decltype(tag);
      bp::Tensor a_holder, b_holder;
      const bp::Tensor *a_shape, *b_shape = nullptr;
      const Operand<T> a = stage<T>(op, self, "self", device, common, a_holder, a_shape);
      const Operand<T> b = other != nullptr ? stage<T>(op, *other, "other", device, common, b_holder, b_shape)
                                            : Operand<T>{nullptr, store<T>(scalarAs<T>(value))};
      launchElementwise(makeOffsetCalculator<3>(op, res.sizes(), {&res, a_shape, b_shape}), res.numel(), device.index,
                        static_cast<bool*>(res.data_ptr()), CompareFn<T>{c}, a, b);
    });
  });
}

template <Cmp C>
bp::Tensor compareTensorOut(const char* op, const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return compareOut(op, self, &other, bp::Scalar(), bp_common::comparisonDtype(self, other), C, out);
}

template <Cmp C>
bp::Tensor compareScalarOut(const char* op, const bp::Tensor& self, const bp::Scalar& other, const bp::Tensor& out) {
  return compareOut(op, self, nullptr, other, bp_common::comparisonDtype(self, other), C, out);
}

// --- where and masked_fill's select: raw elements, per element size.

template <class E>
struct SelectFn {
  BP_GPU_HD E operator()(bool c, E x, E y) const { return c ? x : y; }
};

// where(condition, self, other): condition is bool (checked by the host).
bp::Tensor where_out(const bp::Tensor& condition, const bp::Tensor& self, const bp::Tensor& other,
                     const bp::Tensor& out) {
  const char* op = "bp::where.self_out";
  const bp::Device device = callDevice(op, out, "out");
  checkDtype(op, condition, "condition", {ScalarType::Bool});
  checkOnDeviceOrCpuScalar(op, condition, "condition", device);
  bp::Tensor a_holder, b_holder;
  // A device operand converted to out's dtype, or a cpu scalar's bits in it.
  auto operand = [&](const bp::Tensor& t, const char* arg, bp::Tensor& holder) -> SelectOperand {
    if (isCpuScalar(t)) {
      return visitDtype(out.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T v = cpuScalarAs<T>(t);
        uint64_t bits = 0;
        std::memcpy(&bits, &v, sizeof(T));
        return SelectOperand{nullptr, bits};
      });
    }
    checkOnDevice(op, t, arg, device);
    return SelectOperand{&as(op, t, out.dtype(), holder), 0};
  };
  const SelectOperand c = isCpuScalar(condition) ? SelectOperand{nullptr, cpuScalarAs<bool>(condition) ? 1u : 0u}
                                                 : SelectOperand{&condition, 0};
  selectInto(op, out, c, operand(self, "self", a_holder), operand(other, "other", b_holder));
  return out;
}

}  // namespace

void selectInto(const char* op, const bp::Tensor& out, SelectOperand cond, SelectOperand a, SelectOperand b) {
  visitItemSize(out.element_size(), [&](auto tag) {
    using E = decltype(tag);
    auto operand = [](const SelectOperand& s, auto value_tag) {
      using V = decltype(value_tag);
      if (s.tensor != nullptr) return Operand<V>{static_cast<const V*>(s.tensor->data_ptr()), V{}};
      V v;
      std::memcpy(&v, &s.bits, sizeof(V));  // little-endian: the low bytes
      return Operand<V>{nullptr, v};
    };
    launchElementwise(makeOffsetCalculator<4>(op, out.sizes(), {&out, cond.tensor, a.tensor, b.tensor}), out.numel(),
                      out.device().index, static_cast<E*>(out.data_ptr()), SelectFn<E>{}, operand(cond, bool{}),
                      operand(a, E{}), operand(b, E{}));
  });
}

void registerElementwiseKernels(bp::Library& m, int32_t type) {
  // Note [CPU scalars as kernel arguments]: stage() and where_out read a 0-d cpu
  // operand's value on the host.
  BP_REGISTER_ELEMENTWISE_KERNELS(m, type, BP_BIND_BY_POINTER, BP_OPERANDS_TAKE_CPU_SCALARS);
}

}  // namespace bp_gpu
