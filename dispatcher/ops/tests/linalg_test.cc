// Standard operators, family "linalg": each op against a double-precision
// reference through the CPU plugin.
#include <cmath>

#include "backplane/core/allocator.h"
#include "backplane/runtime/profiler.h"
#include "ops_test_util.h"
#include "test_device.h"

namespace backplane::ops_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<ScalarType> kAllDtypes = {ScalarType::Float32,  ScalarType::Float64, ScalarType::Float16,
                                            ScalarType::BFloat16, ScalarType::Int32,   ScalarType::Int64,
                                            ScalarType::Int8,     ScalarType::UInt8};

// Integer results wrap to the dtype (as PyTorch's integer arithmetic); the
// reference is exact in double, so wrap it the same way.
double wrapTo(ScalarType dtype, double v) {
  switch (dtype) {
    case ScalarType::Int8: return static_cast<int8_t>(static_cast<int64_t>(v));
    case ScalarType::UInt8: return static_cast<uint8_t>(static_cast<int64_t>(v));
    case ScalarType::Int32: return static_cast<int32_t>(static_cast<int64_t>(v));
    default: return v;
  }
}

// Inputs of `dtype`: small integers (non-negative for uint8), or [-2, 2).
Tensor input(IntArrayRef sizes, ScalarType dtype, uint32_t seed) {
  return randomTensor(sizes, dtype, seed, dtype == ScalarType::UInt8 ? 0 : -2, 2);
}

// Tolerance of a product with inner dimension k: rounding grows with k.
double productTol(ScalarType dtype, int64_t k) {
  return tolerance(dtype) * static_cast<double>(std::max<int64_t>(k, 1));
}

// Row-major product of [b, m, k] and [b, k, n] (batch strides 0 broadcast).
std::vector<double> refBmm(const std::vector<double>& a, const std::vector<double>& b, int64_t batch, int64_t m,
                           int64_t k, int64_t n, bool a_bcast = false, bool b_bcast = false) {
  std::vector<double> c(static_cast<size_t>(batch * m * n), 0.0);
  for (int64_t z = 0; z < batch; ++z)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < k; ++l)
          s += a[(a_bcast ? 0 : z * m * k) + i * k + l] * b[(b_bcast ? 0 : z * k * n) + l * n + j];
        c[z * m * n + i * n + j] = s;
      }
  return c;
}

std::vector<double> wrapAll(ScalarType dtype, std::vector<double> v) {
  for (double& x : v) x = wrapTo(dtype, x);
  return v;
}

// --- mm

TEST(Mm, EveryDtypeMatchesReference) {
  const std::vector<std::array<int64_t, 3>> shapes = {{3, 4, 5}, {1, 7, 1}, {17, 33, 9}, {64, 65, 66}};
  for (ScalarType dtype : kAllDtypes) {
    for (auto [m, k, n] : shapes) {
      SCOPED_TRACE(::testing::Message() << dtype << " " << m << "x" << k << "x" << n);
      Tensor a = input({m, k}, dtype, 1), b = input({k, n}, dtype, 2);
      Tensor c = callT("mm", {a, b});
      expectClose(c, wrapAll(dtype, refBmm(values(a), values(b), 1, m, k, n)), {m, n}, dtype, productTol(dtype, k));
    }
  }
}

TEST(Mm, TransposedSlicedAndExpandedInputs) {
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float64, ScalarType::BFloat16, ScalarType::Int64}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    Tensor at = input({6, 5}, dtype, 3).t();                    // [5, 6], column-major
    Tensor bs = input({6, 16}, dtype, 4).slice(1, 0, 16, 2);    // [6, 8], column stride 2
    Tensor bt = input({8, 6}, dtype, 5).t();                    // [6, 8] transposed
    Tensor row = input({1, 8}, dtype, 6).expand({6, 8});        // stride-0 rows
    Tensor rows = input({12, 6}, dtype, 7).slice(0, 0, 12, 2);  // [6, 6] every other row
    for (const Tensor& b : {bs, bt, row}) {
      Tensor c = callT("mm", {at, b});
      expectClose(c, refBmm(values(at), values(b), 1, 5, 6, 8), {5, 8}, dtype, productTol(dtype, 6));
    }
    Tensor c = callT("mm", {rows, bt});
    expectClose(c, refBmm(values(rows), values(bt), 1, 6, 6, 8), {6, 8}, dtype, productTol(dtype, 6));
  }
}

TEST(Mm, EmptyInnerDimensionGivesZerosAndEmptyRowsGiveEmpty) {
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::Int32}) {
    Tensor c = callT("mm", {input({3, 0}, dtype, 1), input({0, 4}, dtype, 2)});
    expectClose(c, std::vector<double>(12, 0.0), {3, 4}, dtype);
    Tensor e = callT("mm", {input({0, 5}, dtype, 1), input({5, 4}, dtype, 2)});
    EXPECT_EQ(e.sizes(), IntArrayRef({0, 4}));
    Tensor f = callT("mm", {input({3, 5}, dtype, 1), input({5, 0}, dtype, 2)});
    EXPECT_EQ(f.sizes(), IntArrayRef({3, 0}));
  }
}

