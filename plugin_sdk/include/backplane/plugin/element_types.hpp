// The C++ element types: bp::Half and bp::BFloat16 (16-bit floats), and
// scalarTypeOf<T>(), the ScalarType of each C++ element type. Part of
// <backplane/plugin.hpp>; compiles on its own.
#ifndef BACKPLANE_PLUGIN_ELEMENT_TYPES_HPP_
#define BACKPLANE_PLUGIN_ELEMENT_TYPES_HPP_

#include <cstdint>
#include <type_traits>

#include "backplane/float16_conversions.h"
#include "backplane/plugin/detail/scalar_type_of.hpp"
#include "backplane/plugin/scalar_type.hpp"

namespace bp {

// IEEE binary16. Conversion from float rounds to nearest even; NaN stays
// NaN (quieted, sign and top payload bits kept); overflow gives infinity.
// The conversions are backplane/float16_conversions.h's, the same as the
// host's and the GPU kernels' (Note [16-bit float conversions]).
struct Half {
  uint16_t bits = 0;

  Half() = default;
  explicit Half(float f) noexcept : bits(halfBitsFromFloat(f)) {}
  static constexpr Half fromBits(uint16_t b) noexcept {
    Half h;
    h.bits = b;
    return h;
  }
  // Exact; a signalling NaN comes back quiet.
  operator float() const noexcept { return floatFromHalfBits(bits); }
};

// bfloat16 (the top half of a float32). Conversion from float rounds to
// nearest even; NaN stays NaN (quieted, sign and top payload bits kept).
// Conversion to float is exact (Note [16-bit float conversions]).
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  explicit BFloat16(float f) noexcept : bits(bfloat16BitsFromFloat(f)) {}
  static constexpr BFloat16 fromBits(uint16_t b) noexcept {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  operator float() const noexcept { return floatFromBFloat16Bits(bits); }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "Half and BFloat16 must be 16 bits");

// The ScalarType of C++ element type T (bool, uint8_t, int8_t, int16_t,
// int32_t, int64_t, uint16_t, uint32_t, uint64_t, bp::Half, bp::BFloat16,
// float, double; const allowed).
template <class T>
constexpr ScalarType scalarTypeOf() noexcept {
  static_assert(detail::ScalarTypeOf<std::remove_cv_t<T>>::kKnown,
                "bp: element type must be one of bool, uint8_t, int8_t, int16_t, int32_t, int64_t, uint16_t, "
                "uint32_t, uint64_t, bp::Half, bp::BFloat16, float, double (optionally const)");
  return detail::ScalarTypeOf<std::remove_cv_t<T>>::kValue;
}

}  // namespace bp

#endif  // BACKPLANE_PLUGIN_ELEMENT_TYPES_HPP_
