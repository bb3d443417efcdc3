#pragma once
// The geometry of the window ops (conv2d, max_pool2d, avg_pool2d) that every
// plugin computes alike: the output sizes, and the `int[2]` arguments as
// PyTorch reads them. The dispatcher's meta kernels have checked every
// value and that the arithmetic fits int64 (Note [Window geometry
// overflow] in dispatcher/ops/src/nn.cc), so these are plain host code.
#include <array>
#include <cstdint>

#include "backplane/plugin.hpp"

namespace bp_common {

// An `int[2]` argument as {h, w}: one value stands for both; an empty list
// (max_pool2d's and avg_pool2d's default stride) is `otherwise`.
inline std::array<int64_t, 2> windowPair(bp::IntList v, std::array<int64_t, 2> otherwise = {0, 0}) {
  if (v.empty()) return otherwise;
  return v.size() == 1 ? std::array<int64_t, 2>{v[0], v[0]} : std::array<int64_t, 2>{v[0], v[1]};
}

// conv2d's output size along one dim: (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1.
inline int64_t convOutputSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation) {
  return (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
}

// PyTorch's pooling_output_shape. Ceil mode rounds by the remainder, as the
// dispatcher's rule does (adding stride - 1 first overflows for a stride
// near 2^63), and the last window must start inside the input or its left
// padding; a start past int64 is past it.
inline int64_t poolOutputSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (k - 1) - 1;
  int64_t out = span / stride + 1;  // span >= 0: the rule guarantees an output of at least 1
  if (ceil_mode && span % stride != 0) ++out;
  int64_t last_start = 0;
  if (ceil_mode && (__builtin_mul_overflow(out - 1, stride, &last_start) || last_start >= in + pad)) --out;
  return out;
}

}  // namespace bp_common