TEST(Mm, OutArgument) {
  Tensor a = input({4, 3}, ScalarType::Float32, 1), b = input({3, 5}, ScalarType::Float32, 2);
  const std::vector<double> ref = refBmm(values(a), values(b), 1, 4, 3, 5);
  // Preallocated, returned as is.
  Tensor out = emptyTensor({4, 5}, ScalarType::Float32);
  Tensor r = callT("mm.out", {a, b, out});
  EXPECT_EQ(r.data_ptr(), out.data_ptr());
  expectClose(out, ref, {4, 5}, ScalarType::Float32);
  // Non-contiguous (transposed) out.
  Tensor outt = emptyTensor({5, 4}, ScalarType::Float32).t();
  callT("mm.out", {a, b, outt});
  expectClose(outt, ref, {4, 5}, ScalarType::Float32);
  // Empty out is resized.
  Tensor empty = emptyTensor({0}, ScalarType::Float32);
  callT("mm.out", {a, b, empty});
  expectClose(empty, ref, {4, 5}, ScalarType::Float32);
  // Wrong shape, wrong dtype, aliasing an input.
  EXPECT_THAT(errorOf([&] {
                callT("mm.out", {a, b, emptyTensor({2, 2}, ScalarType::Float32)});
              }),
              HasSubstr("bp::mm: argument 'out' has shape [2, 2] but the result has shape [4, 5]"));
  EXPECT_THAT(errorOf([&] {
                callT("mm.out", {a, b, emptyTensor({4, 5}, ScalarType::Float64)});
              }),
              HasSubstr("bp::mm: argument 'out' has dtype float64 but the result has dtype float32"));
  Tensor sq = input({3, 3}, ScalarType::Float32, 1);
  EXPECT_THAT(errorOf([&] { callT("mm.out", {sq, sq, sq}); }), HasSubstr("shares memory with input 'self'"));
}

TEST(Mm, Errors) {
  Tensor a = input({2, 3}, ScalarType::Float32, 1);
  EXPECT_THAT(errorOf([&] {
                callT("mm", {a, input({4, 5}, ScalarType::Float32, 2)});
              }),
              HasSubstr("bp::mm: self is [2, 3] and mat2 is [4, 5]; self.size(1) must equal mat2.size(0)"));
  EXPECT_THAT(errorOf([&] {
                callT("mm", {a, input({3}, ScalarType::Float32, 2)});
              }),
              HasSubstr("bp::mm: mat2 must be a matrix (2-D), but got a 1-D tensor of shape [3]"));
  EXPECT_THAT(errorOf([&] {
                callT("mm", {a, input({3, 2}, ScalarType::Float64, 2)});
              }),
              HasSubstr("bp::mm: expected self and mat2 to have the same dtype, but got float32 and float64"));
  Tensor bools = fromDoubles({1, 0, 1, 1}, {2, 2}, ScalarType::Bool);
  // The host's rule refuses bool (Note [Dtype rules live in metas]): no
  // kernel sees it.
  EXPECT_THAT(errorOf([&] {
                callT("mm", {bools, bools});
              }),
              HasSubstr("bp::mm: argument 'self' has dtype bool, which this op does not accept (accepted: every dtype "
                        "but bool); convert it to an accepted dtype first"));
  EXPECT_THAT(errorOf([&] { callT("mm", {bools, bools}); }), Not(HasSubstr("kernel of plugin")));
}

// --- bmm

TEST(Bmm, EveryDtypeMatchesReference) {
  for (ScalarType dtype : kAllDtypes) {
    SCOPED_TRACE(::testing::Message() << dtype);
    Tensor a = input({4, 3, 6}, dtype, 1), b = input({4, 6, 5}, dtype, 2);
    Tensor c = callT("bmm", {a, b});
    expectClose(c, wrapAll(dtype, refBmm(values(a), values(b), 4, 3, 6, 5)), {4, 3, 5}, dtype, productTol(dtype, 6));
  }
}

TEST(Bmm, StridedAndBroadcastBatches) {
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    Tensor a = input({3, 5, 4}, dtype, 1).transpose(1, 2);     // [3, 4, 5], column-major matrices
    Tensor b = input({5, 3, 2}, dtype, 2).permute({1, 0, 2});  // [3, 5, 2], batch not outermost
    Tensor c = callT("bmm", {a, b});
    expectClose(c, refBmm(values(a), values(b), 3, 4, 5, 2), {3, 4, 2}, dtype, productTol(dtype, 5));
    // One matrix broadcast over the batch (stride 0), on either side.
    Tensor one = input({1, 5, 2}, dtype, 3);
    Tensor bc = callT("bmm", {a, one.expand({3, 5, 2})});
    expectClose(bc, refBmm(values(a), values(one), 3, 4, 5, 2, false, true), {3, 4, 2}, dtype, productTol(dtype, 5));
    Tensor lone = input({1, 4, 5}, dtype, 4);
    Tensor lc = callT("bmm", {lone.expand({3, 4, 5}), b});
    expectClose(lc, refBmm(values(lone), values(b), 3, 4, 5, 2, true, false), {3, 4, 2}, dtype, productTol(dtype, 5));
  }
}

TEST(Bmm, EmptyOutAndErrors) {
  Tensor z = callT("bmm", {input({2, 3, 0}, ScalarType::Float32, 1), input({2, 0, 4}, ScalarType::Float32, 2)});
  expectClose(z, std::vector<double>(24, 0.0), {2, 3, 4}, ScalarType::Float32);
  EXPECT_EQ(callT("bmm", {input({0, 3, 2}, ScalarType::Float32, 1), input({0, 2, 4}, ScalarType::Float32, 2)}).sizes(),
            IntArrayRef({0, 3, 4}));
  Tensor a = input({2, 3, 4}, ScalarType::Float64, 1), b = input({2, 4, 5}, ScalarType::Float64, 2);
  Tensor out = emptyTensor({2, 3, 5}, ScalarType::Float64);
  callT("bmm.out", {a, b, out});
  expectClose(out, refBmm(values(a), values(b), 2, 3, 4, 5), {2, 3, 5}, ScalarType::Float64,
              productTol(ScalarType::Float64, 4));
  EXPECT_THAT(errorOf([&] {
                callT("bmm", {a, input({3, 4, 5}, ScalarType::Float64, 2)});
              }),
              HasSubstr("bp::bmm: self is [2, 3, 4] and mat2 is [3, 4, 5]; the batch sizes"));
  EXPECT_THAT(errorOf([&] {
                callT("bmm", {a, input({2, 3, 5}, ScalarType::Float64, 2)});
              }),
              HasSubstr("self.size(2) must equal mat2.size(1)"));
  EXPECT_THAT(errorOf([&] {
                callT("bmm", {input({3, 4}, ScalarType::Float64, 1), b});
              }),
              HasSubstr("bp::bmm: self must be a batch of matrices (3-D), but got a 2-D tensor"));
}

