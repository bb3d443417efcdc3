// Standard operators, family "nn": each op against a double-precision
// reference through the CPU plugin.
#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <utility>

#include "backplane/ops/ops.h"
#include "backplane/runtime/profiler.h"
#include "ops_test_util.h"
#include "test_device.h"

namespace backplane::ops_test {
namespace {

using ::testing::HasSubstr;
using V = std::vector<int64_t>;

Device testDevice() { return testing::TestDevice::install("testdev", 2).device(0); }

int64_t numelOf(const V& s) {
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  return n;
}

// --- conv2d reference: direct loops in double.

struct ConvCase {
  V input;   // N, C, H, W
  V weight;  // OC, IC/groups, KH, KW
  bool bias;
  V stride, padding, dilation;
  int64_t groups;
};

std::vector<double> refConv(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                            const ConvCase& c, V& out_sizes) {
  const int64_t n = c.input[0], ch = c.input[1], h = c.input[2], wd = c.input[3];
  const int64_t oc = c.weight[0], icg = c.weight[1], kh = c.weight[2], kw = c.weight[3];
  const int64_t oh = (h + 2 * c.padding[0] - c.dilation[0] * (kh - 1) - 1) / c.stride[0] + 1;
  const int64_t ow = (wd + 2 * c.padding[1] - c.dilation[1] * (kw - 1) - 1) / c.stride[1] + 1;
  out_sizes = {n, oc, oh, ow};
  std::vector<double> out(static_cast<size_t>(n * oc * oh * ow));
  const int64_t ocg = oc / c.groups;
  for (int64_t in = 0; in < n; ++in)
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = b.empty() ? 0 : b[static_cast<size_t>(o)];
          for (int64_t i = 0; i < icg; ++i) {
            const int64_t ic = (o / ocg) * icg + i;
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = y * c.stride[0] - c.padding[0] + ky * c.dilation[0];
                const int64_t ix = xo * c.stride[1] - c.padding[1] + kx * c.dilation[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += x[static_cast<size_t>(((in * ch + ic) * h + iy) * wd + ix)] *
                       w[static_cast<size_t>(((o * icg + i) * kh + ky) * kw + kx)];
              }
          }
          out[static_cast<size_t>(((in * oc + o) * oh + y) * ow + xo)] = acc;
        }
  return out;
}

IValue optional(const Tensor& t) { return t.defined() ? IValue(t) : IValue(); }

Tensor conv(const Tensor& x, const Tensor& w, const Tensor& b, V stride, V padding, V dilation, int64_t groups) {
  return callT("conv2d", {x, w, optional(b), stride, padding, dilation, groups});
}

// Checks conv2d on case `c` for `dtype`, with the input given contiguous
// and as a non-contiguous view of the same values.
void checkConv(const ConvCase& c, ScalarType dtype, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "input " << ::testing::PrintToString(c.input) << " weight "
                                    << ::testing::PrintToString(c.weight) << " groups " << c.groups << " " << dtype);
  Tensor x = randomTensor(c.input, dtype, seed);
  Tensor w = randomTensor(c.weight, dtype, seed + 1);
  Tensor b = c.bias ? randomTensor({c.weight[0]}, dtype, seed + 2) : Tensor();
  V out_sizes;
  const std::vector<double> expected =
      refConv(values(x), values(w), c.bias ? values(b) : std::vector<double>{}, c, out_sizes);
  // Sums of up to a few hundred products: a float32 result is ~1e-5 relative.
  // float16 and bfloat16 sum in float32 and round once; int64 is exact.
  const double tol = dtype == ScalarType::Float32 ? 1e-4 : dtype == ScalarType::Float64 ? 1e-12 : tolerance(dtype);
  expectClose(conv(x, w, b, c.stride, c.padding, c.dilation, c.groups), expected, out_sizes, dtype, tol);
  // Non-contiguous input (stored as N, H, W, C and permuted back) and a
  // weight that is a strided slice of a wider tensor.
  Tensor x_nhwc = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  ASSERT_FALSE(x_nhwc.is_contiguous());
  Tensor wide = randomTensor({c.weight[0], c.weight[1], c.weight[2], 2 * c.weight[3]}, dtype, seed + 3);
  Tensor w_strided = wide.slice(3, 0, std::nullopt, 2);
  ASSERT_EQ(w_strided.sizes(), IntArrayRef(c.weight));
  const std::vector<double> expected2 =
      refConv(values(x), values(w_strided), c.bias ? values(b) : std::vector<double>{}, c, out_sizes);
  expectClose(conv(x_nhwc, w_strided, b, c.stride, c.padding, c.dilation, c.groups), expected2, out_sizes, dtype, tol);
}

TEST(NNConv2d, MatchesReference) {
  const std::vector<ConvCase> cases = {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, true, {1, 1}, {0, 0}, {1, 1}, 1},
      {{1, 3, 9, 8}, {5, 3, 3, 2}, false, {2, 1}, {1, 2}, {2, 1}, 1},
      {{2, 4, 6, 6}, {6, 2, 3, 3}, true, {1, 2}, {1, 1}, {1, 1}, 2},
      {{1, 6, 5, 7}, {6, 1, 3, 3}, true, {1, 1}, {1, 1}, {1, 2}, 6},   // depthwise
      {{3, 2, 5, 5}, {3, 2, 1, 1}, false, {1, 1}, {0, 0}, {1, 1}, 1},  // 1x1
      {{1, 16, 12, 12}, {16, 16, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 1},
  };
  uint32_t seed = 1;
  // float16 and bfloat16 (in float32) and int64 as PyTorch's CPU kernels.
  for (ScalarType dtype :
       {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16, ScalarType::Int64})
    for (const ConvCase& c : cases) checkConv(c, dtype, seed += 10);
}

// int64 convolution wraps around as PyTorch's does, without undefined
// behaviour: 2^62 * 2 + 2^62 * 2 is 0 modulo 2^64.
TEST(NNConv2d, Int64WrapsAround) {
  Tensor x = fromDoubles({4611686018427387904.0, 4611686018427387904.0}, {1, 2, 1, 1}, ScalarType::Int64);
  Tensor w = fromDoubles({2, 2}, {1, 2, 1, 1}, ScalarType::Int64);
  EXPECT_EQ(values(conv(x, w, {}, {1}, {0}, {1}, 1)), std::vector<double>{0});
}

TEST(NNConv2d, SingleValueArgumentsAndUnbatchedInput) {
  Tensor x = randomTensor({3, 6, 5}, ScalarType::Float32, 3);
  Tensor w = randomTensor({2, 3, 2, 2}, ScalarType::Float32, 4);
  ConvCase c{{1, 3, 6, 5}, {2, 3, 2, 2}, false, {2, 2}, {1, 1}, {1, 1}, 1};
  V out_sizes;
  std::vector<double> expected = refConv(values(x), values(w), {}, c, out_sizes);
  // int[2] arguments given as one value apply to both dimensions.
  expectClose(conv(x, w, Tensor(), {2}, {1}, {1}, 1), expected, {2, out_sizes[2], out_sizes[3]}, ScalarType::Float32,
              1e-5);
}

TEST(NNConv2d, EmptyBatch) {
  Tensor x = randomTensor({0, 3, 5, 5}, ScalarType::Float32, 1);
  Tensor w = randomTensor({4, 3, 3, 3}, ScalarType::Float32, 2);
  Tensor y = conv(x, w, Tensor(), {1, 1}, {0, 0}, {1, 1}, 1);
  EXPECT_EQ(y.sizes(), IntArrayRef(V{0, 4, 3, 3}));
}

TEST(NNConv2d, DefaultsFromSchema) {
  Tensor x = randomTensor({1, 2, 4, 4}, ScalarType::Float64, 1);
  Tensor w = randomTensor({3, 2, 3, 3}, ScalarType::Float64, 2);
  Stack stack{x, w};
  op("conv2d").callBoxed(stack);
  ASSERT_EQ(stack.size(), 1u);
  ConvCase c{{1, 2, 4, 4}, {3, 2, 3, 3}, false, {1, 1}, {0, 0}, {1, 1}, 1};
  V out_sizes;
  const std::vector<double> expected = refConv(values(x), values(w), {}, c, out_sizes);
  expectClose(stack[0].toTensor(), expected, out_sizes, ScalarType::Float64);
}

TEST(NNConv2d, RunsOnOtherDevicesThroughFallback) {
  Tensor x = randomTensor({1, 2, 5, 5}, ScalarType::Float32, 1, -2, 2, testDevice());
  Tensor w = randomTensor({2, 2, 3, 3}, ScalarType::Float32, 2, -2, 2, testDevice());
  Tensor y = conv(x, w, Tensor(), {1, 1}, {1, 1}, {1, 1}, 1);
  EXPECT_EQ(y.device(), testDevice());
  ConvCase c{{1, 2, 5, 5}, {2, 2, 3, 3}, false, {1, 1}, {1, 1}, {1, 1}, 1};
  V out_sizes;
  const std::vector<double> expected = refConv(values(x), values(w), {}, c, out_sizes);
  expectClose(y, expected, out_sizes, ScalarType::Float32, 1e-5);
}

