// More elementwise kernels of the GPU plugins, mirroring the CPU plugin's
// plugins/cpu/elementwise_more.cc value for value: rounding division,
// remainder and fmod, bitwise and logical ops, rounding, sign, erf,
// isnan/isinf, nan_to_num and the activations. Each computes into the
// `out` the host has sized and dtype-checked, in out's dtype (in float for
// float16/bfloat16); inputs of another dtype are converted first and a 0-d
// cpu operand is passed by value, as in elementwise.cu. Loops and
// instantiations: Note [GPU elementwise loops] (one kernel per storage type,
// the operation a runtime enum).
//
// Integral division by zero raises "ZeroDivisionError" as on the CPU (Note
// [Integer division by zero] in plugins/cpu/elementwise_more.cc): a scalar
// divisor at the call; a divisor in device memory when the kernel meets a
// zero, at the next synchronization (Note [Deferred device errors]), the
// quotient then being 0. No call waits for the device.
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
#include "device_errors.h"
#include "kernel_args.h"
#include "kernels.h"
#include "loops.cuh"

namespace bp_gpu {
namespace {

namespace mm = bp_common::math;
using bp_common::Div;
using bp_common::divide;

// Operand `t` as storage type T of `dtype` (elementwise.cu's stage).
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

// --- binary

enum class MoreBinary : int32_t { DivTrue, DivTrunc, DivFloor, Remainder, Fmod, And, Or, Xor };

// Division and remainders are bp_common::divide's (Note [Integer division
// by zero] in plugins/cpu/elementwise_more.cc).
template <class M>
BP_GPU_HD M applyMoreBinary(MoreBinary op, M x, M y) {
  if constexpr (std::is_same_v<M, bool>) {
    switch (op) {
      case MoreBinary::And: return x && y;
      case MoreBinary::Or: return x || y;
      case MoreBinary::Xor: return x != y;
      default: return x;  // the host's rule keeps division off bool
    }
  } else {
    if constexpr (std::is_integral_v<M>) {
      switch (op) {
        case MoreBinary::And: return static_cast<M>(x & y);
        case MoreBinary::Or: return static_cast<M>(x | y);
        case MoreBinary::Xor: return static_cast<M>(x ^ y);
        default: break;
      }
      // Division: y != 0 (checked on the host first).
      if (y == M(0)) return M(0);  // unreachable after the check; no trap if reached
    }
    switch (op) {
      case MoreBinary::DivTrue:
        if constexpr (std::is_floating_point_v<M>)
          return divide<Div::True>(x, y);
        else
          return divide<Div::Trunc>(x, y);  // the host's rule keeps true division off integers
      case MoreBinary::DivTrunc: return divide<Div::Trunc>(x, y);
      case MoreBinary::DivFloor: return divide<Div::Floor>(x, y);
      case MoreBinary::Remainder: return divide<Div::Remainder>(x, y);
      case MoreBinary::Fmod: return divide<Div::Fmod>(x, y);
      default: return x;  // the host's rule keeps bitwise ops off floating dtypes
    }
  }
}

// Integral division by zero: recorded on the device, raised at the next
// synchronization (Note [Deferred device errors]); the quotient is 0.
std::string describeZeroDivision(const ErrorSite& site, const int64_t (&)[4]) {
  return bp_common::zeroDivisionMessage(site.op);
}
constexpr ErrorSite kDivZeroSite{"bp::div.out_mode", BP_INVALID_ARGUMENT, &describeZeroDivision, ""};
constexpr ErrorSite kFloorDivideZeroSite{"bp::floor_divide.out", BP_INVALID_ARGUMENT, &describeZeroDivision, ""};
constexpr ErrorSite kRemainderZeroSite{"bp::remainder.Tensor_out", BP_INVALID_ARGUMENT, &describeZeroDivision, ""};
constexpr ErrorSite kFmodZeroSite{"bp::fmod.Tensor_out", BP_INVALID_ARGUMENT, &describeZeroDivision, ""};

// `zero_divisor`: where an integral division records a zero divisor (null:
// no division, or a scalar divisor the host checked).
template <class T>
struct MoreBinaryFn {
  MoreBinary op;
  DeviceErrorSlot* slot = nullptr;
  const ErrorSite* zero_divisor = nullptr;
  BP_GPU_HD T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (zero_divisor != nullptr && y == T(0)) {
        raiseDeviceError(slot, zero_divisor, 0);
        return T(0);
      }
    }
    return store<T>(applyMoreBinary<opmath_t<T>>(op, load(x), load(y)));
  }
};

