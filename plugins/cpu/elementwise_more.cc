// More elementwise kernels of the CPU plugin (the ops of
// dispatcher/ops/src/elementwise_more.cc): rounding division, remainder and
// fmod, rounding, sign, erf, bitwise and logical ops, isnan/isinf,
// nan_to_num and the activations. Each computes into the `out` the host has
// sized and dtype-checked, in out's dtype (in float for float16/bfloat16),
// with inputs of another dtype converted first, as elementwise.cc does.
// Loops: Note [Elementwise loops].
//
// Note [Integer division by zero]
// An integral floor_divide, remainder, fmod or div with a rounding_mode
// whose divisor holds a zero raises "ZeroDivisionError", as PyTorch's CPU
// kernels do, before anything is written. (C++ integer division by zero is
// undefined behaviour, and x86 traps.) The quotient of the most negative
// integer by -1 wraps to itself, and its remainder is 0, as in PyTorch.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "bp_common/arithmetic.h"
#include "bp_common/indexing.h"
#include "bp_common/registration.h"
#include "cpu_common.h"
#include "elementwise_loops.h"
#include "kernels.h"

namespace {

using namespace bp_cpu;
using namespace bp_cpu::elementwise;

// --- division and remainders (Note [Integer division by zero]):
// bp_common::divide.

using bp_common::Div;
using bp_common::divide;
using bp_common::negWrap;

// Throws "ZeroDivisionError" when an element of b (integral) is zero.
template <class T>
void checkNoZeroDivisor(const char* op, const bp::Tensor& b) {
  std::atomic<bool> zero{false};
  runElementwise<1>({&b}, [&](const std::array<char*, 1>& p, int64_t n, const std::array<int64_t, 1>& s) {
    const T* y = reinterpret_cast<const T*>(p[0]);
    bool z = false;
    for (int64_t i = 0; i < n; ++i) z |= y[i * s[0]] == T(0);
    if (z) zero.store(true, std::memory_order_relaxed);
  });
  BP_PLUGIN_CHECK(!zero.load(), bp_common::zeroDivisionMessage(op));
}

template <Div D>
bp::Tensor divisionOut(const char* op, const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  checkArgs(op, {{&self, "self"}, {&other, "other"}, {&out, "out"}});
  checkDtype(op, out, "out", bp::kNumericScalarTypes);
  if (D == Div::True) checkDtype(op, out, "out", bp::kFloatingScalarTypes);
  bp::Tensor a_holder, b_holder;
  const bp::Tensor& a = as(self, out.dtype(), a_holder);
  const bp::Tensor& b = as(other, out.dtype(), b_holder);
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (!std::is_same_v<T, bool>) {
      if constexpr (std::is_integral_v<M>) checkNoZeroDivisor<T>(op, b);
      binaryLoop<T, T, T>(out, a, b, [](M x, M y) -> M { return divide<D, M>(x, y); });
    }
  });
  return out;
}

bp::Tensor div_out_mode(const bp::Tensor& self, const bp::Tensor& other, std::optional<std::string_view> mode,
                        const bp::Tensor& out) {
  const char* op = "bp::div.out_mode";
  if (!mode) return divisionOut<Div::True>(op, self, other, out);
  if (*mode == "trunc") return divisionOut<Div::Trunc>(op, self, other, out);
  // The host's rule has checked rounding_mode; this guards direct callers.
  BP_PLUGIN_CHECK(*mode == "floor", std::string(op) + ": rounding_mode must be None, 'trunc' or 'floor', but got '" +
                                        std::string(*mode) + "'");
  return divisionOut<Div::Floor>(op, self, other, out);
}

bp::Tensor floor_divide_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return divisionOut<Div::Floor>("bp::floor_divide.out", self, other, out);
}
bp::Tensor remainder_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return divisionOut<Div::Remainder>("bp::remainder.Tensor_out", self, other, out);
}
bp::Tensor fmod_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return divisionOut<Div::Fmod>("bp::fmod.Tensor_out", self, other, out);
}

// --- bitwise and logical ops

enum class Bit { And, Or, Xor };

