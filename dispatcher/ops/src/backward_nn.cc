// Family "backward", the nn ops': conv2d_backward, max_pool2d_backward and
// avg_pool2d_backward (Note [Window op gradients]), batch_norm_backward
// (Note [batch_norm's backward]).

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/ops/ops.h"
#include "families.h"
#include "meta.h"
#include "structured.h"

namespace backplane::ops {

// Note [Window op gradients]
// conv2d's, max_pool2d's and avg_pool2d's derivative formulas call one
// backward op each, a standard op a device implements natively (the CPU
// plugin does: oneDNN's backward-data and backward-weights primitives for
// float32 convolutions, one pass over the windows for pooling) or leaves to
// the composite below, written with standard ops so that every device runs
// it without a fallback:
//   * conv2d_backward: the input's gradient is the "full" correlation of the
//     output gradient, dilated by the stride, with the kernel flipped and
//     its channel axes swapped (per group), cropped to the input; the
//     weight's is a convolution of the input (channels as batch) with the
//     output gradient as the kernel, stride and dilation exchanged; the
//     bias's is the output gradient summed over batch and space. Each is
//     one conv2d. output_mask says which of the three to compute, as
//     PyTorch's convolution_backward's does; the others come back
//     undefined (Note [Masked returns]).
//   * max_pool2d_backward and avg_pool2d_backward: for each of the kH * kW
//     window offsets, the input elements at that offset of every window (a
//     strided view of the padded input) get their share of the output
//     gradient: max_pool2d's to the first element (in kh, kw order) equal to
//     the window's maximum, as PyTorch's argmax picks it, avg_pool2d's
//     divided by the window's divisor (PyTorch's, with count_include_pad,
//     ceil_mode and divisor_override); each share is dilated by the stride,
//     placed at its offset and the sum cropped to the unpadded input.
//     max_pool2d_backward takes the input, not PyTorch's indices: Backplane's
//     max_pool2d returns no indices, and a native kernel finds each window's
//     maximum again in the pass that scatters the gradient.
namespace {

using Pair = std::array<int64_t, 2>;

Pair pairOf(IntArrayRef v, Pair otherwise) {
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
// first `count` output positions (oh, ow), the window element at offset
// (kh, kw): xp[:, :, oh * s + kh * d, ow * s + kw * d].
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

// A 3-D (unbatched) tensor as a batch of one, and back.
Tensor batched(const Tensor& t) { return t.dim() == 3 ? t.unsqueeze(0) : t; }
Tensor unbatched(const Tensor& t, bool was_batched) { return was_batched ? t : t.squeeze(0); }

// grad_output must be defined, on the input's device, of its dtype and of
// the forward's output shape: the input's with its channels and spatial
// sizes replaced by `channels` and `out`.
// (`out` nullopt: the input's shape.)
void checkGradOutput(const std::string& op, const Tensor& grad_output, const Tensor& input, int64_t channels,
                     std::optional<Pair> out) {
  BP_CHECK(grad_output.defined(), op, ": argument 'grad_output' is undefined; pass a tensor");
  commonDevice(op, {{"grad_output", &grad_output}, {"input", &input}});
  BP_CHECK(grad_output.dtype() == input.dtype(), op, ": 'grad_output' has dtype ", scalarTypeName(grad_output.dtype()),
           " but the input has ", scalarTypeName(input.dtype()), "; they must match");
  std::vector<int64_t> want(input.sizes().begin(), input.sizes().end());
  if (out) {
    want[want.size() - 3] = channels;
    want[want.size() - 2] = (*out)[0];
    want[want.size() - 1] = (*out)[1];
  }
  BP_CHECK(std::equal(want.begin(), want.end(), grad_output.sizes().begin(), grad_output.sizes().end()), op,
           ": 'grad_output' has shape ", shapeString(grad_output.sizes()), " but the forward's output has shape ",
           shapeString(want), "; pass the gradient of the forward's output");
}

// --- conv2d_backward

void conv2dBackwardMeta(const Tensor& grad_output, const Tensor& input, const Tensor& weight, IntArrayRef stride,
                        IntArrayRef padding, IntArrayRef dilation, int64_t groups, std::array<bool, 3> output_mask) {
  (void)output_mask;  // any mask is valid
  const std::string& op = qualified<"conv2d_backward">();
  const Pair out =
      conv2dOutputSize(op, standardOp<"conv2d_backward">(), input, weight, Tensor(), stride, padding, dilation, groups);
  checkGradOutput(op, grad_output, input, weight.size(0), out);
}

std::tuple<Tensor, Tensor, Tensor> conv2dBackwardComposite(const Tensor& grad_output, const Tensor& input,
                                                           const Tensor& weight, IntArrayRef stride,
                                                           IntArrayRef padding, IntArrayRef dilation, int64_t groups,
                                                           std::array<bool, 3> output_mask) {
  const bool was_batched = input.dim() == 4;
  const Tensor x = batched(input), go = batched(grad_output);
  const Pair s = pairOf(stride, {1, 1}), p = pairOf(padding, {0, 0}), d = pairOf(dilation, {1, 1});
  const int64_t g = groups;
  const int64_t n = x.size(0), ch = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t oc = weight.size(0), kh = weight.size(2), kw = weight.size(3);
  Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[2]) grad_bias = go.sum({0, 2, 3});
  if (output_mask[0]) {
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
    grad_input = unbatched(grad_padded.narrow(2, p[0], h).narrow(3, p[1], wd), was_batched);
  }
  if (output_mask[1]) {
    // Channels as the batch, the batch as channels (grouped), the output
    // gradient as the kernel; stride and dilation exchange roles.
    const int64_t oh = go.size(2), ow = go.size(3);
    const Tensor xs = x.reshape({n, g, ch / g, h, wd}).permute({2, 1, 0, 3, 4}).reshape({ch / g, g * n, h, wd});
    const Tensor gs = go.reshape({n, g, oc / g, oh, ow}).permute({1, 2, 0, 3, 4}).reshape({oc, n, oh, ow});
    const Tensor gw = conv2d(xs, gs, std::nullopt, {d[0], d[1]}, {p[0], p[1]}, {s[0], s[1]}, g);  // [C/g, OC, ., .]
    grad_weight = gw.transpose(0, 1).narrow(2, 0, kh).narrow(3, 0, kw).contiguous();
  }
  return {std::move(grad_input), std::move(grad_weight), std::move(grad_bias)};
}

// --- max_pool2d_backward

void maxPool2dBackwardMeta(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride,
                           IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  const std::string& op = qualified<"max_pool2d_backward">();
  const Pair out = pool2dOutputSize(op, standardOp<"max_pool2d_backward">(), self, kernel_size, stride, padding,
                                    dilation, ceil_mode);
  checkGradOutput(op, grad_output, self, self.size(-3), out);
}

Tensor maxPool2dBackwardComposite(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel_size,
                                  IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  const bool was_batched = self.dim() == 4;
  const Pair k = pairOf(kernel_size, {1, 1});
  const Windows w{k, pairOf(stride, k), pairOf(padding, {0, 0}), pairOf(dilation, {1, 1})};
  const Tensor x = batched(self), go = batched(grad_output);
  using PoolSig = Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool);
  const Tensor y = BP_STANDARD_OP("max_pool2d", PoolSig)
                       .call(x, {k[0], k[1]}, {w.s[0], w.s[1]}, {w.p[0], w.p[1]}, {w.d[0], w.d[1]}, ceil_mode);
  const Pair out{y.size(2), y.size(3)};
  // The padded input, and where it is the input: padding never takes the
  // gradient, not even of an all -inf window.
  const std::vector<int64_t> pad{w.p[1], w.p[1], w.p[0], w.p[0]};
  const Tensor xp = padConstant(x, pad, -std::numeric_limits<double>::infinity());
  const Tensor inside = padConstant(ones(x.sizes(), {ScalarType::Int32, x.device()}), pad).to(ScalarType::Bool);
  // The first element of each window (in kh, kw order) equal to its maximum
  // takes the gradient, as PyTorch's argmax does; a NaN is its window's
  // maximum (the forward propagates it), so the first NaN takes it.
  Tensor taken = zeros(y.sizes(), {ScalarType::Bool, y.device()});
  auto first = [](const Tensor& t, Pair count) { return t.narrow(2, 0, count[0]).narrow(3, 0, count[1]); };
  const Tensor g = scatterWindows(w, x, go, [&](Pair at, Pair count) {
    const Tensor elements = windowElements(xp, at, w.s, count);
    const Tensor is_max = logical_or(elements.eq(first(y, count)), elements.isnan());
    const Tensor wins =
        logical_and(logical_and(is_max, windowElements(inside, at, w.s, count)), first(taken, count).logical_not());
    taken = logical_or(
        taken,
        padConstant(wins.to(ScalarType::Int32), {0, out[1] - count[1], 0, out[0] - count[0]}).to(ScalarType::Bool));
    return first(go, count) * wins.to(go.dtype());
  });
  return unbatched(g, was_batched);
}

// --- avg_pool2d_backward

void avgPool2dBackwardMeta(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride,
                           IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override) {
  (void)count_include_pad;  // any value is valid
  const std::string& op = qualified<"avg_pool2d_backward">();
  const int64_t one = 1;
  const Pair out = pool2dOutputSize(op, standardOp<"avg_pool2d_backward">(), self, kernel_size, stride, padding,
                                    IntArrayRef(&one, 1), ceil_mode);
  BP_CHECK(!divisor_override || *divisor_override != 0, op, ": divisor_override must not be zero");
  checkGradOutput(op, grad_output, self, self.size(-3), out);
}

Tensor avgPool2dBackwardComposite(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel_size,
                                  IntArrayRef stride, IntArrayRef padding, bool /*ceil_mode*/, bool count_include_pad,
                                  std::optional<int64_t> divisor_override) {
  const bool was_batched = self.dim() == 4;
  const Tensor x = batched(self), go = batched(grad_output);
  const Pair k = pairOf(kernel_size, {1, 1});
  const Windows w{k, pairOf(stride, k), pairOf(padding, {0, 0}), {1, 1}};
  const int64_t h = x.size(2), wd = x.size(3), oh = go.size(2), ow = go.size(3);
  // Each window's divisor, PyTorch's: divisor_override; else its extent
  // clipped to the padded input (count_include_pad) or to the input.
  auto extents = [&](int64_t outs, int64_t in, int64_t kernel, int64_t step, int64_t pad) {
    std::vector<double> v(static_cast<size_t>(outs));
    for (int64_t o = 0; o < outs; ++o) {
      const int64_t start = o * step - pad, end = std::min(start + kernel, in + pad);
      v[static_cast<size_t>(o)] =
          static_cast<double>(count_include_pad ? end - start : std::min(end, in) - std::max<int64_t>(start, 0));
    }
    return v;
  };
  Tensor scaled;
  if (divisor_override) {
    scaled = go / static_cast<double>(*divisor_override);
  } else {
    const std::vector<double> rows = extents(oh, h, w.k[0], w.s[0], w.p[0]);
    const std::vector<double> cols = extents(ow, wd, w.k[1], w.s[1], w.p[1]);
    const Tensor r = Tensor(tensorFromVector(rows, {oh, 1})).to(go.device(), go.dtype());
    const Tensor q = Tensor(tensorFromVector(cols, {1, ow})).to(go.device(), go.dtype());
    scaled = go / (r * q);
  }
  const Tensor g =
      scatterWindows(w, x, go, [&](Pair, Pair count) { return scaled.narrow(2, 0, count[0]).narrow(3, 0, count[1]); });
  return unbatched(g, was_batched);
}

// --- batch_norm_backward

// Note [batch_norm's backward]
// batch_norm_backward(grad_output, input, weight, running_mean, running_var,
// training, eps, output_mask) gives batch_norm's three gradients, as
// layer_norm_backward does layer_norm's, per channel (dim 1) over the batch
// and every spatial position: with batch statistics (training, or no
// running statistics) the input's is rstd * (g - mean(g) - xhat *
// mean(g * xhat)) for g = grad * weight, the statistics recomputed from the
// input (batch_norm returns only its result); in evaluation it is g *
// rsqrt(running_var + eps). The weight's is sum(grad * xhat), the bias's
// sum(grad), in the weight's dtype (the input's without one). PyTorch's
// native_batch_norm_backward takes the statistics its forward saved
// instead. output_mask as conv2d_backward's (Note [Masked returns]).

void batchNormBackwardMeta(const Tensor& grad_output, const Tensor& input, const std::optional<Tensor>& weight,
                           const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                           bool training, double eps, std::array<bool, 3> output_mask) {
  (void)output_mask;  // any mask is valid
  const std::string& op = qualified<"batch_norm_backward">();
  checkBatchNorm(op, standardOp<"batch_norm_backward">(), input, orUndefined(weight), Tensor(),
                 orUndefined(running_mean), orUndefined(running_var), training, eps);
  checkGradOutput(op, grad_output, input, input.size(1), std::nullopt);
}

std::tuple<Tensor, Tensor, Tensor> batchNormBackwardComposite(const Tensor& grad_output, const Tensor& input,
                                                              const std::optional<Tensor>& weight,
                                                              const std::optional<Tensor>& running_mean,
                                                              const std::optional<Tensor>& running_var, bool training,
                                                              double eps, std::array<bool, 3> output_mask) {
  const ScalarType dtype = input.dtype();
  const bool narrow = dtype == ScalarType::Float16 || dtype == ScalarType::BFloat16;
  const bool has_weight = weight && weight->defined();
  const ScalarType param_dtype = has_weight ? weight->dtype() : dtype;
  const Tensor x = narrow ? input.to(ScalarType::Float32) : input;
  const Tensor grad = narrow ? grad_output.to(ScalarType::Float32) : grad_output;
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  std::vector<int64_t> channel_shape(static_cast<size_t>(x.dim()), 1);
  channel_shape[1] = x.size(1);
  auto perChannel = [&](const Tensor& t) { return t.to(x.dtype()).reshape(channel_shape); };
  const bool batch_stats =
      training || !running_mean || !running_mean->defined() || !running_var || !running_var->defined();
  Tensor xhat, rstd;
  if (batch_stats) {
    const Tensor centered = x - x.mean(dims, /*keepdim=*/true);
    rstd = ((centered * centered).mean(dims, /*keepdim=*/true) + eps).rsqrt();
    xhat = centered * rstd;
  } else {
    rstd = (perChannel(*running_var) + eps).rsqrt();
    xhat = (x - perChannel(*running_mean)) * rstd;
  }
  Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    const Tensor g = has_weight ? grad * perChannel(*weight) : grad;
    grad_input = batch_stats ? (g - g.mean(dims, true) - xhat * (g * xhat).mean(dims, true)) * rstd : g * rstd;
    grad_input = grad_input.to(dtype);
  }
  if (output_mask[1]) grad_weight = (grad * xhat).sum(dims).to(param_dtype);
  if (output_mask[2]) grad_bias = grad.sum(dims).to(param_dtype);
  return {std::move(grad_input), std::move(grad_weight), std::move(grad_bias)};
}

}  // namespace