void failZeroDivision(const char* op) { bp::fail(BP_INVALID_ARGUMENT, bp_common::zeroDivisionMessage(op)); }

// `zero_site`: where an integral division by zero is recorded (null for
// the bitwise ops, which divide nothing).
bp::Tensor moreBinary(const char* op, const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out,
                      std::initializer_list<ScalarType> supported, MoreBinary kind,
                      const ErrorSite* zero_site = nullptr) {
  const bp::Device device = callDevice(op, out, "out");
  checkDtype(op, out, "out", supported);
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    bp::Tensor a_holder, b_holder;
    const bp::Tensor *a_shape, *b_shape;
    const Operand<T> a = stage<T>(op, self, "self", device, out.dtype(), a_holder, a_shape);
    const Operand<T> b = stage<T>(op, other, "other", device, out.dtype(), b_holder, b_shape);
    MoreBinaryFn<T> fn{kind};
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (zero_site != nullptr) {
        if (b.ptr == nullptr) {
          if (b.value == T(0)) failZeroDivision(op);  // a scalar divisor: known on the host
        } else if (out.numel() > 0) {
          fn.slot = deviceErrorSlot(device.index);
          fn.zero_divisor = zero_site;
        }
      }
    }
    launchElementwise(makeOffsetCalculator<3>(op, out.sizes(), {&out, a_shape, b_shape}), out.numel(), device.index,
                      static_cast<T*>(out.data_ptr()), fn, a, b);
  });
  return out;
}

constexpr std::initializer_list<ScalarType> kIntegralAndBool = {
    ScalarType::Bool, ScalarType::UInt8, ScalarType::Int8, ScalarType::Int16, ScalarType::Int32, ScalarType::Int64};

bp::Tensor div_out_mode(const bp::Tensor& self, const bp::Tensor& other, std::optional<std::string_view> mode,
                        const bp::Tensor& out) {
  const char* op = "bp::div.out_mode";
  if (!mode) return moreBinary(op, self, other, out, bp::kFloatingScalarTypes, MoreBinary::DivTrue);
  // The host's rule has checked rounding_mode; this guards direct callers.
  BP_PLUGIN_CHECK(*mode == "trunc" || *mode == "floor", op,
                  ": rounding_mode must be None, 'trunc' or 'floor', but got '", std::string(*mode), "'");
  return moreBinary(op, self, other, out, bp::kNumericScalarTypes,
                    *mode == "trunc" ? MoreBinary::DivTrunc : MoreBinary::DivFloor, &kDivZeroSite);
}
bp::Tensor floor_divide_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return moreBinary("bp::floor_divide.out", self, other, out, bp::kNumericScalarTypes, MoreBinary::DivFloor,
                    &kFloorDivideZeroSite);
}
bp::Tensor remainder_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return moreBinary("bp::remainder.Tensor_out", self, other, out, bp::kNumericScalarTypes, MoreBinary::Remainder,
                    &kRemainderZeroSite);
}
bp::Tensor fmod_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return moreBinary("bp::fmod.Tensor_out", self, other, out, bp::kNumericScalarTypes, MoreBinary::Fmod, &kFmodZeroSite);
}
// Bitwise ops into a floating out (castable from the integral result):
// computed in self's dtype, or int64 for mixed operands (and/or/xor of
// sign-extended values agree in every wider dtype), then converted.
bp::Tensor bitwiseOut(const char* op, const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out,
                      MoreBinary kind) {
  if (isFloating(out.dtype())) {
    callDevice(op, out, "out");
    bp::Tensor tmp =
        bp::Tensor::empty(out.sizes(), self.dtype() == other.dtype() ? self.dtype() : ScalarType::Int64, out.device());
    moreBinary(op, self, other, tmp, kIntegralAndBool, kind);
    copyCast(op, out, tmp);
    return out;
  }
  return moreBinary(op, self, other, out, kIntegralAndBool, kind);
}
bp::Tensor bitwise_and_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return bitwiseOut("bp::bitwise_and.Tensor_out", self, other, out, MoreBinary::And);
}
bp::Tensor bitwise_or_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return bitwiseOut("bp::bitwise_or.Tensor_out", self, other, out, MoreBinary::Or);
}
bp::Tensor bitwise_xor_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return bitwiseOut("bp::bitwise_xor.Tensor_out", self, other, out, MoreBinary::Xor);
}

