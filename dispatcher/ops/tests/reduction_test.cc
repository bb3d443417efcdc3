// Standard operators, family "reduction": each op against a double-precision
// reference through the CPU plugin.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>

#include "ops_test_util.h"
#include "test_device.h"
#include "ulps.h"

namespace backplane::ops_test {
namespace {

using backplane::testing::ulpsApart;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using Dims = std::vector<int64_t>;

const std::vector<ScalarType> kAll = {ScalarType::Bool,     ScalarType::UInt8,   ScalarType::Int8,
                                      ScalarType::Int32,    ScalarType::Int64,   ScalarType::Float16,
                                      ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64};
const std::vector<ScalarType> kFloats = {ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32,
                                         ScalarType::Float64};

// Random values that every dtype holds exactly or nearly (unsigned: >= 0).
Tensor input(IntArrayRef sizes, ScalarType dt, uint32_t seed) {
  const bool non_negative = dt == ScalarType::UInt8 || dt == ScalarType::Bool;
  return randomTensor(sizes, dt, seed, non_negative ? 0 : -3, 3);
}

// `sizes` (3-d) laid out four ways: contiguous, transposed, sliced with a
// step, and expanded from a size-1 dim (stride 0).
std::vector<std::pair<std::string, Tensor>> layouts(const Dims& sizes, ScalarType dt, uint32_t seed) {
  std::vector<std::pair<std::string, Tensor>> r;
  r.emplace_back("contiguous", input(sizes, dt, seed));
  r.emplace_back("transposed", input({sizes[2], sizes[1], sizes[0]}, dt, seed + 1).permute({2, 1, 0}));
  r.emplace_back("sliced", input({sizes[0], sizes[1], 2 * sizes[2]}, dt, seed + 2).slice(2, 1, 2 * sizes[2], 2));
  r.emplace_back("expanded", input({1, sizes[1], sizes[2]}, dt, seed + 3).expand(sizes));
  for (auto& [name, t] : r) EXPECT_EQ(t.sizes(), IntArrayRef(sizes)) << name;
  return r;
}

// The reduced elements of each output element of reducing `x` over `dims`
// (empty: all), in row-major order; also the output shape.
std::vector<std::vector<double>> groups(const Tensor& x, const Dims& dims, bool keepdim, Dims* out_sizes) {
  const int64_t nd = x.dim();
  std::vector<bool> mask(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims)
    if (nd > 0) mask[static_cast<size_t>(d < 0 ? d + nd : d)] = true;
  out_sizes->clear();
  int64_t num_out = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (!mask[static_cast<size_t>(d)]) {
      out_sizes->push_back(x.size(d));
      num_out *= x.size(d);
    } else if (keepdim) {
      out_sizes->push_back(1);
    }
  }
  std::vector<std::vector<double>> g(static_cast<size_t>(num_out));
  const std::vector<double> v = values(x);
  Dims idx(static_cast<size_t>(nd), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t o = 0;
    for (int64_t d = 0; d < nd; ++d)
      if (!mask[static_cast<size_t>(d)]) o = o * x.size(d) + idx[static_cast<size_t>(d)];
    g[static_cast<size_t>(o)].push_back(v[i]);
    for (int64_t d = nd; d-- > 0;) {
      if (++idx[static_cast<size_t>(d)] < x.size(d)) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return g;
}

template <class F>
std::vector<double> reference(const Tensor& x, const Dims& dims, bool keepdim, Dims* out_sizes, F&& f) {
  std::vector<double> r;
  for (const auto& g : groups(x, dims, keepdim, out_sizes)) r.push_back(f(g));
  return r;
}

// Expects `got` to be `f` of each reduced group of `x`, in the reduced shape.
template <class F>
void expectReduced(const Tensor& got, const Tensor& x, const Dims& dims, bool keepdim, F&& f, ScalarType dt) {
  Dims sizes;
  std::vector<double> want = reference(x, dims, keepdim, &sizes, f);
  expectClose(got, want, sizes, dt);
}

double refSum(const std::vector<double>& g) { return std::accumulate(g.begin(), g.end(), 0.0); }
double refMean(const std::vector<double>& g) { return refSum(g) / static_cast<double>(g.size()); }
double refMax(const std::vector<double>& g) {
  double m = g[0];
  for (double v : g) m = std::isnan(v) || std::isnan(m) ? kNaN : std::max(m, v);
  return m;
}
double refMin(const std::vector<double>& g) {
  double m = g[0];
  for (double v : g) m = std::isnan(v) || std::isnan(m) ? kNaN : std::min(m, v);
  return m;
}
// First index of the maximum (minimum); NaN beats everything.
template <bool Max>
double refArg(const std::vector<double>& g) {
  size_t best = 0;
  for (size_t i = 1; i < g.size(); ++i) {
    if (std::isnan(g[best])) break;
    if (std::isnan(g[i]) || (Max ? g[i] > g[best] : g[i] < g[best])) best = i;
  }
  return static_cast<double>(best);
}
double refVar(const std::vector<double>& g, double correction) {
  const double m = refMean(g);
  double ss = 0;
  for (double v : g) ss += (v - m) * (v - m);
  return ss / std::max(0.0, static_cast<double>(g.size()) - correction);
}

std::vector<double> refSoftmax(const Tensor& x, int64_t dim, bool log);

const std::vector<Dims> kDimLists = {{}, {0}, {1}, {-1}, {0, 2}, {-1, 0}, {0, 1, 2}};

// --- sum

ScalarType sumType(ScalarType t) { return isFloatingType(t) ? t : ScalarType::Int64; }

TEST(Sum, OverDimsEveryLayoutAndDtype) {
  for (ScalarType dt : kAll) {
    for (auto& [name, x] : layouts({2, 3, 4}, dt, 1)) {
      for (const Dims& dims : kDimLists) {
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(::testing::Message() << dt << " " << name << " dims " << dims.size() << " keepdim " << keepdim);
          Dims out_sizes;
          std::vector<double> want = reference(x, dims, keepdim, &out_sizes, refSum);
          expectClose(callT("sum.dim_IntList", {x, dims, keepdim, IValue()}), want, out_sizes, sumType(dt));
        }
      }
      Dims s;
      expectClose(callT("sum", {x, IValue()}), reference(x, {}, false, &s, refSum), {}, sumType(dt));
    }
  }
}

TEST(Sum, NoneDimReducesEverythingAndDtypeConverts) {
  Tensor x = input({3, 5}, ScalarType::Int32, 2);
  Dims s;
  std::vector<double> all = reference(x, {}, false, &s, refSum);
  expectClose(callT("sum.dim_IntList", {x, IValue(), false, IValue()}), all, {}, ScalarType::Int64);
  expectClose(callT("sum.dim_IntList", {x, IValue(), true, IValue()}), all, {1, 1}, ScalarType::Int64);
  expectClose(callT("sum", {x, ScalarType::Float64}), all, {}, ScalarType::Float64);
  expectClose(callT("sum.dim_IntList", {x, Dims{1}, false, ScalarType::Float32}), reference(x, {1}, false, &s, refSum),
              {3}, ScalarType::Float32);
  // An integral dtype converts each floating element first (truncation), as PyTorch.
  Tensor f = fromDoubles({1.5, 2.5, -0.5}, {3}, ScalarType::Float32);
  expectClose(callT("sum", {f, ScalarType::Int64}), {3}, {}, ScalarType::Int64);
  // bool and int8 sums are int64 and do not wrap at 8 bits.
  Tensor b = fromDoubles(std::vector<double>(300, 1), {300}, ScalarType::Bool);
  expectClose(callT("sum", {b, IValue()}), {300}, {}, ScalarType::Int64);
}

// Integral sums are int64 and wrap around modulo 2^64, as PyTorch's do
// (never signed overflow: the UBSan build checks), on every path: one row,
// rows, columns and strided rows. With a floating dtype (and in a mean) the
// elements are converted first: negative sums stay negative, large ones
// do not wrap.
TEST(Sum, IntegralSumsWrapAroundAndKeepTheirSign) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  const Tensor x = tensorFromVector<int64_t>({kMax, 1, kMax, 2}, {2, 2});
  EXPECT_EQ(callT("sum", {x, IValue()}).toVector<int64_t>(), std::vector<int64_t>{1});
  EXPECT_EQ(callT("sum.dim_IntList", {x, Dims{1}, false, IValue()}).toVector<int64_t>(),
            (std::vector<int64_t>{kMin, kMin + 1}));
  EXPECT_EQ(callT("sum.dim_IntList", {x, Dims{0}, false, IValue()}).toVector<int64_t>(), (std::vector<int64_t>{-2, 3}));
  EXPECT_EQ(callT("sum.dim_IntList", {x.t(), Dims{0}, false, IValue()}).toVector<int64_t>(),
            (std::vector<int64_t>{kMin, kMin + 1}));
  const Tensor neg = tensorFromVector<int32_t>({-1, -2, -4}, {3});
  expectClose(callT("sum", {neg, ScalarType::Float64}), {-7}, {}, ScalarType::Float64);
  expectClose(callT("mean", {neg, ScalarType::Float32}), {-7.0 / 3}, {}, ScalarType::Float32, 1e-6);
  expectClose(callT("sum", {fromDoubles({-1.5, -2.5}, {2}, ScalarType::Float32), ScalarType::Int64}), {-3}, {},
              ScalarType::Int64);
  // A floating dtype converts each element first, as PyTorch: that sum does not wrap.
  const Tensor big = tensorFromVector<int64_t>(std::vector<int64_t>(4, int64_t{1} << 62), {4});
  expectClose(callT("sum", {big, ScalarType::Float64}), {0x1p64}, {}, ScalarType::Float64);
  expectClose(callT("mean", {big, ScalarType::Float64}), {0x1p62}, {}, ScalarType::Float64);
  // dtype=bool makes each element 0 or 1 first: [1, -1] sums to true, not to 0.
  EXPECT_EQ(callT("sum", {tensorFromVector<int32_t>({1, -1}, {2}), ScalarType::Bool}).toVector<bool>(),
            std::vector<bool>{true});
}

TEST(Sum, EmptyAndZeroDim) {
  Tensor e = emptyTensor({0, 3}, ScalarType::Float32);
  expectClose(callT("sum", {e, IValue()}), {0}, {}, ScalarType::Float32);
  expectClose(callT("sum.dim_IntList", {e, Dims{0}, false, IValue()}), {0, 0, 0}, {3}, ScalarType::Float32);
  expectClose(callT("sum.dim_IntList", {e, Dims{1}, true, IValue()}), {}, {0, 1}, ScalarType::Float32);
  Tensor z = fromDoubles({4.5}, {}, ScalarType::Float64);
  for (const Dims& dims : std::vector<Dims>{{}, {0}, {-1}}) {
    expectClose(callT("sum.dim_IntList", {z, dims, true, IValue()}), {4.5}, {}, ScalarType::Float64);
  }
  EXPECT_THAT(errorOf([&] {
                callT("sum.dim_IntList", {z, Dims{1}, false, IValue()});
              }),
              HasSubstr("dimension 1 is out of range"));
}

TEST(Sum, LargeInputsAreAccurateAndParallel) {
  // One output (chunked across threads), many outputs, and a column sum.
  Tensor x = input({1 << 20}, ScalarType::Float32, 3);
  Dims s;
  expectClose(callT("sum", {x, IValue()}), reference(x, {}, false, &s, refSum), {}, ScalarType::Float32, 1e-6);
  Tensor m = input({300, 700}, ScalarType::Float32, 4);
  for (const Dims& dims : std::vector<Dims>{{0}, {1}, {}}) {
    expectReduced(callT("sum.dim_IntList", {m, dims, false, IValue()}), m, dims, false, refSum, ScalarType::Float32);
  }
  // float32 accumulates in double: 2^24 + 1 + 1 ... is not lost.
  std::vector<double> v(100001, 1.0);
  v[0] = 16777216.0;
  expectClose(callT("sum", {fromDoubles(v, {100001}, ScalarType::Float32), IValue()}), {16777216.0 + 100000}, {},
              ScalarType::Float32, 1e-7);
  Tensor ints = input({1 << 18}, ScalarType::Int64, 5);
  expectClose(callT("sum", {ints, IValue()}), reference(ints, {}, false, &s, refSum), {}, ScalarType::Int64);
}

TEST(Sum, ManyDims) {
  // More dims than the kernels keep inline, contiguous and reversed (nothing coalesces).
  const Dims sizes(15, 2);
  Dims reversed(15);
  std::iota(reversed.begin(), reversed.end(), 0);
  std::reverse(reversed.begin(), reversed.end());
  Tensor c = input(sizes, ScalarType::Float64, 31);
  for (const Tensor& x : {c, c.permute(reversed)}) {
    for (const Dims& dims : std::vector<Dims>{{0}, {3, -1}, {}}) {
      expectReduced(callT("sum.dim_IntList", {x, dims, true, IValue()}), x, dims, true, refSum, ScalarType::Float64);
      expectReduced(callT("amax", {x, dims, false}), x, dims, false, refMax, ScalarType::Float64);
    }
    expectClose(callT("softmax.int", {x, int64_t{3}, IValue()}), refSoftmax(x, 3, false), sizes, ScalarType::Float64);
  }
}

TEST(Sum, OutSemantics) {
  Tensor x = input({4, 5}, ScalarType::Float32, 6);
  Dims s;
  std::vector<double> want = reference(x, {1}, false, &s, refSum);
  // An empty out is resized; the result is returned and written.
  Tensor out = emptyTensor({0}, ScalarType::Float32);
  Tensor r = callT("sum.IntList_out", {x, Dims{1}, false, IValue(), out});
  EXPECT_TRUE(r.is_alias_of(out));
  expectClose(out, want, {4}, ScalarType::Float32);
  // A non-contiguous out.
  Tensor wide = emptyTensor({4, 2}, ScalarType::Float64);
  Tensor col = wide.select(1, 1);
  callT("sum.IntList_out", {x, Dims{1}, false, IValue(), col});
  expectClose(col, want, {4}, ScalarType::Float64);
  // Integral input into a floating out: computed in out's dtype.
  Tensor xi = input({4, 5}, ScalarType::Int32, 7);
  Tensor fo = emptyTensor({4}, ScalarType::Float32);
  callT("sum.IntList_out", {xi, Dims{-1}, false, IValue(), fo});
  expectClose(fo, reference(xi, {1}, false, &s, refSum), {4}, ScalarType::Float32);
  // Wrong shape, dtype and device.
  EXPECT_THAT(errorOf([&] {
                callT("sum.IntList_out", {x, Dims{1}, false, IValue(), emptyTensor({3})});
              }),
              HasSubstr("has shape [3] but the result has shape [4]"));
  EXPECT_THAT(errorOf([&] {
                callT("sum.IntList_out", {x, Dims{1}, false, IValue(), emptyTensor({4}, ScalarType::Int64)});
              }),
              HasSubstr("cannot be cast"));
  EXPECT_THAT(errorOf([&] {
                callT("sum.IntList_out", {x, Dims{1}, false, ScalarType::Float64, emptyTensor({4})});
              }),
              HasSubstr("expected argument 'out' to have dtype float64"));
  testing::TestDevice& dev = testing::TestDevice::install("testdev", 2);
  EXPECT_THAT(
      errorOf([&] {
        callT("sum.IntList_out", {x, Dims{1}, false, IValue(), emptyTensor({4}, ScalarType::Float32, dev.device(0))});
      }),
      HasSubstr("the inputs' device; pass a tensor on that device"));
}

TEST(Sum, DimErrors) {
  Tensor x = input({2, 3}, ScalarType::Float32, 8);
  EXPECT_THAT(errorOf([&] {
                callT("sum.dim_IntList", {x, Dims{2}, false, IValue()});
              }),
              AllOf(HasSubstr("bp::sum.dim_IntList"), HasSubstr("dimension 2 is out of range")));
  EXPECT_THAT(errorOf([&] { callT("sum.dim_IntList", {x, Dims{-3}, false, IValue()}); }), HasSubstr("out of range"));
  EXPECT_THAT(errorOf([&] {
                callT("sum.dim_IntList", {x, Dims{1, -1}, false, IValue()});
              }),
              HasSubstr("dimension 1 appears more than once"));
  EXPECT_THAT(errorOf([&] {
                callT("sum.IntList_out", {x, Dims{0, 0}, false, IValue(), emptyTensor({0})});
              }),
              AllOf(HasSubstr("bp::sum.IntList_out"), HasSubstr("more than once")));
}

TEST(Sum, RunsOnADeviceTheHostCannotReadThroughTheCpuFallback) {
  testing::TestDevice& dev = testing::TestDevice::install("testdev", 2);
  Tensor host = input({3, 4}, ScalarType::Float32, 9);
  Tensor x = fromDoubles(values(host), {3, 4}, ScalarType::Float32, dev.device(1));
  Dims s;
  Tensor r = callT("sum.dim_IntList", {x.t(), Dims{0}, true, IValue()});
  EXPECT_EQ(r.device(), dev.device(1));
  expectClose(r, reference(host.t(), {0}, true, &s, refSum), {1, 3}, ScalarType::Float32);
  expectClose(callT("mean", {x, IValue()}), reference(host, {}, false, &s, refMean), {}, ScalarType::Float32);
}

// --- mean

TEST(Mean, OverDimsEveryLayoutAndFloatingDtype) {
  for (ScalarType dt : kFloats) {
    for (auto& [name, x] : layouts({3, 2, 5}, dt, 10)) {
      for (const Dims& dims : kDimLists) {
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(::testing::Message() << dt << " " << name << " keepdim " << keepdim);
          Dims s;
          std::vector<double> want = reference(x, dims, keepdim, &s, refMean);
          expectClose(callT("mean.dim", {x, dims, keepdim, IValue()}), want, s, dt);
        }
      }
      Dims s;
      expectClose(callT("mean", {x, IValue()}), reference(x, {}, false, &s, refMean), {}, dt);
    }
  }
}