// --- matmul

// torch.matmul's reference: 1-D operands become a row (left) / column
// (right), batch dimensions broadcast, the added dimensions are removed.
std::vector<double> refMatmul(const Tensor& a, const Tensor& b) {
  std::vector<int64_t> as(a.sizes().begin(), a.sizes().end()), bs(b.sizes().begin(), b.sizes().end());
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  std::vector<int64_t> abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  const size_t nb = std::max(abatch.size(), bbatch.size());
  abatch.insert(abatch.begin(), nb - abatch.size(), 1);
  bbatch.insert(bbatch.begin(), nb - bbatch.size(), 1);
  std::vector<int64_t> batch(nb);
  int64_t total = 1;
  for (size_t i = 0; i < nb; ++i) total *= (batch[i] = abatch[i] == 1 ? bbatch[i] : abatch[i]);
  const std::vector<double> av = values(a), bv = values(b);
  std::vector<double> out;
  for (int64_t z = 0; z < total; ++z) {
    // Batch index -> offsets in a and b (size-1 dims broadcast).
    int64_t rem = z, aoff = 0, boff = 0, astride = 1, bstride = 1;
    for (size_t d = nb; d-- > 0;) {
      const int64_t idx = rem % batch[d];
      rem /= batch[d];
      aoff += (abatch[d] == 1 ? 0 : idx) * astride;
      boff += (bbatch[d] == 1 ? 0 : idx) * bstride;
      astride *= abatch[d];
      bstride *= bbatch[d];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < k; ++l) s += av[aoff * m * k + i * k + l] * bv[boff * k * n + l * n + j];
        out.push_back(s);
      }
  }
  return out;
}

TEST(Matmul, AllRankCombinations) {
  struct Case {
    std::vector<int64_t> a, b, result;
  };
  const std::vector<Case> cases = {
      {{4}, {4}, {}},                           // dot
      {{3, 4}, {4}, {3}},                       // matrix-vector
      {{4}, {4, 5}, {5}},                       // vector-matrix
      {{3, 4}, {4, 5}, {3, 5}},                 // mm
      {{2, 3, 4}, {4, 5}, {2, 3, 5}},           // batch folded into rows
      {{2, 3, 4}, {4}, {2, 3}},                 // batch x vector
      {{4}, {2, 4, 5}, {2, 5}},                 // vector x batch
      {{3, 4}, {2, 4, 5}, {2, 3, 5}},           // matrix broadcast over other's batch
      {{2, 1, 3, 4}, {5, 4, 2}, {2, 5, 3, 2}},  // batch dims broadcast both ways
      {{2, 3, 0}, {0, 5}, {2, 3, 5}},           // empty inner dimension
      {{0, 3, 4}, {4, 5}, {0, 3, 5}},           // empty batch
  };
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float64, ScalarType::BFloat16, ScalarType::Int64}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << dtype << " " << IntArrayRef(c.a) << " @ " << IntArrayRef(c.b));
      Tensor a = input(c.a, dtype, 1), b = input(c.b, dtype, 2);
      Tensor r = callT("matmul", {a, b});
      expectClose(r, refMatmul(a, b), c.result, dtype, productTol(dtype, a.size(-1)));
      Tensor out = emptyTensor({0}, dtype);
      callT("matmul.out", {a, b, out});
      expectClose(out, refMatmul(a, b), c.result, dtype, productTol(dtype, a.size(-1)));
    }
  }
}

TEST(Matmul, NonContiguousOperands) {
  Tensor a = input({4, 2, 3}, ScalarType::Float32, 1).permute({1, 2, 0});  // [2, 3, 4]
  Tensor b = input({5, 4}, ScalarType::Float32, 2).t();                    // [4, 5]
  expectClose(callT("matmul", {a, b}), refMatmul(a, b), {2, 3, 5}, ScalarType::Float32,
              productTol(ScalarType::Float32, 4));
  Tensor b3 = input({2, 5, 4}, ScalarType::Float32, 3).transpose(1, 2);  // [2, 4, 5]
  expectClose(callT("matmul", {a, b3}), refMatmul(a, b3), {2, 3, 5}, ScalarType::Float32,
              productTol(ScalarType::Float32, 4));
}