// Runs fill(bool_result) into out, through a bool temporary when out is not bool.
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

// Logical ops: the operands as truth values (converted to bool: non-zero,
// NaN included, is true).
bp::Tensor logicalOut(const char* op, const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out,
                      MoreBinary kind) {
  const bp::Device device = callDevice(op, out, "out");
  return intoBoolOut(op, out, [&](const bp::Tensor& res) {
    bp::Tensor a_holder, b_holder;
    const bp::Tensor *a_shape, *b_shape;
    const Operand<bool> a = stage<bool>(op, self, "self", device, ScalarType::Bool, a_holder, a_shape);
    const Operand<bool> b = stage<bool>(op, other, "other", device, ScalarType::Bool, b_holder, b_shape);
    launchElementwise(makeOffsetCalculator<3>(op, res.sizes(), {&res, a_shape, b_shape}), res.numel(), device.index,
                      static_cast<bool*>(res.data_ptr()), MoreBinaryFn<bool>{kind}, a, b);
  });
}

// --- unary

enum class MoreUnary : int32_t {
  Copy,
  Floor,
  Ceil,
  Trunc,
  Round,
  RoundScaleUp,
  RoundScaleDown,  // p = 10^|decimals|
  Sign,
  Erf,
  BitNot,
  LeakyRelu,  // p = negative_slope
  Elu,        // p = alpha * scale, q = scale, r = input_scale
  Softplus,   // p = beta, q = threshold
  NanToNum,   // p = nan, q = posinf, r = neginf (values of out's dtype)
};

template <class M>
BP_GPU_HD M applyMoreUnary(MoreUnary op, M x, M p, M q, M r) {
  switch (op) {
    case MoreUnary::Copy: return x;
    case MoreUnary::Sign:
      if constexpr (std::is_same_v<M, bool> || std::is_unsigned_v<M>)
        return static_cast<M>(x > M(0));
      else
        return static_cast<M>((M(0) < x) - (x < M(0)));  // NaN gives 0, -0.0 gives +0.0
    case MoreUnary::BitNot:
      if constexpr (std::is_same_v<M, bool>)
        return !x;
      else if constexpr (std::is_integral_v<M>)
        return static_cast<M>(~x);
      else
        return x;
    default: break;
  }
  if constexpr (std::is_floating_point_v<M>) {
    switch (op) {
      case MoreUnary::Floor: return mm::floor(x);
      case MoreUnary::Ceil: return mm::ceil(x);
      case MoreUnary::Trunc: return mm::trunc(x);
      case MoreUnary::Round: return mm::rint(x);
      case MoreUnary::RoundScaleUp: return mm::rint(x * p) / p;
      case MoreUnary::RoundScaleDown: return mm::rint(x / p) * p;
      case MoreUnary::Erf: return math::erf(x);
      case MoreUnary::LeakyRelu: return x > M(0) ? x : x * p;
      case MoreUnary::Elu: return x <= M(0) ? mm::expm1(x * r) * p : x * q;
      case MoreUnary::Softplus: return x * p > q ? x : mm::log1p(math::exp(x * p)) / p;
      case MoreUnary::NanToNum:
        if (x != x) return p;
        if (x == M(INFINITY)) return q;
        if (x == -M(INFINITY)) return r;
        return x;
      default: break;
    }
  }
  return x;  // floor, ceil, trunc, round, nan_to_num of integers: themselves
}

template <class T>
struct MoreUnaryFn {
  MoreUnary op;
  opmath_t<T> p, q, r;
  BP_GPU_HD T operator()(T x) const { return store<T>(applyMoreUnary<opmath_t<T>>(op, load(x), p, q, r)); }
};

// out = op(self); choose(T{}, p, q, r) sets the parameters in out's
// compute type and returns the operation.
template <class Choose>
bp::Tensor moreUnary(const char* op, const bp::Tensor& self, const bp::Tensor& out,
                     std::initializer_list<ScalarType> supported, Choose choose) {
  const bp::Device device = callDevice(op, out, "out");
  checkDtype(op, out, "out", supported);
  checkOnDevice(op, self, "self", device);
  bp::Tensor holder;
  const bp::Tensor& a = as(op, self, out.dtype(), holder);
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using M = opmath_t<T>;
    M p{}, q{}, r{};
    const MoreUnary kind = choose(T{}, p, q, r);
    launchElementwise(makeOffsetCalculator<2>(op, out.sizes(), {&out, &a}), out.numel(), device.index,
                      static_cast<T*>(out.data_ptr()), MoreUnaryFn<T>{kind, p, q, r},
                      Operand<T>{static_cast<const T*>(a.data_ptr()), T{}});
  });
  return out;
}

