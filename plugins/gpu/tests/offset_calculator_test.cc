// The GPU elementwise loops' index math (loops.cuh, Note [GPU elementwise
// loops]) on the host: dimension merging, broadcast strides, and offsets of
// tensors past 2^31 elements or bytes, which no test can allocate on the
// simulator but a GPU with 80+ GiB runs every day.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "gpu/loops.cuh"

namespace bp_gpu {
namespace {

template <int N>
OffsetCalculator<N> calc(std::vector<int64_t> shape, std::array<std::vector<int64_t>, N> strides) {
  std::array<const int64_t*, N> p;
  for (int k = 0; k < N; ++k) p[k] = strides[k].data();
  return makeOffsetCalculator<N>("test", bp::IntList(shape.data(), shape.size()), p);
}

// Operand k's offset of row-major element `linear` of `shape`, the slow way.
int64_t expectedOffset(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t linear) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    off += (linear % shape[d]) * strides[d];
    linear /= shape[d];
  }
  return off;
}

TEST(OffsetCalculator, MergesContiguousDimensionsIntoOne) {
  const auto c = calc<2>({4, 5, 6}, {{{30, 6, 1}, {30, 6, 1}}});
  EXPECT_EQ(c.ndim, 1);
  EXPECT_EQ(c.sizes[0], 120);
  EXPECT_TRUE(c.narrow);
  EXPECT_EQ(c.get(77).v[1], 77);
}

TEST(OffsetCalculator, DropsSizeOneDimensionsAndKeepsBroadcastsApart) {
  const std::vector<int64_t> shape = {3, 1, 4};
  const std::vector<int64_t> out = {4, 4, 1}, row = {0, 0, 1}, column = {1, 0, 0};
  const auto c = calc<3>(shape, {out, row, column});
  EXPECT_EQ(c.ndim, 2);
  for (int64_t i = 0; i < 12; ++i) {
    const Offsets<3> o = c.get(i);
    EXPECT_EQ(o.v[0], expectedOffset(shape, out, i));
    EXPECT_EQ(o.v[1], expectedOffset(shape, row, i));
    EXPECT_EQ(o.v[2], expectedOffset(shape, column, i));
  }
}

TEST(OffsetCalculator, ZeroDimAndAllOnesAreOneElement) {
  const auto scalar = calc<1>({}, {{{}}});
  EXPECT_EQ(scalar.ndim, 1);
  EXPECT_EQ(scalar.get(0).v[0], 0);
  const auto ones = calc<1>({1, 1}, {{{7, 3}}});
  EXPECT_EQ(ones.get(0).v[0], 0);
}

TEST(OffsetCalculator, TheNarrowPathGivesTheWidePathsOffsets) {
  const std::vector<int64_t> shape = {5, 7, 3, 4};
  const std::vector<int64_t> permuted = {1, 60, 5, 15}, sliced = {2 * 84, 2 * 12, 2 * 4, 2};
  auto narrow = calc<2>(shape, {permuted, sliced});
  ASSERT_TRUE(narrow.narrow);
  auto wide = narrow;
  wide.narrow = false;
  for (int64_t i = 0; i < 5 * 7 * 3 * 4; ++i) {
    EXPECT_EQ(narrow.get(i).v[0], wide.get(i).v[0]);
    EXPECT_EQ(narrow.get(i).v[1], wide.get(i).v[1]);
    EXPECT_EQ(wide.get(i).v[0], expectedOffset(shape, permuted, i));
  }
}

TEST(OffsetCalculator, MoreThanTwoToThe31ElementsUse64BitIndexMath) {
  // 3 x 2^30 elements: out contiguous, the input transposed.
  const int64_t big = int64_t{1} << 30;
  const std::vector<int64_t> shape = {3, big};
  const std::vector<int64_t> out = {big, 1}, transposed = {1, 3};
  const auto c = calc<2>(shape, {out, transposed});
  EXPECT_FALSE(c.narrow);
  for (int64_t i : {int64_t{0}, big - 1, big, 2 * big + 12345, 3 * big - 1}) {
    const Offsets<2> o = c.get(i);
    EXPECT_EQ(o.v[0], i);
    EXPECT_EQ(o.v[1], expectedOffset(shape, transposed, i)) << "element " << i;
  }
}

TEST(OffsetCalculator, OffsetsPastTwoToThe31UseTheWidePathEvenForFewElements) {
  const int64_t far = int64_t{1} << 31;
  const auto c = calc<1>({2, 2}, {{{far, 1}}});
  EXPECT_FALSE(c.narrow);
  EXPECT_EQ(c.get(3).v[0], far + 1);
}

TEST(OffsetCalculator, TooManyDimensionsAfterMergingAreAClearError) {
  // 26 dimensions of size 2 that no merge can join (each stride 4x the next).
  std::vector<int64_t> shape(kMaxDims + 1, 2), strides(kMaxDims + 1);
  for (size_t d = 0; d < strides.size(); ++d) strides[d] = int64_t{1} << (2 * (strides.size() - 1 - d));
  EXPECT_THAT([&] { calc<1>(shape, {strides}); },
              ::testing::ThrowsMessage<bp::Error>(::testing::HasSubstr("at most 25 after merging")));
  // The same rank contiguous merges into one dimension and is fine.
  std::vector<int64_t> contiguous(kMaxDims + 1);
  for (size_t d = 0; d < contiguous.size(); ++d) contiguous[d] = int64_t{1} << (contiguous.size() - 1 - d);
  EXPECT_EQ(calc<1>(shape, {contiguous}).ndim, 1);
}

}  // namespace
}  // namespace bp_gpu