// Attention's heads: views of a [B, S, heads, d] projection as [B, heads, S,
// d], whose batch dimensions share no stride. On the CPU the product runs per
// outer batch index on the views (Note [Heads without copies]): right
// values, and no copy of either operand (the only large allocation is the
// result; none with out=). Broadcast and vector operands take the same path.
TEST(Matmul, AttentionHeadsAreNotCopied) {
  constexpr int64_t B = 2, S = 64, heads = 3, d = 64;  // each operand 96 KiB: the allocator counts it
  const ScalarType f32 = ScalarType::Float32;
  Tensor q = input({B, S, heads, d}, f32, 1).transpose(1, 2);                     // [B, heads, S, d]
  Tensor kt = input({B, S, heads, d}, f32, 2).transpose(1, 2).transpose(-2, -1);  // [B, heads, d, S]
  const double tol = productTol(f32, d);
  const int64_t before = cpuCacheStats().allocations;
  Tensor scores = callT("matmul", {q, kt});
  EXPECT_EQ(cpuCacheStats().allocations - before, 1) << "an operand was copied";
  expectClose(scores, refMatmul(q, kt), {B, heads, S, S}, f32, tol);

  Tensor v = input({B, S, heads, d}, f32, 3).transpose(1, 2);
  Tensor context = emptyTensor({B, heads, S, d}, f32);
  const int64_t before_out = cpuCacheStats().allocations;
  callT("matmul.out", {scores, v, context});
  EXPECT_EQ(cpuCacheStats().allocations - before_out, 0) << "an operand was copied";
  expectClose(context, refMatmul(scores, v), {B, heads, S, d}, f32, productTol(f32, S));

  struct Case {
    Tensor a, b;
    std::vector<int64_t> result;
  };
  const std::vector<Case> cases = {
      // a broadcast over the heads (size-1 batch dimension), b the heads
      {input({B, 1, 5, 4}, f32, 4).permute({0, 1, 3, 2}),
       input({B, 7, heads, 5}, f32, 5).permute({0, 2, 3, 1}),
       {B, heads, 4, 7}},
      // a vector against the heads
      {input({4}, f32, 6), input({B, 5, heads, 4}, f32, 7).permute({0, 2, 3, 1}), {B, heads, 5}},
      // an empty outer batch, and an empty product's inner dimension
      {input({0, 5, heads, 4}, f32, 10).transpose(1, 2),
       input({0, 5, heads, 4}, f32, 11).permute({0, 2, 3, 1}),
       {0, heads, 5, 5}},
      {input({B, 5, heads, 0}, f32, 12).transpose(1, 2),
       input({B, 5, heads, 0}, f32, 13).permute({0, 2, 3, 1}),
       {B, heads, 5, 5}},
      // three batch dimensions, the outer two without a common stride
      {input({2, 3, 4, 5, 6}, f32, 8).permute({1, 0, 2, 3, 4}),
       input({3, 6, 2, 4, 5}, f32, 9).permute({0, 2, 3, 1, 4}),
       {3, 2, 4, 5, 5}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.a.sizes() << " @ " << c.b.sizes());
    expectClose(callT("matmul", {c.a, c.b}), refMatmul(c.a, c.b), c.result, f32, productTol(f32, c.a.size(-1)));
  }
}

TEST(Matmul, Errors) {
  Tensor a = input({2, 3}, ScalarType::Float32, 1);
  EXPECT_THAT(errorOf([&] {
                callT("matmul", {a, input({4, 5}, ScalarType::Float32, 2)});
              }),
              HasSubstr("bp::matmul: self is [2, 3] and other is [4, 5]; self.size(-1) must equal other.size(-2)"));
  EXPECT_THAT(errorOf([&] {
                callT("matmul", {a, input({4}, ScalarType::Float32, 2)});
              }),
              HasSubstr("self.size(-1) must equal other.size(0)"));
  EXPECT_THAT(errorOf([&] {
                callT("matmul", {input({}, ScalarType::Float32, 1), a});
              }),
              HasSubstr("bp::matmul: both arguments need at least 1 dimension"));
  EXPECT_THAT(errorOf([&] {
                callT("matmul", {input({2, 2, 3}, ScalarType::Float32, 1), input({3, 3, 4}, ScalarType::Float32, 1)});
              }),
              HasSubstr("cannot be broadcast"));
  EXPECT_THAT(errorOf([&] {
                callT("matmul", {a, input({3, 2}, ScalarType::Int32, 1)});
              }),
              HasSubstr("same dtype, but got float32 and int32"));
  EXPECT_THAT(
      errorOf([&] {
        callT("matmul.out", {a, input({3, 2}, ScalarType::Float32, 1), emptyTensor({3, 3}, ScalarType::Float32).t()});
      }),
      HasSubstr("bp::matmul: argument 'out' has shape [3, 3] but the result has shape [2, 2]"));
}

// A non-contiguous out is written in place (as PyTorch): transposed, a
// permuted batch, or every other element, on each of matmul's paths.
TEST(Matmul, NonContiguousOut) {
  struct Case {
    std::vector<int64_t> a, b, result;
  };
  const std::vector<Case> cases = {
      {{3, 4}, {4, 5}, {3, 5}},        // mm straight into out
      {{2, 3, 4}, {4, 5}, {2, 3, 5}},  // rows folded
      {{2, 3, 4}, {2, 4, 5}, {2, 3, 5}},
      {{3, 4}, {4}, {3}},
  };
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Int64}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << dtype << " " << IntArrayRef(c.a) << " @ " << IntArrayRef(c.b));
      Tensor a = input(c.a, dtype, 1), b = input(c.b, dtype, 2);
      // out: the reversed-dimension view of a dense buffer, or every other element of a vector.
      std::vector<int64_t> rev(c.result.rbegin(), c.result.rend()), perm;
      for (int64_t d = static_cast<int64_t>(c.result.size()); d-- > 0;) perm.push_back(d);
      int64_t n = 1;
      for (int64_t v : c.result) n *= v;
      Tensor out =
          c.result.size() == 1
              ? fromDoubles(std::vector<double>(static_cast<size_t>(2 * n), 7), {2 * n}, dtype).slice(0, 0, 2 * n, 2)
              : fromDoubles(std::vector<double>(static_cast<size_t>(n), 7), rev, dtype).permute(perm);
      ASSERT_FALSE(out.is_contiguous());
      Tensor r = callT("matmul.out", {a, b, out});
      EXPECT_EQ(r.data_ptr(), out.data_ptr());
      expectClose(out, refMatmul(a, b), c.result, dtype, productTol(dtype, a.size(-1)));
    }
  }
}

// --- addmm

std::vector<double> refAddmm(const std::vector<double>& self, IntArrayRef self_sizes, const std::vector<double>& prod,
                             int64_t m, int64_t n, double beta, double alpha) {
  std::vector<double> out(static_cast<size_t>(m * n));
  const int64_t sd = static_cast<int64_t>(self_sizes.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      // self broadcast to [m, n].
      int64_t si = 0;
      if (sd == 1) si = self_sizes[0] == 1 ? 0 : j;
      if (sd == 2) si = (self_sizes[0] == 1 ? 0 : i) * self_sizes[1] + (self_sizes[1] == 1 ? 0 : j);
      const double s = beta == 0 ? 0 : beta * self[si];
      out[i * n + j] = s + alpha * prod[i * n + j];
    }
  return out;
}