bp::Tensor moreUnaryOp(const char* op, const bp::Tensor& self, const bp::Tensor& out,
                       std::initializer_list<ScalarType> supported, MoreUnary kind) {
  return moreUnary(op, self, out, supported, [kind](auto, auto&, auto&, auto&) { return kind; });
}

#define BP_GPU_MORE_UNARY(NAME, TYPES, KIND)                             \
  bp::Tensor NAME##_out(const bp::Tensor& self, const bp::Tensor& out) { \
    return moreUnaryOp("bp::" #NAME ".out", self, out, TYPES, KIND);     \
  }
BP_GPU_MORE_UNARY(floor, bp::kNumericScalarTypes, MoreUnary::Floor)
BP_GPU_MORE_UNARY(ceil, bp::kNumericScalarTypes, MoreUnary::Ceil)
BP_GPU_MORE_UNARY(trunc, bp::kNumericScalarTypes, MoreUnary::Trunc)
BP_GPU_MORE_UNARY(round, bp::kNumericScalarTypes, MoreUnary::Round)
BP_GPU_MORE_UNARY(sign, bp::kAllScalarTypes, MoreUnary::Sign)
BP_GPU_MORE_UNARY(erf, bp::kFloatingScalarTypes, MoreUnary::Erf)
#undef BP_GPU_MORE_UNARY

bp::Tensor bitwise_not_out(const bp::Tensor& self, const bp::Tensor& out) {
  const char* op = "bp::bitwise_not.out";
  if (isFloating(out.dtype())) {  // computed in self's dtype, then converted
    callDevice(op, out, "out");
    bp::Tensor tmp = bp::Tensor::empty(out.sizes(), self.dtype(), out.device());
    moreUnaryOp(op, self, tmp, kIntegralAndBool, MoreUnary::BitNot);
    copyCast(op, out, tmp);
    return out;
  }
  return moreUnaryOp(op, self, out, kIntegralAndBool, MoreUnary::BitNot);
}

bp::Tensor round_decimals_out(const bp::Tensor& self, int64_t decimals, const bp::Tensor& out) {
  return moreUnary("bp::round.decimals_out", self, out, bp::kFloatingScalarTypes, [&](auto tag, auto& p, auto&, auto&) {
    using M = opmath_t<decltype(tag)>;
    const double magnitude = decimals < 0 ? -static_cast<double>(decimals) : static_cast<double>(decimals);
    p = static_cast<M>(std::pow(10.0, magnitude));
    return decimals < 0 ? MoreUnary::RoundScaleDown : MoreUnary::RoundScaleUp;
  });
}

bp::Tensor leaky_relu_out(const bp::Tensor& self, const bp::Scalar& negative_slope, const bp::Tensor& out) {
  return moreUnary("bp::leaky_relu.out", self, out, bp::kFloatingScalarTypes, [&](auto tag, auto& p, auto&, auto&) {
    using M = opmath_t<decltype(tag)>;
    p = static_cast<M>(negative_slope.toDouble());
    return MoreUnary::LeakyRelu;
  });
}

bp::Tensor elu_out(const bp::Tensor& self, const bp::Scalar& alpha, const bp::Scalar& scale,
                   const bp::Scalar& input_scale, const bp::Tensor& out) {
  return moreUnary("bp::elu.out", self, out, bp::kFloatingScalarTypes, [&](auto tag, auto& p, auto& q, auto& r) {
    using M = opmath_t<decltype(tag)>;
    if constexpr (std::is_floating_point_v<M>) p = static_cast<M>(alpha.toDouble()) * static_cast<M>(scale.toDouble());
    q = static_cast<M>(scale.toDouble());
    r = static_cast<M>(input_scale.toDouble());
    return MoreUnary::Elu;
  });
}

