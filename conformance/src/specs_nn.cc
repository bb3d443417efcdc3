// Conformance specs of the nn family: conv2d, max_pool2d, avg_pool2d,
// batch_norm, layer_norm, softmax and log_softmax (Note [Conformance specs]).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"

namespace backplane::conformance {
namespace {

using Sizes = std::vector<int64_t>;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

IValue optional(const Tensor& t) { return t.defined() ? IValue(t) : IValue(); }
// An omitted (undefined) tensor reads as no values.
std::vector<double> valuesOrEmpty(const Tensor& t) { return t.defined() ? valuesOf(t) : std::vector<double>{}; }

// A spec's sample list, built in order.
struct SampleList {
  std::vector<Sample> samples;

  void add(std::string name, std::vector<IValue> args) {
    Sample s;
    s.name = std::move(name);
    s.args = std::move(args);
    samples.push_back(std::move(s));
  }
  void raise(std::string name, std::vector<IValue> args, std::string reason) {
    add(std::move(name), std::move(args));
    samples.back().must_raise = true;
    samples.back().raise_reason = std::move(reason);
  }
};

// How a sample's input is laid out in memory; the logical sizes are the
// same for every layout.
enum class Layout {
  Contiguous,
  Transposed,    // the last two dims swapped in storage
  ChannelsLast,  // dim 1 innermost in storage (NHWC for a 4-d tensor)
  Sliced,        // every other element of a last dim twice as long
};

Tensor randomLaidOut(Rng& rng, const Sizes& sizes, ScalarType dt, Layout layout, Range range = {}) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  Sizes stored = sizes;
  switch (layout) {
    case Layout::Contiguous: return randomTensor(rng, sizes, dt, range);
    case Layout::Transposed:
      std::swap(stored[static_cast<size_t>(nd - 2)], stored[static_cast<size_t>(nd - 1)]);
      return randomTensor(rng, stored, dt, range).transpose(-2, -1);
    case Layout::ChannelsLast: {
      stored.erase(stored.begin() + 1);
      stored.push_back(sizes[1]);
      Sizes order = {0, nd - 1};
      for (int64_t d = 1; d + 1 < nd; ++d) order.push_back(d);
      return randomTensor(rng, stored, dt, range).permute(order);
    }
    case Layout::Sliced:
      stored.back() *= 2;
      return randomTensor(rng, stored, dt, range).slice(nd - 1, 0, std::nullopt, 2);
  }
  return Tensor();
}

// An `int[2]` argument as {height, width}: one value stands for both.
std::pair<int64_t, int64_t> hw(const IValue& v) {
  const Sizes& l = v.toIntList();
  return {l[0], l.size() == 1 ? l[0] : l[1]};
}

// --- conv2d

// conv2d in double over the sample's values: direct loops, as PyTorch
// defines it (cross-correlation, zero padding, dilated taps, channel groups).
Expected convReference(const Sample& s) {
  const Tensor& x = s.args[0].toTensor();
  const Tensor& w = s.args[1].toTensor();
  const std::vector<double> xv = valuesOf(x), wv = valuesOf(w), bv = valuesOrEmpty(optionalTensor(s.args[2]));
  const auto [sh, sw] = hw(s.args[3]);
  const auto [ph, pw] = hw(s.args[4]);
  const auto [dh, dw] = hw(s.args[5]);
  const int64_t groups = s.args[6].toInt();
  const bool batched = x.dim() == 4;
  const int64_t n = batched ? x.size(0) : 1, c = x.size(-3), h = x.size(-2), wd = x.size(-1);
  const int64_t oc = w.size(0), icg = w.size(1), kh = w.size(2), kw = w.size(3);
  const int64_t oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
  const int64_t ow = (wd + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  const int64_t ocg = oc / groups;
  Expected e;
  e.dtype = x.dtype();
  e.sizes = batched ? Sizes{n, oc, oh, ow} : Sizes{oc, oh, ow};
  e.values.reserve(static_cast<size_t>(n * oc * oh * ow));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t o = 0; o < oc; ++o) {
      const int64_t first_ic = (o / ocg) * icg;
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = bv.empty() ? 0 : bv[static_cast<size_t>(o)];
          for (int64_t i = 0; i < icg; ++i) {
            const double* plane = xv.data() + ((b * c + first_ic + i) * h) * wd;
            const double* kernel = wv.data() + ((o * icg + i) * kh) * kw;
            for (int64_t ky = 0; ky < kh; ++ky) {
              const int64_t iy = y * sh - ph + ky * dh;
              if (iy < 0 || iy >= h) continue;
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t ix = xo * sw - pw + kx * dw;
                if (ix >= 0 && ix < wd) acc += plane[iy * wd + ix] * kernel[ky * kw + kx];
              }
            }
          }
          e.values.push_back(roundTo(e.dtype, acc));
        }
      }
    }
  }
  return e;
}

// Each output sums K = in_channels / groups * kH * kW products, each at
// most 4 in magnitude (inputs in [-2, 2]), plus a bias of at most 2, in the
// dtype's precision. A K-term sum is off by about eps * sqrt(K) times a
// term in practice and by K * eps * (4K + 2) at worst, depending on the
// order (oneDNN blocks and vectorizes its sums). The absolute slack
// eps * (4K + 2) lies between the two and grows with K.
Tolerance convTolerance(ScalarType t, const Sample& s) {
  const Tensor& w = s.args[1].toTensor();
  const double k = static_cast<double>(w.size(1) * w.size(2) * w.size(3));
  Tolerance tol = defaultTolerance(t);
  tol.atol += machineEpsilon(t) * (4 * k + 2);
  return tol;
}

