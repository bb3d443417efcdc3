#pragma once
// Element types of the GPU kernels: the storage type of each dtype
// (bp_gpu::Half and bp_gpu::BFloat16 for the 16-bit floats), the type
// arithmetic runs in (OpMath: float for the 16-bit floats, as the CPU
// plugin), conversions that match the CPU plugin's value for value, the C
// math functions by overload, and the host-side dtype dispatch that picks a
// kernel instantiation.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "gpu_port.h"

namespace bp_gpu {

using bp::ScalarType;

template <class T>
inline constexpr bool kIsReduced = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T>
inline constexpr bool kIsFloating = kIsReduced<T> || std::is_floating_point_v<T>;

// The type arithmetic runs in for storage type T: float for Half and
// BFloat16, T itself otherwise (as bp_cpu::OpMath).
template <class T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<Half> {
  using type = float;
};
template <>
struct OpMath<BFloat16> {
  using type = float;
};
template <class T>
using opmath_t = typename OpMath<T>::type;

template <class T>
BP_GPU_HD inline opmath_t<T> load(T v) {
  if constexpr (kIsReduced<T>) return toFloat(v);
  else return v;
}

// A computed value stored as T: rounded to nearest even for the 16-bit
// floats, != 0 for bool.
template <class T, class V>
BP_GPU_HD inline T store(V v) {
  if constexpr (kIsReduced<T>) return fromFloat<T>(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>) return v != V(0);
  else return static_cast<T>(v);
}

// A floating value as int64, truncated; NaN, infinities and values beyond
// int64 give int64's lowest (as the CPU plugin's floatToIntegral), the same
// on a GPU and in the simulator, with no undefined behaviour.
template <class X>
BP_GPU_HD inline int64_t floatToInt64(X x) {
  if (!(x >= X(-9223372036854775808.0) && x < X(9223372036854775808.0))) return INT64_MIN;
  return static_cast<int64_t>(x);
}

// One element converted as PyTorch's casts (and the CPU plugin's copies):
// through float for the 16-bit floats, != 0 to bool, floating to integral
// through int64 (so -1.0 to uint8 wraps to 255).
template <class O, class I>
BP_GPU_HD inline O convert(I v) {
  if constexpr (std::is_same_v<O, I>) {
    return v;
  } else {
    const auto x = load(v);
    using X = std::remove_const_t<decltype(x)>;
    if constexpr (std::is_same_v<O, bool>) return x != X(0);
    else if constexpr (kIsReduced<O>) return fromFloat<O>(static_cast<float>(x));
    else if constexpr (std::is_same_v<O, uint64_t> && std::is_floating_point_v<X>)
      // 2^63 to 2^64 go to uint64 directly (int64 cannot hold them), as the
      // CPU plugin's floatToIntegral.
      return x >= X(9223372036854775808.0) && x < X(18446744073709551616.0) ? static_cast<O>(x)
                                                                            : static_cast<O>(floatToInt64(x));
    else if constexpr (std::is_integral_v<O> && std::is_floating_point_v<X>)
      return static_cast<O>(floatToInt64(x));
    else return static_cast<O>(x);
  }
}

// The C math functions for float and double by overload, so a kernel
// templated on its compute type calls expf for float and exp for double,
// exactly as the CPU plugin's std:: calls do.
namespace math {
#define BP_GPU_MATH_FN(NAME, FLOAT_FN, DOUBLE_FN)                  \
  BP_GPU_HD inline float NAME(float x) { return FLOAT_FN(x); }     \
  BP_GPU_HD inline double NAME(double x) { return DOUBLE_FN(x); }
BP_GPU_MATH_FN(exp, expf, ::exp)
BP_GPU_MATH_FN(log, logf, ::log)
BP_GPU_MATH_FN(sqrt, sqrtf, ::sqrt)
BP_GPU_MATH_FN(sin, sinf, ::sin)
BP_GPU_MATH_FN(cos, cosf, ::cos)
BP_GPU_MATH_FN(tanh, tanhf, ::tanh)
BP_GPU_MATH_FN(erf, erff, ::erf)
#undef BP_GPU_MATH_FN
BP_GPU_HD inline float pow(float x, float e) { return powf(x, e); }
BP_GPU_HD inline double pow(double x, double e) { return ::pow(x, e); }
// abs clears the sign bit: abs(-0.0) is +0.0, as PyTorch's.
BP_GPU_HD inline float abs(float x) { return fabsf(x); }
BP_GPU_HD inline double abs(double x) { return ::fabs(x); }
}  // namespace math

// --- host side

// Calls f(T{}) with the kernel storage type of `t` (bool, uint8_t, int8_t,
// int16_t, int32_t, int64_t, Half, BFloat16, float, double). uint16, uint32
// and uint64 (PyTorch 2.x's barebones unsigned types) are refused here, so
// that only the kernels that serve them (copies, fills, data movement,
// comparisons: visitAnyDtype) are instantiated for them; the host refuses
// them for every other op first (Note [Barebones unsigned dtypes]).
[[noreturn]] inline void failBarebonesUnsigned(ScalarType t) {
  bp::fail(BP_INVALID_ARGUMENT,
           std::string("this gpu kernel does not support dtype ") + bp::name(t) +
               ": uint16, uint32 and uint64 have creation, copies, data movement and comparisons only (as in "
               "PyTorch 2.x); convert to another dtype first with .to(dtype)");
}
template <class F>
decltype(auto) visitDtype(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Bool: return f(bool{});
    case ScalarType::UInt8: return f(uint8_t{});
    case ScalarType::Int8: return f(int8_t{});
    case ScalarType::Int16: return f(int16_t{});
    case ScalarType::Int32: return f(int32_t{});
    case ScalarType::Int64: return f(int64_t{});
    case ScalarType::Float16: return f(Half{});
    case ScalarType::BFloat16: return f(BFloat16{});
    case ScalarType::Float32: return f(float{});
    case ScalarType::Float64: return f(double{});
    case ScalarType::UInt16:
    case ScalarType::UInt32:
    case ScalarType::UInt64: failBarebonesUnsigned(t);
  }
  bp::fail(BP_INVALID_ARGUMENT, "unknown dtype " + std::to_string(static_cast<int>(t)));
}

