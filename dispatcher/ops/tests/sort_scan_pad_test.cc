// prod, all/any, cumsum, sort, topk, flip and pad through the public C++ API
// and the CPU plugin: PyTorch's dtype rules, edge cases (empty, 0-d,
// negative dims, k = 0 and k = size, ties, NaN, non-contiguous inputs) and
// the errors PyTorch raises. The conformance specs (specs_sort_scan_pad.cc)
// compare every dtype with a reference on cpu and gpusim.
#include <limits>

#include "backplane/ops/ops.h"
#include "ops_test_util.h"

namespace backplane::ops_test {
namespace {

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f32(const std::vector<double>& v, IntArrayRef sizes) { return fromDoubles(v, sizes, ScalarType::Float32); }

// --- prod

TEST(Prod, IntegralAndBoolInputsGiveInt64AndDtypeOverrides) {
  Tensor x = fromDoubles({1, 2, 3, 4, 5, 6}, {2, 3}, ScalarType::Int32);
  expectClose(prod(x), {720}, {}, ScalarType::Int64);
  expectClose(prod(x, 1), {6, 120}, {2}, ScalarType::Int64);
  expectClose(prod(x, -2, true), {4, 10, 18}, {1, 3}, ScalarType::Int64);
  expectClose(prod(fromDoubles({1, 0, 1}, {3}, ScalarType::Bool)), {0}, {}, ScalarType::Int64);
  expectClose(prod(x, ScalarType::Float64), {720}, {}, ScalarType::Float64);
  expectClose(prod(f32({1.5, 2.5, -2}, {3}), ScalarType::Int32), {-4}, {}, ScalarType::Int32);  // 1 * 2 * -2
}

TEST(Prod, EmptyIsOneNaNPropagatesAndInt64Wraps) {
  expectClose(prod(f32({}, {0, 3}), 0), {1, 1, 1}, {3}, ScalarType::Float32);
  expectClose(prod(f32({2, kNaN, 3}, {3})), {kNaN}, {}, ScalarType::Float32);
  // 2^32 * 2^32 = 2^64 wraps to 0, as PyTorch's int64 arithmetic.
  expectClose(prod(fromDoubles({4294967296.0, 4294967296.0}, {2}, ScalarType::Int64)), {0}, {}, ScalarType::Int64);
  expectClose(prod(f32({3}, {}), 0), {3}, {}, ScalarType::Float32);  // 0-d, dim 0
}

TEST(Prod, NonContiguousInputAndOutChecks) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);  // [[1,4],[2,5],[3,6]]
  expectClose(prod(x, 1), {4, 10, 18}, {3}, ScalarType::Float32);
  Tensor out = emptyTensor({0}, ScalarType::Float32);
  call("prod.int_out", {x, int64_t{0}, false, IValue(), out});
  expectClose(out, {6, 120}, {2}, ScalarType::Float32);
  Tensor wrong = emptyTensor({0}, ScalarType::Float64);
  EXPECT_THAT(errorOf([&] {
                call("prod.int_out", {x, int64_t{0}, false, IValue(ScalarType::Float32), wrong});
              }),
              HasSubstr("dtype float32"));
  EXPECT_THAT(errorOf([&] { prod(x, 2); }), HasSubstr("out of range"));
}

// --- all / any

TEST(AllAny, ResultIsBoolOrUint8ForUint8Input) {
  Tensor x = f32({1, 0, kNaN, 2, 3, 4}, {2, 3});
  EXPECT_EQ(all(x).dtype(), ScalarType::Bool);
  expectClose(all(x), {0}, {}, ScalarType::Bool);
  expectClose(any(x), {1}, {}, ScalarType::Bool);
  expectClose(all(x, 1), {0, 1}, {2}, ScalarType::Bool);  // NaN counts as true
  expectClose(any(x, 0, true), {1, 1, 1}, {1, 3}, ScalarType::Bool);
  Tensor u = fromDoubles({0, 7, 255, 1}, {2, 2}, ScalarType::UInt8);
  expectClose(all(u, 1), {0, 1}, {2}, ScalarType::UInt8);
  expectClose(any(u), {1}, {}, ScalarType::UInt8);
}