std::vector<Sample> convSamples(const std::string& op) {
  Rng rng(seedFor(op));
  SampleList out;
  struct Case {
    const char* name;
    Sizes input, weight;
    bool bias;
    Sizes stride, padding, dilation;
    int64_t groups;
    Layout layout = Layout::Contiguous;
  };
  const std::vector<Case> cases = {
      {"[2,4,7,6] * [6,4,3,3], bias", {2, 4, 7, 6}, {6, 4, 3, 3}, true, {1}, {0}, {1}, 1},
      {"bias omitted", {2, 4, 7, 6}, {6, 4, 3, 3}, false, {1}, {0}, {1}, 1},
      {"batch of 1, stride 2, padding 1", {1, 3, 9, 8}, {5, 3, 3, 3}, true, {2}, {1}, {1}, 1},
      {"stride (1,2), padding (2,0), dilation (2,1)", {2, 3, 8, 9}, {4, 3, 3, 2}, true, {1, 2}, {2, 0}, {2, 1}, 1},
      {"dilation 2, padding 2", {3, 2, 7, 7}, {3, 2, 3, 3}, false, {1}, {2}, {2}, 1},
      {"groups 2", {2, 4, 6, 6}, {6, 2, 3, 3}, true, {1}, {1}, {1}, 2},
      {"depthwise (groups 4, 2 filters each)", {2, 4, 5, 5}, {8, 1, 3, 3}, false, {1}, {1}, {1}, 4},
      {"1x1 kernel", {2, 5, 4, 3}, {3, 5, 1, 1}, true, {1}, {0}, {1}, 1},
      {"unbatched [3,6,5]", {3, 6, 5}, {4, 3, 2, 2}, true, {1}, {0}, {1}, 1},
      {"channels-last input", {2, 4, 6, 5}, {3, 4, 3, 3}, true, {1}, {1}, {1}, 1, Layout::ChannelsLast},
      {"sliced input (step 2)", {2, 3, 6, 7}, {4, 3, 3, 3}, false, {2}, {0}, {1}, 1, Layout::Sliced},
      {"empty batch [0,4,5,5]", {0, 4, 5, 5}, {3, 4, 3, 3}, true, {1}, {0}, {1}, 1},
  };
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64}) {
    for (const Case& c : cases) {
      out.add(c.name + dtypeSuffix(dt), {randomLaidOut(rng, c.input, dt, c.layout), randomTensor(rng, c.weight, dt),
                                         c.bias ? IValue(randomTensor(rng, {c.weight[0]}, dt)) : IValue(), c.stride,
                                         c.padding, c.dilation, c.groups});
    }
  }
  // float16 and bfloat16 convolve in float32 (rounded once), int64 exactly,
  // as PyTorch's CPU kernels.
  for (ScalarType dt : {ScalarType::Float16, ScalarType::BFloat16, ScalarType::Int64}) {
    for (size_t i : {0, 2, 3, 5, 8}) {
      const Case& c = cases[i];
      out.add(c.name + dtypeSuffix(dt), {randomLaidOut(rng, c.input, dt, c.layout), randomTensor(rng, c.weight, dt),
                                         c.bias ? IValue(randomTensor(rng, {c.weight[0]}, dt)) : IValue(), c.stride,
                                         c.padding, c.dilation, c.groups});
    }
  }
  const ScalarType f32 = ScalarType::Float32;
  out.add("sliced weight, expanded bias float32",
          {randomTensor(rng, {2, 3, 5, 5}, f32), randomLaidOut(rng, {4, 3, 2, 3}, f32, Layout::Sliced),
           randomTensor(rng, {1}, f32).expand({4}), Sizes{1}, Sizes{0}, Sizes{1}, 1});
  // No input channels: every output is its bias (oneDNN refuses this shape).
  out.add("no input channels [2,0,4,4] float32",
          {randomTensor(rng, {2, 0, 4, 4}, f32), randomTensor(rng, {3, 0, 2, 2}, f32), randomTensor(rng, {3}, f32),
           Sizes{1}, Sizes{0}, Sizes{1}, 1});
  // Large: 1.08M input elements; stride 2 keeps the reference to 9.7M
  // multiply-adds (270K outputs of 36 terms).
  out.add("large [1,4,520,520] * [4,4,3,3] stride 2 float32",
          {randomTensor(rng, {1, 4, 520, 520}, f32), randomTensor(rng, {4, 4, 3, 3}, f32), randomTensor(rng, {4}, f32),
           Sizes{2}, Sizes{1}, Sizes{1}, 1});

  // Tensors are made in the lambda, in a fixed order: argument evaluation order is unspecified.
  auto bad = [&](std::string name, const Sizes& input, ScalarType input_dt, const Sizes& weight, ScalarType weight_dt,
                 std::string reason, Sizes stride = {1}, int64_t groups = 1, Sizes bias = {}) {
    Tensor x = randomTensor(rng, input, input_dt);
    Tensor w = randomTensor(rng, weight, weight_dt);
    Tensor b = bias.empty() ? Tensor() : randomTensor(rng, bias, input_dt);
    out.raise(std::move(name), {x, w, optional(b), stride, Sizes{0}, Sizes{1}, groups}, std::move(reason));
  };
  // conv2d's rule (its meta) takes the floating and integral dtypes, as
  // PyTorch's CPU kernels: the host refuses bool, so no kernel has to.
  const ScalarType b8 = ScalarType::Bool;
  bad("bool input", {1, 2, 4, 4}, b8, {2, 2, 3, 3}, b8, "conv2d takes no bool");
  bad("float32 input, float64 weight", {1, 2, 4, 4}, f32, {2, 2, 3, 3}, ScalarType::Float64,
      "input and weight dtypes differ");
  bad("3 input channels for a weight of 2", {1, 3, 4, 4}, f32, {2, 2, 3, 3}, f32, "channel count mismatch");
  bad("groups 2 with 3 out channels", {1, 4, 4, 4}, f32, {3, 2, 3, 3}, f32, "out_channels not divisible by groups", {1},
      2);
  bad("kernel 5x5 over a 4x4 input", {1, 2, 4, 4}, f32, {2, 2, 5, 5}, f32,
      "the kernel is larger than the padded input");
  bad("2-d input", {2, 4}, f32, {2, 2, 1, 1}, f32, "input must be 3-d or 4-d");
  bad("stride 0", {1, 2, 4, 4}, f32, {2, 2, 3, 3}, f32, "stride must be positive", {0});
  bad("bias of 3 for 2 out channels", {1, 2, 4, 4}, f32, {2, 2, 3, 3}, f32, "bias size mismatch", {1}, 1, {3});
  return out.samples;
}