TEST(Mean, IntegralInputsNeedAFloatingDtype) {
  Tensor x = input({2, 3}, ScalarType::Int64, 11);
  EXPECT_THAT(errorOf([&] {
                callT("mean", {x, IValue()});
              }),
              AllOf(HasSubstr("bp::mean"), HasSubstr("could not infer the output dtype"), HasSubstr("int64")));
  EXPECT_THAT(errorOf([&] {
                callT("mean.dim", {x, Dims{0}, false, ScalarType::Int32});
              }),
              HasSubstr("dtype must be a floating point type"));
  EXPECT_THAT(errorOf([&] {
                callT("mean.out", {x, Dims{0}, false, IValue(), emptyTensor({3})});
              }),
              HasSubstr("could not infer the output dtype"));
  Dims s;
  expectClose(callT("mean.dim", {x, Dims{1}, false, ScalarType::Float64}), reference(x, {1}, false, &s, refMean), {2},
              ScalarType::Float64);
  Tensor b = fromDoubles({1, 0, 1, 1}, {4}, ScalarType::Bool);
  expectClose(callT("mean", {b, ScalarType::Float32}), {0.75}, {}, ScalarType::Float32);
}

TEST(Mean, EmptyIsNanAndOutWorks) {
  Tensor e = emptyTensor({0, 2}, ScalarType::Float32);
  expectClose(callT("mean", {e, IValue()}), {kNaN}, {}, ScalarType::Float32);
  expectClose(callT("mean.dim", {e, Dims{0}, false, IValue()}), {kNaN, kNaN}, {2}, ScalarType::Float32);
  Tensor x = input({4, 6}, ScalarType::Float32, 12);
  Tensor out = emptyTensor({4, 1}, ScalarType::Float64);
  callT("mean.out", {x, Dims{1}, true, IValue(), out});
  Dims s;
  expectClose(out, reference(x, {1}, true, &s, refMean), {4, 1}, ScalarType::Float64);
  EXPECT_THAT(errorOf([&] {
                callT("mean.out", {x, Dims{1}, true, IValue(), emptyTensor({4, 2})});
              }),
              HasSubstr("has shape [4, 2] but the result has shape [4, 1]"));
}

