// Conversions between float (IEEE 754 binary32) and Backplane's two 16-bit
// floating-point formats, float16 (IEEE binary16) and bfloat16 (the top 16
// bits of a binary32), on raw bit patterns. The one definition behind
// core's backplane::Half / backplane::BFloat16, the SDK's bp::Half /
// bp::BFloat16 (plugin.hpp) and the GPU plugins' bp_gpu::Half /
// bp_gpu::BFloat16 (plugins/gpu/gpu_port.h): those types hold the bits and
// call these functions, so every layer rounds the same value to the same
// bits (Note [16-bit float conversions]).
//
// Requirements: C++17 or later; standard headers only. Every function is
// usable in host code and, compiled by nvcc or hipcc, in device code
// (BP_HOST_DEVICE). The *Bits functions are constexpr; the float ones are
// not, since C++17 has no constexpr way to reinterpret a float's bits
// (C++20 callers wrap the *Bits functions with std::bit_cast instead).
//
// Note [16-bit float conversions]
// float -> float16 and float -> bfloat16 round to nearest, ties to even, as
// IEEE 754's default rounding: float16 overflows to +/-inf from |f| >= 65520
// (the tie between 65504 and 2^16) and underflows to +/-0 at or below 2^-25
// (the tie between 0 and the smallest subnormal 2^-24); bfloat16 overflows
// to +/-inf from bits 0x7f7f8000 (the tie between its largest finite value
// 0x7f7f and 2^128), and float subnormals round like any other value.
// float16 -> float is exact for every non-NaN; bfloat16 -> float is the
// 16-bit shift, exact for every pattern.
//
// NaNs stay NaNs, keep their sign and the top payload bits that fit, and
// come out quiet (the top mantissa bit set) from every conversion that
// changes the format's width of mantissa:
//   float -> float16:   sign | 0x7e00 | payload bits 22..13 of the float
//   float16 -> float:   sign | 0x7fc00000 | payload << 13
//   float -> bfloat16:  (bits >> 16) | 0x0040
//   bfloat16 -> float:  bits << 16, unchanged: a signalling NaN stays one
// So a float16 NaN round-trips to itself with the quiet bit set, and a
// float NaN whose payload sits only in the dropped low bits (0x7f800001)
// still converts to a NaN, never to inf.
//
// Why this rule. It is what the CPU instructions do, so vectorised host
// kernels that use them agree bit for bit with the scalar code: x86 F16C
// (vcvtps2ph, vcvtph2ps) quiets and keeps payload and sign for float16 both
// ways (core's tests check F16C on every pattern), AVX512-BF16's
// vcvtneps2bf16 quiets and keeps sign and payload, and bfloat16 -> float is
// a shift everywhere. PyTorch's c10 agrees except in NaN bits it does not
// promise: c10's host code quiets a float16 NaN on the way to float
// (through a multiply) and shifts bfloat16, but writes the canonical 0x7e00 (sign
// kept) for float -> float16 and 0x7fc0 (sign dropped) for float ->
// bfloat16. Backplane keeps the sign everywhere, so neg/abs/copysign of a
// NaN survive a round trip through a 16-bit tensor.
//
// On the GPU. CUDA's conversion intrinsics agree with these functions on
// every non-NaN and differ on every NaN (measured on an H100, sm_90, CUDA
// 13.0, over all 65536 patterns and 2^20 float patterns): __half2float,
// __float2half_rn and __float2bfloat16_rn return the canonical NaN
// (0x7fffffff, 0x7fff), dropping sign and payload; __bfloat162float is the
// shift. So the GPU plugins' kernels call these functions instead of the
// intrinsics (bp_gpu::toFloat / fromFloat in gpu_port.h), compiled for the
// device: there they gave the host's bits on every input measured. The
// gpusim kernels and casts are checked against the cases in every test run
// (plugins/gpu/tests, plugins/gpu/tests), the CUDA and HIP casts
// by gpu_device_tests on a machine with their GPU. A kernel that switches
// to the intrinsics for speed changes NaN bits and must say so.
#ifndef BACKPLANE_FLOAT16_CONVERSIONS_H_
#define BACKPLANE_FLOAT16_CONVERSIONS_H_

#include <cstdint>
#include <cstring>

// Marks a function usable in host and device code when nvcc or hipcc
// compiles it; nothing for a plain C++ compiler.
#ifndef BP_HOST_DEVICE
#if defined(__CUDACC__) || defined(__HIPCC__)
#define BP_HOST_DEVICE __host__ __device__
#else
#define BP_HOST_DEVICE
#endif
#endif