// --- max_pool2d, avg_pool2d

enum class Pool { Max, Avg };

// PyTorch's pooling_output_shape: with ceil_mode the last window may hang
// over the end, but it must start inside the input or the left padding.
int64_t pooledSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = span / stride + 1;  // span >= 0 for every sample that does not raise
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The pooling arguments of a max_pool2d or avg_pool2d sample.
struct PoolArgs {
  int64_t kh, kw, sh, sw, ph, pw, dh = 1, dw = 1;
  bool ceil_mode;
  bool count_include_pad = true;
  std::optional<int64_t> divisor;

  PoolArgs(Pool kind, const Sample& s) {
    std::tie(kh, kw) = hw(s.args[1]);
    std::tie(sh, sw) = s.args[2].toIntList().empty() ? std::pair{kh, kw} : hw(s.args[2]);
    std::tie(ph, pw) = hw(s.args[3]);
    if (kind == Pool::Max) {
      std::tie(dh, dw) = hw(s.args[4]);
      ceil_mode = s.args[5].toBool();
    } else {
      ceil_mode = s.args[4].toBool();
      count_include_pad = s.args[5].toBool();
      if (!s.args[6].isNone()) divisor = s.args[6].toInt();
    }
  }
};

// Pooling as PyTorch defines it: max propagates NaN; avg divides by
// divisor_override, else by the window clipped to the padded input
// (count_include_pad) or to the input.
Expected poolReference(Pool kind, const Sample& s) {
  const Tensor& x = s.args[0].toTensor();
  const PoolArgs a(kind, s);
  const std::vector<double> v = valuesOf(x);
  const int64_t h = x.size(-2), w = x.size(-1), planes = x.numel() / std::max<int64_t>(h * w, 1);
  const int64_t oh = pooledSize(h, a.kh, a.ph, a.sh, a.dh, a.ceil_mode);
  const int64_t ow = pooledSize(w, a.kw, a.pw, a.sw, a.dw, a.ceil_mode);
  Expected e;
  e.dtype = x.dtype();
  e.sizes = sizesOf(x);
  e.sizes[e.sizes.size() - 2] = oh;
  e.sizes.back() = ow;
  for (int64_t p = 0; p < planes; ++p) {
    const double* in = v.data() + p * h * w;
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        double r;
        if (kind == Pool::Max) {
          r = -kInf;
          for (int64_t ky = 0; ky < a.kh; ++ky) {
            const int64_t iy = oy * a.sh - a.ph + ky * a.dh;
            for (int64_t kx = 0; kx < a.kw; ++kx) {
              const int64_t ix = ox * a.sw - a.pw + kx * a.dw;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              const double val = in[iy * w + ix];
              if (!std::isnan(r) && (std::isnan(val) || val > r)) r = val;
            }
          }
        } else {
          const int64_t y0 = oy * a.sh - a.ph, x0 = ox * a.sw - a.pw;
          const int64_t y1 = std::min(y0 + a.kh, h + a.ph), x1 = std::min(x0 + a.kw, w + a.pw);
          const int64_t padded_count = (y1 - y0) * (x1 - x0);
          const int64_t cy0 = std::max<int64_t>(y0, 0), cx0 = std::max<int64_t>(x0, 0);
          const int64_t cy1 = std::min(y1, h), cx1 = std::min(x1, w);
          double sum = 0;
          for (int64_t iy = cy0; iy < cy1; ++iy)
            for (int64_t ix = cx0; ix < cx1; ++ix) sum += in[iy * w + ix];
          const int64_t divisor = a.divisor             ? *a.divisor
                                  : a.count_include_pad ? padded_count
                                                        : (cy1 - cy0) * (cx1 - cx0);
          r = sum / static_cast<double>(divisor);
        }
        e.values.push_back(roundTo(e.dtype, r));
      }
    }
  }
  return e;
}

// The pooling window options of a sample; max_pool2d takes `dilation`,
// avg_pool2d takes `count_include_pad` and `divisor`.
struct PoolCase {
  std::string name = {};
  Sizes input = {};
  Sizes kernel = {}, stride = {}, padding = {0}, dilation = {1};
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<int64_t> divisor = std::nullopt;
  Layout layout = Layout::Contiguous;
};

std::vector<IValue> poolArgs(Pool kind, Tensor x, const PoolCase& c) {
  if (kind == Pool::Max) return {std::move(x), c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode};
  return {std::move(x), c.kernel, c.stride, c.padding, c.ceil_mode, c.count_include_pad, IValue(c.divisor)};
}