TEST(AllAny, DimListNoneReducesEveryDimAndEmptyListNone) {
  Tensor x = fromDoubles({1, 0, 2, 3}, {2, 2}, ScalarType::Int32);
  Tensor every = callT("all.dims", {x, IValue(), false});
  expectClose(every, {0}, {}, ScalarType::Bool);
  expectClose(all(x, IntArrayRef{}), {1, 0, 1, 1}, {2, 2}, ScalarType::Bool);
  expectClose(any(x, {0, 1}, true), {1}, {1, 1}, ScalarType::Bool);
  expectClose(all(f32({}, {0, 3}), 0), {1, 1, 1}, {3}, ScalarType::Bool);
  expectClose(any(f32({}, {0, 3}), 0), {0, 0, 0}, {3}, ScalarType::Bool);
  expectClose(all(f32({0}, {})), {0}, {}, ScalarType::Bool);  // 0-d
}

TEST(AllAny, OutMayBeBoolOrUint8Only) {
  Tensor x = f32({1, 0, 2}, {3});
  Tensor out = emptyTensor({0}, ScalarType::UInt8);
  call("any.all_out", {x, out});
  expectClose(out, {1}, {}, ScalarType::UInt8);
  Tensor bad = emptyTensor({0}, ScalarType::Float32);
  EXPECT_THAT(errorOf([&] { call("all.out", {x, int64_t{0}, false, bad}); }), HasSubstr("bool (or uint8)"));
}

// --- cumsum

TEST(Cumsum, PromotesIntegersAndHonoursDtype) {
  Tensor x = fromDoubles({1, 2, 3, 4, 5, 6}, {2, 3}, ScalarType::Int8);
  expectClose(cumsum(x, 1), {1, 3, 6, 4, 9, 15}, {2, 3}, ScalarType::Int64);
  expectClose(cumsum(x, -2), {1, 2, 3, 5, 7, 9}, {2, 3}, ScalarType::Int64);
  expectClose(cumsum(x, 1, ScalarType::Float32), {1, 3, 6, 4, 9, 15}, {2, 3}, ScalarType::Float32);
  expectClose(cumsum(fromDoubles({1, 1, 0}, {3}, ScalarType::Bool), 0), {1, 2, 2}, {3}, ScalarType::Int64);
  // int8 wraps when the sum is computed in int8 (dtype=int8), as PyTorch's.
  expectClose(cumsum(fromDoubles({100, 100}, {2}, ScalarType::Int8), 0, ScalarType::Int8), {100, -56}, {2},
              ScalarType::Int8);
}