// --- amax, amin

TEST(Amax, OverDimsEveryLayoutAndDtype) {
  for (ScalarType dt : kAll) {
    for (auto& [name, x] : layouts({3, 4, 2}, dt, 13)) {
      for (const Dims& dims : kDimLists) {
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(::testing::Message() << dt << " " << name << " keepdim " << keepdim);
          Dims s;
          expectReduced(callT("amax", {x, dims, keepdim}), x, dims, keepdim, refMax, dt);
          expectReduced(callT("amin", {x, dims, keepdim}), x, dims, keepdim, refMin, dt);
        }
      }
    }
  }
}

TEST(Amax, NanPropagatesInfinitiesCountAndBigInputs) {
  Tensor x = fromDoubles({1, kNaN, 3, -kInf, 2, kInf, kNaN, 5, -1}, {3, 3}, ScalarType::Float32);
  expectClose(callT("amax", {x, Dims{1}, false}), {kNaN, kInf, kNaN}, {3}, ScalarType::Float32);
  expectClose(callT("amin", {x, Dims{0}, false}), {kNaN, kNaN, -1}, {3}, ScalarType::Float32);
  expectClose(callT("amin", {x.slice(0, 1, 2), Dims{}, false}), {-kInf}, {}, ScalarType::Float32);
  Tensor big = input({1 << 19}, ScalarType::Float64, 14);
  Dims s;
  expectClose(callT("amax", {big, Dims{}, false}), reference(big, {}, false, &s, refMax), {}, ScalarType::Float64);
  Tensor m = input({600, 300}, ScalarType::Float32, 15);
  expectClose(callT("amin", {m, Dims{0}, true}), reference(m, {0}, true, &s, refMin), {1, 300}, ScalarType::Float32);
}