std::vector<Sample> poolSamples(const std::string& op, Pool kind) {
  Rng rng(seedFor(op));
  SampleList out;
  std::vector<PoolCase> cases = {
      {.name = "[2,3,8,8] kernel 2 (stride = kernel)", .input = {2, 3, 8, 8}, .kernel = {2}},
      {.name = "kernel 3, stride 2, padding 1", .input = {2, 3, 9, 8}, .kernel = {3}, .stride = {2}, .padding = {1}},
      {.name = "kernel (3,2), stride (2,1), padding (1,0)",
       .input = {1, 2, 7, 6},
       .kernel = {3, 2},
       .stride = {2, 1},
       .padding = {1, 0}},
      {.name = "ceil_mode, a window past the end",
       .input = {1, 2, 7, 7},
       .kernel = {2},
       .stride = {2},
       .ceil_mode = true},
      {.name = "ceil_mode, padding 1",
       .input = {2, 2, 6, 7},
       .kernel = {3},
       .stride = {2},
       .padding = {1},
       .ceil_mode = true},
      {.name = "unbatched [3,7,5]", .input = {3, 7, 5}, .kernel = {2, 3}, .stride = {1, 2}},
      {.name = "transposed input", .input = {2, 3, 6, 7}, .kernel = {2}, .layout = Layout::Transposed},
      {.name = "channels-last input",
       .input = {2, 3, 6, 6},
       .kernel = {3},
       .stride = {1},
       .padding = {1},
       .layout = Layout::ChannelsLast},
      {.name = "sliced input (step 2)", .input = {2, 3, 6, 8}, .kernel = {2}, .layout = Layout::Sliced},
      {.name = "empty batch [0,3,4,4]", .input = {0, 3, 4, 4}, .kernel = {2}},
  };
  if (kind == Pool::Max) {
    cases.push_back({.name = "dilation 2", .input = {2, 2, 9, 9}, .kernel = {3}, .stride = {2}, .dilation = {2}});
    cases.push_back({.name = "dilation (1,2), padding 1, ceil_mode",
                     .input = {1, 3, 8, 9},
                     .kernel = {3},
                     .stride = {2},
                     .padding = {1},
                     .dilation = {1, 2},
                     .ceil_mode = true});
  } else {
    cases.push_back({.name = "count_include_pad=False, padding 1",
                     .input = {2, 3, 7, 7},
                     .kernel = {3},
                     .stride = {2},
                     .padding = {1},
                     .count_include_pad = false});
    cases.push_back({.name = "count_include_pad=False, ceil_mode",
                     .input = {1, 2, 7, 6},
                     .kernel = {3},
                     .stride = {2},
                     .padding = {1},
                     .ceil_mode = true,
                     .count_include_pad = false});
    cases.push_back({.name = "divisor_override 5",
                     .input = {2, 2, 6, 6},
                     .kernel = {3},
                     .stride = {2},
                     .padding = {1},
                     .divisor = 5});
  }
  for (ScalarType dt : kFloatTypes) {
    for (const PoolCase& c : cases) {
      out.add(c.name + dtypeSuffix(dt), poolArgs(kind, randomLaidOut(rng, c.input, dt, c.layout), c));
    }
  }
  if (kind == Pool::Avg) {
    // int64, as PyTorch's CPU kernel: the sum divided with truncation.
    for (const PoolCase& c : cases) {
      out.add(c.name + dtypeSuffix(ScalarType::Int64),
              poolArgs(kind, randomLaidOut(rng, c.input, ScalarType::Int64, c.layout), c));
    }
  }
  const ScalarType f32 = ScalarType::Float32;
  if (kind == Pool::Max) {
    // NaN is the maximum of any window holding it; a window of -inf is -inf.
    std::vector<double> v = valuesOf(randomTensor(rng, {1, 1, 4, 6}, f32));
    v[1] = kNan;
    v[14] = v[15] = v[20] = v[21] = -kInf;
    out.add("NaN and an all -inf window float32", poolArgs(kind, hostTensor(v, {1, 1, 4, 6}, f32), {.kernel = {2}}));
  }
  out.add("large [2,4,384,384] kernel 2 float32",
          poolArgs(kind, randomTensor(rng, {2, 4, 384, 384}, f32), {.kernel = {2}}));

  auto bad = [&](std::string name, const Sizes& input, ScalarType dt, const PoolCase& c, std::string reason) {
    out.raise(std::move(name), poolArgs(kind, randomTensor(rng, input, dt), c), std::move(reason));
  };
  if (kind == Pool::Max) {
    bad("int64 input", {1, 2, 4, 4}, ScalarType::Int64, {.kernel = {2}}, "the input must be floating point");
  } else {
    bad("int32 input", {1, 2, 4, 4}, ScalarType::Int32, {.kernel = {2}}, "avg_pool2d takes floating dtypes and int64");
  }
  bad("2-d input", {4, 4}, f32, {.kernel = {2}}, "input must be 3-d or 4-d");
  bad("no channels [2,0,4,4]", {2, 0, 4, 4}, f32, {.kernel = {2}}, "only the batch dimension may be empty");
  bad("kernel 0", {1, 2, 4, 4}, f32, {.kernel = {0}}, "kernel_size must be positive");
  bad("padding 2 for kernel 3", {1, 2, 6, 6}, f32, {.kernel = {3}, .padding = {2}},
      "padding must be at most half the kernel");
  bad("kernel 3 over a 2x2 input", {1, 2, 2, 2}, f32, {.kernel = {3}}, "the output would be empty");
  bad("three stride values", {1, 2, 4, 4}, f32, {.kernel = {2}, .stride = {1, 1, 1}}, "stride takes 1 or 2 values");
  if (kind == Pool::Avg) {
    bad("divisor_override 0", {1, 2, 4, 4}, f32, {.kernel = {2}, .divisor = 0}, "divisor_override must not be zero");
  }
  return out.samples;
}

void addPool(std::vector<OpSpec>& specs, const std::string& op, Pool kind) {
  OpSpec spec;
  spec.op = op;
  spec.family = "nn";
  spec.samples = [op, kind] { return poolSamples(op, kind); };
  spec.reference = [kind](const Sample& s) { return std::vector<Expected>{poolReference(kind, s)}; };
  specs.push_back(std::move(spec));
}

