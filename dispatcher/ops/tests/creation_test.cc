// Standard operators, family "creation": factories, fills, arange, the
// Philox random draws, dropout, copy_ and to, through the dispatcher with
// the CPU plugin, on the CPU and on the test device (whose memory the host
// cannot read: fills and draws run there by CPU fallback).
#include <cmath>
#include <cstring>

#include "backplane/ops/random.h"
#include "backplane/philox.h"
#include "ops_test_util.h"
#include "test_device.h"

namespace backplane::ops_test {
namespace {

using V = std::vector<int64_t>;
const Device kCpu(DeviceType::CPU);

Device testDevice(DeviceIndex index = 0) { return testing::TestDevice::install("testdev", 2).device(index); }

const std::vector<ScalarType> kAllTypes = {ScalarType::Bool,     ScalarType::UInt8,   ScalarType::Int8,
                                           ScalarType::Int32,    ScalarType::Int64,   ScalarType::Float16,
                                           ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64};
const std::vector<ScalarType> kFloatTypes = {ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32,
                                             ScalarType::Float64};

std::vector<double> repeat(double v, size_t n) { return std::vector<double>(n, v); }

// ------------------------------------------------------------------ Philox

// Known-answer vectors of Random123 (kat_vectors, philox4x32_10).
TEST(Philox, KnownAnswers) {
  using bp::philox::Words;
  Words r = bp::philox::philox4x32_10(Words{{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(r.w[0], 0x6627e8d5u);
  EXPECT_EQ(r.w[1], 0xe169c58du);
  EXPECT_EQ(r.w[2], 0xbc57ac4cu);
  EXPECT_EQ(r.w[3], 0x9b00dbd8u);
  r = bp::philox::philox4x32_10(Words{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(r.w[0], 0x408f276du);
  EXPECT_EQ(r.w[1], 0x41c83b0eu);
  EXPECT_EQ(r.w[2], 0xa20bc7c6u);
  EXPECT_EQ(r.w[3], 0x6d5451fdu);
  r = bp::philox::philox4x32_10(Words{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(r.w[0], 0xd16cfe09u);
  EXPECT_EQ(r.w[1], 0x94fdccebu);
  EXPECT_EQ(r.w[2], 0x5001e420u);
  EXPECT_EQ(r.w[3], 0x24126ea1u);
}

TEST(Philox, BlocksFor) {
  using bp::philox::DrawKind;
  EXPECT_EQ(bp::philox::blocksFor(0, DrawKind::Narrow), 0u);
  EXPECT_EQ(bp::philox::blocksFor(1, DrawKind::Narrow), 1u);
  EXPECT_EQ(bp::philox::blocksFor(8, DrawKind::Narrow), 2u);
  EXPECT_EQ(bp::philox::blocksFor(9, DrawKind::Narrow), 3u);
  EXPECT_EQ(bp::philox::blocksFor(3, DrawKind::Wide), 2u);
}

// Kernels that compute a block at a time get the per-lane values exactly.
TEST(Philox, BlockHelpersMatchLanes) {
  for (uint64_t block = 0; block < 64; ++block) {
    bp::philox::Words b = bp::philox::streamBlock(99, block);
    float n[4];
    bp::philox::narrowNormals(b, n);
    for (int lane = 0; lane < 4; ++lane) EXPECT_EQ(n[lane], bp::philox::narrowNormal(b, lane));
    double w[2];
    bp::philox::wideNormals(b, w);
    for (int lane = 0; lane < 2; ++lane) EXPECT_EQ(w[lane], bp::philox::wideNormal(b, lane));
  }
}

// ------------------------------------------------------------ empty, fills

TEST(Empty, ShapeDtypeDevice) {
  Tensor t = callT("empty", {V{2, 3}, IValue(), IValue()});
  EXPECT_EQ(t.sizes(), IntArrayRef({2, 3}));
  EXPECT_EQ(t.dtype(), ScalarType::Float32);
  EXPECT_EQ(t.device(), kCpu.resolved());
  t = callT("empty", {V{4}, ScalarType::Int8, testDevice(1)});
  EXPECT_EQ(t.dtype(), ScalarType::Int8);
  EXPECT_EQ(t.device(), testDevice(1));
  t = callT("empty", {V{}, ScalarType::Float64, IValue()});
  EXPECT_EQ(t.dim(), 0);
  EXPECT_EQ(t.numel(), 1);
  // An index-less device resolves to index 0.
  t = callT("empty", {V{0, 5}, IValue(), Device(testDevice().type)});
  EXPECT_EQ(t.device(), testDevice(0));
  EXPECT_EQ(t.numel(), 0);
  EXPECT_THAT(errorOf([] {
                callT("empty", {V{2, -1}, IValue(), IValue()});
              }),
              ::testing::HasSubstr("negative size -1 in dimension 1"));
}

TEST(Empty, Strided) {
  Tensor t = callT("empty_strided", {V{2, 3}, V{1, 2}, ScalarType::Int32, testDevice()});
  EXPECT_EQ(t.strides(), IntArrayRef({1, 2}));
  EXPECT_EQ(t.device(), testDevice());
  EXPECT_THAT(errorOf([] {
                callT("empty_strided", {V{2, 3}, V{1}, IValue(), IValue()});
              }),
              ::testing::HasSubstr("different lengths"));
  EXPECT_THAT(errorOf([] {
                callT("empty_strided", {V{2}, V{-1}, IValue(), IValue()});
              }),
              ::testing::HasSubstr("negative stride"));
}

TEST(Fill, EveryDtypeAndDevice) {
  for (Device dev : {kCpu, testDevice()}) {
    for (ScalarType t : kAllTypes) {
      SCOPED_TRACE(std::string(scalarTypeName(t)) + " on " + dev.str());
      Tensor z = callT("zeros", {V{2, 3}, t, dev});
      EXPECT_EQ(z.device(), dev.resolved());
      expectClose(z, repeat(0, 6), {2, 3}, t);
      expectClose(callT("ones", {V{3}, t, dev}), repeat(1, 3), {3}, t);
      // 5 is true in bool (every number converts to bool, non-zero is true).
      const int64_t v = t == ScalarType::Bool ? 1 : 5;
      if (t == ScalarType::Bool) expectClose(callT("full", {V{2}, Scalar(2.5), t, dev}), repeat(1, 2), {2}, t);
      expectClose(callT("full", {V{2, 2}, Scalar(v), t, dev}), repeat(static_cast<double>(v), 4), {2, 2}, t);
      expectClose(callT("full", {V{}, Scalar(v), t, dev}), {static_cast<double>(v)}, {}, t);
      expectClose(callT("zeros", {V{0, 3}, t, dev}), {}, {0, 3}, t);
    }
  }
}

TEST(Fill, FullInfersDtypeFromValue) {
  EXPECT_EQ(callT("full", {V{2}, Scalar(true), IValue(), IValue()}).dtype(), ScalarType::Bool);
  EXPECT_EQ(callT("full", {V{2}, Scalar(int64_t{3}), IValue(), IValue()}).dtype(), ScalarType::Int64);
  Tensor f = callT("full", {V{2}, Scalar(2.5), IValue(), IValue()});
  expectClose(f, {2.5, 2.5}, {2}, ScalarType::Float32);
  // A floating value into an integral tensor truncates, as PyTorch.
  expectClose(callT("full", {V{1}, Scalar(2.7), ScalarType::Int32, IValue()}), {2}, {1}, ScalarType::Int32);
}

TEST(Fill, StridedViewsKeepTheGaps) {
  for (Device dev : {kCpu, testDevice()}) {
    Tensor base = fromDoubles({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4}, ScalarType::Float32, dev);
    callT("fill_.Scalar", {base.slice(1, 1, 4, 2).t(), Scalar(-1.0)});
    expectClose(base, {0, -1, 2, -1, 4, -1, 6, -1, 8, -1, 10, -1}, {3, 4}, ScalarType::Float32);
    callT("zero_", {base.select(0, 2)});
    expectClose(base, {0, -1, 2, -1, 4, -1, 6, -1, 0, 0, 0, 0}, {3, 4}, ScalarType::Float32);
  }
  // Big enough for the parallel path, strided.
  Tensor big = callT("zeros", {V{300, 400}, ScalarType::Float64, IValue()});
  callT("fill_.Scalar", {big.t(), Scalar(3.0)});
  for (double x : values(big)) ASSERT_EQ(x, 3.0);
}

// Note [Writing a Scalar into a tensor]: fill_, full and full_like convert
// the value with PyTorch's checked conversion, one rule for every op.
TEST(Fill, ValuesConvertAsPyTorch) {
  using ::testing::HasSubstr;
  for (const char* op : {"full", "full_like"}) {
    SCOPED_TRACE(op);
    auto make = [&](const Scalar& value, ScalarType dtype) {
      if (std::string(op) == "full") return callT("full", {V{2}, value, dtype, IValue()});
      return callT("full_like", {callT("zeros", {V{2}, ScalarType::Float32, IValue()}), value, dtype, IValue()});
    };
    // float16's largest value is 65504: 65510 overflows, as an integer too.
    EXPECT_THAT(errorOf([&] { make(Scalar(65510.0), ScalarType::Float16); }),
                HasSubstr("the value 65510 cannot be converted to dtype float16 without overflow"));
    EXPECT_THAT(errorOf([&] { make(Scalar(int64_t{65510}), ScalarType::Float16); }),
                HasSubstr("cannot be converted to dtype float16"));
    expectClose(make(Scalar(65504.0), ScalarType::Float16), {65504, 65504}, {2}, ScalarType::Float16);
    EXPECT_THAT(errorOf([&] { make(Scalar(1e300), ScalarType::Float32); }), HasSubstr("dtype float32"));
    // A negative integer wraps into uint8 (down to -255); every number is a
    // bool (non-zero is true).
    expectClose(make(Scalar(int64_t{-1}), ScalarType::UInt8), {255, 255}, {2}, ScalarType::UInt8);
    EXPECT_THAT(errorOf([&] { make(Scalar(int64_t{-256}), ScalarType::UInt8); }), HasSubstr("dtype uint8"));
    expectClose(make(Scalar(int64_t{-1}), ScalarType::Bool), {1, 1}, {2}, ScalarType::Bool);
    expectClose(make(Scalar(int64_t{2}), ScalarType::Bool), {1, 1}, {2}, ScalarType::Bool);
    expectClose(make(Scalar(0.25), ScalarType::Bool), {1, 1}, {2}, ScalarType::Bool);
    // A double past an integer dtype's end overflows (127.5 into int8); inside it truncates.
    EXPECT_THAT(errorOf([&] { make(Scalar(127.5), ScalarType::Int8); }), HasSubstr("dtype int8"));
    expectClose(make(Scalar(-127.5), ScalarType::Int8), {-127, -127}, {2}, ScalarType::Int8);
  }
  // fill_ and masked_fill follow the same rule.
  Tensor h = callT("zeros", {V{2}, ScalarType::Float16, IValue()});
  EXPECT_THAT(errorOf([&] { callT("fill_.Scalar", {h, Scalar(65510.0)}); }), HasSubstr("dtype float16"));
  Tensor u = callT("zeros", {V{2}, ScalarType::UInt8, IValue()});
  callT("fill_.Scalar", {u, Scalar(int64_t{-2})});
  expectClose(u, {254, 254}, {2}, ScalarType::UInt8);
  Tensor mask = callT("ones", {V{2}, ScalarType::Bool, IValue()});
  EXPECT_THAT(errorOf([&] { callT("masked_fill.Scalar", {h, mask, Scalar(65510.0)}); }), HasSubstr("dtype float16"));
  expectClose(callT("masked_fill.Scalar", {u, mask, Scalar(int64_t{-1})}), {255, 255}, {2}, ScalarType::UInt8);
}

TEST(Fill, Errors) {
  Tensor i8 = callT("zeros", {V{2}, ScalarType::Int8, IValue()});
  EXPECT_THAT(errorOf([&] {
                callT("fill_.Scalar", {i8, Scalar(int64_t{300})});
              }),
              ::testing::HasSubstr("cannot be converted to dtype int8 without overflow"));
  Tensor h = callT("zeros", {V{2}, ScalarType::Float16, IValue()});
  EXPECT_THAT(errorOf([&] { callT("fill_.Scalar", {h, Scalar(1e6)}); }), ::testing::HasSubstr("float16"));
  callT("fill_.Scalar", {h, Scalar(INFINITY)});  // infinity fits every floating dtype
  EXPECT_EQ(values(h)[0], INFINITY);
  EXPECT_THAT(errorOf([&] {
                callT("fill_.Scalar", {callT("zeros", {V{1}, ScalarType::Int32, IValue()}), Scalar(NAN)});
              }),
              ::testing::HasSubstr("without overflow"));
  Tensor expanded = callT("zeros", {V{1}, IValue(), IValue()}).expand({3});
  EXPECT_THAT(errorOf([&] {
                callT("fill_.Scalar", {expanded, Scalar(1.0)});
              }),
              ::testing::HasSubstr("several elements at one memory location"));
}

TEST(Fill, LikeFactories) {
  Tensor src = randomTensor({2, 3}, ScalarType::Float64, 1).t();
  Tensor z = callT("zeros_like", {src, IValue(), IValue()});
  expectClose(z, repeat(0, 6), {3, 2}, ScalarType::Float64);
  Tensor o = callT("ones_like", {src, ScalarType::Int32, testDevice()});
  EXPECT_EQ(o.device(), testDevice());
  expectClose(o, repeat(1, 6), {3, 2}, ScalarType::Int32);
  expectClose(callT("full_like", {src, Scalar(7.0), IValue(), IValue()}), repeat(7, 6), {3, 2}, ScalarType::Float64);
  Tensor e = callT("empty_like", {src, ScalarType::Bool, IValue()});
  EXPECT_EQ(e.sizes(), IntArrayRef({3, 2}));
  EXPECT_EQ(e.dtype(), ScalarType::Bool);
}

// ------------------------------------------------------------------ arange

std::vector<double> arangeRef(double start, double end, double step) {
  std::vector<double> v;
  const int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  for (int64_t i = 0; i < n; ++i) v.push_back(start + static_cast<double>(i) * step);
  return v;
}

TEST(Arange, SizesAndValues) {
  expectClose(callT("arange", {Scalar(int64_t{5}), IValue(), IValue()}), {0, 1, 2, 3, 4}, {5}, ScalarType::Int64);
  expectClose(callT("arange.start", {Scalar(int64_t{2}), Scalar(int64_t{5}), IValue(), IValue()}), {2, 3, 4}, {3},
              ScalarType::Int64);
  expectClose(
      callT("arange.start_step", {Scalar(int64_t{10}), Scalar(int64_t{0}), Scalar(int64_t{-3}), IValue(), IValue()}),
      {10, 7, 4, 1}, {4}, ScalarType::Int64);
  // Float steps: ceil((end - start) / step) elements, float32 by default.
  struct Case {
    double start, end, step;
    int64_t size;
  };
  for (Case c : {Case{0, 1, 0.1, 10}, Case{0, 1, 0.3, 4}, Case{1, 2.5, 0.5, 3}, Case{-1, 1, 0.25, 8},
                 Case{1, -1, -0.5, 4}, Case{0, 0, 1, 0}}) {
    SCOPED_TRACE(std::to_string(c.start) + ":" + std::to_string(c.end) + ":" + std::to_string(c.step));
    Tensor t = callT("arange.start_step", {Scalar(c.start), Scalar(c.end), Scalar(c.step), IValue(), IValue()});
    EXPECT_EQ(t.numel(), c.size);
    expectClose(t, arangeRef(c.start, c.end, c.step), {c.size}, ScalarType::Float32);
  }
  for (ScalarType t : {ScalarType::UInt8, ScalarType::Int8, ScalarType::Int32, ScalarType::Float16,
                       ScalarType::BFloat16, ScalarType::Float64}) {
    expectClose(callT("arange.start_step", {Scalar(int64_t{1}), Scalar(int64_t{9}), Scalar(int64_t{2}), t, IValue()}),
                {1, 3, 5, 7}, {4}, t);
  }
  // On the test device (the kernel runs by CPU fallback).
  Tensor d = callT("arange.start_step", {Scalar(0.0), Scalar(2.0), Scalar(0.5), ScalarType::Float64, testDevice()});
  EXPECT_EQ(d.device(), testDevice());
  expectClose(d, {0, 0.5, 1, 1.5}, {4}, ScalarType::Float64);
}

TEST(Arange, Out) {
  Tensor out = callT("empty", {V{0}, ScalarType::Int32, IValue()});
  callT("arange.start_out", {Scalar(int64_t{0}), Scalar(int64_t{3}), Scalar(int64_t{1}), out});
  expectClose(out, {0, 1, 2}, {3}, ScalarType::Int32);
  // A strided out of the right size.
  Tensor base = callT("zeros", {V{6}, ScalarType::Float64, IValue()});
  callT("arange.start_out", {Scalar(int64_t{1}), Scalar(int64_t{4}), Scalar(int64_t{1}), base.slice(0, 0, 6, 2)});
  expectClose(base, {1, 0, 2, 0, 3, 0}, {6}, ScalarType::Float64);
  Tensor wrong = callT("zeros", {V{5}, IValue(), IValue()});
  EXPECT_THAT(errorOf([&] {
                callT("arange.start_out", {Scalar(int64_t{0}), Scalar(int64_t{3}), Scalar(int64_t{1}), wrong});
              }),
              ::testing::HasSubstr("has shape [5] but the result has shape [3]"));
}

TEST(Arange, Errors) {
  EXPECT_THAT(
      errorOf([] {
        callT("arange.start_step", {Scalar(int64_t{0}), Scalar(int64_t{5}), Scalar(int64_t{0}), IValue(), IValue()});
      }),
      ::testing::HasSubstr("step must be nonzero"));
  EXPECT_THAT(errorOf([] {
                callT("arange.start_step", {Scalar(0.0), Scalar(5.0), Scalar(0.0), IValue(), IValue()});
              }),
              ::testing::HasSubstr("step must be finite and nonzero"));
  EXPECT_THAT(
      errorOf([] {
        callT("arange.start_step", {Scalar(int64_t{0}), Scalar(int64_t{5}), Scalar(int64_t{-1}), IValue(), IValue()});
      }),
      ::testing::HasSubstr("is empty in the direction of step -1"));
  EXPECT_THAT(errorOf([] {
                callT("arange.start_step", {Scalar(5.0), Scalar(0.0), Scalar(0.5), IValue(), IValue()});
              }),
              ::testing::HasSubstr("give a negative step"));
  EXPECT_THAT(errorOf([] {
                callT("arange.start_step", {Scalar(0.0), Scalar(INFINITY), Scalar(1.0), IValue(), IValue()});
              }),
              ::testing::HasSubstr("must be finite"));
  EXPECT_THAT(errorOf([] {
                callT("arange", {Scalar(int64_t{3}), ScalarType::Bool, IValue()});
              }),
              ::testing::HasSubstr("dtype bool is not supported"));
}

// ------------------------------------------------------------------ random

// What element i of a float32 uniform draw at (seed, offset) must be.
float expectedUniform(uint64_t seed, uint64_t offset, int64_t i) {
  bp::philox::Words b = bp::philox::streamBlock(seed, offset + static_cast<uint64_t>(i / 4));
  return bp::philox::narrowUniform(b, static_cast<int>(i % 4));
}

TEST(Random, ManualSeedReproduces) {
  manualSeed(123);
  EXPECT_EQ(defaultSeed(), 123u);
  std::vector<double> a = values(callT("rand", {V{10}, IValue(), IValue()}));
  std::vector<double> b = values(callT("randn", {V{7}, ScalarType::Float64, IValue()}));
  EXPECT_EQ(randomState().offset, 3u + 4u);  // ceil(10 / 4) + ceil(7 / 2)
  manualSeed(123);
  EXPECT_EQ(values(callT("rand", {V{10}, IValue(), IValue()})), a);
  EXPECT_EQ(values(callT("randn", {V{7}, ScalarType::Float64, IValue()})), b);
  manualSeed(124);
  EXPECT_NE(values(callT("rand", {V{10}, IValue(), IValue()})), a);
}

TEST(Random, ValuesFollowTheStreamForAnyChunking) {
  // A tensor large enough to be split across threads: every element is the
  // stream's, so the thread count cannot change it.
  manualSeed(7);
  Tensor big = callT("rand", {V{513, 257}, IValue(), IValue()});
  std::vector<double> v = values(big);
  for (int64_t i = 0; i < big.numel(); ++i) ASSERT_EQ(v[static_cast<size_t>(i)], expectedUniform(7, 0, i)) << i;
  // One draw of 8 equals two draws of 4.
  manualSeed(9);
  std::vector<double> one = values(callT("rand", {V{8}, IValue(), IValue()}));
  manualSeed(9);
  std::vector<double> two = values(callT("rand", {V{4}, IValue(), IValue()}));
  std::vector<double> rest = values(callT("rand", {V{4}, IValue(), IValue()}));
  two.insert(two.end(), rest.begin(), rest.end());
  EXPECT_EQ(one, two);
  // float64: 2 per block, so 4 = 2 + 2.
  manualSeed(9);
  one = values(callT("randn", {V{4}, ScalarType::Float64, IValue()}));
  manualSeed(9);
  two = values(callT("randn", {V{2}, ScalarType::Float64, IValue()}));
  rest = values(callT("randn", {V{2}, ScalarType::Float64, IValue()}));
  two.insert(two.end(), rest.begin(), rest.end());
  EXPECT_EQ(one, two);
}

TEST(Random, NormalsFollowTheStream) {
  setRandomState(RandomState{31, 5});
  std::vector<double> f = values(callT("normal_", {callT("empty", {V{3, 3}, IValue(), IValue()}), 1.0, 2.0}));
  for (int64_t i = 0; i < 9; ++i) {
    bp::philox::Words b = bp::philox::streamBlock(31, 5 + static_cast<uint64_t>(i / 4));
    EXPECT_EQ(f[static_cast<size_t>(i)], 1.0f + 2.0f * bp::philox::narrowNormal(b, static_cast<int>(i % 4))) << i;
  }
  EXPECT_EQ(randomState().offset, 5u + 3u);
  std::vector<double> d = values(callT("randn", {V{5}, ScalarType::Float64, IValue()}));
  for (int64_t i = 0; i < 5; ++i) {
    bp::philox::Words b = bp::philox::streamBlock(31, 8 + static_cast<uint64_t>(i / 2));
    EXPECT_EQ(d[static_cast<size_t>(i)], bp::philox::wideNormal(b, static_cast<int>(i % 2))) << i;
  }
}

TEST(Random, StridedSelfGetsRowMajorElements) {
  manualSeed(5);
  Tensor t = callT("empty", {V{3, 5}, IValue(), IValue()}).t();  // [5, 3], transposed
  callT("uniform_", {t, 0.0, 1.0});
  std::vector<double> v = values(t);  // row-major order of the view
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(v[static_cast<size_t>(i)], expectedUniform(5, 0, i)) << i;
}

TEST(Random, SameValuesOnTheTestDevice) {
  for (ScalarType t : kFloatTypes) {
    for (bool normal : {false, true}) {
      SCOPED_TRACE(std::string(scalarTypeName(t)) + (normal ? " randn" : " rand"));
      const char* name = normal ? "randn" : "rand";
      manualSeed(42);
      Tensor c = callT(name, {V{3, 7}, t, IValue()});
      manualSeed(42);
      Tensor d = callT(name, {V{3, 7}, t, testDevice()});
      EXPECT_EQ(d.device(), testDevice());
      EXPECT_EQ(d.dtype(), t);
      EXPECT_EQ(values(c), values(d));
    }
  }
}

struct Moments {
  double mean, var, min, max;
};
Moments moments(const std::vector<double>& v) {
  Moments m{0, 0, INFINITY, -INFINITY};
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= static_cast<double>(v.size() - 1);
  return m;
}

TEST(Random, Statistics) {
  manualSeed(2024);
  for (ScalarType t : kFloatTypes) {
    SCOPED_TRACE(scalarTypeName(t));
    Moments u = moments(values(callT("rand", {V{100000}, t, IValue()})));
    EXPECT_NEAR(u.mean, 0.5, 0.005);
    EXPECT_NEAR(u.var, 1.0 / 12, 0.002);
    EXPECT_GE(u.min, 0.0);
    EXPECT_LT(u.max, 1.0);
    Moments n = moments(values(callT("randn", {V{100000}, t, IValue()})));
    EXPECT_NEAR(n.mean, 0.0, 0.015);
    EXPECT_NEAR(n.var, 1.0, 0.02);
    Tensor x = callT("empty", {V{100000}, t, IValue()});
    Moments r = moments(values(callT("uniform_", {x, -3.0, 5.0})));
    EXPECT_NEAR(r.mean, 1.0, 0.04);
    EXPECT_NEAR(r.var, 64.0 / 12, 0.1);
    EXPECT_GE(r.min, -3.0);
    EXPECT_LT(r.max, 5.0);
    Moments g = moments(values(callT("normal_", {x, 2.0, 3.0})));
    EXPECT_NEAR(g.mean, 2.0, 0.05);
    EXPECT_NEAR(g.var, 9.0, 0.2);
  }
  Moments b =
      moments(values(callT("bernoulli_.float", {callT("empty", {V{100000}, ScalarType::Int32, IValue()}), 0.3})));
  EXPECT_NEAR(b.mean, 0.3, 0.005);
  EXPECT_EQ(b.min, 0);
  EXPECT_EQ(b.max, 1);
}

TEST(Random, EmptyAndLike) {
  const uint64_t before = randomState().offset;
  EXPECT_EQ(callT("rand", {V{0, 4}, IValue(), IValue()}).numel(), 0);
  EXPECT_EQ(randomState().offset, before);  // an empty draw reserves nothing
  Tensor s = callT("rand", {V{}, ScalarType::Float64, IValue()});
  EXPECT_EQ(s.dim(), 0);
  Tensor like = callT("randn_like", {callT("zeros", {V{2, 3}, ScalarType::BFloat16, IValue()}), IValue(), IValue()});
  EXPECT_EQ(like.sizes(), IntArrayRef({2, 3}));
  EXPECT_EQ(like.dtype(), ScalarType::BFloat16);
  EXPECT_EQ(callT("rand_like", {s, ScalarType::Float16, testDevice()}).device(), testDevice());
}

TEST(Random, Errors) {
  EXPECT_THAT(errorOf([] {
                callT("rand", {V{2}, ScalarType::Int64, IValue()});
              }),
              ::testing::HasSubstr("bp::rand: the requested dtype, int64, is not floating"));
  Tensor x = callT("empty", {V{2}, IValue(), IValue()});
  EXPECT_THAT(errorOf([&] { callT("uniform_", {x, 1.0, 0.0}); }), ::testing::HasSubstr("from=1 and to=0"));
  EXPECT_THAT(errorOf([&] { callT("normal_", {x, 0.0, -1.0}); }), ::testing::HasSubstr("std >= 0"));
  EXPECT_THAT(errorOf([&] { callT("bernoulli_.float", {x, 1.5}); }), ::testing::HasSubstr("p in [0, 1]"));
  EXPECT_THAT(errorOf([&] {
                callT("_philox_uniform_", {x, 0.0, 1.0, int64_t{1}, int64_t{-1}});
              }),
              ::testing::HasSubstr("offset must be >= 0"));
  EXPECT_THAT(errorOf([&] {
                callT("uniform_", {callT("empty", {V{2}, ScalarType::Int32, IValue()}), 0.0, 1.0});
              }),
              ::testing::HasSubstr("argument 'self', int32, is not floating"));
}

// ----------------------------------------------------------------- dropout

TEST(Dropout, Semantics) {
  Tensor x = randomTensor({50, 40}, ScalarType::Float32, 3);
  Tensor same = callT("dropout", {x, 0.5, false});
  EXPECT_EQ(same.unsafeGetImpl(), x.unsafeGetImpl());
  EXPECT_EQ(callT("dropout", {x, 0.0, true}).unsafeGetImpl(), x.unsafeGetImpl());
  expectClose(callT("dropout", {x, 1.0, true}), repeat(0, 2000), {50, 40}, ScalarType::Float32);

  Tensor ones = callT("ones", {V{100000}, IValue(), IValue()});
  std::vector<double> v = values(callT("dropout", {ones, 0.3, true}));
  int64_t zeros = 0;
  for (double e : v) {
    if (e == 0)
      ++zeros;
    else
      ASSERT_NEAR(e, 1 / 0.7, 1e-6);
  }
  EXPECT_NEAR(static_cast<double>(zeros) / 1e5, 0.3, 0.007);

  // Same values on the test device for the same stream position.
  manualSeed(11);
  std::vector<double> c = values(callT("dropout", {x, 0.4, true}));
  manualSeed(11);
  Tensor d = callT("dropout", {fromDoubles(values(x), {50, 40}, ScalarType::Float32, testDevice()), 0.4, true});
  EXPECT_EQ(d.device(), testDevice());
  EXPECT_EQ(values(d), c);

  EXPECT_THAT(errorOf([&] { callT("dropout", {x, 1.5, true}); }), ::testing::HasSubstr("between 0 and 1, but got 1.5"));
  EXPECT_THAT(errorOf([&] { callT("dropout", {x, -0.1, false}); }), ::testing::HasSubstr("between 0 and 1"));
}

// ------------------------------------------------------------------- copy_

// PyTorch's conversion of one value to `t`, in double.
double castRef(double v, ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return v != 0;
    case ScalarType::UInt8: return static_cast<uint8_t>(static_cast<int64_t>(v));
    case ScalarType::Int8: return static_cast<int8_t>(static_cast<int64_t>(v));
    case ScalarType::Int32: return static_cast<int32_t>(static_cast<int64_t>(v));
    case ScalarType::Int64: return static_cast<double>(static_cast<int64_t>(v));
    case ScalarType::Float16: return static_cast<float>(Half(static_cast<float>(v)));
    case ScalarType::BFloat16: return static_cast<float>(BFloat16(static_cast<float>(v)));
    case ScalarType::Float32: return static_cast<float>(v);
    case ScalarType::Float64: return v;
    case ScalarType::Int16: return static_cast<int16_t>(static_cast<int64_t>(v));
    case ScalarType::UInt16: return static_cast<uint16_t>(static_cast<int64_t>(v));
    case ScalarType::UInt32: return static_cast<uint32_t>(static_cast<int64_t>(v));
    case ScalarType::UInt64: return static_cast<double>(static_cast<uint64_t>(static_cast<int64_t>(v)));
  }
  return NAN;
}

TEST(Copy, EveryDtypePair) {
  const std::vector<double> src_values = {0, 1, -1, 2.5, -2.75, 100, 0.333, 7};
  for (ScalarType from : kAllTypes) {
    std::vector<double> in;
    for (double v : src_values) in.push_back(castRef(v, from));
    Tensor src = fromDoubles(in, {2, 4}, from);
    for (ScalarType to : kAllTypes) {
      SCOPED_TRACE(std::string(scalarTypeName(from)) + " -> " + std::string(scalarTypeName(to)));
      std::vector<double> want;
      for (double v : in) want.push_back(castRef(v, to));
      Tensor dst = callT("empty", {V{2, 4}, to, IValue()});
      Tensor r = callT("copy_", {dst, src, false});
      EXPECT_EQ(r.unsafeGetImpl(), dst.unsafeGetImpl());
      expectClose(dst, want, {2, 4}, to, 0);
    }
  }
}

TEST(Copy, StridedAndBroadcast) {
  for (ScalarType t : {ScalarType::Float32, ScalarType::Int64, ScalarType::BFloat16}) {
    SCOPED_TRACE(scalarTypeName(t));
    Tensor src = randomTensor({3, 4}, t, 1);
    std::vector<double> s = values(src);
    // Into a transposed destination: dst.t() = src.
    Tensor dst = callT("zeros", {V{4, 3}, t, IValue()});
    callT("copy_", {dst.t(), src, false});
    std::vector<double> want(12);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) want[static_cast<size_t>(j * 3 + i)] = s[static_cast<size_t>(i * 4 + j)];
    expectClose(dst, want, {4, 3}, t, 0);
    // From a transposed, sliced source, with conversion to float64.
    Tensor d2 = callT("empty", {V{2, 3}, ScalarType::Float64, IValue()});
    callT("copy_", {d2, src.t().slice(0, 1, 4, 2), false});
    std::vector<double> w2;
    for (int j : {1, 3})
      for (int i = 0; i < 3; ++i) w2.push_back(s[static_cast<size_t>(i * 4 + j)]);
    expectClose(d2, w2, {2, 3}, ScalarType::Float64, tolerance(t));
    // Broadcasting a row and a 0-d tensor.
    Tensor row = fromDoubles({1, 2, 3}, {3}, t);
    Tensor d3 = callT("empty", {V{2, 3}, t, IValue()});
    callT("copy_", {d3, row, false});
    expectClose(d3, {1, 2, 3, 1, 2, 3}, {2, 3}, t, 0);
    callT("copy_", {d3, fromDoubles({5}, {}, t), false});
    expectClose(d3, repeat(5, 6), {2, 3}, t, 0);
  }
  // Big: the parallel paths (same dtype contiguous, and converting strided).
  Tensor big = randomTensor({400, 300}, ScalarType::Float32, 2);
  Tensor same = callT("empty", {V{400, 300}, IValue(), IValue()});
  callT("copy_", {same, big, false});
  EXPECT_EQ(values(same), values(big));
  Tensor conv = callT("empty", {V{300, 400}, ScalarType::Float64, IValue()});
  callT("copy_", {conv, big.t(), false});
  EXPECT_EQ(values(conv), values(big.t()));
}

TEST(Copy, AcrossDevices) {
  const Device dev0 = testDevice(0), dev1 = testDevice(1);
  Tensor host = randomTensor({3, 4}, ScalarType::Float32, 4);
  std::vector<double> h = values(host);
  // cpu -> testdev, contiguous and same dtype: bytes straight into self.
  Tensor d = callT("empty", {V{3, 4}, IValue(), dev0});
  callT("copy_", {d, host, false});
  EXPECT_EQ(values(d), h);
  // testdev -> testdev:1, converting to float64 into a transposed view.
  Tensor d1 = callT("zeros", {V{4, 3}, ScalarType::Float64, dev1});
  callT("copy_", {d1.t(), d, false});
  EXPECT_EQ(values(d1.t()), h);
  // testdev (strided, sparse span) -> cpu, converting to float16.
  Tensor wide = callT("zeros", {V{3, 40}, IValue(), dev0});
  callT("copy_", {wide.slice(1, 0, 40, 10), d, false});
  Tensor back = callT("empty", {V{3, 4}, ScalarType::Float16, IValue()});
  callT("copy_", {back, wide.slice(1, 0, 40, 10), false});
  expectClose(back, h, {3, 4}, ScalarType::Float16);
  // cpu (broadcast row) -> testdev, bool conversion.
  Tensor b = callT("empty", {V{2, 3}, ScalarType::Bool, dev0});
  callT("copy_", {b, fromDoubles({0, 0.5, -2}, {3}, ScalarType::Float32), false});
  expectClose(b, {0, 1, 1, 0, 1, 1}, {2, 3}, ScalarType::Bool);
}

TEST(Copy, OverlapAndErrors) {
  // Disjoint views of one storage copy fine.
  Tensor x = fromDoubles({1, 2, 3, 4, 5, 6}, {2, 3}, ScalarType::Float32);
  callT("copy_", {x.select(0, 1), x.select(0, 0), false});
  expectClose(x, {1, 2, 3, 1, 2, 3}, {2, 3}, ScalarType::Float32);
  callT("copy_", {x, x, false});  // itself: nothing to do
  expectClose(x, {1, 2, 3, 1, 2, 3}, {2, 3}, ScalarType::Float32);
  Tensor sq = fromDoubles({1, 2, 3, 4}, {2, 2}, ScalarType::Float32);
  EXPECT_THAT(errorOf([&] {
                callT("copy_", {sq, sq.t(), false});
              }),
              ::testing::HasSubstr("shares memory with input 'src'"));
  EXPECT_THAT(errorOf([&] {
                callT("copy_", {x, fromDoubles({1, 2}, {2}, ScalarType::Float32), false});
              }),
              ::testing::HasSubstr("src of shape [2] cannot be broadcast to self's shape [2, 3]"));
  Tensor expanded = callT("zeros", {V{1}, IValue(), IValue()}).expand({3});
  EXPECT_THAT(errorOf([&] {
                callT("copy_", {expanded, fromDoubles({1, 2, 3}, {3}, ScalarType::Float32), false});
              }),
              ::testing::HasSubstr("several elements at one memory location"));
  EXPECT_THAT(errorOf([&] {
                callT("_copy_on_device_",
                      {callT("empty", {V{2}, IValue(), testDevice()}), fromDoubles({1, 2}, {2}, ScalarType::Float32)});
              }),
              ::testing::HasSubstr("copies within one device"));
}

// ---------------------------------------------------------------------- to

TEST(To, Variants) {
  Tensor x = fromDoubles({1.5, -2, 3}, {3}, ScalarType::Float32);
  EXPECT_EQ(callT("to.dtype", {x, ScalarType::Float32, false, false}).unsafeGetImpl(), x.unsafeGetImpl());
  Tensor copied = callT("to.dtype", {x, ScalarType::Float32, false, true});
  EXPECT_NE(copied.unsafeGetImpl(), x.unsafeGetImpl());
  EXPECT_EQ(values(copied), values(x));
  expectClose(callT("to.dtype", {x, ScalarType::Int32, false, false}), {1, -2, 3}, {3}, ScalarType::Int32);

  Tensor d = callT("to.device", {x, testDevice(), ScalarType::Float64, false, false});
  EXPECT_EQ(d.device(), testDevice());
  expectClose(d, {1.5, -2, 3}, {3}, ScalarType::Float64);
  EXPECT_EQ(callT("to.device", {d, Device(testDevice().type), ScalarType::Float64, false, false}).unsafeGetImpl(),
            d.unsafeGetImpl());  // index-less device means index 0

  Tensor back = callT("to.dtype_layout", {d, IValue(), kCpu, false, false});
  EXPECT_EQ(back.device(), kCpu.resolved());
  EXPECT_EQ(back.dtype(), ScalarType::Float64);
  EXPECT_EQ(values(back), values(d));
  EXPECT_EQ(callT("to.dtype_layout", {x, IValue(), IValue(), false, false}).unsafeGetImpl(), x.unsafeGetImpl());

  Tensor other = callT("empty", {V{1}, ScalarType::BFloat16, testDevice(1)});
  Tensor o = callT("to.other", {x.slice(0, 0, 3, 2), other, false, false});
  EXPECT_EQ(o.device(), testDevice(1));
  expectClose(o, {1.5, 3}, {2}, ScalarType::BFloat16);
}

}  // namespace
}  // namespace backplane::ops_test
