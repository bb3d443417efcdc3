// prod, all/any, cumsum, cumprod, sort, topk, flip and the pads on the
// simulator: each runs the GPU plugins' own kernel (not the CPU fallback)
// and matches the CPU plugin, at sizes that split reductions across blocks,
// give the scans many short lines and a few long ones, and sort lines
// within one shared-memory tile and beyond it (Note [Bitonic sort on the
// GPU]). The conformance specs (conformance/src/specs_sort_scan_pad.cc)
// check every dtype and the edge cases on gpusim too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/runtime.h"
#include "backplane/runtime/stream.h"
#include "gpu_test_util.h"

namespace backplane {
namespace {

class GpusimSortScanPadTest : public gpu_test::GpusimSuite {
 protected:
  // Values that repeat with a long period: (i * k) % 7 mapped by scale and shift.
  static Tensor input(int64_t rows, int64_t n, ScalarType dtype, float scale = 0.25f, float shift = -0.5f) {
    std::vector<float> v(static_cast<size_t>(rows * n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 2654435761u) % 7) * scale + shift;
    return Tensor(tensorFromVector<float>(v, {rows, n}, cpu())).to(dtype);
  }
  static void expectSame(const Tensor& got, const Tensor& want, double tol = 0) {
    ASSERT_EQ(got.sizes(), want.sizes());
    ASSERT_EQ(got.dtype(), want.dtype());
    const std::vector<double> g = valuesOf(got), w = valuesOf(want);
    for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], tol * (1 + std::abs(w[i]))) << "element " << i;
  }
};

TEST_F(GpusimSortScanPadTest, ProdAllAnyRunNativelyAndMatchTheCpuOnSplitReductions) {
  for (const char* op : {"bp::prod.int_out", "bp::prod.out", "bp::all.dims_out", "bp::any.dims_out"}) expectNative(op);
  // Signs: products of long rows (split across blocks) stay +-1, exactly.
  const Tensor x = input(3, 70000, ScalarType::Float32).ge(1.0).to(ScalarType::Int32).mul(2).sub(1);
  expectSame(prod(x.to(sim()), 1), prod(x, 1));
  expectSame(prod(x.to(sim())), prod(x));
  const Tensor nonzero = input(3, 70000, ScalarType::Float32, 1.0f, 1.0f);
  expectSame(all(nonzero.to(sim()), 1), all(nonzero, 1));
  expectSame(any(nonzero.to(sim()).eq(9.0)), any(nonzero.eq(9.0)));
  expectSame(any(nonzero.to(sim()).eq(7.0), 1), any(nonzero.eq(7.0), 1));
  const Tensor u = input(2, 5000, ScalarType::UInt8);
  expectSame(all(u.to(sim()), 0), all(u, 0));
  const Tensor f = input(64, 300, ScalarType::Float32, 0.001f, 0.997f).transpose(0, 1);
  expectSame(prod(f.to(sim()), 0, false, ScalarType::Float64), prod(f, 0, false, ScalarType::Float64), 1e-12);
}

TEST_F(GpusimSortScanPadTest, ScansRunNativelyAndMatchTheCpu) {
  expectNative("bp::cumsum.out");
  expectNative("bp::cumprod.out");
  const Tensor x = input(500, 33, ScalarType::Float32);
  expectSame(cumsum(x.to(sim()), 1), cumsum(x, 1), 1e-6);
  expectSame(cumsum(x.to(sim()), 0), cumsum(x, 0), 1e-6);
  const Tensor i = input(40, 9, ScalarType::Int8).transpose(0, 1);
  expectSame(cumsum(i.to(sim()), -1), cumsum(i, -1));
  // Lines longer than a block's 256 lanes: the carry between tiles. float32
  // sums past 2^24 still count (double accumulation), int64 ones wrap.
  const Tensor ones = input(2, 70000, ScalarType::Float32, 0.0f, 300.0f);
  expectSame(cumsum(ones.to(sim()), 1), cumsum(ones, 1), 1e-7);
  const Tensor big = input(3, 1000, ScalarType::Int64).mul(int64_t{3074457345618258602});
  expectSame(cumsum(big.to(sim()), 1), cumsum(big, 1));
  const Tensor near_one = input(700, 3, ScalarType::Float64, 0.001f, 0.997f).transpose(0, 1);
  expectSame(cumprod(near_one.to(sim()), 1), cumprod(near_one, 1), 1e-12);
  expectSame(cumprod(i.to(sim()), 0), cumprod(i, 0));
}