// --- batch_norm, layer_norm

// Each group's mean and biased variance, over `groups` of values: group g
// holds the elements for which groupOf(i) == g.
struct GroupStats {
  std::vector<double> mean, var;
};

template <class GroupOf>
GroupStats groupStats(const std::vector<double>& x, int64_t groups, GroupOf groupOf) {
  const size_t n = static_cast<size_t>(groups);
  GroupStats st{std::vector<double>(n, 0), std::vector<double>(n, 0)};
  std::vector<double> count(n, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    st.mean[groupOf(i)] += x[i];
    count[groupOf(i)] += 1;
  }
  for (size_t g = 0; g < n; ++g) st.mean[g] /= count[g];
  for (size_t i = 0; i < x.size(); ++i) st.var[groupOf(i)] += std::pow(x[i] - st.mean[groupOf(i)], 2);
  for (size_t g = 0; g < n; ++g) st.var[g] /= count[g];
  return st;
}

// (x - mean) / sqrt(var + eps) * weight + bias over `groups` of values
// (grouped as for groupStats); weight and bias (either may be empty) are
// indexed by paramOf(i). With `mean` and `var` empty, they are each group's
// own mean and biased variance.
template <class GroupOf, class ParamOf>
std::vector<double> normalize(const std::vector<double>& x, int64_t groups, GroupOf groupOf, ParamOf paramOf,
                              std::vector<double> mean, std::vector<double> var, const std::vector<double>& weight,
                              const std::vector<double>& bias, double eps) {
  if (mean.empty()) {
    GroupStats st = groupStats(x, groups, groupOf);
    mean = std::move(st.mean);
    var = std::move(st.var);
  }
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t g = groupOf(i), p = paramOf(i);
    double r = (x[i] - mean[g]) / std::sqrt(var[g] + eps);
    if (!weight.empty()) r *= weight[p];
    if (!bias.empty()) r += bias[p];
    out[i] = r;
  }
  return out;
}

// What batch_norm must return, then what running_mean and running_var
// (arguments 3 and 4, when given) must hold after the call. The output is
// normalized per channel (dim 1) with the batch's statistics when
// training, else with the running ones. Training moves the running stats
// towards the batch's as PyTorch does, in their own dtype:
//   running = (1 - momentum) * running + momentum * batch,
// with the batch's unbiased variance (its biased one times n / (n - 1)).
// Evaluation, and training on an empty batch (no statistics), leave them
// as they are.
std::vector<Expected> batchNormReference(const Sample& s) {
  const Tensor& x = s.args[0].toTensor();
  const Tensor running_mean = optionalTensor(s.args[3]), running_var = optionalTensor(s.args[4]);
  const bool training = s.args[5].toBool();
  const double momentum = s.args[6].toDouble();
  const int64_t c = x.size(1);
  const int64_t inner = x.numel() / std::max<int64_t>(x.size(0) * c, 1);
  auto channel = [&](size_t i) { return static_cast<size_t>((static_cast<int64_t>(i) / inner) % c); };
  const std::vector<double> xv = valuesOf(x);
  std::vector<double> mean, var;
  if (training) {
    GroupStats batch = groupStats(xv, c, channel);
    mean = std::move(batch.mean);
    var = std::move(batch.var);
  } else {
    mean = valuesOf(running_mean);
    var = valuesOf(running_var);
  }
  std::vector<Expected> want(1);
  want[0].sizes = sizesOf(x);
  want[0].dtype = x.dtype();
  for (double v : normalize(xv, c, channel, channel, mean, var, valuesOrEmpty(optionalTensor(s.args[1])),
                            valuesOrEmpty(optionalTensor(s.args[2])), s.args[7].toDouble())) {
    want[0].values.push_back(roundTo(x.dtype(), v));
  }
  if (!running_mean.defined()) return want;
  const bool updated = training && x.numel() > 0;
  const double count = static_cast<double>(x.numel() / std::max<int64_t>(c, 1));
  auto after = [&](int argument, const Tensor& running, const std::vector<double>& batch, double unbias) {
    Expected e;
    e.argument = argument;
    e.sizes = sizesOf(running);
    e.dtype = running.dtype();
    e.values = valuesOf(running);
    if (!updated) return e;
    for (size_t ch = 0; ch < e.values.size(); ++ch) {
      e.values[ch] = roundTo(e.dtype, (1 - momentum) * e.values[ch] + momentum * batch[ch] * unbias);
    }
    return e;
  };
  want.push_back(after(3, running_mean, mean, 1));
  want.push_back(after(4, running_var, var, count / (count - 1)));
  return want;
}