TEST(Cumsum, EdgeCasesAndInPlace) {
  expectClose(cumsum(f32({}, {0, 3}), 0), {}, {0, 3}, ScalarType::Float32);
  expectClose(cumsum(f32({5}, {}), 0), {5}, {}, ScalarType::Float32);
  expectClose(cumsum(f32({1, kNaN, 2}, {3}), 0), {1, kNaN, kNaN}, {3}, ScalarType::Float32);
  Tensor t = f32({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);  // [[1,4],[2,5],[3,6]]
  expectClose(cumsum(t, 0), {1, 4, 3, 9, 6, 15}, {3, 2}, ScalarType::Float32);
  Tensor y = fromDoubles({1, 2, 3}, {3}, ScalarType::Int32);
  callT("cumsum_", {y, int64_t{0}, IValue()});
  expectClose(y, {1, 3, 6}, {3}, ScalarType::Int32);  // in place the sum stays int32
  EXPECT_THAT(errorOf([&] { cumsum(y, 1); }), HasSubstr("out of range"));
}

// --- sort

TEST(Sort, AscendingAndDescendingWithNaNLargestAndStableTies) {
  Tensor x = f32({2, kNaN, -kInf, 1, kNaN, kInf, 1, -0.5}, {8});
  auto [v, i] = sort(x);
  expectClose(v, {-kInf, -0.5, 1, 1, 2, kInf, kNaN, kNaN}, {8}, ScalarType::Float32);
  expectClose(i, {2, 7, 3, 6, 0, 5, 1, 4}, {8}, ScalarType::Int64);
  auto [vd, id] = sort(x, 0, true);
  expectClose(vd, {kNaN, kNaN, kInf, 2, 1, 1, -0.5, -kInf}, {8}, ScalarType::Float32);
  expectClose(id, {1, 4, 5, 0, 3, 6, 7, 2}, {8}, ScalarType::Int64);  // ties keep index order
}

TEST(Sort, DimsLayoutsEmptyAnd0d) {
  Tensor x = fromDoubles({3, 1, 2, 0, 5, 4}, {2, 3}, ScalarType::Int32).transpose(0, 1);  // [[3,0],[1,5],[2,4]]
  auto [v, i] = sort(x, -2);
  expectClose(v, {1, 0, 2, 4, 3, 5}, {3, 2}, ScalarType::Int32);
  expectClose(i, {1, 0, 2, 2, 0, 1}, {3, 2}, ScalarType::Int64);
  auto [ve, ie] = sort(f32({}, {0, 3}), 0);
  EXPECT_EQ(ve.sizes(), IntArrayRef({0, 3}));
  auto [v0, i0] = sort(f32({7}, {}));
  expectClose(v0, {7}, {}, ScalarType::Float32);
  expectClose(i0, {0}, {}, ScalarType::Int64);
  auto [vb, ib] = sort(fromDoubles({1, 0, 1, 0}, {4}, ScalarType::Bool));
  expectClose(vb, {0, 0, 1, 1}, {4}, ScalarType::Bool);
  expectClose(ib, {1, 3, 0, 2}, {4}, ScalarType::Int64);
}

TEST(Sort, OutFormsCheckDtypes) {
  Tensor x = f32({3, 1, 2}, {3});
  Tensor values = emptyTensor({0}, ScalarType::Float32), indices = emptyTensor({0}, ScalarType::Int64);
  Stack stack{x, int64_t{0}, true, values, indices};
  op("sort.values").callBoxed(stack);
  ASSERT_EQ(stack.size(), 2u);
  EXPECT_EQ(stack[0].toTensor().unsafeGetImpl(), values.unsafeGetImpl());
  expectClose(values, {3, 2, 1}, {3}, ScalarType::Float32);
  expectClose(indices, {0, 2, 1}, {3}, ScalarType::Int64);
  Tensor bad_indices = emptyTensor({0}, ScalarType::Int32);
  EXPECT_THAT(errorOf([&] {
                Stack s{x, true, int64_t{0}, false, emptyTensor({0}, ScalarType::Float32), bad_indices};
                op("sort.values_stable").callBoxed(s);
              }),
              HasSubstr("'indices' to have dtype int64"));
}

// --- topk

TEST(Topk, LargestSmallestKEdgesAndNaN) {
  Tensor x = f32({2, kNaN, -1, 5, 5, 0}, {6});
  auto [v, i] = topk(x, 3);
  expectClose(v, {kNaN, 5, 5}, {3}, ScalarType::Float32);
  expectClose(i, {1, 3, 4}, {3}, ScalarType::Int64);
  auto [vs, is] = topk(x, 2, 0, false);
  expectClose(vs, {-1, 0}, {2}, ScalarType::Float32);
  expectClose(is, {2, 5}, {2}, ScalarType::Int64);
  auto [v0, i0] = topk(x, 0);
  EXPECT_EQ(v0.sizes(), IntArrayRef({0}));
  EXPECT_EQ(i0.dtype(), ScalarType::Int64);
  auto [vall, iall] = topk(fromDoubles({1, 3, 2}, {3}, ScalarType::Int64), 3);
  expectClose(vall, {3, 2, 1}, {3}, ScalarType::Int64);
  auto [vz, iz] = topk(f32({4}, {}), 1);
  expectClose(vz, {4}, {}, ScalarType::Float32);
}

TEST(Topk, AlongDim0OfATransposedInput) {
  Tensor x = f32({1, 6, 2, 5, 3, 4}, {3, 2}).transpose(0, 1);  // [[1,2,3],[6,5,4]]
  auto [v, i] = topk(x, 1, 0);
  expectClose(v, {6, 5, 4}, {1, 3}, ScalarType::Float32);
  expectClose(i, {1, 1, 1}, {1, 3}, ScalarType::Int64);
}

TEST(Topk, RefusesBadKAndBool) {
  Tensor x = f32({1, 2, 3}, {3});
  EXPECT_THAT(errorOf([&] { topk(x, 4); }), HasSubstr("out of range"));
  EXPECT_THAT(errorOf([&] { topk(x, -1); }), HasSubstr("out of range"));
  EXPECT_THAT(errorOf([&] { topk(fromDoubles({1, 0}, {2}, ScalarType::Bool), 1); }), HasSubstr("bool"));
}

// --- flip

TEST(Flip, ReversesListedDims) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  expectClose(flip(x, {1}), {3, 2, 1, 6, 5, 4}, {2, 3}, ScalarType::Float32);
  expectClose(flip(x, {0, -1}), {6, 5, 4, 3, 2, 1}, {2, 3}, ScalarType::Float32);
  expectClose(flip(x.transpose(0, 1), {0}), {3, 6, 2, 5, 1, 4}, {3, 2}, ScalarType::Float32);
  expectClose(flip(x, IntArrayRef{}), {1, 2, 3, 4, 5, 6}, {2, 3}, ScalarType::Float32);
  expectClose(flip(f32({9}, {}), {0}), {9}, {}, ScalarType::Float32);
  EXPECT_THAT(errorOf([&] { flip(x, {1, -1}); }), HasSubstr("more than once"));
  EXPECT_THAT(errorOf([&] { flip(x, {2}); }), HasSubstr("out of range"));
}

