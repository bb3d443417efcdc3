// The elementwise loops' paths (loops.cuh, Note [Contiguous elementwise
// loops]) on the simulator, without the host: which path the host picks for
// which operands, and that each path computes every element exactly once
// (tails of every length, misaligned views, stride-0 and scalar inputs,
// several blocks striding over the grid). ASan builds also check that the
// vector loads and stores stay inside each operand. And the row kernels'
// choices (block_reduce.cuh): which rows fit the shared-memory row cache,
// and how many blocks share a long reduction. (The kernels themselves run
// through the host in plugins/gpu/tests/row_kernels_test.cc.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "gpu/block_reduce.cuh"
#include "gpu/loops.cuh"

namespace bp_gpu {
namespace {

OffsetCalculator<3> walk3(std::vector<int64_t> shape, std::array<std::vector<int64_t>, 3> strides) {
  return makeOffsetCalculator<3>("test", bp::IntList(shape.data(), shape.size()),
                                 {strides[0].data(), strides[1].data(), strides[2].data()});
}

// x * 3 + y: the inputs are told apart, and a float result rounds as the CPU's.
struct MulAdd {
  BP_GPU_HD float operator()(float x, float y) const { return x * 3.0f + y; }
};

TEST(LoopPath, DenseAlignedOperandsTakeTheVectorizedPath) {
  alignas(16) static float a[64], b[64], out[64];
  const auto w = walk3({4, 16}, {{{16, 1}, {16, 1}, {16, 1}}});
  EXPECT_EQ(chooseLoopPath(w, out, Operand<float>{a, 0}, Operand<float>{b, 0}), LoopPath::kVectorized);
  // A scalar (null) or a stride-0 operand does not stream: only the others must be aligned.
  EXPECT_EQ(chooseLoopPath(w, out, Operand<float>{a, 0}, Operand<float>{nullptr, 2}), LoopPath::kVectorized);
  const auto bcast = walk3({4, 16}, {{{16, 1}, {16, 1}, {0, 0}}});
  EXPECT_EQ(chooseLoopPath(bcast, out, Operand<float>{a, 0}, Operand<float>{b + 1, 0}), LoopPath::kVectorized);
}

TEST(LoopPath, AMisalignedPointerTakesTheUnrolledPath) {
  alignas(16) static float a[65], out[65];
  const auto w = walk3({64}, {{{1}, {1}, {1}}});
  EXPECT_EQ(chooseLoopPath(w, out, Operand<float>{a + 1, 0}, Operand<float>{a, 0}), LoopPath::kUnrolled);
  EXPECT_EQ(chooseLoopPath(w, out + 2, Operand<float>{a, 0}, Operand<float>{a, 0}), LoopPath::kUnrolled);
  // A vector is 16 bytes of the widest operand: bool results of double
  // inputs need 2-byte alignment only.
  alignas(16) static double d[64];
  alignas(16) static bool flags[66];
  const auto c = walk3({64}, {{{1}, {1}, {0}}});
  EXPECT_EQ(chooseLoopPath(c, flags + 2, Operand<double>{d, 0}, Operand<double>{d, 0}), LoopPath::kVectorized);
  EXPECT_EQ(chooseLoopPath(c, flags + 1, Operand<double>{d, 0}, Operand<double>{d, 0}), LoopPath::kUnrolled);
}

TEST(LoopPath, AnythingButOneUnitStrideDimensionIsStrided) {
  alignas(16) static float a[256], out[256];
  const Operand<float> in{a, 0};
  EXPECT_EQ(chooseLoopPath(walk3({4, 16}, {{{16, 1}, {1, 4}, {16, 1}}}), out, in, in),
            LoopPath::kStrided);                                                                // transposed
  EXPECT_EQ(chooseLoopPath(walk3({64}, {{{1}, {2}, {1}}}), out, in, in), LoopPath::kStrided);   // every other element
  EXPECT_EQ(chooseLoopPath(walk3({64}, {{{1}, {-1}, {1}}}), out, in, in), LoopPath::kStrided);  // reversed
  EXPECT_EQ(chooseLoopPath(walk3({4, 16}, {{{16, 1}, {1, 0}, {16, 1}}}), out, in, in), LoopPath::kStrided);  // a column
  // One element: any strides.
  EXPECT_EQ(chooseLoopPath(walk3({1}, {{{7}, {3}, {5}}}), out, in, in), LoopPath::kVectorized);
}

template <LoopPath kPath>
void runMulAdd(const OffsetCalculator<3>& w, int64_t n, float* out, Operand<float> x, Operand<float> y, unsigned grid) {
  launch(&elementwiseKernel<kPath, MulAdd, float, float, float>, dim3(grid), dim3(kBlockSize), 0, nullptr, w, n, out,
         MulAdd{}, x, y);
}

// Every path on every length around a tile (kBlockSize * kUnroll * 4
// floats), aligned and shifted by one element, with a stride-0 and a
// scalar second input, on 1 and 3 blocks: the same numbers as a host loop,
// and nothing written outside [0, n).
TEST(ElementwiseLoop, EveryPathComputesEveryElementOnce) {
  const int64_t tile = int64_t{kBlockSize} * kUnroll * 4;
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{4}, tile - 1, tile, tile + 5, 3 * tile + 7}) {
    for (int shift : {0, 1}) {
      for (int second : {0, 1, 2}) {  // dense, stride 0, scalar
        for (unsigned grid : {1u, 3u}) {
          SCOPED_TRACE(testing::Message()
                       << "n=" << n << " shift=" << shift << " second=" << second << " grid=" << grid);
          std::vector<float> xs(static_cast<size_t>(n + 1)), ys(static_cast<size_t>(n + 1));
          std::iota(xs.begin(), xs.end(), 0.5f);
          std::iota(ys.begin(), ys.end(), -100.0f);
          std::vector<float> out(static_cast<size_t>(n + 2), -1.0f);
          const Operand<float> x{xs.data() + shift, 0};
          const Operand<float> y = second == 2 ? Operand<float>{nullptr, 7.0f} : Operand<float>{ys.data() + shift, 0};
          const auto w = walk3({n}, {{{1}, {1}, {second == 0 ? int64_t{1} : int64_t{0}}}});
          const LoopPath path = chooseLoopPath(w, out.data() + shift, x, y);
          if (n > 1) {
            EXPECT_EQ(path, shift == 0 ? LoopPath::kVectorized : LoopPath::kUnrolled);
          }
          for (LoopPath p : {path, LoopPath::kStrided}) {
            std::fill(out.begin(), out.end(), -1.0f);
            if (p == LoopPath::kVectorized) runMulAdd<LoopPath::kVectorized>(w, n, out.data() + shift, x, y, grid);
            if (p == LoopPath::kUnrolled) runMulAdd<LoopPath::kUnrolled>(w, n, out.data() + shift, x, y, grid);
            if (p == LoopPath::kStrided) runMulAdd<LoopPath::kStrided>(w, n, out.data() + shift, x, y, grid);
            for (int64_t i = 0; i < n; ++i) {
              const float yi = second == 0 ? ys[i + shift] : second == 1 ? ys[shift] : 7.0f;
              ASSERT_EQ(out[i + shift], xs[i + shift] * 3.0f + yi) << "element " << i;
            }
            if (shift == 1) {
              EXPECT_EQ(out[0], -1.0f);
            }
            EXPECT_EQ(out[n + shift], -1.0f);
          }
        }
      }
    }
  }
}