void addBackwardNNOps(std::vector<StandardOp>& ops) {
  using K = KernelFunction;
  const ScalarTypeSet kFloating = ScalarTypeSet::floating();
  ops.push_back(
      StandardOp{"conv2d_backward(Tensor grad_output, Tensor input, Tensor weight, int[2] stride, "
                 "int[2] padding, int[2] dilation, int groups, bool[3] output_mask) -> "
                 "(Tensor grad_input, Tensor grad_weight, Tensor grad_bias)",
                 K::makeFromFunction(BP_FN(conv2dBackwardMeta)),
                 K::makeFromFunction(BP_FN(conv2dBackwardComposite)),
                 "backward",
                 {{"grad_output", kFloating}, {"input", kFloating}, {"weight", kFloating}}});
  ops.push_back(
      StandardOp{"max_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, "
                 "int[2] padding, int[2] dilation, bool ceil_mode) -> Tensor",
                 K::makeFromFunction(BP_FN(maxPool2dBackwardMeta)),
                 K::makeFromFunction(BP_FN(maxPool2dBackwardComposite)),
                 "backward",
                 {{"grad_output", kFloating}, {"self", kFloating}}});
  ops.push_back(
      StandardOp{"avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, "
                 "int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor",
                 K::makeFromFunction(BP_FN(avgPool2dBackwardMeta)),
                 K::makeFromFunction(BP_FN(avgPool2dBackwardComposite)),
                 "backward",
                 {{"grad_output", kFloating}, {"self", kFloating}}});
  ops.push_back(
      StandardOp{"batch_norm_backward(Tensor grad_output, Tensor input, Tensor? weight, "
                 "Tensor? running_mean, Tensor? running_var, bool training, float eps, "
                 "bool[3] output_mask) -> (Tensor grad_input, Tensor grad_weight, Tensor grad_bias)",
                 K::makeFromFunction(BP_FN(batchNormBackwardMeta)),
                 K::makeFromFunction(BP_FN(batchNormBackwardComposite)),
                 "backward",
                 {{"grad_output", kFloating},
                  {"input", kFloating},
                  {"weight", kFloating},
                  {"running_mean", kFloating},
                  {"running_var", kFloating}}});
  // Out= forms derived from the functional ones (Note [Derived out= forms]).
  ops.push_back(
      derivedOut("conv2d_backward.out(Tensor grad_output, Tensor input, Tensor weight, int[2] stride, int[2] padding, "
                 "int[2] dilation, int groups, bool[3] output_mask, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) "
                 "out2) -> (Tensor(a!), Tensor(b!), Tensor(c!))",
                 "conv2d_backward"));
  ops.push_back(
      derivedOut("max_pool2d_backward.out(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] "
                 "padding, int[2] dilation, bool ceil_mode, *, Tensor(a!) out) -> Tensor(a!)",
                 "max_pool2d_backward"));
  ops.push_back(derivedOut(
      "avg_pool2d_backward.grad_input(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] "
      "padding, bool ceil_mode, bool count_include_pad, int? divisor_override, *, Tensor(a!) grad_input) -> Tensor(a!)",
      "avg_pool2d_backward"));
}

}  // namespace backplane::ops