bool isFloatingOut(const bp::Tensor& out) {
  const ScalarType t = out.dtype();
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 || t == ScalarType::Float32 || t == ScalarType::Float64;
}

template <Bit B, class M>
M bitwise(M x, M y) {
  if constexpr (B == Bit::And)
    return static_cast<M>(x & y);
  else if constexpr (B == Bit::Or)
    return static_cast<M>(x | y);
  else
    return static_cast<M>(x ^ y);
}

template <Bit B>
bp::Tensor bitwiseOut(const char* op, const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  checkArgs(op, {{&self, "self"}, {&other, "other"}, {&out, "out"}});
  if (isFloatingOut(out)) {
    // A floating out (castable from the integral result): computed in
    // self's dtype, or int64 for mixed operands (and/or/xor of
    // sign-extended values agree in every wider dtype), then converted.
    bp::Tensor tmp =
        bp::Tensor::empty(out.sizes(), self.dtype() == other.dtype() ? self.dtype() : ScalarType::Int64, kCpuDevice);
    bitwiseOut<B>(op, self, other, tmp);
    copyCast(tmp, out);
    return out;
  }
  checkDtype(
      op, out, "out",
      {ScalarType::Bool, ScalarType::UInt8, ScalarType::Int8, ScalarType::Int16, ScalarType::Int32, ScalarType::Int64});
  bp::Tensor a_holder, b_holder;
  const bp::Tensor& a = as(self, out.dtype(), a_holder);
  const bp::Tensor& b = as(other, out.dtype(), b_holder);
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) binaryLoop<T, T, T>(out, a, b, [](T x, T y) { return bitwise<B, T>(x, y); });
  });
  return out;
}

// Inputs as truth values: non-zero (NaN included) is true.
template <Bit B>
bp::Tensor logicalOut(const char* op, const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  checkArgs(op, {{&self, "self"}, {&other, "other"}, {&out, "out"}});
  bp::Tensor a_holder, b_holder;
  const bp::Tensor& a = as(self, ScalarType::Bool, a_holder);
  const bp::Tensor& b = as(other, ScalarType::Bool, b_holder);
  return intoBoolOut(out, [&](const bp::Tensor& res) {
    binaryLoop<bool, bool, bool>(res, a, b, [](bool x, bool y) { return bitwise<B, bool>(x, y); });
  });
}

// --- unary

// floor, ceil, trunc, round: integers are already whole (copied).
#define BP_ROUNDING(NAME, FN)                                                                            \
  bp::Tensor NAME##_out(const bp::Tensor& self, const bp::Tensor& out) {                                 \
    return unary("bp::" #NAME ".out", self, out, bp::kNumericScalarTypes, [&](auto tag, const auto& a) { \
      using T = decltype(tag);                                                                           \
      using M = opmath_t<T>;                                                                             \
      if constexpr (std::is_floating_point_v<M>)                                                         \
        unaryLoop<T, T>(out, a, [](M x) -> M { return FN(x); });                                         \
      else if constexpr (!std::is_same_v<T, bool>)                                                       \
        unaryLoop<T, T>(out, a, [](M x) { return x; });                                                  \
    });                                                                                                  \
  }
BP_ROUNDING(floor, std::floor)
BP_ROUNDING(ceil, std::ceil)
BP_ROUNDING(trunc, std::trunc)
BP_ROUNDING(round, std::nearbyint)  // the default rounding mode: halves to even
#undef BP_ROUNDING

// round(x, decimals): x scaled by 10^decimals, rounded half to even, scaled
// back, in the compute type (as PyTorch).
bp::Tensor round_decimals_out(const bp::Tensor& self, int64_t decimals, const bp::Tensor& out) {
  return unary("bp::round.decimals_out", self, out, bp::kFloatingScalarTypes, [&](auto tag, const auto& a) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (std::is_floating_point_v<M>) {
      const bool negative_decimals = decimals < 0;
      const double magnitude = negative_decimals ? -static_cast<double>(decimals) : static_cast<double>(decimals);
      const M scale = static_cast<M>(std::pow(10.0, magnitude));
      if (negative_decimals)
        unaryLoop<T, T>(out, a, [scale](M x) -> M { return std::nearbyint(x / scale) * scale; });
      else
        unaryLoop<T, T>(out, a, [scale](M x) -> M { return std::nearbyint(x * scale) / scale; });
    }
  });
}