TEST(Amax, EmptyReductionIsAnErrorZeroDimIsItself) {
  Tensor e = emptyTensor({0, 3}, ScalarType::Float32);
  EXPECT_THAT(errorOf([&] {
                callT("amax", {e, Dims{}, false});
              }),
              AllOf(HasSubstr("bp::amax"), HasSubstr("dimension 0 of size 0")));
  EXPECT_THAT(errorOf([&] { callT("amin", {e, Dims{0}, false}); }), HasSubstr("bp::amin"));
  // Reducing the non-empty dim of an empty tensor is fine: an empty result.
  expectClose(callT("amax", {e, Dims{1}, false}), {}, {0}, ScalarType::Float32);
  Tensor z = fromDoubles({-2}, {}, ScalarType::Int32);
  expectClose(callT("amax", {z, Dims{0}, true}), {-2}, {}, ScalarType::Int32);
}

TEST(Amax, OutMustHaveTheInputDtype) {
  Tensor x = input({2, 5}, ScalarType::Float32, 16);
  Tensor out = emptyTensor({0}, ScalarType::Float32);
  callT("amax.out", {x, Dims{1}, false, out});
  Dims s;
  expectClose(out, reference(x, {1}, false, &s, refMax), {2}, ScalarType::Float32);
  EXPECT_THAT(errorOf([&] {
                callT("amax.out", {x, Dims{1}, false, emptyTensor({2}, ScalarType::Float64)});
              }),
              AllOf(HasSubstr("bp::amax.out"), HasSubstr("expected argument 'out' to have dtype float32")));
  EXPECT_THAT(errorOf([&] { callT("amin.out", {x, Dims{5}, false, out}); }), HasSubstr("out of range"));
}

// --- argmax, argmin

TEST(Argmax, OverEachDimEveryLayoutAndDtype) {
  for (ScalarType dt : kAll) {
    for (auto& [name, x] : layouts({3, 4, 5}, dt, 17)) {  // small integers: many ties
      for (int64_t dim : {0, 1, 2, -1}) {
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(::testing::Message() << dt << " " << name << " dim " << dim << " keepdim " << keepdim);
          Dims s;
          expectReduced(callT("argmax", {x, dim, keepdim}), x, {dim}, keepdim, refArg<true>, ScalarType::Int64);
          expectReduced(callT("argmin", {x, dim, keepdim}), x, {dim}, keepdim, refArg<false>, ScalarType::Int64);
        }
      }
      // No dim: an index into the flattened (row-major) tensor.
      Dims s;
      expectClose(callT("argmax", {x, IValue(), false}), reference(x, {}, false, &s, refArg<true>), {},
                  ScalarType::Int64);
      expectClose(callT("argmin", {x, IValue(), true}), reference(x, {}, false, &s, refArg<false>), {1, 1, 1},
                  ScalarType::Int64);
    }
  }
}