std::vector<Sample> batchNormSamples(const std::string& op) {
  Rng rng(seedFor(op));
  SampleList out;
  // Running variances must be positive.
  const Range var_range{0.5, 2};
  auto push = [&](std::string name, Tensor x, bool weight, bool bias, bool stats, bool training, double momentum,
                  double eps, ScalarType param_dt) {
    const int64_t c = x.size(1);
    auto param = [&](bool given, Range r = {}) {
      return given ? IValue(randomTensor(rng, {c}, param_dt, r)) : IValue();
    };
    out.add(std::move(name), {std::move(x), param(weight), param(bias), param(stats), param(stats, var_range), training,
                              momentum, eps, true});
  };
  for (ScalarType dt : kFloatTypes) {
    for (bool training : {true, false}) {
      const std::string mode = training ? " training" : " eval";
      auto add = [&](const std::string& name, const Sizes& sizes, bool weight, bool bias, bool stats,
                     Layout layout = Layout::Contiguous, double momentum = 0.1, double eps = 1e-5) {
        push(name + mode + dtypeSuffix(dt), randomLaidOut(rng, sizes, dt, layout), weight, bias, stats || !training,
             training, momentum, eps, dt);
      };
      add("[4,3]", {4, 3}, true, true, true);
      add("[4,3,5] weight and bias omitted", {4, 3, 5}, false, false, true);
      add("[2,3,4,4] weight only, momentum 0.5", {2, 3, 4, 4}, true, false, true, Layout::Contiguous, 0.5);
      add("[2,3,4,4] bias only, eps 1e-3", {2, 3, 4, 4}, false, true, true, Layout::Contiguous, 0.1, 1e-3);
      add("[2,3,2,2,3]", {2, 3, 2, 2, 3}, true, true, true);
      add("channels-last [2,4,3,5]", {2, 4, 3, 5}, true, true, true, Layout::ChannelsLast);
      add("transposed [3,4,5,2]", {3, 4, 5, 2}, true, true, true, Layout::Transposed);
      if (training) add("[3,2,4] without running stats", {3, 2, 4}, true, true, false);
    }
    push("batch of 1 [1,3,4] training" + dtypeSuffix(dt), randomTensor(rng, {1, 3, 4}, dt), true, true, true, true, 0.1,
         1e-5, dt);
    push("empty batch [0,3,4] eval" + dtypeSuffix(dt), randomTensor(rng, {0, 3, 4}, dt), true, true, true, false, 0.1,
         1e-5, dt);
  }
  const ScalarType f32 = ScalarType::Float32;
  push("bfloat16 input, float32 parameters training", randomTensor(rng, {4, 3, 5}, ScalarType::BFloat16), true, true,
       true, true, 0.1, 1e-5, f32);
  push("float16 input, float32 parameters eval", randomTensor(rng, {4, 3, 5}, ScalarType::Float16), true, true, true,
       false, 0.1, 1e-5, f32);
  // The ends of the running stats' update: kept as they are, replaced by the batch's.
  push("momentum 0 [4,3,5] training float32", randomTensor(rng, {4, 3, 5}, f32), true, true, true, true, 0.0, 1e-5,
       f32);
  push("momentum 1 [4,3,5] training float32", randomTensor(rng, {4, 3, 5}, f32), true, true, true, true, 1.0, 1e-5,
       f32);
  push("large [8,16,96,96] training float32", randomTensor(rng, {8, 16, 96, 96}, f32), true, true, true, true, 0.1,
       1e-5, f32);
  push("large [8,16,96,96] eval float32", randomTensor(rng, {8, 16, 96, 96}, f32), true, true, true, false, 0.1, 1e-5,
       f32);

  const Tensor c3 = randomTensor(rng, {3}, f32);
  const Tensor x = randomTensor(rng, {2, 3, 4}, f32);
  auto bad = [&](std::string name, Tensor input, IValue w, IValue rm, IValue rv, bool training, double eps,
                 std::string reason) {
    out.raise(std::move(name),
              {std::move(input), std::move(w), c3, std::move(rm), std::move(rv), training, 0.1, eps, true},
              std::move(reason));
  };
  bad("eval without running stats", x, c3, IValue(), IValue(), false, 1e-5, "evaluation needs the running stats");
  bad("running_mean without running_var", x, c3, c3, IValue(), true, 1e-5, "running stats come in pairs");
  bad("weight of 4 for 3 channels", x, randomTensor(rng, {4}, f32), c3, c3, false, 1e-5, "weight size mismatch");
  bad("int64 running_var", x, c3, c3, randomTensor(rng, {3}, ScalarType::Int64), false, 1e-5,
      "running_var must be floating point");
  bad("int64 input", randomTensor(rng, {2, 3, 4}, ScalarType::Int64), c3, c3, c3, false, 1e-5,
      "the input must be floating point");
  bad("1-d input", randomTensor(rng, {3}, f32), c3, c3, c3, false, 1e-5, "the input needs a channel dimension");
  bad("one value per channel [1,3] training", randomTensor(rng, {1, 3}, f32), c3, c3, c3, true, 1e-5,
      "training needs more than one value per channel");
  bad("eps -1", x, c3, c3, c3, false, -1.0, "eps must be non-negative");
  // PyTorch gives an empty result here and leaves the running stats alone
  // (its batch_norm returns early for an empty input; only one value per
  // channel is refused). Last, so that a backend that raises is still
  // checked on every other sample.
  push("empty batch [0,3,4] training float32", randomTensor(rng, {0, 3, 4}, f32), true, true, true, true, 0.1, 1e-5,
       f32);
  return out.samples;
}

// layer_norm's output: each row over the trailing normalized_shape dims.
std::vector<Expected> layerNormReference(const Sample& s) {
  const Tensor& x = s.args[0].toTensor();
  const int64_t m = numelOf(s.args[1].toIntList());
  const int64_t rows = m == 0 ? 0 : x.numel() / m;
  auto row = [m](size_t i) { return static_cast<size_t>(static_cast<int64_t>(i) / m); };
  auto column = [m](size_t i) { return static_cast<size_t>(static_cast<int64_t>(i) % m); };
  Expected e;
  e.sizes = sizesOf(x);
  e.dtype = x.dtype();
  const std::vector<double> out =
      normalize(valuesOf(x), rows, row, column, {}, {}, valuesOrEmpty(optionalTensor(s.args[2])),
                valuesOrEmpty(optionalTensor(s.args[3])), s.args[4].toDouble());
  for (double v : out) e.values.push_back(roundTo(e.dtype, v));
  return {e};
}