// visitDtype and also uint16_t, uint32_t, uint64_t.
template <class F>
decltype(auto) visitAnyDtype(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::UInt16: return f(uint16_t{});
    case ScalarType::UInt32: return f(uint32_t{});
    case ScalarType::UInt64: return f(uint64_t{});
    default: return visitDtype(t, static_cast<F&&>(f));
  }
}

// Every dtype, for the kernels that serve the barebones unsigned ones too.
inline constexpr std::initializer_list<ScalarType> kAnyDtype = {
    ScalarType::Bool,   ScalarType::UInt8,   ScalarType::Int8,     ScalarType::Int16,   ScalarType::Int32,
    ScalarType::Int64,  ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64,
    ScalarType::UInt16, ScalarType::UInt32,  ScalarType::UInt64};

// Calls f(E{}) with the unsigned integer type of `size` bytes: kernels that
// only move elements are instantiated per element size, not per dtype.
template <class F>
decltype(auto) visitItemSize(size_t size, F&& f) {
  switch (size) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    default: return f(uint64_t{});
  }
}

inline bool isFloating(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 || t == ScalarType::Float32 ||
         t == ScalarType::Float64;
}

// A Scalar as storage type T, as PyTorch converts one that the host has
// range-checked (Note [Writing a Scalar into a tensor] in the dispatcher's
// meta.h), and as the CPU plugin's scalarTo: integers wrap modulo 2^bits
// (-1 into uint8 is 255); a double becomes an integer through int64
// (bp::Scalar::toInt throws for one beyond int64); an integer becomes a
// floating value directly, and the 16-bit floats round from float; bool is
// value != 0.
template <class T>
T scalarTo(const bp::Scalar& s) {
  if constexpr (std::is_same_v<T, bool>)
    return s.toBool();
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(s.toInt());
  else if constexpr (kIsReduced<T>)
    return fromFloat<T>(s.isFloatingPoint() ? static_cast<float>(s.toDouble()) : static_cast<float>(s.toInt()));
  else
    return s.isFloatingPoint() ? static_cast<T>(s.toDouble()) : static_cast<T>(s.toInt());
}

}  // namespace bp_gpu