TEST(Argmax, FirstOccurrenceNanAndBigInputs) {
  Tensor x = fromDoubles({1, 3, 3, 0, kNaN, 2, kNaN, 0, -1, -1, 7, 7}, {3, 4}, ScalarType::Float32);
  expectClose(callT("argmax", {x, int64_t{1}, false}), {1, 0, 2}, {3}, ScalarType::Int64);
  expectClose(callT("argmin", {x, int64_t{1}, false}), {3, 0, 0}, {3}, ScalarType::Int64);
  expectClose(callT("argmax", {x, IValue(), false}), {4}, {}, ScalarType::Int64);
  // A transposed input: first in the logical (row-major) order, not in memory order.
  Tensor t = fromDoubles({5, 1, 5, 1}, {2, 2}, ScalarType::Int32).t();  // [[5, 5], [1, 1]]
  expectClose(callT("argmax", {t, IValue(), false}), {0}, {}, ScalarType::Int64);
  expectClose(callT("argmin", {t, IValue(), false}), {2}, {}, ScalarType::Int64);
  // Big: one output, chunked across threads, with the maximum twice.
  std::vector<double> v(1 << 20, 0.0);
  v[300000] = 9;
  v[900000] = 9;
  v[700000] = -9;
  v[100] = -9;
  Tensor big = fromDoubles(v, {1 << 20}, ScalarType::Float32);
  expectClose(callT("argmax", {big, IValue(), false}), {300000}, {}, ScalarType::Int64);
  expectClose(callT("argmin", {big, int64_t{0}, true}), {100}, {1}, ScalarType::Int64);
}

TEST(Argmax, ErrorsAndOut) {
  Tensor e = emptyTensor({2, 0}, ScalarType::Float32);
  EXPECT_THAT(errorOf([&] {
                callT("argmax", {e, IValue(), false});
              }),
              AllOf(HasSubstr("bp::argmax"), HasSubstr("is empty")));
  EXPECT_THAT(errorOf([&] {
                callT("argmin", {e, int64_t{1}, false});
              }),
              AllOf(HasSubstr("bp::argmin"), HasSubstr("dimension 1 of size 0")));
  expectClose(callT("argmax", {e, int64_t{0}, false}), {}, {0}, ScalarType::Int64);
  Tensor x = input({3, 4}, ScalarType::Float64, 18);
  EXPECT_THAT(errorOf([&] { callT("argmax", {x, int64_t{2}, false}); }), HasSubstr("out of range"));
  Tensor out = emptyTensor({0}, ScalarType::Int64);
  callT("argmax.out", {x, int64_t{0}, false, out});
  Dims s;
  expectClose(out, reference(x, {0}, false, &s, refArg<true>), {4}, ScalarType::Int64);
  EXPECT_THAT(errorOf([&] {
                callT("argmax.out", {x, int64_t{0}, false, emptyTensor({4}, ScalarType::Int32)});
              }),
              HasSubstr("expected argument 'out' to have dtype int64"));
  Tensor z = fromDoubles({3}, {}, ScalarType::Float32);
  expectClose(callT("argmax", {z, int64_t{0}, false}), {0}, {}, ScalarType::Int64);
}

// --- var, std

TEST(Var, CorrectionOverDimsEveryLayoutAndDtype) {
  for (ScalarType dt : kFloats) {
    for (auto& [name, x] : layouts({4, 3, 5}, dt, 19)) {
      for (const Dims& dims : kDimLists) {
        for (double corr : {0.0, 1.0, 2.5}) {
          SCOPED_TRACE(::testing::Message() << dt << " " << name << " correction " << corr);
          Dims s;
          auto var = [&](const std::vector<double>& g) { return refVar(g, corr); };
          auto sd = [&](const std::vector<double>& g) { return std::sqrt(refVar(g, corr)); };
          expectReduced(callT("var.correction", {x, dims, Scalar(corr), true}), x, dims, true, var, dt);
          expectReduced(callT("std.correction", {x, dims, Scalar(corr), false}), x, dims, false, sd, dt);
        }
      }
    }
  }
}

TEST(Var, DefaultsOlderSpellingsAndEdgeCases) {
  Tensor x = input({6, 7}, ScalarType::Float64, 20);
  Dims s;
  auto unbiased = [](const std::vector<double>& g) { return refVar(g, 1); };
  auto biased = [](const std::vector<double>& g) { return refVar(g, 0); };
  expectClose(callT("var.correction", {x, IValue(), IValue(), false}), reference(x, {}, false, &s, unbiased), {},
              ScalarType::Float64);
  expectClose(callT("var", {x, true}), reference(x, {}, false, &s, unbiased), {}, ScalarType::Float64);
  expectClose(callT("std", {x, false}), {std::sqrt(reference(x, {}, false, &s, biased)[0])}, {}, ScalarType::Float64);
  expectClose(callT("var.dim", {x, Dims{1}, false, true}), reference(x, {1}, true, &s, biased), {6, 1},
              ScalarType::Float64);
  expectClose(callT("std.dim", {x, Dims{0}, true, false}),
              reference(x, {0}, false, &s, [](const auto& g) { return std::sqrt(refVar(g, 1)); }), {7},
              ScalarType::Float64);
  // One element with correction 1: 0/0; a large mean does not cost accuracy.
  expectClose(callT("var.correction", {fromDoubles({3}, {1}, ScalarType::Float32), IValue(), IValue(), false}), {kNaN},
              {}, ScalarType::Float32);
  expectClose(callT("var", {fromDoubles({1e8 + 1, 1e8 + 2, 1e8 + 3}, {3}, ScalarType::Float64), true}), {1}, {},
              ScalarType::Float64);
  expectClose(callT("var", {emptyTensor({0}, ScalarType::Float32), true}), {kNaN}, {}, ScalarType::Float32);
  // Big, parallel: one output and many.
  Tensor big = input({1 << 19}, ScalarType::Float32, 21);
  expectClose(callT("var", {big, true}), reference(big, {}, false, &s, unbiased), {}, ScalarType::Float32);
  Tensor m = input({256, 400}, ScalarType::Float32, 22);
  expectClose(callT("std.correction", {m, Dims{0}, IValue(), false}),
              reference(m, {0}, false, &s, [](const auto& g) { return std::sqrt(refVar(g, 1)); }), {400},
              ScalarType::Float32);
}