// sort and topk give the CPU's values and indices exactly: ties in index
// order (stable), NaN the largest value, ascending and descending, along the
// last dim and a strided one, lines within one tile, exactly one, and
// longer (global merge steps), every dtype family.
TEST_F(GpusimSortScanPadTest, SortAndTopkRunNativelyAndMatchTheCpuIndexForIndex) {
  expectNative("bp::sort.values_stable");
  expectNative("bp::topk.values");
  auto expectBoth = [](const std::tuple<Tensor, Tensor>& got, const std::tuple<Tensor, Tensor>& want) {
    ASSERT_EQ(std::get<0>(got).dtype(), std::get<0>(want).dtype());
    expectClose(std::get<0>(got), std::get<0>(want), 0, 0);  // NaN where the CPU has NaN
    ASSERT_EQ(std::get<1>(got).cpu().toVector<int64_t>(), std::get<1>(want).toVector<int64_t>());
  };
  struct Case {
    int64_t rows, n;
  };
  for (const Case& c : {Case{7, 5}, Case{3, 1024}, Case{2, 3000}, Case{1, 1}}) {
    for (ScalarType dt : {ScalarType::Float32, ScalarType::Float16, ScalarType::Float64, ScalarType::Int64,
                          ScalarType::UInt8, ScalarType::Bool}) {
      SCOPED_TRACE(::testing::Message() << dt << " " << c.rows << " x " << c.n);
      Tensor x = input(c.rows, c.n, ScalarType::Float64);  // 7 distinct values: many ties
      if (isFloatingType(dt) && c.n > 3) {
        std::vector<double> v = x.toVector<double>();
        v[2] = v[v.size() - 1] = std::nan("");
        v[1] = -std::numeric_limits<double>::infinity();
        x = Tensor(tensorFromVector<double>(v, {c.rows, c.n}, cpu()));
      }
      x = x.to(dt);
      const Tensor xs = x.to(sim());
      for (bool descending : {false, true}) {
        expectBoth(sort(xs, 1, descending), sort(x, 1, descending));
        expectBoth(sort(xs, 0, descending), sort(x, 0, descending));
        if (dt == ScalarType::Bool) continue;  // topk takes no bool
        for (int64_t k : {int64_t{0}, int64_t{1}, (c.n + 1) / 2, c.n}) {
          expectBoth(topk(xs, k, 1, descending), topk(x, k, 1, descending));
        }
      }
    }
  }
  // A strided input and strided outputs (sort.values_stable's out= form).
  const Tensor t = input(40, 9, ScalarType::Float32).transpose(0, 1);
  Tensor values = zeros({40, 9}, {ScalarType::Float32, sim()}).transpose(0, 1);
  Tensor indices = zeros({40, 9}, {ScalarType::Int64, sim()}).transpose(0, 1);
  Stack stack{t.to(sim()), true, int64_t{1}, false, values, indices};
  Dispatcher::singleton().findOpOrThrow("bp::sort.values_stable").callBoxed(stack);
  expectBoth({values, indices}, sort(t, 1, false));
}