TEST(Addmm, BroadcastSelfAndScalars) {
  const std::vector<std::vector<int64_t>> self_shapes = {{}, {6}, {1, 6}, {4, 1}, {4, 6}};
  for (ScalarType dtype : kAllDtypes) {
    const bool floating = isFloatingType(dtype);
    const std::vector<std::pair<double, double>> scalars =
        floating ? std::vector<std::pair<double, double>>{{1, 1}, {1, 2}, {0.5, 2}, {0, -1.5}, {-1, 0.25}}
                 : std::vector<std::pair<double, double>>{{1, 1}, {2, 3}, {0, -1}};
    for (const auto& ss : self_shapes) {
      for (auto [beta, alpha] : scalars) {
        SCOPED_TRACE(::testing::Message()
                     << dtype << " self " << IntArrayRef(ss) << " beta " << beta << " alpha " << alpha);
        Tensor self = input(ss, dtype, 1), m1 = input({4, 5}, dtype, 2), m2 = input({5, 6}, dtype, 3);
        IValue b = floating ? IValue(Scalar(beta)) : IValue(Scalar(static_cast<int64_t>(beta)));
        IValue al = floating ? IValue(Scalar(alpha)) : IValue(Scalar(static_cast<int64_t>(alpha)));
        Tensor r = callT("addmm", {self, m1, m2, b, al});
        expectClose(r,
                    wrapAll(dtype, refAddmm(values(self), self.sizes(), refBmm(values(m1), values(m2), 1, 4, 5, 6), 4,
                                            6, beta, alpha)),
                    {4, 6}, dtype, productTol(dtype, 5) * 4);
      }
    }
  }
}

// _addmm_activation (Note [Fused activation products]): relu or exact gelu
// of addmm. The CPU plugin's fused kernel serves gelu in float32 with a row
// self and beta = alpha = 1 (mat2 read transposed through its strides, as a
// linear layer's weight); every other call, relu's included, goes to the
// composite. Both against a double-precision reference; NaN stays NaN.
TEST(AddmmActivation, ReluAndGeluOfAddmm) {
  struct Case {
    ScalarType dtype;
    std::vector<int64_t> self;
    double beta, alpha;
    bool transposed_mat2;
    int fused;  // 1: the CPU plugin's kernel serves it; 0: the composite; -1: either (the CPU decides)
  };
  const std::vector<Case> cases = {
      {ScalarType::Float32, {9}, 1, 1, true, true},       // a linear layer's bias, weight transposed
      {ScalarType::Float32, {1, 9}, 1, 1, false, true},   // a 2-D row
      {ScalarType::Float32, {}, 1, 1, false, true},       // one value
      {ScalarType::Float32, {5, 9}, 1, 1, false, false},  // a full self: the composite
      {ScalarType::Float32, {9}, 0.5, 2, false, false},   // scaled: the composite
      {ScalarType::Float64, {9}, 1, 1, true, false},      // no oneDNN product: the composite
      {ScalarType::BFloat16, {9}, 1, 1, true, -1},        // fused where oneDNN computes in bfloat16
  };
  for (const Case& c : cases) {
    for (bool use_gelu : {false, true}) {
      SCOPED_TRACE(::testing::Message() << c.dtype << " self " << IntArrayRef(c.self) << " beta " << c.beta << " alpha "
                                        << c.alpha << (use_gelu ? " gelu" : " relu"));
      Tensor self = input(c.self, c.dtype, 1), m1 = input({5, 7}, c.dtype, 2);
      Tensor m2 = c.transposed_mat2 ? input({9, 7}, c.dtype, 3).t() : input({7, 9}, c.dtype, 3);
      Profiler profiler;
      Tensor r = callT("_addmm_activation", {self, m1, m2, Scalar(c.beta), Scalar(c.alpha), use_gelu});
      profiler.stop();
      std::vector<double> want = refAddmm(
          values(self), self.sizes(), refBmm(values(m1), values(m2.contiguous()), 1, 5, 7, 9), 5, 9, c.beta, c.alpha);
      for (double& x : want) x = use_gelu ? 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))) : std::max(x, 0.0);
      expectClose(r, want, {5, 9}, c.dtype, productTol(c.dtype, 7) * 4);
      const OpReport report = profiler.report();
      if (c.fused >= 0) {
        EXPECT_EQ(report.find("bp::addmm", DispatchKey::CPU) == nullptr, c.fused == 1 && use_gelu) << report.table();
      }
      Tensor out = emptyTensor({5, 9}, c.dtype);
      callT("_addmm_activation.out", {self, m1, m2, Scalar(c.beta), Scalar(c.alpha), use_gelu, out});
      expectClose(out, want, {5, 9}, c.dtype, productTol(c.dtype, 7) * 4);
    }
  }
  // NaN in the product stays NaN through either activation, fused or not.
  for (bool use_gelu : {false, true}) {
    Tensor m1 = fromDoubles({1, std::nan(""), 2, 3}, {2, 2}, ScalarType::Float32);
    Tensor r = callT("_addmm_activation", {input({2}, ScalarType::Float32, 1), m1,
                                           input({2, 2}, ScalarType::Float32, 2), Scalar(1), Scalar(1), use_gelu});
    const std::vector<double> v = values(r);
    EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1])) << (use_gelu ? "gelu" : "relu");  // the row with NaN
    EXPECT_FALSE(std::isnan(v[2]) || std::isnan(v[3])) << (use_gelu ? "gelu" : "relu");
  }
  // Integers: relu through the composite; gelu refused by name.
  Tensor i1 = input({2, 3}, ScalarType::Int64, 1), i2 = input({3, 2}, ScalarType::Int64, 2);
  Tensor ib = input({2}, ScalarType::Int64, 3);
  std::vector<double> want = refAddmm(values(ib), ib.sizes(), refBmm(values(i1), values(i2), 1, 2, 3, 2), 2, 2, 1, 1);
  for (double& x : want) x = std::max(x, 0.0);
  expectClose(callT("_addmm_activation", {ib, i1, i2, Scalar(int64_t{1}), Scalar(int64_t{1}), false}), want, {2, 2},
              ScalarType::Int64);
  EXPECT_THAT(errorOf([&] {
                callT("_addmm_activation", {ib, i1, i2, Scalar(int64_t{1}), Scalar(int64_t{1}), true});
              }),
              HasSubstr("bp::_addmm_activation: use_gelu=True needs a floating dtype (gelu), got int64"));
  EXPECT_THAT(errorOf([&] {
                callT("_addmm_activation", {input({4}, ScalarType::Float32, 1), input({2, 3}, ScalarType::Float32, 2),
                                            input({3, 5}, ScalarType::Float32, 3), Scalar(1), Scalar(1), true});
              }),
              HasSubstr("bp::_addmm_activation: the shapes [4] and [2, 5] cannot be broadcast together"));
}