TEST(Var, ErrorsAndOut) {
  EXPECT_THAT(errorOf([&] {
                callT("var", {input({3}, ScalarType::Int32, 23), true});
              }),
              HasSubstr("bp::var: argument 'self' has dtype int32, which this op does not accept (accepted: float16, "
                        "bfloat16, float32, float64)"));
  Tensor x = input({3, 4}, ScalarType::Float32, 24);
  EXPECT_THAT(errorOf([&] {
                callT("std.correction", {x, Dims{0, -2}, IValue(), false});
              }),
              HasSubstr("appears more than once"));
  Tensor out = emptyTensor({0}, ScalarType::Float32);
  callT("var.correction_out", {x, Dims{1}, Scalar(0.0), false, out});
  Dims s;
  expectClose(out, reference(x, {1}, false, &s, [](const auto& g) { return refVar(g, 0); }), {3}, ScalarType::Float32);
  EXPECT_THAT(errorOf([&] {
                callT("std.correction_out", {x, Dims{1}, IValue(), false, emptyTensor({3}, ScalarType::Float64)});
              }),
              HasSubstr("expected argument 'out' to have dtype float32"));
}

// --- softmax, log_softmax

std::vector<double> refSoftmax(const Tensor& x, int64_t dim, bool log) {
  const int64_t nd = x.dim();
  const int64_t d = nd == 0 ? 0 : (dim < 0 ? dim + nd : dim);
  std::vector<double> v = values(x), r(v.size());
  if (v.empty()) return r;
  const int64_t n = nd == 0 ? 1 : x.size(d);
  int64_t inner = 1;
  for (int64_t i = d + 1; i < nd; ++i) inner *= x.size(i);
  const int64_t outer = static_cast<int64_t>(v.size()) / (n * inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * n + j) * inner + in); };
      double mx = -kInf, sum = 0;
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, v[at(j)]);
      for (int64_t j = 0; j < n; ++j) sum += std::exp(v[at(j)] - mx);
      for (int64_t j = 0; j < n; ++j) r[at(j)] = log ? v[at(j)] - mx - std::log(sum) : std::exp(v[at(j)] - mx) / sum;
    }
  }
  return r;
}

TEST(Softmax, AlongEachDimEveryLayoutAndDtype) {
  for (ScalarType dt : kFloats) {
    for (auto& [name, x] : layouts({3, 4, 5}, dt, 25)) {
      for (int64_t dim : {0, 1, 2, -1}) {
        SCOPED_TRACE(::testing::Message() << dt << " " << name << " dim " << dim);
        const Dims sizes{3, 4, 5};
        expectClose(callT("softmax.int", {x, dim, IValue()}), refSoftmax(x, dim, false), sizes, dt);
        expectClose(callT("log_softmax.int", {x, dim, IValue()}), refSoftmax(x, dim, true), sizes, dt);
      }
    }
  }
}

TEST(Softmax, StableDtypeEdgeCasesAndBig) {
  // Large logits do not overflow; -inf entries get probability 0.
  Tensor x = fromDoubles({1000, 1001, 1002, -kInf, 0, -kInf}, {2, 3}, ScalarType::Float32);
  expectClose(callT("softmax.int", {x, int64_t{1}, IValue()}), refSoftmax(x, 1, false), {2, 3}, ScalarType::Float32);
  expectClose(callT("log_softmax.int", {x, int64_t{-1}, IValue()}), refSoftmax(x, 1, true), {2, 3},
              ScalarType::Float32);
  // A row of -inf is NaN, as in PyTorch.
  Tensor ninf = fromDoubles({-kInf, -kInf}, {2}, ScalarType::Float64);
  expectClose(callT("softmax.int", {ninf, int64_t{0}, IValue()}), {kNaN, kNaN}, {2}, ScalarType::Float64);
  // dtype= converts first: integral inputs allowed, float16 computed in float64.
  Tensor i = input({4, 3}, ScalarType::Int64, 26);
  expectClose(callT("softmax.int", {i, int64_t{0}, ScalarType::Float64}), refSoftmax(i, 0, false), {4, 3},
              ScalarType::Float64);
  Tensor h = input({2, 6}, ScalarType::Float16, 27);
  expectClose(callT("log_softmax.int", {h, int64_t{1}, ScalarType::Float64}), refSoftmax(h, 1, true), {2, 6},
              ScalarType::Float64);
  // 0-d: softmax is 1, log_softmax 0; empty stays empty.
  Tensor z = fromDoubles({2.5}, {}, ScalarType::Float32);
  expectClose(callT("softmax.int", {z, int64_t{-1}, IValue()}), {1}, {}, ScalarType::Float32);
  expectClose(callT("log_softmax.int", {z, int64_t{0}, IValue()}), {0}, {}, ScalarType::Float32);
  expectClose(callT("softmax.int", {emptyTensor({0, 4}), int64_t{1}, IValue()}), {}, {0, 4}, ScalarType::Float32);
  Tensor big = input({512, 300}, ScalarType::Float32, 28);
  expectClose(callT("softmax.int", {big, int64_t{0}, IValue()}), refSoftmax(big, 0, false), {512, 300},
              ScalarType::Float32);
}

// A log-probability is never positive. Where one logit dominates its row,
// the row's log-sum-exp is log(1 + tiny): [[30, 0]]'s first element is
// -log1p(e^-30) = -9.36e-14, which the CPU plugin gives to the float's
// precision (oneDNN's approximate exp() gave +1.4e-6, a probability above
// 1; PyTorch's float32 sum rounds 1 + e^-30 to 1 and gives 0), on every
// path, in float32, bfloat16 and float64.
TEST(Softmax, LogSoftmaxIsNeverPositive) {
  const double tiny = -std::log1p(std::exp(-30.0));
  for (ScalarType dt : {ScalarType::Float32, ScalarType::BFloat16, ScalarType::Float64}) {
    SCOPED_TRACE(::testing::Message() << dt);
    const Tensor x = fromDoubles({30, 0, 0, 30, 50, -50, 1, 1}, {4, 2}, dt);
    const Tensor y = callT("log_softmax.int", {x, int64_t{1}, IValue()});
    expectClose(y, refSoftmax(x, 1, true), {4, 2}, dt);
    const std::vector<double> got = values(y);
    const double rounded = values(fromDoubles({tiny}, {1}, dt))[0];
    EXPECT_EQ(got[0], rounded);
    EXPECT_EQ(got[3], rounded);
    EXPECT_LE(*std::max_element(got.begin(), got.end()), 0.0);
    // Many rows, each with one dominant logit, along the last dim and
    // transposed (dim 0 of the contiguous transpose), in parallel.
    std::vector<double> v(256 * 64);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = i % 64 == (i / 64) % 64 ? 40.0 + static_cast<double>(i % 7) : -static_cast<double>(i % 5);
    const Tensor rows = fromDoubles(v, {256, 64}, dt);
    for (const Tensor& y : {callT("log_softmax.int", {rows, int64_t{1}, IValue()}),
                            callT("log_softmax.int", {rows.t().contiguous().t(), int64_t{1}, IValue()}),
                            callT("log_softmax.int", {rows.t().contiguous(), int64_t{0}, IValue()})}) {
      const std::vector<double> got = values(y);
      EXPECT_LE(*std::max_element(got.begin(), got.end()), 0.0);
    }
  }
}

