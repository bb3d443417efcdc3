// The derivative formulas of conv2d, max_pool2d and avg_pool2d (Note
// [Window op gradients]), for dispatcher/ops/src/derivatives.cc's table.

#include "derivatives_nn.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/ops/ops.h"
#include "structured.h"

namespace backplane::ops {

// Note [Window op gradients]
// The gradients of the window ops are written with standard ops, so every
// device that runs the forward runs the backward the same way, with no
// backward kernel of its own:
//   * conv2d: the input's gradient is the "full" correlation of the output
//     gradient, dilated by the stride, with the kernel flipped and its
//     channel axes swapped (per group), cropped to the input; the weight's
//     is a convolution of the input (channels as batch) with the output
//     gradient as the kernel, stride and dilation exchanged; the bias's is
//     the output gradient summed over batch and space. Each is one conv2d,
//     so a device's (or oneDNN's) forward kernel does the work.
//   * max_pool2d and avg_pool2d: for each of the kH * kW window offsets, the
//     input elements at that offset of every window (a strided view of the
//     padded input) get their share of the output gradient: max_pool2d's to
//     the first element equal to the window's maximum, avg_pool2d's divided
//     by the window's divisor (PyTorch's, with count_include_pad, ceil_mode
//     and divisor_override); each share is dilated by the stride, placed at
//     its offset and the sum cropped to the unpadded input.
// A native backward kernel (a vendor's fused one: Note [Declared
// derivatives]) can replace them on a device.
namespace {

using Pair = std::array<int64_t, 2>;

Pair pairOf(const std::vector<int64_t>& v, Pair otherwise) {
  if (v.empty()) return otherwise;
  return v.size() == 1 ? Pair{v[0], v[0]} : Pair{v[0], v[1]};
}

using PadSig = Tensor(const Tensor&, IntArrayRef, const Scalar&);
Tensor padConstant(const Tensor& t, std::vector<int64_t> pad, double value = 0) {
  return BP_STANDARD_OP("constant_pad_nd", PadSig).call(t, pad, Scalar(value));
}

// `g` with `s - 1` zeros between neighbours along dim (size n -> (n - 1) * s + 1).
Tensor dilate(const Tensor& g, int64_t dim, int64_t s) {
  if (s == 1 || g.size(dim) == 0) return g;
  std::vector<int64_t> zeros_shape(g.sizes().begin(), g.sizes().end());
  zeros_shape.insert(zeros_shape.begin() + dim + 1, s - 1);
  Tensor spread = cat({g.unsqueeze(dim + 1), zeros(zeros_shape, {g.dtype(), g.device()})}, dim + 1);
  std::vector<int64_t> merged(g.sizes().begin(), g.sizes().end());
  merged[static_cast<size_t>(dim)] *= s;
  return spread.reshape(merged).narrow(dim, 0, (g.size(dim) - 1) * s + 1);
}

// `g` [N, C, a, b] widened to the padded input's extent [hp, wp]: zeros
// before it (`at`) and after it; negative amounts crop.
Tensor placeAt(const Tensor& g, Pair at, int64_t hp, int64_t wp) {
  return padConstant(g, {at[1], wp - at[1] - g.size(3), at[0], hp - at[0] - g.size(2)});
}

// The strided view of padded input xp [N, C, Hp, Wp] holding, for the
// first `rows` x `cols` output positions (oh, ow), the window element at
// offset (kh, kw): xp[:, :, oh * s + kh * d, ow * s + kw * d].
Tensor windowElements(const Tensor& xp, Pair offset, Pair stride, Pair count) {
  return xp.slice(2, offset[0], offset[0] + (count[0] - 1) * stride[0] + 1, stride[0])
      .slice(3, offset[1], offset[1] + (count[1] - 1) * stride[1] + 1, stride[1]);
}

// The pooling windows of a call: kernel, stride (default: the kernel),
// padding and dilation.
struct Windows {
  Pair k, s, p, d;
};

// Sums, over every window offset, share(offset, count) [N, C, count]
// placed back where its elements came from, and crops the padding: the
// input's gradient [N, C, H, W]. `count` is how many of the output
// positions (rows, columns) have their element at `offset` inside the
// padded input: all of them but those of a ceil_mode window hanging over
// the end.
template <class Share>
Tensor scatterWindows(const Windows& w, const Tensor& x, const Tensor& grad, Share&& share) {
  const int64_t n = x.size(0), ch = x.size(1), h = x.size(2), wd = x.size(3);
  const TensorOptions options{grad.dtype(), grad.device()};
  const Pair padded{h + 2 * w.p[0], wd + 2 * w.p[1]}, out{grad.size(2), grad.size(3)};
  Tensor total;
  for (int64_t kh = 0; kh < w.k[0]; ++kh) {
    for (int64_t kw = 0; kw < w.k[1]; ++kw) {
      const Pair at{kh * w.d[0], kw * w.d[1]};
      Pair count;
      for (int i = 0; i < 2; ++i)
        count[i] = at[i] >= padded[i] ? 0 : std::min(out[i], (padded[i] - 1 - at[i]) / w.s[i] + 1);
      if (count[0] == 0 || count[1] == 0) continue;
      Tensor part = share(at, count);
      if (part.numel() == 0) continue;
      part = placeAt(dilate(dilate(part, 2, w.s[0]), 3, w.s[1]), at, padded[0], padded[1]);
      total = total.defined() ? total + part : part;
    }
  }
  if (!total.defined()) return zeros({n, ch, h, wd}, options);  // no window (an empty batch or channel)
  return total.narrow(2, w.p[0], h).narrow(3, w.p[1], wd);
}

// A 3-D (unbatched) tensor as a batch of one; `batched` says which it was.
Tensor batched(const Tensor& t) { return t.dim() == 3 ? t.unsqueeze(0) : t; }
Tensor unbatched(const Tensor& t, bool was_batched) { return was_batched ? t : t.squeeze(0); }

}  // namespace

void conv2dBackward(DerivativeContext& c) {
  const Tensor& input = c.tensor("input");
  const Tensor& weight = c.tensor("weight");
  const bool was_batched = input.dim() == 4;
  const Tensor x = batched(input), go = batched(c.grad());
  const Pair s = pairOf(c.ints("stride"), {1, 1}), p = pairOf(c.ints("padding"), {0, 0});
  const Pair d = pairOf(c.ints("dilation"), {1, 1});
  const int64_t g = c.integer("groups");
  const int64_t n = x.size(0), ch = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t oc = weight.size(0), kh = weight.size(2), kw = weight.size(3);
  if (c.needs("bias")) c.set("bias", go.sum({0, 2, 3}));
  if (c.needs("input")) {
    // The flipped kernel with in and out channels swapped per group:
    // [OC, C/g, kH, kW] -> [C, OC/g, kH, kW].
    const Tensor w_t =
        weight.reshape({g, oc / g, ch / g, kh, kw}).transpose(1, 2).reshape({ch, oc / g, kh, kw}).flip({2, 3});
    const Tensor spread = dilate(dilate(go, 2, s[0]), 3, s[1]);
    const int64_t eh = d[0] * (kh - 1), ew = d[1] * (kw - 1);
    // The full correlation covers padded rows [0, (OH - 1) * s + eh + 1);
    // padded rows past it got nothing from any window.
    const Tensor full =
        conv2d(padConstant(spread, {ew, ew, eh, eh}), w_t, std::nullopt, {1, 1}, {0, 0}, {d[0], d[1]}, g);
    const int64_t hp = h + 2 * p[0], wp = wd + 2 * p[1];
    const Tensor grad_padded = padConstant(full, {0, wp - full.size(3), 0, hp - full.size(2)});
    c.set("input", unbatched(grad_padded.narrow(2, p[0], h).narrow(3, p[1], wd), was_batched));
  }
  if (c.needs("weight")) {
    // Channels as the batch, the batch as channels (grouped), the output
    // gradient as the kernel; stride and dilation exchange roles.
    const int64_t oh = go.size(2), ow = go.size(3);
    const Tensor xs = x.reshape({n, g, ch / g, h, wd}).permute({2, 1, 0, 3, 4}).reshape({ch / g, g * n, h, wd});
    const Tensor gs = go.reshape({n, g, oc / g, oh, ow}).permute({1, 2, 0, 3, 4}).reshape({oc, n, oh, ow});
    const Tensor gw = conv2d(xs, gs, std::nullopt, {d[0], d[1]}, {p[0], p[1]}, {s[0], s[1]}, g);  // [C/g, OC, ., .]
    c.set("weight", gw.transpose(0, 1).narrow(2, 0, kh).narrow(3, 0, kw));
  }
}

void maxPool2dBackward(DerivativeContext& c) {
  const Tensor& self = c.tensor("self");
  const bool was_batched = self.dim() == 4;
  const Tensor x = batched(self), y = batched(c.result()), go = batched(c.grad());
  const Pair k = pairOf(c.ints("kernel_size"), {1, 1});
  const Windows w{k, pairOf(c.ints("stride"), k), pairOf(c.ints("padding"), {0, 0}),
                  pairOf(c.ints("dilation"), {1, 1})};
  const Pair out{y.size(2), y.size(3)};
  // Padding never wins: -inf, as PyTorch's kernels skip it.
  const Tensor xp = padConstant(x, {w.p[1], w.p[1], w.p[0], w.p[0]}, -std::numeric_limits<double>::infinity());
  // The first element of each window (in kh, kw order) equal to its maximum
  // takes the gradient, as PyTorch's argmax does.
  Tensor taken = zeros(y.sizes(), {ScalarType::Bool, y.device()});
  auto first = [](const Tensor& t, Pair count) { return t.narrow(2, 0, count[0]).narrow(3, 0, count[1]); };
  const Tensor g = scatterWindows(w, x, go, [&](Pair at, Pair count) {
    const Tensor wins =
        logical_and(windowElements(xp, at, w.s, count).eq(first(y, count)), first(taken, count).logical_not());
    taken = logical_or(
        taken,
        padConstant(wins.to(ScalarType::Int32), {0, out[1] - count[1], 0, out[0] - count[0]}).to(ScalarType::Bool));
    return first(go, count) * wins.to(go.dtype());
  });
  c.set("self", unbatched(g, was_batched));
}

void avgPool2dBackward(DerivativeContext& c) {
  const Tensor& self = c.tensor("self");
  const bool was_batched = self.dim() == 4;
  const Tensor x = batched(self), go = batched(c.grad());
  const Pair k = pairOf(c.ints("kernel_size"), {1, 1});
  const Windows w{k, pairOf(c.ints("stride"), k), pairOf(c.ints("padding"), {0, 0}), {1, 1}};
  const int64_t h = x.size(2), wd = x.size(3), oh = go.size(2), ow = go.size(3);
  // Each window's divisor, PyTorch's: divisor_override; else its extent
  // clipped to the padded input (count_include_pad) or to the input.
  const std::optional<int64_t> override_divisor = c.optionalInteger("divisor_override");
  const bool include_pad = c.boolean("count_include_pad");
  auto extents = [&](int64_t outs, int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
    std::vector<double> v(static_cast<size_t>(outs));
    for (int64_t o = 0; o < outs; ++o) {
      const int64_t start = o * stride - pad, end = std::min(start + kernel, in + pad);
      v[static_cast<size_t>(o)] =
          static_cast<double>(include_pad ? end - start : std::min(end, in) - std::max<int64_t>(start, 0));
    }
    return v;
  };
  Tensor scaled;
  if (override_divisor) {
    scaled = go / static_cast<double>(*override_divisor);
  } else {
    const std::vector<double> rows = extents(oh, h, w.k[0], w.s[0], w.p[0]);
    const std::vector<double> cols = extents(ow, wd, w.k[1], w.s[1], w.p[1]);
    const Tensor r = Tensor(tensorFromVector(rows, {oh, 1})).to(go.device(), go.dtype());
    const Tensor q = Tensor(tensorFromVector(cols, {1, ow})).to(go.device(), go.dtype());
    scaled = go / (r * q);
  }
  const Tensor g =
      scatterWindows(w, x, go, [&](Pair, Pair count) { return scaled.narrow(2, 0, count[0]).narrow(3, 0, count[1]); });
  c.set("self", unbatched(g, was_batched));
}

}  // namespace backplane::ops
