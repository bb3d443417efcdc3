#pragma once
// The float16 and bfloat16 conversion rule (Note [16-bit float conversions]
// in backplane/float16_conversions.h) as test data, checked against every
// layer that has its own Half and BFloat16 types: core's (backplane::Half),
// the SDK's (bp::Half), the GPU plugins' (bp_gpu::Half, in kernels on the
// simulator) and the device casts of the gpusim and CUDA/HIP plugins. Each
// layer's test hands expectFloat16ConversionsFollowTheRule its four
// conversions; all layers meet the same literal bits, so they agree.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <ios>
#include <sstream>
#include <string>
#include <vector>

#include "backplane/float16_conversions.h"

namespace float16_test {

// A float (by its bits) and the float16 and bfloat16 bits it must become.
struct FromFloatCase {
  uint32_t float_bits;
  uint16_t half_bits;
  uint16_t bfloat16_bits;
  const char* what;
};

inline constexpr FromFloatCase kFromFloatCases[] = {
    {0x00000000, 0x0000, 0x0000, "+0"},
    {0x80000000, 0x8000, 0x8000, "-0"},
    {0x3f800000, 0x3c00, 0x3f80, "1"},
    {0xc0000000, 0xc000, 0xc000, "-2"},
    {0x3dcccccd, 0x2e66, 0x3dcd, "0.1"},
    // Ties of float16 (1 + 2^-11 is halfway between 0x3c00 and 0x3c01).
    {0x3f801000, 0x3c00, 0x3f80, "1 + 2^-11: float16 tie, to even below"},
    {0x3f801001, 0x3c01, 0x3f80, "just above that tie"},
    {0x3f800fff, 0x3c00, 0x3f80, "just below that tie"},
    {0x3f803000, 0x3c02, 0x3f80, "1 + 3 * 2^-11: float16 tie, to even above"},
    {0xbf803000, 0xbc02, 0xbf80, "-(1 + 3 * 2^-11)"},
    // Ties of bfloat16 (1 + 2^-8 is halfway between 0x3f80 and 0x3f81).
    {0x3f808000, 0x3c04, 0x3f80, "1 + 2^-8: bfloat16 tie, to even below"},
    {0x3f808001, 0x3c04, 0x3f81, "just above that tie"},
    {0x3f818000, 0x3c0c, 0x3f82, "1 + 3 * 2^-8: bfloat16 tie, to even above"},
    {0x3fffffff, 0x4000, 0x4000, "rounding up carries into the exponent"},
    // Overflow.
    {0x477fe000, 0x7bff, 0x4780, "65504, the largest float16"},
    {0x477fefff, 0x7bff, 0x4780, "just below 65520"},
    {0x477ff000, 0x7c00, 0x4780, "65520: tie between 65504 and 2^16, to even (inf)"},
    {0xc77ff000, 0xfc00, 0xc780, "-65520"},
    {0x47800000, 0x7c00, 0x4780, "2^16"},
    {0x7f7f7fff, 0x7c00, 0x7f7f, "just below bfloat16's overflow tie"},
    {0x7f7f8000, 0x7c00, 0x7f80, "bfloat16's overflow tie, to even (inf)"},
    {0x7f7fffff, 0x7c00, 0x7f80, "FLT_MAX"},
    {0xff7fffff, 0xfc00, 0xff80, "-FLT_MAX"},
    {0x7f800000, 0x7c00, 0x7f80, "inf"},
    {0xff800000, 0xfc00, 0xff80, "-inf"},
    // float16 subnormals (2^-24 is the smallest).
    {0x38800000, 0x0400, 0x3880, "2^-14, the smallest normal float16"},
    {0x387fc000, 0x03ff, 0x3880, "1023 * 2^-24, the largest subnormal float16"},
    {0x387fe000, 0x0400, 0x3880, "2047 * 2^-25: tie above the largest subnormal, to even (normal)"},
    {0x33800000, 0x0001, 0x3380, "2^-24, the smallest subnormal float16"},
    {0xb3800000, 0x8001, 0xb380, "-2^-24"},
    {0x33000000, 0x0000, 0x3300, "2^-25: tie between 0 and 2^-24, to even (0)"},
    {0xb3000000, 0x8000, 0xb300, "-2^-25: to -0"},
    {0x33000001, 0x0001, 0x3300, "just above 2^-25"},
    {0x32ffffff, 0x0000, 0x3300, "just below 2^-25"},
    {0x33c00000, 0x0002, 0x33c0, "3 * 2^-25: tie, to even above"},
    {0x34200000, 0x0002, 0x3420, "5 * 2^-25: tie, to even below"},
    // float subnormals.
    {0x00000001, 0x0000, 0x0000, "the smallest float subnormal"},
    {0x80000001, 0x8000, 0x8000, "the smallest float subnormal, negative"},
    {0x00008000, 0x0000, 0x0000, "float subnormal at a bfloat16 tie, to even below"},
    {0x00018000, 0x0000, 0x0002, "float subnormal at a bfloat16 tie, to even above"},
    {0x807fffff, 0x8000, 0x8080, "the largest float subnormal, negative: bfloat16 rounds up to normal"},
    // NaNs: quiet, sign and top payload bits kept.
    {0x7fc00000, 0x7e00, 0x7fc0, "quiet NaN"},
    {0xffc00000, 0xfe00, 0xffc0, "quiet NaN, negative"},
    {0x7fc02000, 0x7e01, 0x7fc0, "quiet NaN with payload in float16's range"},
    {0x7f800001, 0x7e00, 0x7fc0, "signalling NaN, payload only in dropped bits: NaN, not inf"},
    {0xff800001, 0xfe00, 0xffc0, "signalling NaN, negative"},
    {0x7fa00000, 0x7f00, 0x7fe0, "signalling NaN with a high payload: quieted, payload kept"},
    {0xffa00000, 0xff00, 0xffe0, "signalling NaN with a high payload, negative"},
    {0x7f810000, 0x7e08, 0x7fc1, "signalling NaN that bfloat16 can hold: quieted"},
    {0x7fffffff, 0x7fff, 0x7fff, "NaN, every payload bit"},
    {0xffffffff, 0xffff, 0xffff, "NaN, every payload bit, negative"},
};

// A 16-bit pattern and the float bits it must become as float16 and as
// bfloat16.
struct ToFloatCase {
  uint16_t bits;
  uint32_t float_bits_from_half;
  uint32_t float_bits_from_bfloat16;
  const char* what;
};

inline constexpr ToFloatCase kToFloatCases[] = {
    {0x0000, 0x00000000, 0x00000000, "+0"},
    {0x8000, 0x80000000, 0x80000000, "-0"},
    {0x3c00, 0x3f800000, 0x3c000000, "1 as float16"},
    {0x3f80, 0x3ff00000, 0x3f800000, "1 as bfloat16"},
    {0x0001, 0x33800000, 0x00010000, "the smallest subnormal float16"},
    {0x8001, 0xb3800000, 0x80010000, "the smallest subnormal float16, negative"},
    {0x0200, 0x38000000, 0x02000000, "2^-15, a subnormal float16"},
    {0x03ff, 0x387fc000, 0x03ff0000, "the largest subnormal float16"},
    {0x0400, 0x38800000, 0x04000000, "the smallest normal float16"},
    {0x7bff, 0x477fe000, 0x7bff0000, "65504"},
    {0x7c00, 0x7f800000, 0x7c000000, "inf as float16"},
    {0xfc00, 0xff800000, 0xfc000000, "-inf as float16"},
    {0x7f80, 0x7ff00000, 0x7f800000, "inf as bfloat16 (a quiet NaN as float16)"},
    {0x7c01, 0x7fc02000, 0x7c010000, "signalling NaN as float16: comes back quiet"},
    {0xfc01, 0xffc02000, 0xfc010000, "signalling NaN as float16, negative: quiet, sign kept"},
    {0x7d00, 0x7fe00000, 0x7d000000, "signalling NaN as float16 with a high payload: quiet, payload kept"},
    {0x7e00, 0x7fc00000, 0x7e000000, "quiet NaN as float16"},
    {0xfe00, 0xffc00000, 0xfe000000, "quiet NaN as float16, negative"},
    {0x7f81, 0x7ff02000, 0x7f810000, "signalling NaN as bfloat16: widening keeps it signalling"},
    {0xff81, 0xfff02000, 0xff810000, "signalling NaN as bfloat16, negative"},
    {0x7fc0, 0x7ff80000, 0x7fc00000, "quiet NaN as bfloat16"},
    {0xffff, 0xffffe000, 0xffff0000, "NaN, every payload bit, negative"},
};

// float bits of float16 `h`, computed from its value, not by the bit
// manipulation under test; NaNs by the rule.
inline uint32_t referenceFloatBitsOfHalf(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 0x1f && m != 0) return sign | 0x7fc00000u | static_cast<uint32_t>(m) << 13;
  const double magnitude = e == 0x1f ? HUGE_VAL : e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  const float f = static_cast<float>(sign ? -magnitude : magnitude);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

inline bool isHalfNan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
inline bool isBFloat16Nan(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

// One layer's conversions, on arrays, so that a device can convert a whole
// batch in one launch. Each returns one result per input, in order.
struct Float16Conversions {
  std::function<std::vector<uint16_t>(const std::vector<uint32_t>& float_bits)> half_from_float;
  std::function<std::vector<uint32_t>(const std::vector<uint16_t>& half_bits)> float_from_half;
  std::function<std::vector<uint16_t>(const std::vector<uint32_t>& float_bits)> bfloat16_from_float;
  std::function<std::vector<uint32_t>(const std::vector<uint16_t>& bfloat16_bits)> float_from_bfloat16;
};

namespace detail {
inline std::string hex(uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

// Adds one failure listing the first few of `got` != `want` (by `what(i)`),
// and how many there are.
template <class T, class What>
void expectAllEqual(const char* conversion, const std::vector<T>& got, const std::vector<T>& want, What what) {
  ASSERT_EQ(got.size(), want.size()) << conversion << ": one result per input";
  size_t wrong = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (++wrong <= 8) first += "\n  " + what(i) + ": got " + hex(got[i]) + ", want " + hex(want[i]);
  }
  if (wrong != 0) ADD_FAILURE() << conversion << ": " << wrong << " of " << got.size() << " wrong" << first;
}
}  // namespace detail

// Checks `c` against the rule: the listed cases bit for bit; every float16
// and bfloat16 bit pattern to float (float16 against its value) and back; a
// sweep over float bit patterns (every `float_stride`th, NaN payloads and
// subnormals included) against backplane/float16_conversions.h.
inline void expectFloat16ConversionsFollowTheRule(const Float16Conversions& c, uint32_t float_stride = 65521) {
  {
    std::vector<uint32_t> in;
    std::vector<uint16_t> want_half, want_bfloat16;
    for (const FromFloatCase& k : kFromFloatCases) {
      in.push_back(k.float_bits);
      want_half.push_back(k.half_bits);
      want_bfloat16.push_back(k.bfloat16_bits);
    }
    const auto what = [&](size_t i) { return detail::hex(in[i]) + " (" + kFromFloatCases[i].what + ")"; };
    detail::expectAllEqual("float -> float16 (cases)", c.half_from_float(in), want_half, what);
    detail::expectAllEqual("float -> bfloat16 (cases)", c.bfloat16_from_float(in), want_bfloat16, what);
  }
  {
    std::vector<uint16_t> in;
    std::vector<uint32_t> want_half, want_bfloat16;
    for (const ToFloatCase& k : kToFloatCases) {
      in.push_back(k.bits);
      want_half.push_back(k.float_bits_from_half);
      want_bfloat16.push_back(k.float_bits_from_bfloat16);
    }
    const auto what = [&](size_t i) { return detail::hex(in[i]) + " (" + kToFloatCases[i].what + ")"; };
    detail::expectAllEqual("float16 -> float (cases)", c.float_from_half(in), want_half, what);
    detail::expectAllEqual("bfloat16 -> float (cases)", c.float_from_bfloat16(in), want_bfloat16, what);
  }
  {
    // Every pattern to float and back: the same pattern, or for a NaN the
    // same pattern with the quiet bit set.
    std::vector<uint16_t> all(65536);
    std::vector<uint32_t> want_half(all.size()), want_bfloat16(all.size());
    std::vector<uint16_t> want_half_back(all.size()), want_bfloat16_back(all.size());
    for (uint32_t b = 0; b < all.size(); ++b) {
      const uint16_t h = static_cast<uint16_t>(b);
      all[b] = h;
      want_half[b] = referenceFloatBitsOfHalf(h);
      want_bfloat16[b] = b << 16;
      want_half_back[b] = isHalfNan(h) ? static_cast<uint16_t>(h | 0x0200) : h;
      want_bfloat16_back[b] = isBFloat16Nan(h) ? static_cast<uint16_t>(h | 0x0040) : h;
    }
    const auto what = [](size_t i) { return detail::hex(static_cast<uint32_t>(i)); };
    const std::vector<uint32_t> from_half = c.float_from_half(all);
    const std::vector<uint32_t> from_bfloat16 = c.float_from_bfloat16(all);
    detail::expectAllEqual("float16 -> float (all 65536)", from_half, want_half, what);
    detail::expectAllEqual("bfloat16 -> float (all 65536)", from_bfloat16, want_bfloat16, what);
    detail::expectAllEqual("float16 -> float -> float16 (all 65536)", c.half_from_float(from_half), want_half_back,
                           what);
    detail::expectAllEqual("bfloat16 -> float -> bfloat16 (all 65536)", c.bfloat16_from_float(from_bfloat16),
                           want_bfloat16_back, what);
  }
  {
    std::vector<uint32_t> in;
    for (uint64_t f = 0; f <= 0xffffffffu; f += float_stride) in.push_back(static_cast<uint32_t>(f));
    std::vector<uint16_t> want_half, want_bfloat16;
    for (uint32_t f : in) {
      want_half.push_back(bp::halfBitsFromFloatBits(f));
      want_bfloat16.push_back(bp::bfloat16BitsFromFloatBits(f));
    }
    const auto what = [&](size_t i) { return detail::hex(in[i]); };
    detail::expectAllEqual("float -> float16 (sweep)", c.half_from_float(in), want_half, what);
    detail::expectAllEqual("float -> bfloat16 (sweep)", c.bfloat16_from_float(in), want_bfloat16, what);
  }
}

// Conversions of a type pair with Half(float), BFloat16(float), float(h)
// and H::fromBits / B::fromBits, one value at a time (core's and the SDK's).
template <class H, class B>
Float16Conversions scalarConversionsOf() {
  const auto toFloat = [](uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  };
  const auto toBits = [](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits;
  };
  Float16Conversions c;
  c.half_from_float = [=](const std::vector<uint32_t>& in) {
    std::vector<uint16_t> out;
    for (uint32_t f : in) out.push_back(H(toFloat(f)).bits);
    return out;
  };
  c.bfloat16_from_float = [=](const std::vector<uint32_t>& in) {
    std::vector<uint16_t> out;
    for (uint32_t f : in) out.push_back(B(toFloat(f)).bits);
    return out;
  };
  c.float_from_half = [=](const std::vector<uint16_t>& in) {
    std::vector<uint32_t> out;
    for (uint16_t h : in) out.push_back(toBits(static_cast<float>(H::fromBits(h))));
    return out;
  };
  c.float_from_bfloat16 = [=](const std::vector<uint16_t>& in) {
    std::vector<uint32_t> out;
    for (uint16_t b : in) out.push_back(toBits(static_cast<float>(B::fromBits(b))));
    return out;
  };
  return c;
}

}  // namespace float16_test
