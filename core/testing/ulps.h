#pragma once
// How far apart two float32 values are, in representable floats: for tests
// that state an accuracy in ulps.

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <limits>

namespace backplane::testing {

// 0 when a == b (so +0 and -0 are 0 apart); both must be non-NaN.
inline int64_t ulpsApart(float a, float b) {
  if (a == b) return 0;
  // The bits as a signed integer ordered like the floats they encode.
  auto ordered = [](float f) {
    const auto i = static_cast<int64_t>(std::bit_cast<int32_t>(f));
    return i < 0 ? std::numeric_limits<int32_t>::min() - i : i;
  };
  return std::abs(ordered(a) - ordered(b));
}

}  // namespace backplane::testing