TEST(NNConv2d, Errors) {
  const ScalarType f = ScalarType::Float32;
  Tensor x = randomTensor({1, 4, 5, 5}, f, 1);
  Tensor w = randomTensor({2, 4, 3, 3}, f, 2);
  auto err = [](const Tensor& x, const Tensor& w, const Tensor& b, V s, V p, V d, int64_t g) {
    return errorOf([&] { conv(x, w, b, s, p, d, g); });
  };
  EXPECT_THAT(err(randomTensor({4, 5, 5}, f, 1).view({4, 25}), w, {}, {1}, {0}, {1}, 1),
              HasSubstr("expected a 3-D (unbatched: C, H, W) or 4-D"));
  EXPECT_THAT(err(x, randomTensor({2, 4, 3}, f, 1), {}, {1}, {0}, {1}, 1), HasSubstr("expected a 4-D weight"));
  EXPECT_THAT(err(x, randomTensor({2, 3, 3, 3}, f, 1), {}, {1}, {0}, {1}, 1),
              HasSubstr("to have 3 channels, but it has 4"));
  EXPECT_THAT(err(x, randomTensor({3, 2, 3, 3}, f, 1), {}, {1}, {0}, {1}, 2), HasSubstr("must be divisible by 2"));
  EXPECT_THAT(err(x, w, randomTensor({3}, f, 1), {1}, {0}, {1}, 1),
              HasSubstr("expected bias to be 1-D with 2 elements"));
  EXPECT_THAT(err(x, w, {}, {0}, {0}, {1}, 1), HasSubstr("stride must be positive"));
  EXPECT_THAT(err(x, w, {}, {1}, {-1}, {1}, 1), HasSubstr("padding must be non-negative"));
  EXPECT_THAT(err(x, w, {}, {1}, {0}, {0}, 1), HasSubstr("dilation must be positive"));
  EXPECT_THAT(err(x, w, {}, {1}, {0}, {1}, 0), HasSubstr("groups must be positive"));
  EXPECT_THAT(err(x, w, {}, {1, 1, 1}, {0}, {1}, 1), HasSubstr("'stride' must be a single int or a list of two"));
  EXPECT_THAT(err(x, randomTensor({2, 4, 7, 3}, f, 1), {}, {1}, {0}, {1}, 1),
              HasSubstr("smaller than the (dilated) kernel"));
  EXPECT_THAT(err(x, w, {}, {1}, {0}, {3}, 1), HasSubstr("smaller than the (dilated) kernel"));
  // Note [Window geometry overflow]: refused by the rule, every number named.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(err(x, w, {}, {1}, {kMax}, {1}, 1),
            "bp::conv2d: output size overflows int64 (input 5 x 5, kernel 3 x 3, stride [1], padding "
            "[9223372036854775807], dilation [1]); use a smaller padding, dilation or kernel");
  EXPECT_THAT(err(x, w, {}, {1}, {0, 1}, {1, kMax / 2 + 1}, 1),
              HasSubstr("output size overflows int64 (input 5 x 5, kernel 3 x 3, stride [1], padding [0, 1], "
                        "dilation [1, 4611686018427387904])"));
  EXPECT_THAT(err(x, w, {}, {1}, {kMax / 2}, {1}, 1), HasSubstr("output size overflows int64"));
  EXPECT_THAT(err(x, randomTensor({2, 4, 0, 3}, f, 1), {}, {1}, {kMax / 2 - 10}, {kMax, 1}, 1),
              HasSubstr("output size overflows int64"));
  EXPECT_THAT(err(x, randomTensor({2, 4, 3, 3}, ScalarType::Float64, 1), {}, {1}, {0}, {1}, 1),
              HasSubstr("argument 'weight' has dtype float64 but 'input' has float32"));
  EXPECT_THAT(err(randomTensor({1, 4, 5, 5}, ScalarType::Bool, 1), randomTensor({2, 4, 3, 3}, ScalarType::Bool, 1), {},
                  {1}, {0}, {1}, 1),
              HasSubstr("bp::conv2d: argument 'input' has dtype bool, which this op does not accept (accepted: "));
  {
    // Integers convolve in their dtype, wrapping as PyTorch's slow path:
    // int8 100 * 2 + 100 * 2 is 400, which wraps to -112.
    const Tensor xi = fromDoubles({100, 100}, {1, 2, 1, 1}, ScalarType::Int8);
    const Tensor wi = fromDoubles({2, 2}, {1, 2, 1, 1}, ScalarType::Int8);
    const Tensor r = conv(xi, wi, {}, {1}, {0}, {1}, 1);
    EXPECT_EQ(r.dtype(), ScalarType::Int8);
    EXPECT_EQ(values(r), std::vector<double>{-112});
    const Tensor ru = conv(fromDoubles({3, 4}, {1, 2, 1, 1}, ScalarType::UInt8),
                           fromDoubles({5, 6}, {1, 2, 1, 1}, ScalarType::UInt8), {}, {1}, {0}, {1}, 1);
    EXPECT_EQ(values(ru), std::vector<double>{39});
    // int16 products of -1 and -32768 (65535 * 32768 in unsigned arithmetic).
    const Tensor r16 = conv(fromDoubles({-1, -32768}, {1, 2, 1, 1}, ScalarType::Int16),
                            fromDoubles({-1, -1}, {1, 2, 1, 1}, ScalarType::Int16), {}, {1}, {0}, {1}, 1);
    EXPECT_EQ(values(r16), std::vector<double>{-32767});  // 1 + 32768 wraps to -32767
  }
  EXPECT_THAT(err(randomTensor({1, 4, 5, 5}, f, 1, -2, 2, testDevice()), w, {}, {1}, {0}, {1}, 1),
              HasSubstr("expected all tensors on one device"));
  // The rule runs before any kernel on every device.
  EXPECT_THAT(err(randomTensor({1, 3, 5, 5}, f, 1, -2, 2, testDevice()),
                  randomTensor({2, 4, 3, 3}, f, 1, -2, 2, testDevice()), {}, {1}, {0}, {1}, 1),
              HasSubstr("to have 4 channels, but it has 3"));
}

// --- pooling reference (PyTorch's rules, in double)

int64_t refPoolSize(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil_mode) {
  const int64_t eff = d * (k - 1) + 1;
  int64_t out = ceil_mode ? (in + 2 * p - eff + s - 1) / s + 1 : (in + 2 * p - eff) / s + 1;
  // With ceil_mode the last window must start inside the input or left padding.
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

struct PoolCase {
  V input;  // N, C, H, W
  V kernel, stride, padding, dilation;
  bool ceil_mode;
};

std::vector<double> refPool(bool is_max, const std::vector<double>& x, const PoolCase& c, bool count_include_pad,
                            std::optional<int64_t> divisor, V& out_sizes) {
  const int64_t planes = c.input[0] * c.input[1], h = c.input[2], w = c.input[3];
  const V s = c.stride.empty() ? c.kernel : c.stride;
  const int64_t oh = refPoolSize(h, c.kernel[0], c.padding[0], s[0], c.dilation[0], c.ceil_mode);
  const int64_t ow = refPoolSize(w, c.kernel[1], c.padding[1], s[1], c.dilation[1], c.ceil_mode);
  out_sizes = {c.input[0], c.input[1], oh, ow};
  std::vector<double> out;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xo = 0; xo < ow; ++xo) {
        double best = -INFINITY, sum = 0;
        int64_t count = 0, padded = 0;
        for (int64_t ky = 0; ky < c.kernel[0]; ++ky)
          for (int64_t kx = 0; kx < c.kernel[1]; ++kx) {
            const int64_t iy = y * s[0] - c.padding[0] + ky * c.dilation[0];
            const int64_t ix = xo * s[1] - c.padding[1] + kx * c.dilation[1];
            // Window positions inside the padded input count for
            // count_include_pad; ceil_mode overhang beyond it does not.
            if (iy < h + c.padding[0] && ix < w + c.padding[1]) ++padded;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            const double v = x[static_cast<size_t>((p * h + iy) * w + ix)];
            if (v > best || std::isnan(v)) best = std::isnan(best) ? best : v;
            sum += v;
            ++count;
          }
        if (is_max)
          out.push_back(best);
        else
          out.push_back(sum / static_cast<double>(divisor ? *divisor : count_include_pad ? padded : count));
      }
  return out;
}

Tensor maxPool(const Tensor& x, const PoolCase& c) {
  return callT("max_pool2d", {x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode});
}
Tensor avgPool(const Tensor& x, const PoolCase& c, bool count_include_pad, std::optional<int64_t> divisor) {
  return callT("avg_pool2d", {x, c.kernel, c.stride, c.padding, c.ceil_mode, count_include_pad,
                              divisor ? IValue(*divisor) : IValue()});
}

const std::vector<PoolCase>& poolCases() {
  static const std::vector<PoolCase> cases = {
      {{2, 3, 6, 7}, {2, 2}, {}, {0, 0}, {1, 1}, false},
      {{1, 2, 7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
      {{1, 2, 7, 8}, {3, 2}, {2, 3}, {1, 1}, {1, 1}, true},
      {{2, 1, 5, 5}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true},
      {{1, 1, 3, 3}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true},  // last window would start in the right padding
      {{1, 2, 9, 8}, {3, 2}, {1, 2}, {1, 1}, {2, 1}, true},  // dilation (max only)
      {{0, 2, 4, 4}, {2, 2}, {}, {0, 0}, {1, 1}, false},     // empty batch
      // Larger planes, for oneDNN's vectorized float32 paths. With
      // count_include_pad the first stays within the padding (oneDNN), the
      // second has ceil_mode windows past it (loop).
      {{2, 8, 16, 18}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
      {{1, 8, 17, 20}, {3, 3}, {2, 2}, {0, 1}, {1, 1}, true},
  };
  return cases;
}

TEST(NNPool, MaxPoolMatchesReference) {
  uint32_t seed = 5;
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float64, ScalarType::BFloat16, ScalarType::Float16})
    for (const PoolCase& c : poolCases()) {
      SCOPED_TRACE(::testing::PrintToString(c.input) + " kernel " + ::testing::PrintToString(c.kernel));
      Tensor x = randomTensor(c.input, dtype, ++seed);
      V sizes;
      std::vector<double> expected = refPool(true, values(x), c, true, std::nullopt, sizes);
      expectClose(maxPool(x, c), expected, sizes, dtype);
      // Non-contiguous (channels-last storage) input.
      expectClose(maxPool(x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}), c), expected, sizes, dtype);
    }
}

TEST(NNPool, AvgPoolMatchesReference) {
  uint32_t seed = 50;
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float64, ScalarType::BFloat16})
    for (const PoolCase& c : poolCases()) {
      if (c.dilation != V{1, 1}) continue;
      for (bool include_pad : {true, false})
        for (std::optional<int64_t> divisor : {std::optional<int64_t>(), std::optional<int64_t>(3)}) {
          SCOPED_TRACE(::testing::PrintToString(c.input) + " kernel " + ::testing::PrintToString(c.kernel) +
                       (include_pad ? " include_pad" : "") + (divisor ? " divisor" : ""));
          Tensor x = randomTensor(c.input, dtype, ++seed);
          V sizes;
          std::vector<double> expected = refPool(false, values(x), c, include_pad, divisor, sizes);
          expectClose(avgPool(x, c, include_pad, divisor), expected, sizes, dtype);
          expectClose(avgPool(x.transpose(2, 3).contiguous().transpose(2, 3), c, include_pad, divisor), expected, sizes,
                      dtype);
        }
    }
}

// int64 average pooling divides the sum with truncation (toward zero), as
// PyTorch's CPU kernel.
TEST(NNPool, AvgPoolInt64Truncates) {
  Tensor x = fromDoubles({1, 2, 3, 5, -1, -2, -3, -5}, {2, 1, 2, 2}, ScalarType::Int64);
  Tensor y = callT("avg_pool2d", {x, V{2}, V{}, V{0}, false, true, IValue()});
  EXPECT_EQ(y.dtype(), ScalarType::Int64);
  EXPECT_EQ(values(y), (std::vector<double>{2, -2}));
  // divisor_override -1 negates, even the lowest value's sum (wrapping).
  Tensor low = fromDoubles({-9223372036854775808.0}, {1, 1, 1}, ScalarType::Int64);
  EXPECT_EQ(values(callT("avg_pool2d", {low, V{1}, V{}, V{0}, false, true, IValue(int64_t{-1})})),
            (std::vector<double>{-9223372036854775808.0}));
  EXPECT_THAT(errorOf([&] {
                callT("avg_pool2d", {fromDoubles({1, 2, 3, 4}, {1, 2, 2}, ScalarType::Int32), V{2}, V{}, V{0}, false,
                                     true, IValue()});
              }),
              HasSubstr("argument 'self' has dtype int32, which this op does not accept"));
}

TEST(NNPool, KnownValues) {
  // PyTorch: avg_pool2d(arange(9).view(1, 1, 3, 3), 2, 2, ceil_mode=True)
  // divides the overhanging windows by their clipped size.
  Tensor x = fromDoubles({0, 1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 3, 3}, ScalarType::Float32);
  PoolCase c{{1, 1, 3, 3}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true};
  expectClose(avgPool(x, c, true, std::nullopt), {2, 3.5, 6.5, 8}, {1, 1, 2, 2}, ScalarType::Float32);
  expectClose(maxPool(x, c), {4, 5, 7, 8}, {1, 1, 2, 2}, ScalarType::Float32);
  // Last-window rule: 3 wide, kernel 2, stride 2, padding 1, ceil_mode gives
  // 2 outputs, not 3 (a third window would start in the right padding).
  PoolCase p{{1, 1, 3, 3}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true};
  EXPECT_EQ(maxPool(x, p).sizes(), IntArrayRef(V{1, 1, 2, 2}));
  // count_include_pad with padding: the corner window covers 1 input value and 3 padding cells.
  expectClose(avgPool(x, p, true, std::nullopt), {0, 0.75, 2.25, 6}, {1, 1, 2, 2}, ScalarType::Float32);
  expectClose(avgPool(x, p, false, std::nullopt), {0, 1.5, 4.5, 6}, {1, 1, 2, 2}, ScalarType::Float32);
  // Unbatched input and NaN propagation (PyTorch: NaN wins max pooling).
  Tensor n = fromDoubles({1, NAN, 3, 4}, {1, 2, 2}, ScalarType::Float32);
  Tensor m = callT("max_pool2d", {n, V{2}, V{}, V{0}, V{1}, false});
  EXPECT_EQ(m.sizes(), IntArrayRef(V{1, 1, 1}));
  EXPECT_TRUE(std::isnan(values(m)[0]));
}

