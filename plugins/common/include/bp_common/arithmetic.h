#pragma once
// Element arithmetic every plugin computes alike, for host and device: the
// C math functions by overload, integer arithmetic that wraps as PyTorch's
// does, powers, rounding division and remainders, and comparisons. Each
// function is inline and branch-free where its template arguments are
// known, so kernels' inner loops pay nothing for sharing it.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backplane/float16_conversions.h"

namespace bp_common {

// The C math functions for float and double by overload, so a kernel
// templated on its compute type calls expf for float and exp for double
// (what std::exp's overloads call on the host), on every device.
namespace math {
#define BP_COMMON_MATH_FN(NAME, FLOAT_FN, DOUBLE_FN)                \
  BP_HOST_DEVICE inline float NAME(float x) { return FLOAT_FN(x); } \
  BP_HOST_DEVICE inline double NAME(double x) { return DOUBLE_FN(x); }
BP_COMMON_MATH_FN(exp, expf, ::exp)
BP_COMMON_MATH_FN(log, logf, ::log)
BP_COMMON_MATH_FN(sqrt, sqrtf, ::sqrt)
BP_COMMON_MATH_FN(sin, sinf, ::sin)
BP_COMMON_MATH_FN(cos, cosf, ::cos)
BP_COMMON_MATH_FN(tanh, tanhf, ::tanh)
BP_COMMON_MATH_FN(erf, erff, ::erf)
BP_COMMON_MATH_FN(floor, floorf, ::floor)
BP_COMMON_MATH_FN(ceil, ceilf, ::ceil)
BP_COMMON_MATH_FN(trunc, truncf, ::trunc)
BP_COMMON_MATH_FN(rint, rintf, ::rint)  // to nearest, halves to even
BP_COMMON_MATH_FN(expm1, expm1f, ::expm1)
BP_COMMON_MATH_FN(log1p, log1pf, ::log1p)
#undef BP_COMMON_MATH_FN
BP_HOST_DEVICE inline float pow(float x, float e) { return powf(x, e); }
BP_HOST_DEVICE inline double pow(double x, double e) { return ::pow(x, e); }
BP_HOST_DEVICE inline float fmod(float x, float y) { return fmodf(x, y); }
BP_HOST_DEVICE inline double fmod(double x, double y) { return ::fmod(x, y); }
BP_HOST_DEVICE inline float copysign(float x, float y) { return copysignf(x, y); }
BP_HOST_DEVICE inline double copysign(double x, double y) { return ::copysign(x, y); }
// abs clears the sign bit: abs(-0.0) is +0.0, as PyTorch's.
BP_HOST_DEVICE inline float abs(float x) { return fabsf(x); }
BP_HOST_DEVICE inline double abs(double x) { return ::fabs(x); }
}  // namespace math

// Integer +, - and * wrap around (two's complement), as PyTorch's do: they
// run in an unsigned type at least as wide as unsigned int, where wrapping
// is defined (signed overflow is undefined behaviour, and UBSan's builds
// report it), and convert back, which C++20 defines as modular. Floating
// types and bool are computed as written.
template <class M>
using wrap_t = std::conditional_t<(sizeof(M) < sizeof(unsigned)), unsigned, std::make_unsigned_t<M>>;
template <class M>
inline constexpr bool kWraps = std::is_integral_v<M> && !std::is_same_v<M, bool>;

template <class M>
BP_HOST_DEVICE inline M addWrap(M x, M y) {
  if constexpr (kWraps<M>)
    return static_cast<M>(static_cast<wrap_t<M>>(x) + static_cast<wrap_t<M>>(y));
  else
    return static_cast<M>(x + y);
}
template <class M>
BP_HOST_DEVICE inline M subWrap(M x, M y) {
  if constexpr (kWraps<M>)
    return static_cast<M>(static_cast<wrap_t<M>>(x) - static_cast<wrap_t<M>>(y));
  else
    return static_cast<M>(x - y);
}
template <class M>
BP_HOST_DEVICE inline M mulWrap(M x, M y) {
  if constexpr (kWraps<M>)
    return static_cast<M>(static_cast<wrap_t<M>>(x) * static_cast<wrap_t<M>>(y));
  else
    return static_cast<M>(x * y);
}
template <class M>
BP_HOST_DEVICE inline M negWrap(M x) {
  if constexpr (kWraps<M>)
    return static_cast<M>(wrap_t<M>(0) - static_cast<wrap_t<M>>(x));
  else
    return static_cast<M>(-x);  // keeps -0.0 for +0.0
}

template <class M>
BP_HOST_DEVICE inline bool negative(M x) {
  if constexpr (std::is_unsigned_v<M>)
    return false;
  else
    return x < M(0);
}

// Integer power by squaring; a negative exponent gives 1/x^-e truncated
// (0 unless |x| is 1), as PyTorch.
template <class M>
BP_HOST_DEVICE inline M intPow(M x, M e) {
  if constexpr (std::is_signed_v<M>) {
    if (e < 0) {
      if (x == 1) return 1;
      if (x == -1) return (e % 2 == 0) ? M(1) : M(-1);
      return 0;
    }
  }
  M r = 1;
  for (; e > 0; e /= 2) {
    if (e % 2) r = mulWrap(r, x);
    x = mulWrap(x, x);
  }
  return r;
}

template <class M>
BP_HOST_DEVICE inline M powOf(M x, M e) {
  if constexpr (std::is_floating_point_v<M>)
    return math::pow(x, e);
  else if constexpr (std::is_same_v<M, bool>)
    return x || !e;
  else
    return intPow<M>(x, e);
}

// --- division and remainders (Note [Integer division by zero] in
// plugins/cpu/elementwise_more.cc)

enum class Div : int32_t { True, Trunc, Floor, Remainder, Fmod };

// x / y rounded as D says, in compute type M (not bool). Integers need
// y != 0, which the kernels check before they run; the quotient of the most
// negative integer by -1 wraps to itself, and its remainder is 0, as in
// PyTorch.
template <Div D, class M>
BP_HOST_DEVICE inline M divide(M x, M y) {
  if constexpr (std::is_floating_point_v<M>) {
    if constexpr (D == Div::True) {
      return x / y;
    } else if constexpr (D == Div::Trunc) {
      return math::trunc(x / y);
    } else if constexpr (D == Div::Floor) {
      // Python's floor division of floats: exact where x / y rounds across
      // an integer, IEEE's result for a zero divisor.
      if (y == M(0)) return x / y;
      const M mod = math::fmod(x, y);
      M div = (x - mod) / y;
      if (mod != M(0) && (y < M(0)) != (mod < M(0))) div -= M(1);
      if (div == M(0)) return math::copysign(M(0), x / y);
      M floordiv = math::floor(div);
      if (div - floordiv > M(0.5)) floordiv += M(1);
      return floordiv;
    } else if constexpr (D == Div::Remainder) {
      M mod = math::fmod(x, y);
      if (mod != M(0) && (y < M(0)) != (mod < M(0))) mod += y;
      return mod;
    } else {
      return math::fmod(x, y);
    }
  } else {
    // y == -1 is separate: x / -1 overflows for the most negative x.
    const bool minus_one = negative(y) && y == static_cast<M>(-1);
    if constexpr (D == Div::Remainder || D == Div::Fmod) {
      if (minus_one) return M(0);
      M r = static_cast<M>(x % y);
      if constexpr (D == Div::Remainder) {
        if (r != M(0) && negative(r) != negative(y)) r = static_cast<M>(r + y);
      }
      return r;
    } else {
      if (minus_one) return negWrap(x);
      M q = static_cast<M>(x / y);
      if constexpr (D == Div::Floor) {
        if (negative(x) != negative(y) && static_cast<M>(q * y) != x) q = static_cast<M>(q - 1);
      }
      return q;
    }
  }
}

// --- comparisons

enum class Cmp : int32_t { Eq, Ne, Lt, Le, Gt, Ge };

template <class M>
BP_HOST_DEVICE inline bool compare(Cmp c, M x, M y) {
  switch (c) {
    case Cmp::Eq: return x == y;
    case Cmp::Ne: return x != y;
    case Cmp::Lt: return x < y;
    case Cmp::Le: return x <= y;
    case Cmp::Gt: return x > y;
    case Cmp::Ge: return x >= y;
  }
  return false;
}

}  // namespace bp_common