TEST(Addmm, BetaZeroIgnoresNaNAndEmptyInnerDimension) {
  Tensor self = fromDoubles({NAN, 1, 2}, {3}, ScalarType::Float32);
  Tensor m1 = input({2, 4}, ScalarType::Float32, 1), m2 = input({4, 3}, ScalarType::Float32, 2);
  Tensor r = callT("addmm", {self, m1, m2, Scalar(0), Scalar(1)});
  expectClose(r, refBmm(values(m1), values(m2), 1, 2, 4, 3), {2, 3}, ScalarType::Float32,
              productTol(ScalarType::Float32, 4));
  // k == 0: beta * self broadcast.
  Tensor s = input({3}, ScalarType::Float64, 3);
  Tensor z = callT("addmm", {s, input({2, 0}, ScalarType::Float64, 1), input({0, 3}, ScalarType::Float64, 1),
                             Scalar(2.0), Scalar(1.0)});
  std::vector<double> sv = values(s), expect;
  for (int i = 0; i < 2; ++i)
    for (double v : sv) expect.push_back(2 * v);
  expectClose(z, expect, {2, 3}, ScalarType::Float64);
}

TEST(Addmm, OutInPlaceAndTransposed) {
  Tensor m1 = input({5, 4}, ScalarType::Float32, 1).t(), m2 = input({5, 3}, ScalarType::Float32, 2);  // [4,5]@[5,3]
  const std::vector<double> prod = refBmm(values(m1), values(m2), 1, 4, 5, 3);
  Tensor self = input({4, 3}, ScalarType::Float32, 3);
  const std::vector<double> ref = refAddmm(values(self), self.sizes(), prod, 4, 3, 0.5, 2);
  Tensor out = emptyTensor({3, 4}, ScalarType::Float32).t();
  callT("addmm.out", {self, m1, m2, Scalar(0.5), Scalar(2.0), out});
  expectClose(out, ref, {4, 3}, ScalarType::Float32, productTol(ScalarType::Float32, 5));
  // In place, on a transposed self.
  Tensor selft = input({3, 4}, ScalarType::Float32, 3).t();
  const std::vector<double> reft = refAddmm(values(selft), selft.sizes(), prod, 4, 3, 0.5, 2);
  Tensor r = callT("addmm_", {selft, m1, m2, Scalar(0.5), Scalar(2.0)});
  EXPECT_EQ(r.data_ptr(), selft.data_ptr());
  expectClose(selft, reft, {4, 3}, ScalarType::Float32, productTol(ScalarType::Float32, 5));
  EXPECT_THAT(errorOf([&] {
                callT("addmm_", {input({3}, ScalarType::Float32, 1), m1, m2, Scalar(1), Scalar(1)});
              }),
              HasSubstr("bp::addmm_: self has shape [3] but the product has shape [4, 3]"));
}

TEST(Addmm, Errors) {
  Tensor m1 = input({4, 5}, ScalarType::Float32, 1), m2 = input({5, 3}, ScalarType::Float32, 2);
  EXPECT_THAT(errorOf([&] {
                callT("addmm", {input({4}, ScalarType::Float32, 1), m1, m2, Scalar(1), Scalar(1)});
              }),
              HasSubstr("bp::addmm"));
  EXPECT_THAT(errorOf([&] {
                callT("addmm", {input({2, 4, 3}, ScalarType::Float32, 1), m1, m2, Scalar(1), Scalar(1)});
              }),
              HasSubstr("bp::addmm: self of shape [2, 4, 3] cannot be broadcast to the product's shape [4, 3]"));
  EXPECT_THAT(errorOf([&] {
                callT("addmm", {input({3}, ScalarType::Float32, 1), m1, input({4, 3}, ScalarType::Float32, 1),
                                Scalar(1), Scalar(1)});
              }),
              HasSubstr("bp::addmm: mat1 is [4, 5] and mat2 is [4, 3]; mat1.size(1) must equal mat2.size(0)"));
  EXPECT_THAT(errorOf([&] {
                callT("addmm", {input({3}, ScalarType::Float64, 1), m1, m2, Scalar(1), Scalar(1)});
              }),
              HasSubstr("expected self and mat1 to have the same dtype, but got float64 and float32"));
  Tensor i1 = input({4, 5}, ScalarType::Int32, 1), i2 = input({5, 3}, ScalarType::Int32, 2);
  EXPECT_THAT(errorOf([&] {
                callT("addmm", {input({3}, ScalarType::Int32, 1), i1, i2, Scalar(0.5), Scalar(1)});
              }),
              HasSubstr("beta and alpha must be integers"));
  EXPECT_THAT(errorOf([&] {
                callT("addmm.out", {input({3}, ScalarType::Float32, 1), m1, m2, Scalar(1), Scalar(1), m1});
              }),
              HasSubstr("argument 'out' has shape [4, 5] but the result has shape [4, 3]"));
}