// float32 contiguous inputs without NaN run on oneDNN; a NaN or -inf
// anywhere sends max pooling to the loop, which must give PyTorch's answer.
TEST(NNPool, MaxPoolNanAndNegativeInfinity) {
  PoolCase c{{1, 4, 16, 16}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false};
  Tensor x = randomTensor(c.input, ScalarType::Float32, 71);
  std::vector<double> xv = values(x);
  xv[static_cast<size_t>(2 * 256 + 5 * 16 + 5)] = NAN;                                 // channel 2, row 5, column 5
  for (int64_t i = 0; i < 256; ++i) xv[static_cast<size_t>(3 * 256 + i)] = -INFINITY;  // channel 3
  V sizes;
  const std::vector<double> expected = refPool(true, xv, c, true, std::nullopt, sizes);
  Tensor y = maxPool(fromDoubles(xv, c.input, ScalarType::Float32), c);
  const std::vector<double> got = values(y);
  ASSERT_EQ(got.size(), expected.size());
  int nans = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    if (std::isnan(expected[i])) {
      ++nans;
      EXPECT_TRUE(std::isnan(got[i]));
    } else {
      EXPECT_EQ(got[i], expected[i]);
    }
  }
  EXPECT_EQ(nans, 4);  // the windows over (5, 5): output rows 2..3 x columns 2..3
  EXPECT_EQ(got[static_cast<size_t>(3 * 64)], -INFINITY);
}

// Each avg_pool2d mode on one float32 input large enough for oneDNN:
// exclude-padding and include-padding within the padded input (oneDNN),
// ceil_mode overhang (14 wide, kernel 4, stride 3, padding 2: the last
// ceil_mode window ends 1 past the padding) and divisor_override (loops).
TEST(NNPool, AvgPoolModes) {
  Tensor x = randomTensor({2, 4, 14, 14}, ScalarType::Float32, 81);
  for (bool ceil : {false, true})
    for (bool include_pad : {true, false})
      for (std::optional<int64_t> divisor : {std::optional<int64_t>(), std::optional<int64_t>(5)}) {
        PoolCase c{{2, 4, 14, 14}, {4, 4}, {3, 3}, {2, 2}, {1, 1}, ceil};
        SCOPED_TRACE(::testing::Message()
                     << "ceil " << ceil << " include_pad " << include_pad << " divisor " << divisor.value_or(0));
        V sizes;
        const std::vector<double> expected = refPool(false, values(x), c, include_pad, divisor, sizes);
        expectClose(avgPool(x, c, include_pad, divisor), expected, sizes, ScalarType::Float32);
      }
}

TEST(NNPool, DefaultsAndFallback) {
  Tensor x = randomTensor({1, 2, 6, 6}, ScalarType::Float32, 9, -2, 2, testDevice());
  Stack stack{x, V{3}};
  op("max_pool2d").callBoxed(stack);
  PoolCase c{{1, 2, 6, 6}, {3, 3}, {}, {0, 0}, {1, 1}, false};
  V sizes;
  const std::vector<double> expected = refPool(true, values(x), c, true, std::nullopt, sizes);
  expectClose(stack[0].toTensor(), expected, sizes, ScalarType::Float32);
  EXPECT_EQ(stack[0].toTensor().device(), testDevice());
}

TEST(NNPool, Errors) {
  Tensor x = randomTensor({1, 2, 5, 5}, ScalarType::Float32, 1);
  auto maxErr = [](const Tensor& x, V k, V s, V p, V d, bool ceil = false) {
    return errorOf([&] { callT("max_pool2d", {x, k, s, p, d, ceil}); });
  };
  EXPECT_THAT(maxErr(randomTensor({5, 5}, ScalarType::Float32, 1), {2}, {}, {0}, {1}),
              HasSubstr("expected a 3-D (C, H, W) or 4-D"));
  EXPECT_THAT(maxErr(randomTensor({1, 0, 5, 5}, ScalarType::Float32, 1), {2}, {}, {0}, {1}),
              HasSubstr("non-batch dimensions to be non-empty"));
  EXPECT_THAT(maxErr(x, {0}, {}, {0}, {1}), HasSubstr("kernel_size must be positive"));
  EXPECT_THAT(maxErr(x, {2}, {0}, {0}, {1}), HasSubstr("stride must be positive"));
  EXPECT_THAT(maxErr(x, {2}, {}, {0}, {0}), HasSubstr("dilation must be positive"));
  EXPECT_THAT(maxErr(x, {3}, {}, {2}, {1}), HasSubstr("padding must be at most half the kernel size"));
  EXPECT_THAT(maxErr(x, {3}, {}, {-1}, {1}), HasSubstr("padding must be non-negative"));
  EXPECT_THAT(maxErr(x, {6}, {}, {0}, {1}), HasSubstr("the output size must be positive"));
  // Note [Window geometry overflow]: a huge kernel with half of it as padding,
  // or a huge dilation, overflows the output size arithmetic.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(maxErr(x, {kMax}, {1}, {kMax / 2}, {1}),
            "bp::max_pool2d: output size overflows int64 (input 5 x 5, kernel 9223372036854775807 x "
            "9223372036854775807, stride [1], padding [4611686018427387903], dilation [1]); use a smaller padding, "
            "dilation or kernel");
  EXPECT_THAT(maxErr(x, {2}, {1}, {0}, {kMax}), HasSubstr("output size overflows int64"));
  // A huge stride in ceil mode is one window, no overflow in the rule (the
  // CPU kernel may still refuse such a stride).
  EXPECT_THAT(maxErr(x, {1}, {kMax}, {0}, {1}, true), ::testing::Not(HasSubstr("overflows")));
  EXPECT_THAT(errorOf([&] {
                callT("avg_pool2d", {x, V{kMax}, V{1}, V{kMax / 2}, false, true, IValue()});
              }),
              HasSubstr("bp::avg_pool2d: output size overflows int64 (input 5 x 5, kernel 9223372036854775807 x "
                        "9223372036854775807, stride [1], padding [4611686018427387903], dilation [1])"));
  EXPECT_THAT(errorOf([&] {
                callT("avg_pool2d", {x, V{kMax - 1}, V{kMax}, V{kMax / 2 - 1}, true, true, IValue()});
              }),
              HasSubstr("output size overflows int64"));
  EXPECT_THAT(maxErr(x, {2, 2, 2}, {}, {0}, {1}), HasSubstr("'kernel_size' must be a single int or a list of two"));
  EXPECT_THAT(maxErr(randomTensor({1, 2, 5, 5}, ScalarType::Int32, 1), {2}, {}, {0}, {1}),
              HasSubstr("argument 'self' has dtype int32, which this op does not accept (accepted: float16, bfloat16, "
                        "float32, float64)"));
  EXPECT_THAT(errorOf([&] {
                callT("avg_pool2d", {x, V{2}, V{}, V{0}, false, true, int64_t{0}});
              }),
              HasSubstr("divisor_override must not be zero"));
  EXPECT_THAT(errorOf([&] {
                callT("avg_pool2d", {x, V{2}, V{}, V{2}, false, true, IValue()});
              }),
              HasSubstr("padding must be at most half the kernel size"));
}

// --- batch_norm and layer_norm

Tensor batchNorm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rm, const Tensor& rv, bool training,
                 double momentum, double eps) {
  return callT("batch_norm", {x, optional(w), optional(b), optional(rm), optional(rv), training, momentum, eps, true});
}

TEST(NNBatchNorm, InferenceMatchesReference) {
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float64, ScalarType::BFloat16}) {
    for (const V& shape : {V{4, 3}, V{2, 3, 5}, V{2, 3, 4, 5}, V{0, 3, 4, 4}}) {
      for (bool affine : {true, false}) {
        SCOPED_TRACE(::testing::PrintToString(shape) + (affine ? " affine" : ""));
        const int64_t c = shape[1];
        Tensor x = randomTensor(shape, dtype, 7);
        Tensor w = affine ? randomTensor({c}, dtype, 8) : Tensor();
        Tensor b = affine ? randomTensor({c}, dtype, 9) : Tensor();
        Tensor rm = randomTensor({c}, dtype, 10);
        Tensor rv = randomTensor({c}, dtype, 11, 0.5, 2);
        const double eps = 1e-3;
        std::vector<double> xv = values(x), wv = affine ? values(w) : std::vector<double>(c, 1.0),
                            bv = affine ? values(b) : std::vector<double>(c, 0.0), mv = values(rm), vv = values(rv);
        const int64_t inner = c == 0 ? 0 : numelOf(shape) / std::max<int64_t>(shape[0] * c, 1);
        std::vector<double> expected(xv.size());
        for (size_t i = 0; i < xv.size(); ++i) {
          const size_t ch = static_cast<size_t>((static_cast<int64_t>(i) / inner) % c);
          expected[i] = (xv[i] - mv[ch]) / std::sqrt(vv[ch] + eps) * wv[ch] + bv[ch];
        }
        expectClose(batchNorm(x, w, b, rm, rv, false, 0.1, eps), expected, shape, dtype);
        if (shape.size() == 4) {
          Tensor xs = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
          expectClose(batchNorm(xs, w, b, rm, rv, false, 0.1, eps), expected, shape, dtype);
        }
      }
    }
  }
}

// float32 inference runs on oneDNN: weight and bias each alone, a 5-D
// input and non-float32 parameters must match the float64 loop path.
TEST(NNBatchNorm, InferenceFloat32MatchesFloat64) {
  for (const V& shape : {V{8, 16}, V{2, 16, 3, 4, 5}, V{3, 32, 9, 9}}) {
    const int64_t c = shape[1];
    Tensor x = randomTensor(shape, ScalarType::Float64, 41, -3, 3);
    Tensor w = randomTensor({c}, ScalarType::Float64, 42);
    Tensor b = randomTensor({c}, ScalarType::Float64, 43);
    Tensor rm = randomTensor({c}, ScalarType::Float64, 44);
    Tensor rv = randomTensor({c}, ScalarType::Float64, 45, 0.5, 2);
    auto f32 = [](const Tensor& t) { return t.defined() ? fromDoubles(values(t), t.sizes(), ScalarType::Float32) : t; };
    for (int params = 0; params < 4; ++params) {
      SCOPED_TRACE(::testing::PrintToString(shape) + " params " + std::to_string(params));
      const Tensor wp = params & 1 ? w : Tensor(), bp = params & 2 ? b : Tensor();
      const std::vector<double> expected = values(batchNorm(x, wp, bp, rm, rv, false, 0.1, 1e-5));
      expectClose(batchNorm(f32(x), f32(wp), f32(bp), f32(rm), f32(rv), false, 0.1, 1e-5), expected, shape,
                  ScalarType::Float32);
    }
  }
}