namespace bp {

// float16 bits nearest to the float with bits `f` (Note [16-bit float
// conversions]).
BP_HOST_DEVICE constexpr uint16_t halfBitsFromFloatBits(uint32_t f) noexcept {
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000u);
  const uint32_t x = f & 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));  // NaN: quiet
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 (and inf): rounds to inf
  if (x >= 0x38800000u) {
    // Normal float16 (>= 2^-14): rebias the exponent (127 -> 15, i.e. subtract
    // 112 << 23, written as adding its two's complement 0xc8000000) and round
    // the 13 dropped bits to nearest even. A carry out of the mantissa bumps
    // the exponent, which is what rounding up to the next binade means.
    const uint32_t rounded = x + 0xc8000000u + 0xfffu + ((x >> 13) & 1u);
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }
  // Subnormal float16 or zero: |f| = m * 2^(e - 150), so in units of the
  // smallest subnormal (2^-24) it is m >> (126 - e), rounded to nearest
  // even. Reaching 0x400 rounds up into the smallest normal, as it should.
  const uint32_t e = x >> 23;
  if (e < 102) return sign;  // |f| < 2^-25 (float subnormals included): rounds to zero
  const uint32_t m = (x & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24
  uint32_t q = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

// Bits of the float equal to float16 `h`; a NaN comes back quiet (Note
// [16-bit float conversions]).
BP_HOST_DEVICE constexpr uint32_t floatBitsFromHalfBits(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return m == 0 ? (sign | 0x7f800000u) : (sign | 0x7fc00000u | (m << 13));  // inf, NaN
  if (e != 0) return sign | ((e + 112u) << 23) | (m << 13);
  if (m == 0) return sign;
  // Subnormal float16: a normal float. Shift the leading 1 up to the
  // implicit bit's place, lowering the exponent once per step (at most 10).
  uint32_t exponent = 113;  // the exponent of 2^-14, the subnormals' scale, in float's bias
  while ((m & 0x400u) == 0) {
    m <<= 1;
    --exponent;
  }
  return sign | (exponent << 23) | ((m & 0x3ffu) << 13);
}

// bfloat16 bits nearest to the float with bits `f` (Note [16-bit float
// conversions]).
BP_HOST_DEVICE constexpr uint16_t bfloat16BitsFromFloatBits(uint32_t f) noexcept {
  // A NaN: keep the top bits, force quiet (rounding could carry it into inf).
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x0040u);
  // Adding 0x7fff plus the lowest kept bit rounds ties to even; a carry
  // ripples into the exponent (up to inf) exactly as rounding up should.
  return static_cast<uint16_t>((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}

// Bits of the float equal to bfloat16 `b`: the same bits, widened.
BP_HOST_DEVICE constexpr uint32_t floatBitsFromBFloat16Bits(uint16_t b) noexcept {
  return static_cast<uint32_t>(b) << 16;
}

namespace detail {
// The bits of `from` as a To (same size). __builtin_memcpy where the
// compiler has it: it is callable in device code under nvcc and hipcc, where
// std::memcpy may be a host-only function.
template <class To, class From>
BP_HOST_DEVICE inline To float16BitCast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From), "float16BitCast: sizes differ");
  To to;
#if defined(__GNUC__) || defined(__clang__)
  __builtin_memcpy(&to, &from, sizeof to);
#else
  std::memcpy(&to, &from, sizeof to);
#endif
  return to;
}
}  // namespace detail

// The same conversions on float values.
BP_HOST_DEVICE inline uint16_t halfBitsFromFloat(float f) noexcept {
  return halfBitsFromFloatBits(detail::float16BitCast<uint32_t>(f));
}
BP_HOST_DEVICE inline float floatFromHalfBits(uint16_t h) noexcept {
  return detail::float16BitCast<float>(floatBitsFromHalfBits(h));
}
BP_HOST_DEVICE inline uint16_t bfloat16BitsFromFloat(float f) noexcept {
  return bfloat16BitsFromFloatBits(detail::float16BitCast<uint32_t>(f));
}
BP_HOST_DEVICE inline float floatFromBFloat16Bits(uint16_t b) noexcept {
  return detail::float16BitCast<float>(floatBitsFromBFloat16Bits(b));
}

}  // namespace bp

#endif  // BACKPLANE_FLOAT16_CONVERSIONS_H_