// --- linear

int64_t numelOf(IntArrayRef s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

// input @ weight.T + bias in double: rows of input against weight [n, in]
// (or [in]: one output per row, no last dimension), bias broadcast to the
// result (wrapped to integer dtypes).
std::vector<double> refLinear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  const std::vector<double> xv = values(x), wv = values(w);
  const int64_t in = x.size(-1), rows = numelOf(IntArrayRef(x.sizes().data(), x.sizes().size() - 1));
  const int64_t n = w.dim() == 2 ? w.size(0) : 1;
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end() - 1);
  if (w.dim() == 2) sizes.push_back(n);
  std::vector<double> bv = bias.defined() ? values(bias) : std::vector<double>();
  std::vector<double> out;
  for (int64_t f = 0; f < rows * n; ++f) {
    const int64_t r = f / n, o = f % n;
    double s = 0;
    for (int64_t i = 0; i < in; ++i) s += xv[r * in + i] * wv[o * in + i];
    if (bias.defined()) {
      // Bias element of output element f: its trailing indices, 0 where bias has size 1.
      int64_t rem = f, bi = 0, bstride = 1;
      for (int64_t d = static_cast<int64_t>(sizes.size()) - 1, bd = bias.dim() - 1; d >= 0; --d, --bd) {
        const int64_t idx = rem % sizes[d];
        rem /= sizes[d];
        if (bd < 0) continue;
        bi += (bias.size(bd) == 1 ? 0 : idx) * bstride;
        bstride *= bias.size(bd);
      }
      s += bv[bi];
    }
    out.push_back(wrapTo(x.dtype(), s));
  }
  return out;
}

std::vector<int64_t> linearShape(const Tensor& x, const Tensor& w) {
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end() - 1);
  if (w.dim() == 2) sizes.push_back(w.size(0));
  return sizes;
}

void expectLinear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  SCOPED_TRACE(::testing::Message() << "input " << x.sizes() << " weight " << w.sizes() << " bias "
                                    << (bias.defined() ? ::testing::PrintToString(bias.sizes()) : "none"));
  Tensor r = callT("linear", {x, w, bias.defined() ? IValue(bias) : IValue()});
  EXPECT_EQ(r.dtype(), x.dtype());
  expectClose(r, refLinear(x, w, bias), linearShape(x, w), x.dtype(), productTol(x.dtype(), x.size(-1)) * 2);
}

TEST(Linear, EveryDtypeAndRankMatchesReference) {
  for (ScalarType dtype : kAllDtypes) {
    SCOPED_TRACE(::testing::Message() << dtype);
    Tensor w = input({5, 4}, dtype, 2), bias = input({5}, dtype, 3);
    for (const std::vector<int64_t>& xs : std::vector<std::vector<int64_t>>{{4}, {3, 4}, {2, 3, 4}, {2, 1, 3, 4}}) {
      Tensor x = input(xs, dtype, 1);
      expectLinear(x, w, bias);
      expectLinear(x, w, Tensor());
    }
    // Larger than the small cases (oneDNN's blocked kernels, threads).
    expectLinear(input({37, 70}, dtype, 4), input({33, 70}, dtype, 5), input({33}, dtype, 6));
  }
}

TEST(Linear, BiasShapesAndVectorWeight) {
  for (ScalarType dtype :
       {ScalarType::Float32, ScalarType::Float64, ScalarType::BFloat16, ScalarType::Float16, ScalarType::Int32}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    Tensor x = input({2, 3, 4}, dtype, 1), w = input({5, 4}, dtype, 2);
    for (const std::vector<int64_t>& bs : std::vector<std::vector<int64_t>>{{}, {1}, {3, 1}, {3, 5}, {2, 3, 5}})
      expectLinear(x, w, input(bs, dtype, 3));
    // A 1-D weight: one output per row, no out_features dimension.
    Tensor wv = input({4}, dtype, 4);
    expectLinear(x, wv, Tensor());
    expectLinear(x, wv, input({}, dtype, 5));
    expectLinear(x, wv, input({3}, dtype, 6));
    expectLinear(input({4}, dtype, 7), wv, input({}, dtype, 8));  // a dot product plus a scalar
  }
}

TEST(Linear, NonContiguousOperands) {
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float64, ScalarType::BFloat16, ScalarType::Int64}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    Tensor w = input({5, 4}, dtype, 2), bias = input({5}, dtype, 3);
    Tensor permuted = input({4, 2, 3}, dtype, 1).permute({1, 2, 0});     // [2, 3, 4], rows do not collapse
    Tensor strided = input({2, 3, 8}, dtype, 4).slice(2, 0, 8, 2);       // [2, 3, 4], column stride 2
    Tensor every_other_row = input({6, 4}, dtype, 5).slice(0, 0, 6, 2);  // [3, 4], row stride 8
    Tensor transposed = input({4, 3}, dtype, 6).t();                     // [3, 4], column-major
    Tensor expanded = input({1, 4}, dtype, 7).expand({3, 4});            // stride-0 rows
    Tensor wt = input({4, 5}, dtype, 8).t();                             // [5, 4], column-major weight
    Tensor ws = input({10, 4}, dtype, 9).slice(0, 0, 10, 2);             // every other weight row
    Tensor bs = input({10}, dtype, 10).slice(0, 0, 10, 2);               // bias with stride 2
    Tensor be = input({1}, dtype, 11).expand({5});                       // bias with stride 0
    for (const Tensor& x : {permuted, strided, every_other_row, transposed, expanded}) {
      expectLinear(x, w, bias);
      expectLinear(x, wt, bs);
      expectLinear(x, ws, be);
      expectLinear(x, wt, Tensor());
    }
  }
}