TEST(NNBatchNorm, TrainingUsesBatchStatisticsAndUpdatesRunningStats) {
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float64}) {
    const V shape{3, 2, 4, 3};
    Tensor x = randomTensor(shape, dtype, 21);
    Tensor w = randomTensor({2}, dtype, 22);
    Tensor b = randomTensor({2}, dtype, 23);
    Tensor rm = fromDoubles({0.5, -0.5}, {2}, dtype);
    Tensor rv = fromDoubles({1.0, 2.0}, {2}, dtype);
    const double momentum = 0.1, eps = 1e-5;
    std::vector<double> xv = values(x), wv = values(w), bv = values(b);
    std::vector<double> mean(2, 0), var(2, 0);
    const size_t inner = 12, count = 36;
    for (size_t i = 0; i < xv.size(); ++i) mean[(i / inner) % 2] += xv[i] / count;
    for (size_t i = 0; i < xv.size(); ++i) var[(i / inner) % 2] += std::pow(xv[i] - mean[(i / inner) % 2], 2) / count;
    std::vector<double> expected(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      const size_t ch = (i / inner) % 2;
      expected[i] = (xv[i] - mean[ch]) / std::sqrt(var[ch] + eps) * wv[ch] + bv[ch];
    }
    // On the CPU plugin, and on a device without kernels, where the CPU
    // fallback must copy the updated running stats back.
    for (Device device : {Device(DeviceType::CPU), testDevice()}) {
      SCOPED_TRACE(device.str());
      Tensor rm_d = stageSpan(rm, device), rv_d = stageSpan(rv, device);
      expectClose(
          batchNorm(stageSpan(x, device), stageSpan(w, device), stageSpan(b, device), rm_d, rv_d, true, momentum, eps),
          expected, shape, dtype);
      expectClose(rm_d, {0.9 * 0.5 + 0.1 * mean[0], 0.9 * -0.5 + 0.1 * mean[1]}, {2}, dtype);
      expectClose(rv_d, {0.9 * 1.0 + 0.1 * var[0] * 36 / 35, 0.9 * 2.0 + 0.1 * var[1] * 36 / 35}, {2}, dtype);
    }
    // Without running stats, training mode still normalizes with batch statistics.
    expectClose(batchNorm(x, w, b, {}, {}, true, momentum, eps), expected, shape, dtype);
  }
}

TEST(NNBatchNorm, TrainingOnAnEmptyBatchLeavesTheRunningStatsAlone) {
  Tensor x = randomTensor({0, 2, 3}, ScalarType::Float32, 1);
  Tensor rm = fromDoubles({0.5, -0.5}, {2}, ScalarType::Float32);
  Tensor rv = fromDoubles({1.0, 2.0}, {2}, ScalarType::Float32);
  Tensor y = batchNorm(x, {}, {}, rm, rv, true, 0.1, 1e-5);
  EXPECT_EQ(y.sizes(), x.sizes());
  expectClose(rm, {0.5, -0.5}, {2}, ScalarType::Float32);
  expectClose(rv, {1.0, 2.0}, {2}, ScalarType::Float32);
}

TEST(NNBatchNorm, Errors) {
  Tensor x = randomTensor({2, 3, 4}, ScalarType::Float32, 1);
  Tensor c3 = randomTensor({3}, ScalarType::Float32, 2);
  Tensor c4 = randomTensor({4}, ScalarType::Float32, 2);
  EXPECT_THAT(errorOf([&] { batchNorm(x, c3, c3, {}, {}, false, 0.1, 1e-5); }),
              HasSubstr("running_mean and running_var must be given when training=False"));
  EXPECT_THAT(errorOf([&] { batchNorm(x, c4, c3, c3, c3, false, 0.1, 1e-5); }),
              HasSubstr("expected 'weight' to be 1-D with 3 elements"));
  EXPECT_THAT(errorOf([&] { batchNorm(x, c3, c3, c3, c4, false, 0.1, 1e-5); }),
              HasSubstr("expected 'running_var' to be 1-D with 3 elements"));
  EXPECT_THAT(errorOf([&] { batchNorm(randomTensor({3}, ScalarType::Float32, 1), {}, {}, c3, c3, false, 0.1, 1e-5); }),
              HasSubstr("at least 2 dimensions"));
  EXPECT_THAT(errorOf([&] {
                batchNorm(randomTensor({1, 3}, ScalarType::Float32, 1), {}, {}, c3, c3, true, 0.1, 1e-5);
              }),
              HasSubstr("expected more than 1 value per channel when training"));
  EXPECT_THAT(errorOf([&] {
                batchNorm(randomTensor({2, 3}, ScalarType::Int64, 1), {}, {}, c3, c3, false, 0.1, 1e-5);
              }),
              HasSubstr("argument 'input' has dtype int64, which this op does not accept"));
  EXPECT_THAT(errorOf([&] {
                batchNorm(x, {}, {}, randomTensor({3}, ScalarType::Float32, 1, -2, 2, testDevice()), c3, false, 0.1,
                          1e-5);
              }),
              HasSubstr("expected all tensors on one device"));
}

Tensor layerNorm(const Tensor& x, V shape, const Tensor& w, const Tensor& b, double eps) {
  return callT("layer_norm", {x, shape, optional(w), optional(b), eps, true});
}

TEST(NNLayerNorm, MatchesReference) {
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float64, ScalarType::BFloat16, ScalarType::Float16}) {
    for (const auto& [shape, normalized] : {std::pair{V{2, 3, 4}, V{4}}, std::pair{V{2, 3, 4}, V{3, 4}},
                                            std::pair{V{5}, V{5}}, std::pair{V{0, 4}, V{4}}}) {
      for (bool affine : {true, false}) {
        SCOPED_TRACE(::testing::PrintToString(shape) + " normalized " + ::testing::PrintToString(normalized));
        const int64_t m = numelOf(normalized);
        Tensor x = randomTensor(shape, dtype, 31, -2, 2);
        Tensor w = affine ? randomTensor(normalized, dtype, 32) : Tensor();
        Tensor b = affine ? randomTensor(normalized, dtype, 33) : Tensor();
        std::vector<double> xv = values(x), wv = affine ? values(w) : std::vector<double>(m, 1.0),
                            bv = affine ? values(b) : std::vector<double>(m, 0.0);
        std::vector<double> expected(xv.size());
        const double eps = 1e-5;
        for (size_t r = 0; r * m < xv.size(); ++r) {
          double mean = 0, var = 0;
          for (int64_t j = 0; j < m; ++j) mean += xv[r * m + j] / m;
          for (int64_t j = 0; j < m; ++j) var += std::pow(xv[r * m + j] - mean, 2) / m;
          for (int64_t j = 0; j < m; ++j)
            expected[r * m + j] = (xv[r * m + j] - mean) / std::sqrt(var + eps) * wv[j] + bv[j];
        }
        // Normalizing rounds the input's error up by ~1/std: allow a few ulps more.
        const double tol = 4 * tolerance(dtype);
        expectClose(layerNorm(x, normalized, w, b, eps), expected, shape, dtype, tol);
        if (shape.size() == 3) {
          Tensor xt = x.transpose(0, 1).contiguous().transpose(0, 1);
          ASSERT_FALSE(xt.is_contiguous());
          expectClose(layerNorm(xt, normalized, w, b, eps), expected, shape, dtype, tol);
        }
      }
    }
  }
}

// float32 runs on oneDNN (any layout, after a contiguous copy): wide rows,
// several normalized dims and weight or bias alone must match the float64
// loop path.
TEST(NNLayerNorm, Float32MatchesFloat64) {
  for (const auto& [shape, normalized] :
       {std::pair{V{64, 768}, V{768}}, std::pair{V{3, 5, 6, 7}, V{6, 7}}, std::pair{V{2, 1000}, V{1000}}}) {
    Tensor x = randomTensor(shape, ScalarType::Float64, 51, -2, 5);
    Tensor w = randomTensor(normalized, ScalarType::Float64, 52);
    Tensor b = randomTensor(normalized, ScalarType::Float64, 53);
    auto f32 = [](const Tensor& t) { return t.defined() ? fromDoubles(values(t), t.sizes(), ScalarType::Float32) : t; };
    for (int params = 0; params < 4; ++params) {
      SCOPED_TRACE(::testing::PrintToString(shape) + " params " + std::to_string(params));
      const Tensor wp = params & 1 ? w : Tensor(), bp = params & 2 ? b : Tensor();
      const std::vector<double> expected = values(layerNorm(x, normalized, wp, bp, 1e-5));
      expectClose(layerNorm(f32(x), normalized, f32(wp), f32(bp), 1e-5), expected, shape, ScalarType::Float32,
                  4 * tolerance(ScalarType::Float32));
    }
  }
}

// --- variance on data with a large offset and a small spread
//
// Every variance (batch_norm in training, layer_norm, var/std) must be
// computed stably (two passes or Welford): with values 1000 + 0.01 * u the
// one-pass E[x^2] - E[x]^2 loses the spread even in double, and
// normalizing as x * scale + shift (scale ~ 100) in float32 loses it in
// the rounding of x * scale. The reference is float64 over the same
// float32 inputs; the largest error is printed for the record.
std::vector<double> offsetValues(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = static_cast<double>(static_cast<float>(1000.0 + 0.01 * u(gen)));
  return v;
}

double maxAbsError(const Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = values(got);
  EXPECT_EQ(g.size(), want.size());
  double e = 0;
  for (size_t i = 0; i < g.size() && i < want.size(); ++i) e = std::max(e, std::abs(g[i] - want[i]));
  return e;
}

// Mean and biased variance of the `n` values v[index(i)], in two passes.
std::pair<double, double> referenceMoments(const std::vector<double>& v, size_t n, auto index) {
  double mean = 0, var = 0;
  for (size_t i = 0; i < n; ++i) mean += v[index(i)];
  mean /= static_cast<double>(n);
  for (size_t i = 0; i < n; ++i) var += (v[index(i)] - mean) * (v[index(i)] - mean);
  return {mean, var / static_cast<double>(n)};
}

TEST(NNNumerics, VarianceOfLargeOffsetSmallSpreadMatchesFloat64) {
  const double eps = 1e-5;
  // batch_norm, training: [8, 4, 16, 16], statistics per channel.
  {
    const V shape{8, 4, 16, 16};
    const size_t c = 4, inner = 256, per_channel = 8 * inner;
    const std::vector<double> xv = offsetValues(numelOf(shape), 61);
    std::vector<double> expected(xv.size());
    for (size_t ch = 0; ch < c; ++ch) {
      auto index = [&](size_t i) { return ((i / inner) * c + ch) * inner + i % inner; };
      const auto [mean, var] = referenceMoments(xv, per_channel, index);
      for (size_t i = 0; i < per_channel; ++i) expected[index(i)] = (xv[index(i)] - mean) / std::sqrt(var + eps);
    }
    Tensor x = fromDoubles(xv, shape, ScalarType::Float32);
    const double err = maxAbsError(batchNorm(x, {}, {}, {}, {}, true, 0.1, eps), expected);
    std::cout << "[ numerics ] batch_norm training, float32: max |error| vs float64 = " << err << "\n";
    EXPECT_LE(err, 1e-4);
  }
  // layer_norm: [16, 1024] over the last dim (float32: oneDNN; float64: loops).
  {
    const V shape{16, 1024};
    const std::vector<double> xv = offsetValues(numelOf(shape), 62);
    std::vector<double> expected(xv.size()), var_expected(16);
    for (size_t r = 0; r < 16; ++r) {
      auto index = [&](size_t i) { return r * 1024 + i; };
      const auto [mean, var] = referenceMoments(xv, 1024, index);
      var_expected[r] = var * 1024 / 1023;
      for (size_t i = 0; i < 1024; ++i) expected[index(i)] = (xv[index(i)] - mean) / std::sqrt(var + eps);
    }
    Tensor x = fromDoubles(xv, shape, ScalarType::Float32);
    const double err = maxAbsError(layerNorm(x, {1024}, {}, {}, eps), expected);
    std::cout << "[ numerics ] layer_norm, float32: max |error| vs float64 = " << err << "\n";
    EXPECT_LE(err, 1e-4);
    // var (unbiased) and std along the rows: relative error.
    const std::vector<double> got = values(callT("var.correction", {x, V{1}, IValue(), false}));
    double rel = 0;
    for (size_t r = 0; r < 16; ++r) rel = std::max(rel, std::abs(got[r] - var_expected[r]) / var_expected[r]);
    std::cout << "[ numerics ] var, float32: max relative error vs float64 = " << rel << "\n";
    EXPECT_LE(rel, 1e-4);
  }
}