// Mixed element sizes share one vector count: 16 bytes of the widest.
struct IsPositive {
  BP_GPU_HD bool operator()(double x) const { return x > 0; }
};

TEST(ElementwiseLoop, NarrowResultsOfWideInputsVectorizeTogether) {
  static_assert(kVecOf<bool, double> == 2 && kVecOf<uint8_t> == 16 && kVecOf<Half, float> == 4);
  const int64_t n = 4096 + 5;
  std::vector<double> xs(n);
  for (int64_t i = 0; i < n; ++i) xs[i] = (i % 3 == 0) ? -1.0 - i : i;
  auto out = std::make_unique<bool[]>(n);
  int64_t strides[2] = {1, 1};
  const auto w = makeOffsetCalculator<2>("test", bp::IntList(&n, 1), {&strides[0], &strides[1]});
  ASSERT_EQ(chooseLoopPath(w, out.get(), Operand<double>{xs.data(), 0}), LoopPath::kVectorized);
  launch(&elementwiseKernel<LoopPath::kVectorized, IsPositive, bool, double>, dim3(2), dim3(kBlockSize), 0, nullptr, w,
         n, out.get(), IsPositive{}, Operand<double>{xs.data(), 0});
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], xs[i] > 0) << "element " << i;
}

// Note [One-pass rows]: 32 KiB of cached values beside the kernel's static
// buffer, within the device's shared memory.
TEST(RowCache, RowsFitWhileTheBlocksRowsTakeAtMost32KiB) {
  const size_t device = 48 * 1024;
  EXPECT_EQ(rowCacheBytes(8192, kReduceThreads, sizeof(float), device), 32u * 1024);
  EXPECT_EQ(rowCacheBytes(8193, kReduceThreads, sizeof(float), device), 0u);
  EXPECT_EQ(rowCacheBytes(4096, kReduceThreads, sizeof(double), device), 32u * 1024);
  EXPECT_EQ(rowCacheBytes(4097, kReduceThreads, sizeof(double), device), 0u);
  // Short rows: a block serves kReduceThreads / lanes of them at once.
  EXPECT_EQ(rowCacheBytes(5, lanesFor(5), sizeof(float), device), size_t{kReduceThreads / 8} * 5 * sizeof(float));
  // Columns with few lanes and many slots overflow sooner.
  EXPECT_EQ(rowCacheBytes(300, 8, sizeof(float), device), 0u);
  // A device with less shared memory: what remains beside the static buffer.
  const size_t small = 16 * 1024;
  EXPECT_EQ(rowCacheBytes(3840, kReduceThreads, sizeof(float), small), 3840u * 4);
  EXPECT_EQ(rowCacheBytes(3841, kReduceThreads, sizeof(float), small), 0u);
  EXPECT_EQ(rowCacheBytes(0, kReduceThreads, sizeof(float), device), 0u);
}