TEST(Linear, EmptyDimensions) {
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Int32}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    Tensor bias = input({5}, dtype, 3);
    expectLinear(input({0, 4}, dtype, 1), input({5, 4}, dtype, 2), bias);                  // no rows
    expectLinear(input({3, 4}, dtype, 1), input({0, 4}, dtype, 2), input({0}, dtype, 3));  // no outputs
    // in_features == 0: the result is the bias (or zeros).
    expectLinear(input({2, 3, 0}, dtype, 1), input({5, 0}, dtype, 2), bias);
    expectLinear(input({3, 0}, dtype, 1), input({5, 0}, dtype, 2), Tensor());
  }
}

TEST(Linear, TheCpuKernelIsNative) {
  EXPECT_EQ(op("linear").kernelKind(DispatchKey::CPU), KernelKind::Native);
  EXPECT_NE(op("linear").entry().meta(), nullptr);
}

TEST(Linear, Errors) {
  Tensor x = input({2, 4}, ScalarType::Float32, 1), w = input({5, 4}, ScalarType::Float32, 2);
  EXPECT_THAT(errorOf([&] {
                callT("linear", {x, input({5, 3}, ScalarType::Float32, 2), IValue()});
              }),
              HasSubstr("bp::linear: input is [2, 4] and weight is [5, 3]; input.size(-1) must equal weight.size(-1)"));
  EXPECT_THAT(errorOf([&] {
                callT("linear", {x, input({5, 4}, ScalarType::Float64, 2), IValue()});
              }),
              HasSubstr("bp::linear: expected input and weight to have the same dtype, but got float32 and float64"));
  EXPECT_THAT(errorOf([&] {
                callT("linear", {x, w, input({5}, ScalarType::Int32, 2)});
              }),
              HasSubstr("bp::linear: expected input and bias to have the same dtype, but got float32 and int32"));
  EXPECT_THAT(errorOf([&] {
                callT("linear", {x, input({2, 5, 4}, ScalarType::Float32, 2), IValue()});
              }),
              HasSubstr("weight must be [out_features, in_features]"));
  EXPECT_THAT(errorOf([&] {
                callT("linear", {input({}, ScalarType::Float32, 1), w, IValue()});
              }),
              HasSubstr("bp::linear: input must have at least 1 dimension, but it is 0-d"));
  EXPECT_THAT(errorOf([&] {
                callT("linear", {x, w, input({4}, ScalarType::Float32, 3)});
              }),
              HasSubstr("bp::linear: bias of shape [4] cannot be broadcast to the result's shape [2, 5]"));
  EXPECT_THAT(errorOf([&] {
                callT("linear", {x, w, input({3, 2, 5}, ScalarType::Float32, 3)});
              }),
              HasSubstr("bp::linear: bias of shape [3, 2, 5] cannot be broadcast to the result's shape [2, 5]"));
  // A dot product's result is 0-d: a bias [1] would grow it.
  EXPECT_THAT(errorOf([&] {
                callT("linear", {input({4}, ScalarType::Float32, 1), input({4}, ScalarType::Float32, 2),
                                 input({1}, ScalarType::Float32, 3)});
              }),
              HasSubstr("bp::linear: bias of shape [1] cannot be broadcast to the result's shape []"));
}

// --- a device whose memory the host cannot read: composites and CPU fallback

TEST(LinalgOnDevice, CompositesAndFallbackWork) {
  auto& dev = testing::TestDevice::install("testdev", 2);
  const Device d = dev.device(0);
  Tensor a = input({3, 4}, ScalarType::Float32, 1), b = input({4, 5}, ScalarType::Float32, 2);
  Tensor bias = input({5}, ScalarType::Float32, 3);
  const std::vector<double> av = values(a), bv = values(b), biasv = values(bias);
  Tensor da = fromDoubles(av, {3, 4}, ScalarType::Float32, d), db = fromDoubles(bv, {4, 5}, ScalarType::Float32, d);
  Tensor dbias = fromDoubles(biasv, {5}, ScalarType::Float32, d);
  const std::vector<double> prod = refBmm(av, bv, 1, 3, 4, 5);
  Tensor r = callT("mm", {da, db});
  EXPECT_EQ(r.device(), d);
  expectClose(r, prod, {3, 5}, ScalarType::Float32, productTol(ScalarType::Float32, 4));
  expectClose(callT("matmul", {da, db}), prod, {3, 5}, ScalarType::Float32, productTol(ScalarType::Float32, 4));
  Tensor ad = callT("addmm", {dbias, da, db, Scalar(0.5), Scalar(2.0)});
  EXPECT_EQ(ad.device(), d);
  expectClose(ad, refAddmm(biasv, {5}, prod, 3, 5, 0.5, 2), {3, 5}, ScalarType::Float32,
              productTol(ScalarType::Float32, 4) * 2);
  Tensor lin = callT("linear", {da, fromDoubles(bv, {4, 5}, ScalarType::Float32, d).t(), dbias});
  expectClose(lin, refAddmm(biasv, {5}, prod, 3, 5, 1, 1), {3, 5}, ScalarType::Float32,
              productTol(ScalarType::Float32, 4) * 2);
  EXPECT_THAT(errorOf([&] {
                callT("mm", {da, b});
              }),
              HasSubstr("bp::mm: expected all tensors on one device, but argument 'self' is on"));
  // linear's checks (its meta kernel) hold on every device.
  EXPECT_THAT(errorOf([&] {
                callT("linear", {da, db.t(), bias});
              }),
              HasSubstr("bp::linear: expected all tensors on one device"));
  EXPECT_THAT(errorOf([&] {
                callT("linear", {da, db.t(), fromDoubles({1, 2}, {2}, ScalarType::Float32, d)});
              }),
              HasSubstr("bp::linear: bias of shape [2] cannot be broadcast to the result's shape [3, 5]"));
}

}  // namespace
}  // namespace backplane::ops_test