TEST(NNLayerNorm, Errors) {
  Tensor x = randomTensor({2, 3, 4}, ScalarType::Float32, 1);
  EXPECT_THAT(errorOf([&] { layerNorm(x, {3}, {}, {}, 1e-5); }),
              HasSubstr("given normalized_shape=[3], expected input whose trailing dimensions are [3]"));
  EXPECT_THAT(errorOf([&] { layerNorm(x, {}, {}, {}, 1e-5); }), HasSubstr("at least one dimension"));
  EXPECT_THAT(errorOf([&] { layerNorm(x, {4}, randomTensor({3}, ScalarType::Float32, 1), {}, 1e-5); }),
              HasSubstr("expected 'weight' of size [4]"));
  EXPECT_THAT(errorOf([&] { layerNorm(x, {2, 3, 4, 5}, {}, {}, 1e-5); }), HasSubstr("trailing dimensions"));
  EXPECT_THAT(errorOf([&] {
                layerNorm(randomTensor({2, 4}, ScalarType::Int32, 1), {4}, {}, {}, 1e-5);
              }),
              HasSubstr("argument 'input' has dtype int32, which this op does not accept"));
}

// layer_norm.out is the kernel (the functional form a composite over it):
// an out= that is a strided view gets exactly the functional's values, an
// empty one is resized, each call returns its out, and an out= of another
// dtype is refused before any kernel runs, naming the op.
TEST(NNLayerNorm, OutFormWritesStridedOutsAndRefusesOtherDtypes) {
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::BFloat16}) {
    SCOPED_TRACE(scalarTypeName(dt));
    const Tensor x = randomTensor({3, 5}, dt, 7), w = randomTensor({5}, dt, 8), b = randomTensor({5}, dt, 9);
    const std::vector<double> want = values(layerNorm(x, {5}, w, b, 1e-5));
    const Tensor strided = randomTensor({5, 3}, dt, 10).t();
    ASSERT_FALSE(strided.is_contiguous());
    const Tensor r = callT("layer_norm.out", {x, V{5}, optional(w), optional(b), 1e-5, true, strided});
    EXPECT_EQ(r.unsafeGetImpl(), strided.unsafeGetImpl());
    EXPECT_EQ(values(strided), want);
    const Tensor empty = randomTensor({0}, dt, 11);
    callT("layer_norm.out", {x, V{5}, optional(w), optional(b), 1e-5, true, empty});
    EXPECT_EQ(empty.sizes(), IntArrayRef(V{3, 5}));
    EXPECT_EQ(values(empty), want);
  }
  const Tensor x = randomTensor({2, 4}, ScalarType::Float32, 1);
  EXPECT_THAT(errorOf([&] {
                callT("layer_norm.out",
                      {x, V{4}, IValue(), IValue(), 1e-5, true, randomTensor({2, 4}, ScalarType::Float64, 2)});
              }),
              HasSubstr("bp::layer_norm.out: argument 'out' has dtype float64 but the result has dtype float32"));
  EXPECT_THAT(errorOf([&] {
                callT("layer_norm.out",
                      {x, V{3}, IValue(), IValue(), 1e-5, true, randomTensor({2, 4}, ScalarType::Float32, 2)});
              }),
              HasSubstr("bp::layer_norm.out: given normalized_shape=[3]"));
}

// --- The backward ops (Note [Backward ops]): the CPU plugin's float32 and
// float64 kernels against a double-precision reference, the composite
// (float16) against the same, and the host's rule.
TEST(NNBackwardOps, SoftmaxAndLogSoftmaxBackwardMatchTheReference) {
  const std::vector<double> g = {0.5, -1, 2, 0.25, -0.75, 1.5}, y = {0.1, 0.2, 0.7, 0.3, 0.3, 0.4};
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16}) {
    for (int64_t dim : {0, 1}) {
      const Tensor gt = fromDoubles(g, {2, 3}, dt), yt = fromDoubles(y, {2, 3}, dt);
      const std::vector<double> soft = callT("_softmax_backward_data", {gt, yt, dim, dt}).toVector<double>();
      const std::vector<double> logsoft = callT("_log_softmax_backward_data", {gt, yt, dim, dt}).toVector<double>();
      for (int64_t i = 0; i < 2; ++i) {
        for (int64_t j = 0; j < 3; ++j) {
          double s = 0, sg = 0;
          for (int64_t k = 0; k < (dim == 1 ? 3 : 2); ++k) {
            const size_t at = static_cast<size_t>(dim == 1 ? i * 3 + k : k * 3 + j);
            s += g[at] * y[at];
            sg += g[at];
          }
          const size_t at = static_cast<size_t>(i * 3 + j);
          const double tol = dt == ScalarType::Float16 ? 5e-3 : 1e-6;
          EXPECT_NEAR(soft[at], (g[at] - s) * y[at], tol) << scalarTypeName(dt) << " dim " << dim;
          EXPECT_NEAR(logsoft[at], g[at] - std::exp(y[at]) * sg, tol) << scalarTypeName(dt) << " dim " << dim;
        }
      }
    }
  }
}

// gelu_backward against the formula in double: 4 elements (the CPU's loop)
// and, for float32, 10,000 over [-8, 8) (oneDNN's kernel, Note [oneDNN gelu]).
TEST(NNBackwardOps, GeluBackwardMatchesTheReference) {
  for (int64_t n : {int64_t{4}, int64_t{10000}}) {
    std::vector<double> g(static_cast<size_t>(n)), x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      x[static_cast<size_t>(i)] = n == 4 ? std::vector<double>{-1.5, 0, 0.7, 2.5}[static_cast<size_t>(i)]
                                         : -8.0 + 16.0 * static_cast<double>(i) / static_cast<double>(n);
      g[static_cast<size_t>(i)] =
          n == 4 ? std::vector<double>{1, -2, 0.5, 3}[static_cast<size_t>(i)] : 1.0 + static_cast<double>(i % 7) / 7.0;
    }
    for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::BFloat16}) {
      if (n > 4 && dt != ScalarType::Float32) continue;
      const std::vector<double> none =
          callT("gelu_backward", {fromDoubles(g, {n}, dt), fromDoubles(x, {n}, dt), std::string("none")})
              .toVector<double>();
      const std::vector<double> tanh_form =
          callT("gelu_backward", {fromDoubles(g, {n}, dt), fromDoubles(x, {n}, dt), std::string("tanh")})
              .toVector<double>();
      const double tol = dt == ScalarType::BFloat16 ? 3e-2 : 1e-5;
      for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
        const double v = dt == ScalarType::Float64 ? x[i] : static_cast<double>(static_cast<float>(x[i]));
        const double want =
            g[i] * (0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-v * v / 2) / std::sqrt(2 * M_PI));
        const double k = std::sqrt(2 / M_PI), t = std::tanh(k * (v + 0.044715 * v * v * v));
        const double want_tanh = g[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v));
        ASSERT_NEAR(none[i], want, tol * std::max(1.0, std::abs(want))) << scalarTypeName(dt) << " x=" << v;
        ASSERT_NEAR(tanh_form[i], want_tanh, tol * std::max(1.0, std::abs(want_tanh)))
            << scalarTypeName(dt) << " x=" << v;
      }
    }
  }
}

// embedding_dense_backward: the CPU kernel (float32, float64) and the
// composite (float16 on the CPU, float32 on a device without kernels)
// against sums computed here: repeated indices add, padding_idx's row stays 0,
// scale_grad_by_freq divides by the count, int32 indices work.
TEST(NNBackwardOps, EmbeddingDenseBackwardSumsRowsByIndex) {
  const std::vector<double> g = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 5 rows of 2
  const std::vector<double> idx = {3, 0, 3, 1, 3};
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16}) {
    for (Device dev : {Device(DeviceType::CPU), testDevice()}) {
      for (ScalarType it : {ScalarType::Int64, ScalarType::Int32}) {
        for (bool scale : {false, true}) {
          SCOPED_TRACE(std::string(scalarTypeName(dt)) + " " + dev.str() + " " + std::string(scalarTypeName(it)) +
                       (scale ? " scale_grad_by_freq" : ""));
          const int64_t padding = scale ? -1 : 1;
          const Tensor got =
              callT("embedding_dense_backward",
                    {fromDoubles(g, {5, 2}, dt, dev), fromDoubles(idx, {5}, it, dev), int64_t{4}, padding, scale});
          ASSERT_EQ(got.sizes(), (IntArrayRef{4, 2}));
          const double s = scale ? 1.0 / 3 : 1.0;
          const std::vector<double> want = {3, 4, padding == 1 ? 0.0 : 7.0, padding == 1 ? 0.0 : 8.0,
                                            0, 0, (1 + 5 + 9) * s,          (2 + 6 + 10) * s};
          const std::vector<double> values = got.cpu().toVector<double>();
          for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(values[i], want[i], 1e-2) << "element " << i;
        }
      }
    }
  }
  // The CPU plugin's kernel serves float32 with int64 and int32 indices
  // (its declared dtypes name both kinds), not the composite.
  for (ScalarType it : {ScalarType::Int64, ScalarType::Int32}) {
    Profiler profiler;
    callT("embedding_dense_backward",
          {fromDoubles(g, {5, 2}, ScalarType::Float32), fromDoubles(idx, {5}, it), int64_t{4}, int64_t{-1}, false});
    profiler.stop();
    const OpReport report = profiler.report();
    const OpStats* row = report.find("bp::embedding_dense_backward", DispatchKey::CPU);
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(row->native_calls, 1u) << scalarTypeName(it) << "\n" << report.table();
  }
  // The host's rule: grad_output must be indices' shape plus one dim.
  EXPECT_THAT(errorOf([&] {
                callT("embedding_dense_backward",
                      {fromDoubles({1, 2}, {2}, ScalarType::Float32), fromDoubles({0, 1}, {2}, ScalarType::Int64),
                       int64_t{3}, int64_t{-1}, false});
              }),
              HasSubstr("grad_output must be indices' shape plus the embedding dim"));
  EXPECT_THAT(errorOf([&] {
                callT("embedding_dense_backward",
                      {fromDoubles({1, 2}, {1, 2}, ScalarType::Float32), fromDoubles({7}, {1}, ScalarType::Int64),
                       int64_t{3}, int64_t{-1}, false});
              }),
              HasSubstr("out of range"));
}