// Note [Split reductions]: few rows of many elements are split until the
// device has kSplitBlocksPerSm blocks per multiprocessor, each part giving
// every lane at least kSplitMinPerLane elements (kSplitMinElements for a row
// of kReduceThreads lanes).
TEST(SplitReductions, FewLongRowsSplitToFillTheDevice) {
  const int h100 = 132, all = kReduceThreads;
  EXPECT_EQ(splitsFor(1, int64_t{16} << 20, all, h100), h100 * kSplitBlocksPerSm);           // sum of 16M elements
  EXPECT_EQ(splitsFor(4, int64_t{4} << 20, all, h100), (h100 * kSplitBlocksPerSm + 3) / 4);  // [4, 4M] -> [4]
  EXPECT_EQ(splitsFor(1, 3 * kSplitMinElements + 5, all, h100), 3);                          // parts stay long
  EXPECT_EQ(splitsFor(1, 2 * kSplitMinElements - 1, all, h100), 1);
  EXPECT_EQ(splitsFor(h100 * kSplitBlocksPerSm, int64_t{1} << 30, all, h100), 1);  // enough rows already
  EXPECT_EQ(splitsFor(3, 40000, all, 4), 11);  // the simulator's 4 multiprocessors: what the host tests run
}

// Columns: a linear layer's bias gradient, [1024, 768] summed over its rows,
// is 768 rows of 1024 elements in the column layout, 8 lanes each (Note
// [GPU row reductions]): 24 blocks on a device of 132 multiprocessors, each
// lane reading 128 elements one after another. Split, 16 parts of 64 (8
// per lane): 384 blocks.
TEST(SplitReductions, ShortColumnsOnAFewBlocksSplitByTheirReadsPerLane) {
  const int h100 = 132;
  const RowLayout layout = rowLayoutFor(1024, /*elements_adjacent=*/false, /*row_stride=*/1, /*rows_along=*/768);
  ASSERT_TRUE(layout.slots_fastest);
  ASSERT_EQ(layout.lanes, 8);
  const int64_t blocks = (768 + kReduceThreads / 8 - 1) / (kReduceThreads / 8);
  EXPECT_EQ(blocks, 24);
  EXPECT_EQ(splitsFor(blocks, 1024, layout.lanes, h100), 16);
  EXPECT_EQ(splitsFor(blocks, 2 * kSplitMinPerLane * 8 - 1, layout.lanes, h100), 1);  // too short to pay
  EXPECT_EQ(splitsFor(h100 * kSplitBlocksPerSm, 1 << 20, layout.lanes, h100), 1);     // enough columns already
}

}  // namespace
}  // namespace bp_gpu