bp::Tensor softplus_out(const bp::Tensor& self, const bp::Scalar& beta, const bp::Scalar& threshold,
                        const bp::Tensor& out) {
  return moreUnary("bp::softplus.out", self, out, bp::kFloatingScalarTypes, [&](auto tag, auto& p, auto& q, auto&) {
    using M = opmath_t<decltype(tag)>;
    p = static_cast<M>(beta.toDouble());
    q = static_cast<M>(threshold.toDouble());
    return MoreUnary::Softplus;
  });
}

// The largest finite value of storage type T.
template <class T>
double largestFinite() {
  if constexpr (std::is_same_v<T, Half>)
    return 65504.0;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return 3.3895313892515355e38;
  else
    return static_cast<double>(std::numeric_limits<T>::max());
}

// v as a value of floating storage type T, loaded: an infinity beyond
// float's range (no out-of-range conversion), else rounded to nearest.
template <class T>
opmath_t<T> asValueOf(double v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    if (std::isfinite(v) && std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max()))
      v = v > 0 ? INFINITY : -INFINITY;
    return load(store<T>(static_cast<float>(v)));
  }
}

bp::Tensor nan_to_num_out(const bp::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                          std::optional<double> neginf, const bp::Tensor& out) {
  const char* op = "bp::nan_to_num.out";
  BP_PLUGIN_CHECK(out.dtype() == self.dtype(), op, ": out must have self's dtype");
  return moreUnary(op, self, out, bp::kAllScalarTypes, [&](auto tag, auto& p, auto& q, auto& r) {
    using T = decltype(tag);
    if constexpr (kIsFloating<T>) {
      p = asValueOf<T>(nan.value_or(0.0));
      q = asValueOf<T>(posinf.value_or(largestFinite<T>()));
      r = asValueOf<T>(neginf.value_or(-largestFinite<T>()));
      return MoreUnary::NanToNum;
    } else {
      return MoreUnary::Copy;
    }
  });
}

// --- predicates: bool results from self's own dtype

enum class Predicate : int32_t { IsNan, IsInf, IsZero };

template <class T>
struct PredicateFn {
  Predicate op;
  BP_GPU_HD bool operator()(T v) const {
    const auto x = load(v);
    using M = std::remove_const_t<decltype(x)>;
    switch (op) {
      case Predicate::IsNan: return x != x;
      case Predicate::IsInf:
        if constexpr (std::is_floating_point_v<M>)
          return x == M(INFINITY) || x == -M(INFINITY);
        else
          return false;
      case Predicate::IsZero: return x == M(0);
    }
    return false;
  }
};

bp::Tensor predicateOut(const char* op, const bp::Tensor& self, const bp::Tensor& out, Predicate kind) {
  const bp::Device device = callDevice(op, out, "out");
  checkOnDevice(op, self, "self", device);
  return intoBoolOut(op, out, [&](const bp::Tensor& res) {
    visitDtype(self.dtype(), [&](auto tag) {
      using T = decltype(tag);
      launchElementwise(makeOffsetCalculator<2>(op, res.sizes(), {&res, &self}), res.numel(), device.index,
                        static_cast<bool*>(res.data_ptr()), PredicateFn<T>{kind},
                        Operand<T>{static_cast<const T*>(self.data_ptr()), T{}});
    });
  });
}

bp::Tensor logical_and_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return logicalOut("bp::logical_and.out", self, other, out, MoreBinary::And);
}
bp::Tensor logical_or_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return logicalOut("bp::logical_or.out", self, other, out, MoreBinary::Or);
}
bp::Tensor logical_xor_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return logicalOut("bp::logical_xor.out", self, other, out, MoreBinary::Xor);
}
bp::Tensor logical_not_out(const bp::Tensor& self, const bp::Tensor& out) {
  return predicateOut("bp::logical_not.out", self, out, Predicate::IsZero);
}
bp::Tensor isnan_out(const bp::Tensor& self, const bp::Tensor& out) {
  return predicateOut("bp::isnan.out", self, out, Predicate::IsNan);
}
bp::Tensor isinf_out(const bp::Tensor& self, const bp::Tensor& out) {
  return predicateOut("bp::isinf.out", self, out, Predicate::IsInf);
}

}  // namespace

void registerElementwiseMoreKernels(bp::Library& m, int32_t type) {
  BP_REGISTER_ELEMENTWISE_MORE_KERNELS(m, type, BP_OPERANDS_TAKE_CPU_SCALARS);  // stage() reads a cpu scalar
}

}  // namespace bp_gpu