// --- pad

TEST(Pad, ConstantPadsAndCrops) {
  Tensor x = f32({1, 2, 3, 4}, {2, 2});
  expectClose(pad(x, {1, 0}, "constant", 9.0), {9, 1, 2, 9, 3, 4}, {2, 3}, ScalarType::Float32);
  expectClose(pad(x, {0, 0, 1, 0}), {0, 0, 1, 2, 3, 4}, {3, 2}, ScalarType::Float32);
  expectClose(pad(x, {-1, 1}), {2, 0, 4, 0}, {2, 2}, ScalarType::Float32);
  Tensor i = fromDoubles({1, 2}, {2}, ScalarType::Int8);
  EXPECT_THAT(errorOf([&] { pad(i, {1, 1}, "constant", 300.0); }), HasSubstr("cannot be converted"));
  EXPECT_THAT(errorOf([&] { pad(x, {-2, -1}); }), HasSubstr("negative size"));
  EXPECT_THAT(errorOf([&] { pad(x, {1, 1, 1}); }), HasSubstr("odd length"));
}

TEST(Pad, ReflectAndReplicate) {
  Tensor x = f32({1, 2, 3}, {1, 3});
  expectClose(pad(x, {2, 1}, "reflect"), {3, 2, 1, 2, 3, 2}, {1, 6}, ScalarType::Float32);
  expectClose(pad(x, {2, 1}, "replicate"), {1, 1, 1, 2, 3, 3}, {1, 6}, ScalarType::Float32);
  Tensor y = f32({1, 2, 3, 4}, {1, 2, 2});
  expectClose(pad(y, {1, 0, 0, 1}, "reflect"), {2, 1, 2, 4, 3, 4, 2, 1, 2}, {1, 3, 3}, ScalarType::Float32);
  // A non-contiguous input: x's columns.
  Tensor t = f32({1, 2, 3, 4, 5, 6}, {3, 2}).transpose(0, 1);  // [[1,3,5],[2,4,6]]
  expectClose(pad(t, {1, 1}, "replicate"), {1, 1, 3, 5, 5, 2, 2, 4, 6, 6}, {2, 5}, ScalarType::Float32);
}

TEST(Pad, ReflectLargerThanTheInputRaisesAsPyTorch) {
  Tensor x = f32({1, 2, 3}, {1, 3});
  EXPECT_THAT(errorOf([&] { pad(x, {3, 0}, "reflect"); }), HasSubstr("must be smaller than its size 3"));
  EXPECT_THAT(errorOf([&] { pad(x, {1, 1}, "reflect", 2.0); }), HasSubstr("takes no value"));
  EXPECT_THAT(errorOf([&] { pad(x, {1, 1}, "circular"); }), HasSubstr("unknown padding mode"));
  EXPECT_THAT(errorOf([&] { pad(f32({1, 2}, {2}), {1, 1}, "reflect"); }), HasSubstr("2-3d"));
  EXPECT_THAT(errorOf([&] {
                pad(fromDoubles({1, 0}, {1, 2}, ScalarType::Bool), {1, 0}, "replicate");
              }),
              HasSubstr("bool"));
}

}  // namespace
}  // namespace backplane::ops_test