// layer_norm_backward: the CPU kernel (float32, float64) and the composite
// (float16 on the CPU, float32 on a device without kernels) against the
// gradients computed here in double, over two normalized dims, with and
// without a weight (of another dtype than the input's); the parameters'
// gradients come in the weight's dtype; no rows give zero sums.
TEST(NNBackwardOps, LayerNormBackwardMatchesTheReference) {
  const int64_t rows = 3, m = 6;
  const Tensor x64 = randomTensor({rows, 2, 3}, ScalarType::Float64, 5, -2, 2);
  const Tensor g64 = randomTensor({rows, 2, 3}, ScalarType::Float64, 6, -1, 1);
  const Tensor w64 = randomTensor({2, 3}, ScalarType::Float64, 7, 0.5, 1.5);
  const std::vector<double> x = values(x64), g = values(g64), w = values(w64.to(ScalarType::Float32));
  const double eps = 1e-5;
  for (bool with_weight : {true, false}) {
    // The reference, in double.
    std::vector<double> gi(x.size()), gw(m, 0), gb(m, 0);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0, mg = 0, mgx = 0;
      for (int64_t j = 0; j < m; ++j) mean += x[r * m + j] / m;
      for (int64_t j = 0; j < m; ++j) var += (x[r * m + j] - mean) * (x[r * m + j] - mean) / m;
      const double rstd = 1 / std::sqrt(var + eps);
      auto xhat = [&](int64_t j) { return (x[r * m + j] - mean) * rstd; };
      auto scaled = [&](int64_t j) { return g[r * m + j] * (with_weight ? w[j] : 1.0); };
      for (int64_t j = 0; j < m; ++j) {
        mg += scaled(j) / m;
        mgx += scaled(j) * xhat(j) / m;
        gw[j] += g[r * m + j] * xhat(j);
        gb[j] += g[r * m + j];
      }
      for (int64_t j = 0; j < m; ++j) gi[r * m + j] = rstd * (scaled(j) - mg - xhat(j) * mgx);
    }
    for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16}) {
      for (Device dev : {Device(DeviceType::CPU), testDevice()}) {
        SCOPED_TRACE(std::string(scalarTypeName(dt)) + " " + dev.str() + (with_weight ? " weight" : ""));
        const ScalarType wt = ScalarType::Float32;  // the reference's weights are float32's
        Stack stack{g64.to(dev, dt), x64.to(dev, dt), IValue(std::vector<int64_t>{2, 3}),
                    with_weight ? IValue(w64.to(dev, wt)) : IValue(), eps};
        op("layer_norm_backward").callBoxed(stack);
        ASSERT_EQ(stack.size(), 3u);
        const Tensor got_i = stack[0].toTensor(), got_w = stack[1].toTensor(), got_b = stack[2].toTensor();
        EXPECT_EQ(got_i.dtype(), dt);
        EXPECT_EQ(got_w.dtype(), with_weight ? wt : dt);
        ASSERT_EQ(got_w.sizes(), (IntArrayRef{2, 3}));
        ASSERT_EQ(got_b.sizes(), (IntArrayRef{2, 3}));
        const double tol = dt == ScalarType::Float16 ? 2e-2 : dt == ScalarType::Float32 ? 1e-5 : 1e-12;
        const std::vector<double> vi = values(got_i.cpu()), vw = values(got_w.cpu()), vb = values(got_b.cpu());
        for (size_t i = 0; i < gi.size(); ++i) EXPECT_NEAR(vi[i], gi[i], tol * 10) << "grad_input " << i;
        for (int64_t j = 0; j < m; ++j) {
          // In the weight's dtype (float32) when there is one.
          const double param_tol = with_weight ? std::max(tol, 1e-6) : tol;
          EXPECT_NEAR(vw[static_cast<size_t>(j)], gw[static_cast<size_t>(j)], param_tol * 10) << "grad_weight " << j;
          EXPECT_NEAR(vb[static_cast<size_t>(j)], gb[static_cast<size_t>(j)], param_tol * 10) << "grad_bias " << j;
        }
      }
    }
  }
  // No rows: an empty input gradient and zero sums.
  const Tensor empty = randomTensor({0, 4}, ScalarType::Float32, 1);
  Stack stack{empty, empty, IValue(std::vector<int64_t>{4}), IValue(), 1e-5};
  op("layer_norm_backward").callBoxed(stack);
  ASSERT_EQ(stack.size(), 3u);
  EXPECT_EQ(stack[0].toTensor().numel(), 0);
  EXPECT_EQ(values(stack[1].toTensor()), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(values(stack[2].toTensor()), (std::vector<double>{0, 0, 0, 0}));
  // The host's rule.
  const Tensor a = randomTensor({2, 4}, ScalarType::Float32, 2);
  Stack bad{a, a, IValue(std::vector<int64_t>{3}), IValue(), 1e-5};
  EXPECT_THAT(errorOf([&] { op("layer_norm_backward").callBoxed(bad); }),
              HasSubstr("bp::layer_norm_backward: given normalized_shape=[3], expected input whose trailing "
                        "dimensions are [3]"));
  Stack bad_weight{a, a, IValue(std::vector<int64_t>{4}), IValue(randomTensor({3}, ScalarType::Float32, 3)), 1e-5};
  EXPECT_THAT(errorOf([&] { op("layer_norm_backward").callBoxed(bad_weight); }),
              HasSubstr("expected 'weight' of size [4] (normalized_shape), but got [3]"));
  Stack bad_grad{randomTensor({2, 3}, ScalarType::Float32, 4), a, IValue(std::vector<int64_t>{4}), IValue(), 1e-5};
  EXPECT_THAT(errorOf([&] { op("layer_norm_backward").callBoxed(bad_grad); }),
              HasSubstr("'grad_output' has shape [2, 3] but 'input' has shape [2, 4]"));
}

// --- The window ops' backward ops (Note [Window op gradients]): the CPU
// kernels (oneDNN for float32 convolutions, loops otherwise) and the
// composites (float16 on the CPU; every dtype on a device without kernels)
// against gradients computed here in double by the definition: each output
// element's gradient flows back to the inputs (and weights) it was made of.

// conv2d's three gradients from refConv's sums, in double.
struct ConvGrads {
  std::vector<double> input, weight, bias;
};
ConvGrads refConvBackward(const std::vector<double>& go, const std::vector<double>& x, const std::vector<double>& w,
                          const ConvCase& c, const V& out) {
  const int64_t n = c.input[0], ch = c.input[1], h = c.input[2], wd = c.input[3];
  const int64_t oc = c.weight[0], icg = c.weight[1], kh = c.weight[2], kw = c.weight[3];
  const int64_t oh = out[2], ow = out[3], ocg = oc / c.groups;
  ConvGrads g{std::vector<double>(x.size()), std::vector<double>(w.size()), std::vector<double>(oc)};
  for (int64_t in = 0; in < n; ++in)
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          const double gv = go[static_cast<size_t>(((in * oc + o) * oh + y) * ow + xo)];
          g.bias[static_cast<size_t>(o)] += gv;
          for (int64_t i = 0; i < icg; ++i) {
            const int64_t ic = (o / ocg) * icg + i;
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = y * c.stride[0] - c.padding[0] + ky * c.dilation[0];
                const int64_t ix = xo * c.stride[1] - c.padding[1] + kx * c.dilation[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                const size_t xi = static_cast<size_t>(((in * ch + ic) * h + iy) * wd + ix);
                const size_t wi = static_cast<size_t>(((o * icg + i) * kh + ky) * kw + kx);
                g.input[xi] += gv * w[wi];
                g.weight[wi] += gv * x[xi];
              }
          }
        }
  return g;
}

std::tuple<Tensor, Tensor, Tensor> convBackward(const Tensor& go, const Tensor& x, const Tensor& w, const ConvCase& c,
                                                std::vector<bool> mask) {
  Stack stack{go, x, w, c.stride, c.padding, c.dilation, c.groups, IValue(std::move(mask))};
  op("conv2d_backward").callBoxed(stack);
  EXPECT_EQ(stack.size(), 3u);
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
}

TEST(NNBackwardOps, Conv2dBackwardMatchesTheReference) {
  const std::vector<ConvCase> cases = {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 1},
      {{1, 4, 9, 8}, {6, 2, 3, 2}, true, {2, 1}, {1, 0}, {1, 2}, 2},  // groups, stride, dilation
      // The forward's last windows leave padded rows and columns unread.
      {{2, 2, 6, 6}, {3, 2, 3, 3}, true, {2, 2}, {1, 1}, {1, 1}, 1},
      {{1, 3, 5, 5}, {2, 3, 1, 1}, true, {3, 3}, {0, 0}, {1, 1}, 1},
      {{3, 4, 8, 8}, {8, 1, 3, 3}, true, {1, 1}, {2, 2}, {2, 2}, 4},  // depthwise-like
  };
  uint32_t seed = 200;
  for (const ConvCase& c : cases) {
    const Tensor x64 = randomTensor(c.input, ScalarType::Float64, ++seed);
    const Tensor w64 = randomTensor(c.weight, ScalarType::Float64, ++seed);
    V out;
    refConv(values(x64), values(w64), {}, c, out);
    const Tensor go64 = randomTensor(out, ScalarType::Float64, ++seed);
    const ConvGrads want = refConvBackward(values(go64), values(x64), values(w64), c, out);
    for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16}) {
      for (Device dev : {Device(DeviceType::CPU), testDevice()}) {
        SCOPED_TRACE(::testing::Message() << "input " << ::testing::PrintToString(c.input) << " weight "
                                          << ::testing::PrintToString(c.weight) << " " << dt << " " << dev.str());
        const double tol = dt == ScalarType::Float16 ? 5e-2 : dt == ScalarType::Float32 ? 1e-4 : 1e-12;
        auto [gi, gw, gb] = convBackward(go64.to(dev, dt), x64.to(dev, dt), w64.to(dev, dt), c, {true, true, true});
        expectClose(gi.cpu(), want.input, IntArrayRef(c.input), dt, tol);
        expectClose(gw.cpu(), want.weight, IntArrayRef(c.weight), dt, tol);
        expectClose(gb.cpu(), want.bias, IntArrayRef({c.weight[0]}), dt, tol);
      }
    }
  }
}

// output_mask: only what it asks for is computed; the rest comes back
// undefined, from the CPU plugin's kernel (across the plugin ABI: Note
// [Masked returns]) and from the composite alike. An unbatched input and a
// non-contiguous one give the batched, contiguous results.
TEST(NNBackwardOps, Conv2dBackwardComputesWhatItsMaskAsksFor) {
  const ConvCase c{{1, 2, 5, 5}, {3, 2, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 1};
  const Tensor x = randomTensor(c.input, ScalarType::Float64, 1), w = randomTensor(c.weight, ScalarType::Float64, 2);
  const Tensor go = randomTensor({1, 3, 5, 5}, ScalarType::Float64, 3);
  const ConvGrads want = refConvBackward(values(go), values(x), values(w), c, {1, 3, 5, 5});
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16}) {
    for (int which = 0; which < 3; ++which) {
      SCOPED_TRACE(::testing::Message() << dt << " mask " << which);
      std::vector<bool> mask(3, false);
      mask[static_cast<size_t>(which)] = true;
      Profiler profiler;
      auto [gi, gw, gb] = convBackward(go.to(dt), x.to(dt), w.to(dt), c, mask);
      profiler.stop();
      // The CPU plugin's kernel for float32 and float64; the composite else.
      const OpReport report = profiler.report();
      const OpStats* row = report.find("bp::conv2d_backward", DispatchKey::CPU);
      ASSERT_NE(row, nullptr);
      EXPECT_EQ(row->native_calls, dt == ScalarType::Float16 ? 0u : 1u) << report.table();
      EXPECT_EQ(gi.defined(), which == 0);
      EXPECT_EQ(gw.defined(), which == 1);
      EXPECT_EQ(gb.defined(), which == 2);
      const double tol = dt == ScalarType::Float16 ? 5e-2 : 1e-4;
      if (which == 0) expectClose(gi, want.input, IntArrayRef(c.input), dt, tol);
      if (which == 1) expectClose(gw, want.weight, IntArrayRef(c.weight), dt, tol);
      if (which == 2) expectClose(gb, want.bias, IntArrayRef({3}), dt, tol);
    }
  }
  // Unbatched, and a channels-last input and gradient.
  auto [gi, gw, gb] = convBackward(go.squeeze(0).to(ScalarType::Float32), x.squeeze(0).to(ScalarType::Float32),
                                   w.to(ScalarType::Float32), c, {true, true, true});
  expectClose(gi, want.input, IntArrayRef({2, 5, 5}), ScalarType::Float32, 1e-4);
  expectClose(gw, want.weight, IntArrayRef(c.weight), ScalarType::Float32, 1e-4);
  const Tensor x_cl = x.to(ScalarType::Float32).permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  const Tensor go_cl = go.to(ScalarType::Float32).permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  auto [gi2, gw2, gb2] = convBackward(go_cl, x_cl, w.to(ScalarType::Float32), c, {true, true, true});
  expectClose(gi2, want.input, IntArrayRef(c.input), ScalarType::Float32, 1e-4);
  expectClose(gw2, want.weight, IntArrayRef(c.weight), ScalarType::Float32, 1e-4);
  expectClose(gb2, want.bias, IntArrayRef({3}), ScalarType::Float32, 1e-4);
}