bp::Tensor sign_out(const bp::Tensor& self, const bp::Tensor& out) {
  return unary("bp::sign.out", self, out, bp::kAllScalarTypes, [&](auto tag, const auto& a) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<M>) {
      unaryLoop<T, T>(out, a, [](M x) -> M { return static_cast<M>(x > M(0)); });
    } else {
      // NaN gives 0; -0.0 gives +0.0 (as PyTorch).
      unaryLoop<T, T>(out, a, [](M x) -> M { return static_cast<M>((M(0) < x) - (x < M(0))); });
    }
  });
}

bp::Tensor erf_out(const bp::Tensor& self, const bp::Tensor& out) {
  return unary("bp::erf.out", self, out, bp::kFloatingScalarTypes, [&](auto tag, const auto& a) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (std::is_floating_point_v<M>) unaryLoop<T, T>(out, a, [](M x) -> M { return std::erf(x); });
  });
}

bp::Tensor bitwise_not_out(const bp::Tensor& self, const bp::Tensor& out) {
  if (isFloatingOut(out)) {  // computed in self's dtype, then converted
    checkArgs("bp::bitwise_not.out", {{&self, "self"}, {&out, "out"}});
    bp::Tensor tmp = bp::Tensor::empty(out.sizes(), self.dtype(), kCpuDevice);
    bitwise_not_out(self, tmp);
    copyCast(tmp, out);
    return out;
  }
  return unary(
      "bp::bitwise_not.out", self, out,
      {ScalarType::Bool, ScalarType::UInt8, ScalarType::Int8, ScalarType::Int16, ScalarType::Int32, ScalarType::Int64},
      [&](auto tag, const auto& a) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool>)
          unaryLoop<T, T>(out, a, [](bool x) { return !x; });
        else if constexpr (std::is_integral_v<T>)
          unaryLoop<T, T>(out, a, [](T x) { return static_cast<T>(~x); });
      });
}

// A predicate of self's elements (in self's own dtype) into a bool result.
template <class Pred>
bp::Tensor predicateOut(const char* op, const bp::Tensor& self, const bp::Tensor& out, Pred pred) {
  checkArgs(op, {{&self, "self"}, {&out, "out"}});
  return intoBoolOut(out, [&](const bp::Tensor& res) {
    visitDtype(self.dtype(), [&](auto tag) {
      using T = decltype(tag);
      using M = opmath_t<T>;
      unaryLoop<bool, T>(res, self, [&pred](M x) { return pred(x); });
    });
  });
}

bp::Tensor logical_not_out(const bp::Tensor& self, const bp::Tensor& out) {
  return predicateOut("bp::logical_not.out", self, out, [](auto x) { return x == decltype(x)(0); });
}
bp::Tensor isnan_out(const bp::Tensor& self, const bp::Tensor& out) {
  return predicateOut("bp::isnan.out", self, out, [](auto x) { return x != x; });
}
bp::Tensor isinf_out(const bp::Tensor& self, const bp::Tensor& out) {
  return predicateOut("bp::isinf.out", self, out, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>)
      return std::isinf(x);
    else
      return false;
  });
}

// The largest finite value of storage type T, as a double.
template <class T>
double largestFinite() {
  if constexpr (std::is_same_v<T, bp::Half>)
    return 65504.0;
  else if constexpr (std::is_same_v<T, bp::BFloat16>)
    return 3.3895313892515355e38;
  else
    return static_cast<double>(std::numeric_limits<T>::max());
}

// v as a value of floating storage type T: an infinity beyond float's
// range (no out-of-range conversion), else rounded to nearest.
template <class T>
T toFloating(double v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    if (std::isfinite(v) && std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max()))
      v = v > 0 ? INFINITY : -INFINITY;
    return store<T>(static_cast<float>(v));
  }
}

