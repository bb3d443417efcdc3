#pragma once
// The geometry of the window ops (conv2d, max_pool2d, avg_pool2d) that every
// plugin computes alike: the output sizes, the `int[2]` arguments as
// PyTorch reads them, and a convolution's whole geometry. The dispatcher's meta kernels have checked every
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

// A conv2d call's geometry, forward and backward (the backward's rule has
// checked that grad_output has the forward's output shape). Plain arrays,
// so that GPU kernels take it by value.
struct ConvGeometry {
  int64_t n, c, h, w;  // input: images (1 when unbatched), channels, size
  int64_t oc, kh, kw;  // weight
  int64_t oh, ow;      // output size
  int64_t stride[2], padding[2], dilation[2];
  int64_t groups;
};
inline ConvGeometry convGeometry(const bp::Tensor& input, const bp::Tensor& weight, bp::IntList stride,
                                 bp::IntList padding, bp::IntList dilation, int64_t groups) {
  ConvGeometry g{};
  g.n = input.dim() == 4 ? input.size(0) : 1;
  g.c = input.size(-3);
  g.h = input.size(-2);
  g.w = input.size(-1);
  g.oc = weight.size(0);
  g.kh = weight.size(2);
  g.kw = weight.size(3);
  const std::array<int64_t, 2> s = windowPair(stride), p = windowPair(padding), d = windowPair(dilation);
  for (int i = 0; i < 2; ++i) g.stride[i] = s[i], g.padding[i] = p[i], g.dilation[i] = d[i];
  g.groups = groups;
  g.oh = convOutputSize(g.h, g.kh, g.padding[0], g.stride[0], g.dilation[0]);
  g.ow = convOutputSize(g.w, g.kw, g.padding[1], g.stride[1], g.dilation[1]);
  return g;
}

}  // namespace bp_common