std::vector<Sample> layerNormSamples(const std::string& op) {
  Rng rng(seedFor(op));
  SampleList out;
  // Parameters take the input's dtype unless `param_dtype` is given.
  auto push = [&](std::string name, Tensor x, const Sizes& shape, bool weight, bool bias, double eps = 1e-5,
                  std::optional<ScalarType> param_dtype = std::nullopt) {
    const ScalarType pdt = param_dtype.value_or(x.dtype());
    auto param = [&](bool given) { return given ? IValue(randomTensor(rng, shape, pdt)) : IValue(); };
    out.add(std::move(name), {std::move(x), shape, param(weight), param(bias), eps, true});
  };
  for (ScalarType dt : kFloatTypes) {
    auto add = [&](const std::string& name, const Sizes& sizes, const Sizes& shape, bool weight, bool bias,
                   Layout layout = Layout::Contiguous, double eps = 1e-5) {
      push(name + dtypeSuffix(dt), randomLaidOut(rng, sizes, dt, layout), shape, weight, bias, eps);
    };
    add("[4,6] over [6]", {4, 6}, {6}, true, true);
    add("[2,3,4] over [3,4]", {2, 3, 4}, {3, 4}, true, true);
    add("[2,3,4] over [4], weight and bias omitted", {2, 3, 4}, {4}, false, false);
    add("[3,5] weight only, eps 1e-2", {3, 5}, {5}, true, false, Layout::Contiguous, 1e-2);
    add("[3,5] bias only", {3, 5}, {5}, false, true);
    add("1-d [7] over its whole shape", {7}, {7}, true, true);
    add("one element per row [4,1]", {4, 1}, {1}, true, true);
    add("transposed [5,6]", {5, 6}, {6}, true, true, Layout::Transposed);
    add("sliced [3,2,5] over [2,5]", {3, 2, 5}, {2, 5}, true, true, Layout::Sliced);
    add("empty rows [0,5]", {0, 5}, {5}, true, true);
  }
  const ScalarType f32 = ScalarType::Float32;
  push("expanded [4,6] float32", randomTensor(rng, {1, 6}, f32).expand({4, 6}), {6}, true, true);
  push("rows with a large mean float32", randomTensor(rng, {3, 8}, f32, {100, 104}), {8}, true, true);
  push("bfloat16 input, float32 parameters", randomTensor(rng, {3, 8}, ScalarType::BFloat16), {8}, true, true, 1e-5,
       f32);
  push("large [1100,1000] over [1000] float32", randomTensor(rng, {1100, 1000}, f32), {1000}, true, true);

  const Tensor x = randomTensor(rng, {2, 3, 4}, f32);
  auto bad = [&](std::string name, Tensor input, Sizes shape, IValue w, double eps, std::string reason) {
    out.raise(std::move(name), {std::move(input), std::move(shape), std::move(w), IValue(), eps, true},
              std::move(reason));
  };
  bad("normalized_shape [3] for trailing dim 4", x, {3}, IValue(), 1e-5, "normalized_shape mismatch");
  bad("normalized_shape [2,3,4,1]", x, {2, 3, 4, 1}, IValue(), 1e-5, "more normalized dims than the input has");
  bad("empty normalized_shape", x, {}, IValue(), 1e-5, "normalized_shape must not be empty");
  bad("weight [3] for normalized_shape [4]", x, {4}, randomTensor(rng, {3}, f32), 1e-5, "weight size mismatch");
  bad("int64 input", randomTensor(rng, {2, 4}, ScalarType::Int64), {4}, IValue(), 1e-5,
      "the input must be floating point");
  bad("eps -1", x, {4}, IValue(), -1.0, "eps must be non-negative");
  return out.samples;
}

void addNorm(std::vector<OpSpec>& specs, const std::string& op, std::vector<Sample> (*samples)(const std::string&),
             Reference reference, std::string out = "") {
  OpSpec spec;
  spec.op = op;
  spec.out = std::move(out);
  spec.family = "nn";
  spec.samples = [op, samples] { return samples(op); };
  spec.reference = std::move(reference);
  specs.push_back(std::move(spec));
}

// --- softmax, log_softmax

// Along `dim` in double over the inputs converted to the result dtype
// first, as PyTorch does with dtype=. The max is subtracted before exp(),
// and a row holding NaN or +inf, or only -inf, comes out NaN by the same
// arithmetic (inf - inf).
Expected softmaxReference(bool log, const Sample& s) {
  const Tensor& x = s.args[0].toTensor();
  Expected e;
  e.sizes = sizesOf(x);
  e.dtype = s.args[2].isNone() ? x.dtype() : s.args[2].toScalarType();
  std::vector<double> v = valuesOf(x);
  for (double& a : v) a = roundTo(e.dtype, a);
  const int64_t nd = x.dim();
  const int64_t d = nd == 0 ? 0 : (s.args[1].toInt() + nd) % nd;
  const int64_t n = nd == 0 ? 1 : x.size(d);
  int64_t inner = 1;
  for (int64_t i = d + 1; i < nd; ++i) inner *= x.size(i);
  const int64_t outer = n * inner == 0 ? 0 : x.numel() / (n * inner);
  e.values.resize(v.size());
  std::vector<double> exps(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * n + j) * inner + i); };
      double mx = -kInf;
      bool nan = false;
      for (int64_t j = 0; j < n; ++j) {
        mx = std::max(mx, v[at(j)]);
        nan |= std::isnan(v[at(j)]);
      }
      if (nan) mx = kNan;
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += exps[static_cast<size_t>(j)] = std::exp(v[at(j)] - mx);
      const double lse = std::log(sum);
      for (int64_t j = 0; j < n; ++j) {
        const double r = log ? (v[at(j)] - mx) - lse : exps[static_cast<size_t>(j)] / sum;
        e.values[at(j)] = roundTo(e.dtype, r);
      }
    }
  }
  return e;
}