// The exact softmax / log_softmax of one float32 row, in long double, and
// without the rounding a float64 reference has where one element dominates:
// the max's term is exactly 1, so log(sum) is log1p(sum of the others).
std::vector<long double> exactSoftmax(const std::vector<float>& x, bool log) {
  const size_t top = static_cast<size_t>(std::max_element(x.begin(), x.end()) - x.begin());
  const long double mx = x[top];
  long double rest = 0;
  for (size_t j = 0; j < x.size(); ++j)
    if (j != top) rest += std::exp(static_cast<long double>(x[j]) - mx);
  const long double lse = std::log1p(rest);
  std::vector<long double> r(x.size());
  for (size_t j = 0; j < x.size(); ++j)
    r[j] =
        log ? (static_cast<long double>(x[j]) - mx) - lse : std::exp(static_cast<long double>(x[j]) - mx) / (1 + rest);
  return r;
}

// The accuracy docs/operators.md states for float32 (Note [Softmax kernels]
// in plugins/cpu/softmax_rows.cc), against the exact value: log_softmax
// within 2 ulps where |y| >= 0.01, and 3 + |ln |y|| ulps closer to 0
// (only a row's dominant element, whose log-probability is -log1p of the
// others' tiny sum); softmax within 3 + |x - max| ulps (the rounding of
// x - max, which every float32 softmax carries into the exponent). Rows of
// every length up to a few vectors, logits at several scales, dominant
// elements and ties, along the last dim (softmaxRow) and the first
// (softmaxColumns, 16 rows side by side, and a partial block).
TEST(Softmax, Float32WithinStatedUlpsOfExact) {
  std::mt19937 gen(7);
  int64_t worst_log = 0, worst_log_near_zero = 0, worst_softmax = 0;
  for (int64_t n : {1, 2, 7, 16, 17, 31, 64, 65, 100, 257}) {
    for (double scale : {0.01, 1.0, 10.0, 100.0}) {
      const int64_t rows = 21;
      std::normal_distribution<float> normal(0.0f, static_cast<float>(scale));
      std::vector<float> m(static_cast<size_t>(rows * n));
      for (float& v : m) v = normal(gen);
      // Row 0: one dominant element; row 1: a tie at the max.
      m[static_cast<size_t>(n / 2)] += 40.0f;
      if (n > 1) m[static_cast<size_t>(n)] = m[static_cast<size_t>(2 * n - 1)] = 5.0f * static_cast<float>(scale);
      std::vector<double> md(m.begin(), m.end()), mt(m.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j) mt[static_cast<size_t>(j * rows + r)] = md[static_cast<size_t>(r * n + j)];
      const Tensor by_rows = fromDoubles(md, {rows, n}, ScalarType::Float32);
      const Tensor by_columns = fromDoubles(mt, {n, rows}, ScalarType::Float32);
      for (bool log : {false, true}) {
        const char* op = log ? "log_softmax.int" : "softmax.int";
        const std::vector<double> got_rows = values(callT(op, {by_rows, int64_t{1}, IValue()}));
        const std::vector<double> got_columns = values(callT(op, {by_columns, int64_t{0}, IValue()}));
        for (int64_t r = 0; r < rows; ++r) {
          const std::vector<float> row(m.begin() + r * n, m.begin() + (r + 1) * n);
          const std::vector<long double> exact = exactSoftmax(row, log);
          const float mx = *std::max_element(row.begin(), row.end());
          for (int64_t j = 0; j < n; ++j) {
            const auto want = static_cast<float>(exact[static_cast<size_t>(j)]);
            for (double got :
                 {got_rows[static_cast<size_t>(r * n + j)], got_columns[static_cast<size_t>(j * rows + r)]}) {
              const int64_t ulps = ulpsApart(static_cast<float>(got), want);
              const double bound = log ? (std::fabs(want) >= 0.01 ? 2.0 : 3.0 + std::fabs(std::log(std::fabs(want))))
                                       : 3.0 + (mx - row[static_cast<size_t>(j)]);
              EXPECT_LE(static_cast<double>(ulps), bound)
                  << op << " n " << n << " scale " << scale << " row " << r << " x " << row[static_cast<size_t>(j)]
                  << " max " << mx << ": got " << got << ", exact " << want;
              if (!log)
                worst_softmax = std::max(worst_softmax, ulps);
              else if (std::fabs(want) >= 0.01)
                worst_log = std::max(worst_log, ulps);
              else
                worst_log_near_zero = std::max(worst_log_near_zero, ulps);
            }
          }
        }
      }
    }
  }
  std::printf("[ worst ulps ] log_softmax %lld (|y| >= 0.01), %lld (|y| < 0.01); softmax %lld\n",
              static_cast<long long>(worst_log), static_cast<long long>(worst_log_near_zero),
              static_cast<long long>(worst_softmax));
}