TEST(NNBackwardOps, Conv2dBackwardRefusesABadGradientOrMask) {
  const ConvCase c{{1, 2, 5, 5}, {3, 2, 3, 3}, true, {1, 1}, {0, 0}, {1, 1}, 1};
  const Tensor x = randomTensor(c.input, ScalarType::Float32, 1), w = randomTensor(c.weight, ScalarType::Float32, 2);
  EXPECT_THAT(errorOf([&] {
                convBackward(randomTensor({1, 3, 5, 5}, ScalarType::Float32, 3), x, w, c, {true, true, true});
              }),
              HasSubstr("bp::conv2d_backward: 'grad_output' has shape [1, 3, 5, 5] but the forward's output has "
                        "shape [1, 3, 3, 3]"));
  EXPECT_THAT(errorOf([&] {
                convBackward(randomTensor({1, 3, 3, 3}, ScalarType::Float64, 3), x, w, c, {true, true, true});
              }),
              HasSubstr("'grad_output' has dtype float64 but the input has float32"));
  EXPECT_THAT(errorOf([&] {
                convBackward(randomTensor({1, 3, 3, 3}, ScalarType::Float32, 3), x, w, c, {true});
              }),
              HasSubstr("a bool[] argument of 1 values was passed where the kernel takes 3"));
  EXPECT_THAT(errorOf([&] {
                convBackward(randomTensor({1, 3, 3, 3}, ScalarType::Float32, 3), x,
                             randomTensor({3, 1, 3, 3}, ScalarType::Float32, 4), c, {true, true, true});
              }),
              HasSubstr("bp::conv2d_backward: given groups=1 and weight of size [3, 1, 3, 3]"));
}

// The input's gradient of max_pool2d (each window's gradient to the element
// the forward picks: the first greater than every earlier one, in window
// order, or the first NaN) and of avg_pool2d (divided by the forward's
// divisor, to every element of the window inside the input), in double.
std::vector<double> refPoolBackward(bool is_max, const std::vector<double>& x, const std::vector<double>& go,
                                    const PoolCase& c, bool count_include_pad, std::optional<int64_t> divisor,
                                    const V& out) {
  const int64_t planes = c.input[0] * c.input[1], h = c.input[2], w = c.input[3], oh = out[2], ow = out[3];
  const V s = c.stride.empty() ? c.kernel : c.stride;
  std::vector<double> gi(x.size());
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xo = 0; xo < ow; ++xo) {
        const double gv = go[static_cast<size_t>((p * oh + y) * ow + xo)];
        std::vector<size_t> inside;
        int64_t padded = 0, best = -1;
        for (int64_t ky = 0; ky < c.kernel[0]; ++ky)
          for (int64_t kx = 0; kx < c.kernel[1]; ++kx) {
            const int64_t iy = y * s[0] - c.padding[0] + ky * c.dilation[0];
            const int64_t ix = xo * s[1] - c.padding[1] + kx * c.dilation[1];
            if (iy < h + c.padding[0] && ix < w + c.padding[1]) ++padded;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            const size_t i = static_cast<size_t>((p * h + iy) * w + ix);
            inside.push_back(i);
            const bool best_nan = best >= 0 && std::isnan(x[static_cast<size_t>(best)]);
            if (!best_nan && (best < 0 || x[i] > x[static_cast<size_t>(best)] || std::isnan(x[i])))
              best = static_cast<int64_t>(i);
          }
        if (is_max) {
          gi[static_cast<size_t>(best)] += gv;
        } else {
          const double d = static_cast<double>(divisor             ? *divisor
                                               : count_include_pad ? padded
                                                                   : static_cast<int64_t>(inside.size()));
          for (size_t i : inside) gi[i] += gv / d;
        }
      }
  return gi;
}

TEST(NNBackwardOps, PoolBackwardsMatchTheReference) {
  uint32_t seed = 300;
  for (const PoolCase& c : poolCases()) {
    // Values on a coarse grid, so that windows have ties (the first
    // maximum takes the gradient).
    const Tensor x64 = randomTensor(c.input, ScalarType::Int64, ++seed, -4, 4).to(ScalarType::Float64);
    V out;
    refPool(true, values(x64), c, true, std::nullopt, out);
    const Tensor go64 = randomTensor(out, ScalarType::Float64, ++seed);
    const std::vector<double> want_max = refPoolBackward(true, values(x64), values(go64), c, true, std::nullopt, out);
    const bool dilated = c.dilation != V{1, 1};
    for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16}) {
      for (Device dev : {Device(DeviceType::CPU), testDevice()}) {
        SCOPED_TRACE(::testing::Message() << ::testing::PrintToString(c.input) << " kernel "
                                          << ::testing::PrintToString(c.kernel) << " " << dt << " " << dev.str());
        const Tensor x = x64.to(dev, dt), go = go64.to(dev, dt);
        const Tensor got =
            callT("max_pool2d_backward", {go, x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode});
        expectClose(got.cpu(), want_max, IntArrayRef(c.input), dt);
        // A channels-last input reads through its strides.
        const Tensor x_cl = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
        expectClose(
            callT("max_pool2d_backward", {go, x_cl, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode}).cpu(),
            want_max, IntArrayRef(c.input), dt);
        if (dilated) continue;  // avg_pool2d has no dilation
        for (bool include_pad : {true, false}) {
          for (std::optional<int64_t> divisor : {std::optional<int64_t>(), std::optional<int64_t>(3)}) {
            const std::vector<double> want =
                refPoolBackward(false, values(x64), values(go64), c, include_pad, divisor, out);
            expectClose(callT("avg_pool2d_backward", {go, x, c.kernel, c.stride, c.padding, c.ceil_mode, include_pad,
                                                      divisor ? IValue(*divisor) : IValue()})
                            .cpu(),
                        want, IntArrayRef(c.input), dt);
          }
        }
      }
    }
  }
}

// The first NaN in a window takes its gradient, as PyTorch's argmax picks
// it; an all -inf window's gradient goes to its first element inside the
// input, never to the padding. The CPU kernel and the composite alike.
TEST(NNBackwardOps, MaxPoolBackwardFollowsTheForwardsPick) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16}) {
    for (Device dev : {Device(DeviceType::CPU), testDevice()}) {
      SCOPED_TRACE(::testing::Message() << dt << " " << dev.str());
      const Tensor x = fromDoubles({1, nan, 5, nan, -inf, -inf, -inf, -inf}, {1, 1, 2, 4}, dt).to(dev);
      EXPECT_EQ(values(callT("max_pool2d_backward", {fromDoubles({10, 20}, {1, 1, 1, 2}, dt).to(dev), x, V{2, 2}, V{},
                                                     V{0, 0}, V{1, 1}, false})),
                (std::vector<double>{0, 10, 0, 20, 0, 0, 0, 0}));
      // Padded: the windows of the last row hold padding and -inf only.
      EXPECT_EQ(values(callT("max_pool2d_backward", {fromDoubles({1, 2, 3, 4, 5, 6}, {1, 1, 2, 3}, dt).to(dev), x,
                                                     V{2, 2}, V{}, V{1, 1}, V{1, 1}, false})),
                (std::vector<double>{1, 2, 0, 3, 4, 5, 0, 6}));
    }
  }
  const Tensor x = randomTensor({1, 1, 4, 4}, ScalarType::Float32, 1);
  EXPECT_THAT(errorOf([&] {
                callT("max_pool2d_backward",
                      {randomTensor({1, 1, 3, 3}, ScalarType::Float32, 2), x, V{2, 2}, V{}, V{0, 0}, V{1, 1}, false});
              }),
              HasSubstr("bp::max_pool2d_backward: 'grad_output' has shape [1, 1, 3, 3] but the forward's output has "
                        "shape [1, 1, 2, 2]"));
  EXPECT_THAT(errorOf([&] {
                callT("avg_pool2d_backward", {randomTensor({1, 1, 2, 2}, ScalarType::Float32, 2), x, V{2, 2}, V{},
                                              V{0, 0}, false, true, int64_t{0}});
              }),
              HasSubstr("bp::avg_pool2d_backward: divisor_override must not be zero"));
}

// batch_norm_backward (Note [batch_norm's backward]): the CPU kernel
// (float32, float64) and the composite (float16 on the CPU, every dtype on a
// device without kernels) against the gradients computed here in double,
// in training (batch statistics) and evaluation (running statistics), with
// and without a weight, 2-D and 4-D inputs; output_mask leaves out what it
// does not ask for.
TEST(NNBackwardOps, BatchNormBackwardMatchesTheReference) {
  const double eps = 1e-5;
  for (const V& shape : {V{3, 4, 5, 2}, V{6, 3}}) {
    const int64_t n = shape[0], ch = shape[1], spatial = numelOf(shape) / (n * ch), m = n * spatial;
    const Tensor x64 = randomTensor(shape, ScalarType::Float64, 11, -2, 3);
    const Tensor g64 = randomTensor(shape, ScalarType::Float64, 12, -1, 1);
    const Tensor w64 = randomTensor({ch}, ScalarType::Float64, 13, 0.5, 1.5);
    const Tensor rm64 = randomTensor({ch}, ScalarType::Float64, 14, -0.5, 0.5);
    const Tensor rv64 = randomTensor({ch}, ScalarType::Float64, 15, 0.5, 2);
    const std::vector<double> x = values(x64), g = values(g64), w = values(w64), rm = values(rm64), rv = values(rv64);
    auto at = [&](int64_t i, int64_t c, int64_t s) { return static_cast<size_t>((i * ch + c) * spatial + s); };
    for (bool training : {true, false}) {
      for (bool with_weight : {true, false}) {
        std::vector<double> gi(x.size()), gw(static_cast<size_t>(ch)), gb(static_cast<size_t>(ch));
        for (int64_t c = 0; c < ch; ++c) {
          double mean = rm[static_cast<size_t>(c)], var = rv[static_cast<size_t>(c)];
          if (training) {
            mean = var = 0;
            for (int64_t i = 0; i < n; ++i)
              for (int64_t s = 0; s < spatial; ++s) mean += x[at(i, c, s)] / static_cast<double>(m);
            for (int64_t i = 0; i < n; ++i)
              for (int64_t s = 0; s < spatial; ++s)
                var += (x[at(i, c, s)] - mean) * (x[at(i, c, s)] - mean) / static_cast<double>(m);
          }
          const double rstd = 1 / std::sqrt(var + eps), wc = with_weight ? w[static_cast<size_t>(c)] : 1.0;
          double mg = 0, mgx = 0;
          for (int64_t i = 0; i < n; ++i)
            for (int64_t s = 0; s < spatial; ++s) {
              const double xhat = (x[at(i, c, s)] - mean) * rstd, gv = g[at(i, c, s)];
              gw[static_cast<size_t>(c)] += gv * xhat;
              gb[static_cast<size_t>(c)] += gv;
              mg += gv * wc / static_cast<double>(m);
              mgx += gv * wc * xhat / static_cast<double>(m);
            }
          for (int64_t i = 0; i < n; ++i)
            for (int64_t s = 0; s < spatial; ++s) {
              const double xhat = (x[at(i, c, s)] - mean) * rstd, gv = g[at(i, c, s)] * wc;
              gi[at(i, c, s)] = training ? rstd * (gv - mg - xhat * mgx) : gv * rstd;
            }
        }
        for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16}) {
          for (Device dev : {Device(DeviceType::CPU), testDevice()}) {
            SCOPED_TRACE(::testing::Message()
                         << ::testing::PrintToString(shape) << " " << dt << " " << dev.str()
                         << (training ? " training" : " evaluation") << (with_weight ? " weight" : ""));
            const double tol = dt == ScalarType::Float16 ? 5e-2 : dt == ScalarType::Float32 ? 1e-4 : 1e-10;
            for (const std::vector<bool>& mask : {std::vector<bool>{true, true, true}, {false, true, false}}) {
              // Running statistics given in training too (they do not count).
              Stack stack{g64.to(dev, dt),
                          x64.to(dev, dt),
                          with_weight ? IValue(w64.to(dev, dt)) : IValue(),
                          rm64.to(dev, dt),
                          rv64.to(dev, dt),
                          training,
                          eps,
                          IValue(mask)};
              Profiler profiler;
              op("batch_norm_backward").callBoxed(stack);
              profiler.stop();
              ASSERT_EQ(stack.size(), 3u);
              const Tensor got_i = stack[0].toTensor(), got_w = stack[1].toTensor(), got_b = stack[2].toTensor();
              ASSERT_EQ(got_i.defined(), mask[0]);
              ASSERT_EQ(got_w.defined(), mask[1]);
              ASSERT_EQ(got_b.defined(), mask[2]);
              if (mask[0]) expectClose(got_i.cpu(), gi, IntArrayRef(shape), dt, tol);
              expectClose(got_w.cpu(), gw, IntArrayRef({ch}), dt, tol);
              if (mask[2]) expectClose(got_b.cpu(), gb, IntArrayRef({ch}), dt, tol);
              if (dev.type == DeviceType::CPU) {
                const OpReport report = profiler.report();
                const OpStats* row = report.find("bp::batch_norm_backward", DispatchKey::CPU);
                ASSERT_NE(row, nullptr);
                EXPECT_EQ(row->native_calls, dt == ScalarType::Float16 ? 0u : 1u) << report.table();
              }
            }
          }
        }
      }
    }
  }
  const Tensor a = randomTensor({4, 3}, ScalarType::Float32, 1);
  Stack bad_grad{randomTensor({4, 2}, ScalarType::Float32, 2), a, IValue(), IValue(), IValue(), true, 1e-5,
                 IValue(std::vector<bool>{true, true, true})};
  EXPECT_THAT(errorOf([&] { op("batch_norm_backward").callBoxed(bad_grad); }),
              HasSubstr("bp::batch_norm_backward: 'grad_output' has shape [4, 2] but the forward's output has shape "
                        "[4, 3]"));
  Stack no_stats{a, a, IValue(), IValue(), IValue(), false, 1e-5, IValue(std::vector<bool>{true, true, true})};
  EXPECT_THAT(errorOf([&] { op("batch_norm_backward").callBoxed(no_stats); }),
              HasSubstr("bp::batch_norm_backward: running_mean and running_var must be given when training=False"));
}