// nan_to_num: NaN to `nan` (0), +inf to `posinf` (the dtype's largest
// value), -inf to `neginf` (its lowest), each a value of self's dtype. out
// has self's dtype (the host's rule); integral and bool selves are copied.
bp::Tensor nan_to_num_out(const bp::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                          std::optional<double> neginf, const bp::Tensor& out) {
  const char* op = "bp::nan_to_num.out";
  checkArgs(op, {{&self, "self"}, {&out, "out"}});
  BP_PLUGIN_CHECK(out.dtype() == self.dtype(), std::string(op) + ": out must have self's dtype");
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (std::is_floating_point_v<M>) {
      const M nan_v = load(toFloating<T>(nan.value_or(0.0)));
      const M pos_v = load(toFloating<T>(posinf.value_or(largestFinite<T>())));
      const M neg_v = load(toFloating<T>(neginf.value_or(-largestFinite<T>())));
      unaryLoop<T, T>(out, self, [=](M x) -> M {
        if (x != x) return nan_v;
        if (x == std::numeric_limits<M>::infinity()) return pos_v;
        if (x == -std::numeric_limits<M>::infinity()) return neg_v;
        return x;
      });
    } else {
      unaryLoop<T, T>(out, self, [](M x) { return x; });
    }
  });
  return out;
}

// --- activations (floating selves: the host's rule)

bp::Tensor leaky_relu_out(const bp::Tensor& self, const bp::Scalar& negative_slope, const bp::Tensor& out) {
  return unary("bp::leaky_relu.out", self, out, bp::kFloatingScalarTypes, [&](auto tag, const auto& a) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (std::is_floating_point_v<M>) {
      const M slope = static_cast<M>(negative_slope.toDouble());
      unaryLoop<T, T>(out, a, [slope](M x) -> M { return x > M(0) ? x : x * slope; });
    }
  });
}

bp::Tensor elu_out(const bp::Tensor& self, const bp::Scalar& alpha, const bp::Scalar& scale,
                   const bp::Scalar& input_scale, const bp::Tensor& out) {
  return unary("bp::elu.out", self, out, bp::kFloatingScalarTypes, [&](auto tag, const auto& a) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (std::is_floating_point_v<M>) {
      const M negcoef = static_cast<M>(alpha.toDouble()) * static_cast<M>(scale.toDouble());
      const M poscoef = static_cast<M>(scale.toDouble());
      const M negiptcoef = static_cast<M>(input_scale.toDouble());
      unaryLoop<T, T>(out, a, [=](M x) -> M { return x <= M(0) ? std::expm1(x * negiptcoef) * negcoef : x * poscoef; });
    }
  });
}

bp::Tensor softplus_out(const bp::Tensor& self, const bp::Scalar& beta, const bp::Scalar& threshold,
                        const bp::Tensor& out) {
  return unary("bp::softplus.out", self, out, bp::kFloatingScalarTypes, [&](auto tag, const auto& a) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    if constexpr (std::is_floating_point_v<M>) {
      const M b = static_cast<M>(beta.toDouble()), th = static_cast<M>(threshold.toDouble());
      unaryLoop<T, T>(out, a, [=](M x) -> M { return x * b > th ? x : std::log1p(std::exp(x * b)) / b; });
    }
  });
}

bp::Tensor bitwise_and_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return bitwiseOut<Bit::And>("bp::bitwise_and.Tensor_out", self, other, out);
}
bp::Tensor bitwise_or_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return bitwiseOut<Bit::Or>("bp::bitwise_or.Tensor_out", self, other, out);
}
bp::Tensor bitwise_xor_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return bitwiseOut<Bit::Xor>("bp::bitwise_xor.Tensor_out", self, other, out);
}
bp::Tensor logical_and_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return logicalOut<Bit::And>("bp::logical_and.out", self, other, out);
}
bp::Tensor logical_or_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return logicalOut<Bit::Or>("bp::logical_or.out", self, other, out);
}
bp::Tensor logical_xor_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return logicalOut<Bit::Xor>("bp::logical_xor.out", self, other, out);
}

}  // namespace

namespace bp_cpu {

void registerElementwiseMoreKernels(bp::Library& m) {
  BP_REGISTER_ELEMENTWISE_MORE_KERNELS(m, kCpu, BP_OPERANDS_ON_DEVICE);
}

}  // namespace bp_cpu