// The CPU plugin computes float32 rows in place when the row is
// unit-stride in the input and out (softmaxRow), or blocks of 16 adjacent
// rows when `dim` is not innermost (softmaxColumns); any other layout or
// dtype is copied through a buffer (rows or blocks), float64 in scalar
// double. Each layout below takes one of them; all must agree with the
// reference, including partial vector lengths and parallel sizes.
TEST(Softmax, EveryKernelPath) {
  struct Case {
    const char* name;
    Tensor x;
    int64_t dim;
  };
  for (ScalarType dt : {ScalarType::Float32, ScalarType::BFloat16, ScalarType::Float64}) {
    const std::vector<Case> cases = {
        {"last dim, contiguous (rows in place for f32)", input({37, 300}, dt, 40), 1},
        {"last dim, 3-d contiguous, parallel", input({4, 50, 333}, dt, 41), -1},
        {"last dim, long rows", input({3, 5000}, dt, 42), 1},
        {"last dim, one row", input({1, 19}, dt, 43), 1},
        {"last dim, sliced rows (in place for f32)", input({9, 80}, dt, 44).slice(1, 0, 70), 1},
        {"last dim, transposed (staged rows)", input({30, 11}, dt, 45).t(), 1},
        {"middle dim (blocks)", input({6, 50, 40}, dt, 46), 1},
        {"middle dim, parallel (blocks)", input({8, 64, 70}, dt, 47), 1},
        {"first dim (blocks)", input({50, 37}, dt, 48), 0},
        {"first dim, sliced inner (blocks)", input({20, 64}, dt, 49).slice(1, 3, 60), 0},
        {"middle dim, expanded inner (staged rows)", input({5, 7, 1}, dt, 50).expand({5, 7, 24}), 1},
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << dt << " " << c.name);
      const std::vector<int64_t> sizes(c.x.sizes().begin(), c.x.sizes().end());
      expectClose(callT("softmax.int", {c.x, c.dim, IValue()}), refSoftmax(c.x, c.dim, false), sizes, dt);
      expectClose(callT("log_softmax.int", {c.x, c.dim, IValue()}), refSoftmax(c.x, c.dim, true), sizes, dt);
      // Into a preallocated contiguous out, and a transposed one (staged).
      Tensor out = emptyTensor(sizes, dt);
      callT("softmax.int_out", {c.x, c.dim, IValue(), out});
      expectClose(out, refSoftmax(c.x, c.dim, false), sizes, dt);
      Tensor out_t =
          emptyTensor(Dims(sizes.rbegin(), sizes.rend()), dt).permute(c.x.dim() == 2 ? Dims{1, 0} : Dims{2, 1, 0});
      callT("log_softmax.int_out", {c.x, c.dim, IValue(), out_t});
      expectClose(out_t, refSoftmax(c.x, c.dim, true), sizes, dt);
    }
  }
}

// PyTorch's non-finite semantics on every path: a row holding a NaN or
// +inf, or only -inf, is all NaN; -inf entries of a row with a finite max
// get probability 0 (log: -inf).
TEST(Softmax, NonFiniteRowsOnEveryPath) {
  const int64_t rows = 7, n = 40;
  std::vector<double> m(static_cast<size_t>(rows * n));
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::sin(static_cast<double>(i)) * 3;
  auto at = [&](int64_t r, int64_t j) -> double& { return m[static_cast<size_t>(r * n + j)]; };
  for (int64_t j = 0; j < n; ++j) at(0, j) = -kInf;                   // all -inf
  at(1, 7) = kInf;                                                    // one +inf
  at(2, 33) = kNaN;                                                   // one NaN
  at(3, 0) = at(3, 17) = at(3, 39) = -kInf;                           // some -inf, finite max
  at(4, 2) = at(4, 38) = kInf;                                        // two +inf
  for (int64_t j = 0; j < n; ++j) at(5, j) = j == 20 ? kNaN : -kInf;  // NaN among -inf
  // Row 6 stays finite.
  std::vector<double> mt(m.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) mt[static_cast<size_t>(j * rows + r)] = at(r, j);
  for (ScalarType dt : {ScalarType::Float32, ScalarType::BFloat16, ScalarType::Float64}) {
    struct Case {
      const char* name;
      Tensor x;
      int64_t dim;
    };
    const std::vector<Case> cases = {
        {"last dim, contiguous (rows)", fromDoubles(m, {rows, n}, dt), 1},
        {"first dim (blocks)", fromDoubles(mt, {n, rows}, dt), 0},
        {"last dim, transposed (staged rows)", fromDoubles(mt, {n, rows}, dt).t(), 1},
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << dt << " " << c.name);
      const std::vector<int64_t> sizes(c.x.sizes().begin(), c.x.sizes().end());
      for (bool log : {false, true}) {
        const Tensor y = callT(log ? "log_softmax.int" : "softmax.int", {c.x, c.dim, IValue()});
        const std::vector<double> expected = refSoftmax(c.x, c.dim, log);
        // The reference's semantics are the ones claimed above.
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < n; ++j) {
            const size_t i = static_cast<size_t>(c.dim == 0 ? j * rows + r : r * n + j);
            if (r <= 2 || r == 4 || r == 5)
              EXPECT_TRUE(std::isnan(expected[i])) << r << "," << j;
            else if (r == 3 && (j == 0 || j == 17 || j == 39))
              EXPECT_EQ(expected[i], log ? -kInf : 0.0);
            else
              EXPECT_TRUE(std::isfinite(expected[i])) << r << "," << j;
          }
        }
        expectClose(y, expected, sizes, dt);
      }
    }
  }
}

TEST(Softmax, ErrorsAndOut) {
  Tensor x = input({3, 4}, ScalarType::Float32, 29);
  EXPECT_THAT(errorOf([&] {
                callT("softmax.int", {x, int64_t{2}, IValue()});
              }),
              AllOf(HasSubstr("bp::softmax.int"), HasSubstr("dimension 2 is out of range")));
  EXPECT_THAT(errorOf([&] {
                callT("log_softmax.int", {input({3}, ScalarType::Int32, 30), int64_t{0}, IValue()});
              }),
              AllOf(HasSubstr("bp::log_softmax.int"), HasSubstr("must be floating point")));
  EXPECT_THAT(errorOf([&] {
                callT("softmax.int", {x, int64_t{0}, ScalarType::Int64});
              }),
              HasSubstr("must be floating point"));
  // A transposed out.
  Tensor out = emptyTensor({4, 3}, ScalarType::Float32).t();
  callT("softmax.int_out", {x, int64_t{1}, IValue(), out});
  expectClose(out, refSoftmax(x, 1, false), {3, 4}, ScalarType::Float32);
  EXPECT_THAT(errorOf([&] {
                callT("log_softmax.int_out", {x, int64_t{1}, IValue(), emptyTensor({3, 4}, ScalarType::Float64)});
              }),
              HasSubstr("expected argument 'out' to have dtype float32"));
  EXPECT_THAT(errorOf([&] {
                callT("softmax.int_out", {x, int64_t{1}, IValue(), x.slice(1, 1, 3)});
              }),
              HasSubstr("shape"));
}

}  // namespace
}  // namespace backplane::ops_test