// topk of a few entries of long rows is a selection (Note [topk as a
// selection] in sort.cu): the CPU's values and indices exactly (ties in
// index order, NaN the largest), along the last dim and dim 0 of a transposed view, over
// one round, several, and k at the largest the selection takes; and it
// launches a handful of kernels where the full sort launches dozens.
TEST_F(GpusimSortScanPadTest, TopkOfLongRowsIsASelectionWithTheSortsResult) {
  auto expectBoth = [](const std::tuple<Tensor, Tensor>& got, const std::tuple<Tensor, Tensor>& want) {
    expectClose(std::get<0>(got), std::get<0>(want), 0, 0);
    ASSERT_EQ(std::get<1>(got).cpu().toVector<int64_t>(), std::get<1>(want).toVector<int64_t>());
  };
  struct Case {
    int64_t rows, n, k;
  };
  for (const Case& c : {Case{3, 1025, 1}, Case{2, 5000, 3}, Case{2, 3000, 512}, Case{1, 70000, 10}}) {
    for (ScalarType dt : {ScalarType::Float32, ScalarType::Int32}) {
      SCOPED_TRACE(::testing::Message() << dt << " " << c.rows << " x " << c.n << " k=" << c.k);
      std::vector<double> v = input(c.rows, c.n, ScalarType::Float64).toVector<double>();  // 7 values: ties
      if (dt == ScalarType::Float32) v[c.n / 2] = v[v.size() - 3] = std::nan("");
      const Tensor x = Tensor(tensorFromVector<double>(v, {c.rows, c.n}, cpu())).to(dt);
      const Tensor xs = x.to(sim());
      for (bool largest : {true, false}) {
        expectBoth(topk(xs, c.k, 1, largest), topk(x, c.k, 1, largest));
        // The lines along dim 0 of a transposed view; the outputs' lines too.
        expectBoth(topk(xs.transpose(0, 1), c.k, 0, largest), topk(x.transpose(0, 1), c.k, 0, largest));
      }
    }
  }
  const Tensor x = input(1, 1 << 17, ScalarType::Float32).to(sim());
  auto launchesOf = [&](int64_t k) {
    const int64_t before = activity("kernel_launches");
    const auto r = topk(x, k, 1, true);
    return activity("kernel_launches") - before;
  };
  EXPECT_EQ(launchesOf(10), 7) << "load, two rounds of a tile pass and a compaction, the last tile, store";
  EXPECT_GE(launchesOf(1 << 16), 38) << "k past the selection's limit: the full sort";
}

// The selection's scratch lives until its last reader is queued: on a
// deferred stream (gpusim's app streams run when forced), topk's work is
// still queued when the call returns, and blocks it freed may go to another
// stream at once; that stream's work, forced first, must not reach them.
TEST_F(GpusimSortScanPadTest, TopkScratchOutlivesItsQueuedReaders) {
  const Tensor x = input(1, 2000, ScalarType::Float32);  // one round: 2,048 -> 32 entries, read from the second scratch
  const Tensor xs = x.to(sim());
  Stream a = Stream::create(sim()), b = Stream::create(sim());
  std::tuple<Tensor, Tensor> got;
  {
    StreamGuard on(a);
    got = topk(xs, 10, 1, true);
  }
  {
    StreamGuard on(b);
    std::vector<Tensor> others;  // blocks of the scratch's size classes, written on b
    for (int i = 0; i < 16; ++i) others.push_back(full({32}, -1e30, {ScalarType::Float32, sim()}));
    for (int i = 0; i < 16; ++i) others.push_back(full({32}, int64_t{-7}, {ScalarType::Int64, sim()}));
  }
  b.synchronize();
  a.synchronize();
  StreamGuard on(a);
  const auto want = topk(x, 10, 1, true);
  expectClose(std::get<0>(got), std::get<0>(want), 0, 0);
  EXPECT_EQ(std::get<1>(got).cpu().toVector<int64_t>(), std::get<1>(want).toVector<int64_t>());
}

TEST_F(GpusimSortScanPadTest, FlipAndPadsRunNativelyAndMatchTheCpu) {
  for (const char* op : {"bp::flip.out", "bp::constant_pad_nd.out", "bp::reflection_pad1d.out",
                         "bp::reflection_pad2d.out", "bp::reflection_pad3d.out", "bp::replication_pad1d.out",
                         "bp::replication_pad2d.out", "bp::replication_pad3d.out"})
    expectNative(op);
  const Tensor x = input(6, 10, ScalarType::Float16).view({2, 3, 10});
  expectSame(flip(x.to(sim()), {0, 2}), flip(x, {0, 2}));
  const Tensor t = x.transpose(1, 2);
  expectSame(pad(t.to(sim()), {2, 1, 3, 0}, "reflect"), pad(t, {2, 1, 3, 0}, "reflect"));
  expectSame(pad(t.to(sim()), {4, 1}, "replicate"), pad(t, {4, 1}, "replicate"));
  expectSame(pad(t.to(sim()), {1, -1, 0, 2}, "constant", 2.5), pad(t, {1, -1, 0, 2}, "constant", 2.5));
}

}  // namespace
}  // namespace backplane
