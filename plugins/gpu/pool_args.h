#pragma once
// The window geometry of max_pool2d and avg_pool2d, forward (conv_pool.cu)
// and backward (backward.cu), as their kernels take it by value.
#include <cstdint>

#include "backplane/plugin.hpp"
#include "bp_common/windows.h"
#include "dtypes.cuh"

namespace bp_gpu {

struct PoolArgs {
  int64_t channels, h, w, oh, ow;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t stride_n, stride_c, stride_h, stride_w;  // self's; stride_n is 0 unbatched
  bool count_include_pad;                          // avg_pool2d
  int64_t divisor;                                 // avg_pool2d's divisor_override, or 0
};

// The geometry of a pooling of `self` (3-D or 4-D, read through its
// strides) into an oh x ow output; an empty stride is the kernel size, an
// empty dilation 1 (avg_pool2d has none).
inline PoolArgs poolArgs(const bp::Tensor& self, int64_t oh, int64_t ow, bp::IntList kernel, bp::IntList stride,
                         bp::IntList padding, bp::IntList dilation) {
  const auto k = bp_common::windowPair(kernel, {1, 1});
  const auto s = bp_common::windowPair(stride, k);
  const auto p = bp_common::windowPair(padding);
  const auto d = bp_common::windowPair(dilation, {1, 1});
  const bool batched = self.dim() == 4;
  return PoolArgs{self.size(-3),
                  self.size(-2),
                  self.size(-1),
                  oh,
                  ow,
                  k[0],
                  k[1],
                  s[0],
                  s[1],
                  p[0],
                  p[1],
                  d[0],
                  d[1],
                  batched ? self.stride(0) : 0,
                  self.stride(-3),
                  self.stride(-2),
                  self.stride(-1),
                  false,
                  0};
}

// The pick of max_pool2d's window (oy, ox) over one plane `in` (read
// through a's strides), as the CPU plugin's loop finds it: the first value
// greater than every earlier one, and the first NaN as soon as one is seen
// (PyTorch propagates NaN); -inf for a window of -inf. *at_y and *at_x: its
// position (the forward's result, the backward's gradient target).
template <class T>
BP_GPU_HD inline opmath_t<T> windowMax(const PoolArgs& a, const T* in, int64_t oy, int64_t ox, int64_t* at_y,
                                       int64_t* at_x) {
  using M = opmath_t<T>;
  M best = -M(INFINITY);
  *at_y = *at_x = -1;
  for (int64_t ky = 0; ky < a.kh; ++ky) {
    const int64_t y = oy * a.sh - a.ph + ky * a.dh;
    if (y < 0 || y >= a.h) continue;
    for (int64_t kx = 0; kx < a.kw; ++kx) {
      const int64_t x = ox * a.sw - a.pw + kx * a.dw;
      if (x < 0 || x >= a.w) continue;
      const M v = load(in[y * a.stride_h + x * a.stride_w]);
      if (*at_y < 0 || v > best || v != v) {
        best = v;
        *at_y = y;
        *at_x = x;
      }
      if (best != best) return best;
    }
  }
  return best;
}

}  // namespace bp_gpu