TEST(NNBackwardOps, TheHostsRuleRefusesMismatchedArguments) {
  const Tensor a = fromDoubles({1, 2, 3, 4}, {2, 2}, ScalarType::Float32);
  const Tensor b = fromDoubles({1, 2, 3}, {3}, ScalarType::Float32);
  EXPECT_THAT(errorOf([&] {
                callT("gelu_backward", {a, b, std::string("none")});
              }),
              HasSubstr("bp::gelu_backward: 'grad_output' has shape [2, 2] but 'self' has shape [3]"));
  EXPECT_THAT(errorOf([&] {
                callT("gelu_backward", {a, a, std::string("erf")});
              }),
              HasSubstr("approximate must be 'none' or 'tanh', but got 'erf'"));
  EXPECT_THAT(errorOf([&] {
                callT("_softmax_backward_data", {a, a, int64_t{2}, ScalarType::Float32});
              }),
              HasSubstr("bp::_softmax_backward_data"));
  EXPECT_THAT(errorOf([&] {
                callT("_log_softmax_backward_data", {a, a.to(ScalarType::Float64), int64_t{0}, ScalarType::Float32});
              }),
              HasSubstr("'grad_output' has dtype float32 but 'output' has dtype float64"));
}

// --- The optimizer ops (Note [Optimizer ops]): the host's rule refuses bad
// lists and hyperparameters with messages that say what to pass; the CPU
// kernel and the composite (on a device without kernels) take the same step,
// including for float16, which both compute in float32. torch_parity's
// optimizers family checks the arithmetic against torch::optim.
TEST(OptimizerOps, TheHostsRuleRefusesBadListsAndHyperparameters) {
  const Tensor p = fromDoubles({1, 2, 3}, {3}, ScalarType::Float32);
  const Tensor g = fromDoubles({0.1, 0.2, 0.3}, {3}, ScalarType::Float32);
  auto sgd = [&](std::vector<Tensor> ps, std::vector<Tensor> gs, std::vector<Tensor> bufs, double momentum,
                 double lr = 0.1, bool nesterov = false, double dampening = 0) {
    _fused_sgd_(ps, gs, bufs, 0, momentum, lr, dampening, nesterov, false, false);
  };
  EXPECT_THAT(errorOf([&] { sgd({}, {}, {}, 0); }), HasSubstr("'self' is empty; pass at least one parameter"));
  EXPECT_THAT(errorOf([&] { sgd({p}, {}, {}, 0); }),
              HasSubstr("'grads' has 0 tensors but 'self' has 1; pass one per parameter"));
  EXPECT_THAT(errorOf([&] {
                sgd({p}, {g.reshape({1, 3})}, {}, 0);
              }),
              HasSubstr("grads[0] has shape [1, 3] but self[0] has [3]"));
  EXPECT_THAT(errorOf([&] { sgd({p}, {g.to(ScalarType::Float64)}, {}, 0); }),
              HasSubstr("grads[0] has dtype float64 but self[0] has float32"));
  EXPECT_THAT(errorOf([&] { sgd({p}, {g}, {}, 0.9); }),
              HasSubstr("'momentum_buffer_list' has 0 tensors but 'self' has 1; pass one per parameter (or none "
                        "when momentum is 0)"));
  EXPECT_THAT(errorOf([&] { sgd({p}, {g}, {}, 0, -1); }), HasSubstr("lr must be a finite number >= 0, got -1"));
  EXPECT_THAT(errorOf([&] { sgd({p}, {g}, {}, 0, 0.1, true); }),
              HasSubstr("nesterov momentum needs momentum > 0 and dampening 0"));
  const Tensor ints = fromDoubles({1, 2, 3}, {3}, ScalarType::Int64);
  EXPECT_THAT(errorOf([&] { sgd({ints}, {ints}, {}, 0); }),
              HasSubstr("self[0] has dtype int64; optimizers update floating parameters"));
  const Tensor strided = fromDoubles({1, 2, 3, 4, 5, 6}, {2, 3}, ScalarType::Float32).t();
  EXPECT_THAT(errorOf([&] { sgd({strided}, {strided.contiguous()}, {}, 0); }), HasSubstr("self[0] is not contiguous"));
  EXPECT_THAT(errorOf([&] {
                sgd({p, p.to(testDevice())}, {g, g.to(testDevice())}, {}, 0);
              }),
              HasSubstr("self[1] is on testdev:0 but self[0] is on cpu"));
  auto adamw = [&](int64_t step, double beta1, bool amsgrad, std::vector<Tensor> vmax) {
    _fused_adamw_({p}, {g}, {zeros_like(p)}, {zeros_like(p)}, vmax, step, 1e-3, beta1, 0.999, 0.01, 1e-8, amsgrad,
                  false);
  };
  EXPECT_THAT(errorOf([&] { adamw(0, 0.9, false, {}); }), HasSubstr("step must be the step's number, counted from 1"));
  EXPECT_THAT(errorOf([&] { adamw(1, 1.0, false, {}); }), HasSubstr("beta1 must be in [0, 1), got 1"));
  EXPECT_THAT(
      errorOf([&] { adamw(1, 0.9, true, {}); }),
      HasSubstr("'max_exp_avg_sqs' has 0 tensors but 'self' has 1; pass one per parameter when amsgrad is set"));
  EXPECT_THAT(errorOf([&] { adamw(1, 0.9, false, {zeros_like(p)}); }),
              HasSubstr("max_exp_avg_sqs holds 1 tensors but amsgrad is false"));
  // A refused call changed nothing.
  EXPECT_EQ(p.toVector<double>(), (std::vector<double>{1, 2, 3}));
}

TEST(OptimizerOps, TheCpuKernelAndTheCompositeTakeTheSameStep) {
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16}) {
    for (Device dev : {Device(DeviceType::CPU), testDevice()}) {
      SCOPED_TRACE(std::string(scalarTypeName(dt)) + " on " + dev.str());
      // Two parameters of different shapes, one call; three steps of each op.
      std::vector<Tensor> ps = {fromDoubles({0.5, -1, 2, 0.25}, {2, 2}, dt, dev), fromDoubles({3, -0.5}, {2}, dt, dev)};
      std::vector<Tensor> qs = {ps[0].clone(), ps[1].clone()};
      const std::vector<Tensor> gs = {fromDoubles({0.1, -0.2, 0.3, 0.05}, {2, 2}, dt, dev),
                                      fromDoubles({-0.4, 0.25}, {2}, dt, dev)};
      std::vector<Tensor> bufs = {empty_like(ps[0]), empty_like(ps[1])};
      std::vector<Tensor> m = {zeros_like(qs[0]), zeros_like(qs[1])}, v = {zeros_like(qs[0]), zeros_like(qs[1])};
      for (int step = 1; step <= 3; ++step) {
        _fused_sgd_(ps, gs, bufs, 0.01, 0.9, 0.1, 0.1, false, false, step == 1);
        _fused_adamw_(qs, gs, m, v, {}, step, 0.1, 0.9, 0.99, 0.01, 1e-8, false, false);
      }
      // The reference: the same arithmetic in double.
      const std::vector<std::vector<double>> p0 = {{0.5, -1, 2, 0.25}, {3, -0.5}};
      const std::vector<std::vector<double>> g0 = {{0.1, -0.2, 0.3, 0.05}, {-0.4, 0.25}};
      const double tol = dt == ScalarType::BFloat16 ? 2e-2 : dt == ScalarType::Float16 ? 2e-3 : 1e-5;
      for (size_t t = 0; t < 2; ++t) {
        const std::vector<double> got_sgd = ps[t].toVector<double>(), got_adamw = qs[t].toVector<double>();
        for (size_t i = 0; i < p0[t].size(); ++i) {
          double p = p0[t][i], buf = 0, q = p0[t][i], mm = 0, vv = 0;
          for (int step = 1; step <= 3; ++step) {
            const double g = g0[t][i] + 0.01 * p;
            buf = step == 1 ? g : 0.9 * buf + 0.9 * g;
            p -= 0.1 * buf;
            q *= 1 - 0.1 * 0.01;
            mm = 0.9 * mm + 0.1 * g0[t][i];
            vv = 0.99 * vv + 0.01 * g0[t][i] * g0[t][i];
            const double denom = std::sqrt(vv) / std::sqrt(1 - std::pow(0.99, step)) + 1e-8;
            q -= 0.1 / (1 - std::pow(0.9, step)) * mm / denom;
          }
          EXPECT_NEAR(got_sgd[i], p, tol * (1 + std::abs(p))) << "SGD, parameter " << t << " element " << i;
          EXPECT_NEAR(got_adamw[i], q, tol * (1 + std::abs(q))) << "AdamW, parameter " << t << " element " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace backplane::ops_test