std::vector<Sample> softmaxSamples(const std::string& op) {
  Rng rng(seedFor(op));
  SampleList out;
  auto push = [&](std::string name, Tensor x, int64_t dim, std::optional<ScalarType> dtype = std::nullopt) {
    out.add(std::move(name), {std::move(x), dim, IValue(dtype)});
  };
  for (ScalarType dt : kFloatTypes) {
    for (int64_t dim = -3; dim < 3; ++dim) {
      push("[3,4,5] dim " + std::to_string(dim) + dtypeSuffix(dt), randomTensor(rng, {3, 4, 5}, dt), dim);
    }
    push("0-d dim 0" + dtypeSuffix(dt), randomTensor(rng, {}, dt), 0);
    push("0-d dim -1" + dtypeSuffix(dt), randomTensor(rng, {}, dt), -1);
    push("one element [1] dim 0" + dtypeSuffix(dt), randomTensor(rng, {1}, dt), 0);
    push("empty [0,4] dim 1" + dtypeSuffix(dt), randomTensor(rng, {0, 4}, dt), 1);
    push("rows of length 0 [3,0] dim 1" + dtypeSuffix(dt), randomTensor(rng, {3, 0}, dt), 1);
    push("transposed [5,6] dim 1" + dtypeSuffix(dt), randomLaidOut(rng, {5, 6}, dt, Layout::Transposed), 1);
    push("sliced [4,6] dim 1" + dtypeSuffix(dt), randomLaidOut(rng, {4, 6}, dt, Layout::Sliced), 1);
    push("expanded [1,6] to [4,6] dim 0" + dtypeSuffix(dt), randomTensor(rng, {1, 6}, dt).expand({4, 6}), 0);
    push("expanded [4,1] to [4,6] dim 1" + dtypeSuffix(dt), randomTensor(rng, {4, 1}, dt).expand({4, 6}), 1);
    // exp(100) overflows float32 and the 16-bit types: only a max-shifted
    // exp stays finite.
    for (int64_t dim : {-1, 0}) {
      push("values around 100 [6,40] dim " + std::to_string(dim) + dtypeSuffix(dt),
           randomTensor(rng, {6, 40}, dt, {90, 110}), dim);
    }
  }
  const ScalarType f32 = ScalarType::Float32;
  // Rows: one -inf, a NaN, +inf, all -inf.
  std::vector<double> v = valuesOf(randomTensor(rng, {4, 5}, f32));
  v[2] = -kInf;
  v[6] = kNan;
  v[13] = kInf;
  std::fill(v.begin() + 15, v.end(), -kInf);
  const Tensor special = hostTensor(v, {4, 5}, f32);
  push("non-finite rows dim 1 float32", special, 1);
  push("non-finite columns dim 0 float32", special.transpose(0, 1), 0);
  push("float32 input, dtype=float64", randomTensor(rng, {3, 7}, f32), 1, ScalarType::Float64);
  push("float32 input, dtype=float16 (input converted first)", randomTensor(rng, {3, 7}, f32, {-8, 8}), 1,
       ScalarType::Float16);
  push("bfloat16 input, dtype=float32", randomTensor(rng, {3, 7}, ScalarType::BFloat16), -1, f32);
  push("int64 input, dtype=float32", randomTensor(rng, {3, 7}, ScalarType::Int64), 1, f32);
  push("bool input, dtype=float64", randomTensor(rng, {4, 5}, ScalarType::Bool), 0, ScalarType::Float64);
  push("large [1100,1000] dim -1 float32", randomTensor(rng, {1100, 1000}, f32), -1);

  const Tensor x = randomTensor(rng, {2, 3}, f32);
  out.raise("dim 2 of a 2-d tensor", {x, 2, IValue()}, "dimension out of range");
  out.raise("dim -3 of a 2-d tensor", {x, -3, IValue()}, "dimension out of range");
  out.raise("dim 1 of a 0-d tensor", {randomTensor(rng, {}, f32), 1, IValue()}, "dimension out of range");
  out.raise("int64 input without dtype=", {randomTensor(rng, {2, 3}, ScalarType::Int64), 1, IValue()},
            "the result would be integral");
  out.raise("dtype=int32", {x, 1, ScalarType::Int32}, "the result must be floating point");
  return out.samples;
}

void addSoftmax(std::vector<OpSpec>& specs, const std::string& name, bool log) {
  OpSpec spec;
  spec.op = "bp::" + name + ".int";
  spec.family = "nn";
  spec.samples = [op = spec.op] { return softmaxSamples(op); };
  spec.reference = [log](const Sample& s) { return std::vector<Expected>{softmaxReference(log, s)}; };
  spec.out = "bp::" + name + ".int_out";
  specs.push_back(std::move(spec));
}

}  // namespace

void addNnSpecs(std::vector<OpSpec>& specs) {
  OpSpec conv;
  conv.op = "bp::conv2d";
  conv.family = "nn";
  conv.samples = [] { return convSamples("bp::conv2d"); };
  conv.reference = [](const Sample& s) { return std::vector<Expected>{convReference(s)}; };
  conv.tolerance = convTolerance;
  specs.push_back(std::move(conv));
  addPool(specs, "bp::max_pool2d", Pool::Max);
  addPool(specs, "bp::avg_pool2d", Pool::Avg);
  // Besides its output, batch_norm certifies what running_mean and
  // running_var hold after each call: training's update towards the batch
  // statistics, in the running stats' own dtype, and no change in
  // evaluation or on an empty batch (batchNormReference).
  addNorm(specs, "bp::batch_norm", batchNormSamples, batchNormReference);
  addNorm(specs, "bp::layer_norm", layerNormSamples, layerNormReference, "bp::layer_norm.out");
  addSoftmax(specs, "softmax", false);
  addSoftmax(specs, "log_softmax", true);
}

}  // namespace backplane::conformance
