#pragma once
// Note [GPU row reductions]
// Reductions, softmax and layer_norm share one launch shape. A block of
// kReduceThreads threads serves `slots` independent rows (an output element
// of a reduction, a softmax or layer_norm row); each row is walked by
// `lanes` threads (a power of two, lanes * slots == kReduceThreads), lane l
// taking elements l, l + lanes, ... and the lanes' partial results are
// combined by a tree in shared memory (blockCombine). Which of the two
// varies fastest across the threads of a warp decides which reads coalesce:
//
//   * lanes fastest (the default): the row's elements are adjacent in
//     memory (a reduction over the last dim, a softmax over dim -1);
//   * slots fastest ("columns"): neighbouring rows are adjacent while a
//     row's elements are far apart (a mean over the batch dim).
//
// Short rows get few lanes and many slots, so a [1e6, 4] reduction does not
// leave 252 of 256 threads idle. Blocks walk the rows in a grid-stride loop
// over groups of `slots`; the loop bounds depend only on the block, so every
// thread of a block reaches every __syncthreads().
//
// Passes over global memory: softmax needs a row's max before its sum of
// exponentials and both before its outputs; layer_norm a mean before the
// squared deviations from it (two passes keep the variance accurate for
// rows with a large mean) and both before its outputs. Reading the row from
// global memory for each pass made them cost 3-4x the bytes of the data.
// Note [One-pass rows] says how they read it once.
//
// Note [One-pass rows]
// When the rows a block serves at once fit in the row cache (rowCacheBytes:
// slots * n opmath values within kRowCacheBytes and the device's shared
// memory beside the kernel's static kReduceThreads values), the kernel gets
// that much dynamic shared memory and its first pass copies each element,
// converted to opmath, into it; every later pass reads the cache. Lane l
// caches exactly the elements it reads (l, l + lanes, ...), so a thread only
// ever reads back what it wrote itself and the cache needs no barrier of
// its own. Slot s's element j sits at s * n + j, or at j * slots + s when
// slots vary fastest (neighbouring threads then touch neighbouring words).
// The passes do the same arithmetic in the same order as the uncached ones
// (which remain, for longer rows), so results are identical bit for bit
// whichever runs. Softmax keeps exp(x - max) in the cache for its output
// pass (computed once, not twice); log_softmax keeps x.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "dtypes.cuh"
#include "runtime.h"

namespace bp_gpu {

inline constexpr int kReduceThreads = 256;

// Where this thread sits in a row-group block (see the Note).
struct RowLane {
  int slot, lane, slots, lanes;
};

__device__ inline RowLane rowLane(bool slots_fastest) {
  if (slots_fastest) {
    return RowLane{static_cast<int>(threadIdx.x), static_cast<int>(threadIdx.y), static_cast<int>(blockDim.x),
                   static_cast<int>(blockDim.y)};
  }
  return RowLane{static_cast<int>(threadIdx.y), static_cast<int>(threadIdx.x), static_cast<int>(blockDim.y),
                 static_cast<int>(blockDim.x)};
}

// Combines the `lanes` values of each slot with `combine` (a lower lane's
// value first: combine(earlier, later)) and returns the slot's result to
// every lane. `shared` holds kReduceThreads values; every thread of the block
// must call this (it synchronizes).
template <class V, class Combine>
__device__ inline V blockCombine(V value, V* shared, const RowLane& t, const Combine& combine) {
  const int i = t.slot * t.lanes + t.lane;
  shared[i] = value;
  __syncthreads();
  for (int s = t.lanes / 2; s > 0; s /= 2) {
    if (t.lane < s) shared[i] = combine(shared[i], shared[i + s]);
    __syncthreads();
  }
  const V result = shared[t.slot * t.lanes];
  __syncthreads();  // the buffer may be written again right after
  return result;
}

// Combiners for blockCombine.
template <class V>
struct SumOf {
  BP_GPU_HD V operator()(V a, V b) const { return a + b; }
};
// NaN never wins (a < NaN is false); callers that must propagate NaN (softmax)
// get it through later arithmetic.
template <class V>
struct MaxOf {
  BP_GPU_HD V operator()(V a, V b) const { return a < b ? b : a; }
};

// Lanes per row for rows of `n` elements: the power of two covering n, at
// most kReduceThreads; at least 1.
inline int lanesFor(int64_t n) {
  int lanes = 1;
  while (lanes < kReduceThreads && lanes < n) lanes *= 2;
  return lanes;
}

// How rows of n elements share a block (Note [GPU row reductions]): slots
// fastest when a row's own elements are not adjacent but neighbouring rows
// are (the first row dim has stride 1 and more than one row), so that a
// warp reads neighbouring rows together; then lanes per row are capped so
// that a block holds as many of those rows as a warp covers.
struct RowLayout {
  bool slots_fastest;
  int lanes;
};
inline RowLayout rowLayoutFor(int64_t n, bool elements_adjacent, int64_t row_stride, int64_t rows_along) {
  RowLayout r{!elements_adjacent && row_stride == 1 && rows_along > 1, lanesFor(n)};
  if (r.slots_fastest) r.lanes = std::min(r.lanes, kReduceThreads / std::min(32, lanesFor(rows_along)));
  return r;
}

// Blocks for `rows` rows of `lanes` lanes: enough to fill the device
// several times over; the grid-stride loop over rows covers the rest.
inline int64_t rowBlocks(int64_t rows, int lanes, int device) {
  const int slots = kReduceThreads / lanes;
  const int64_t cap = static_cast<int64_t>(limits(device).sm_count) * 16;
  return std::max<int64_t>(1, std::min<int64_t>((rows + slots - 1) / slots, cap));
}

// Launches kernel(args...) as launchRows does, on a grid of rowBlocks x
// `splits` blocks: blockIdx.y says which part of each row a block reduces
// (Note [Split reductions]).
template <class... P, class... A>
void launchRowsSplit(void (*kernel)(P...), int64_t rows, int lanes, bool slots_fastest, size_t dynamic_shmem,
                     int64_t splits, int device, A&&... args) {
  if (rows <= 0) return;
  const int slots = kReduceThreads / lanes;
  DeviceGuard guard(device);
  const dim3 block = slots_fastest ? dim3(static_cast<unsigned>(slots), static_cast<unsigned>(lanes))
                                   : dim3(static_cast<unsigned>(lanes), static_cast<unsigned>(slots));
  launch(kernel, dim3(static_cast<unsigned>(rowBlocks(rows, lanes, device)), static_cast<unsigned>(splits)), block,
         dynamic_shmem, currentStream(device), std::forward<A>(args)...);
}

// Bytes of dynamic shared memory a one-pass row kernel may ask for.
inline constexpr size_t kRowCacheBytes = 32 * 1024;

// The dynamic shared memory caching the rows of n elements that a block of
// `lanes` lanes serves at once, as values of `value_size` bytes, when they
// fit (Note [One-pass rows]); 0 when they do not and the kernel must read
// global memory for each pass. `shared_per_block`: the device's limit.
inline size_t rowCacheBytes(int64_t n, int lanes, size_t value_size, size_t shared_per_block) {
  const int slots = kReduceThreads / lanes;
  const size_t static_bytes = kReduceThreads * value_size;  // blockCombine's buffer
  const size_t budget = std::min(kRowCacheBytes, shared_per_block > static_bytes ? shared_per_block - static_bytes : 0);
  if (n <= 0 || static_cast<uint64_t>(n) > budget / value_size / static_cast<size_t>(slots)) return 0;
  return static_cast<size_t>(slots) * static_cast<size_t>(n) * value_size;
}

// Launches kernel(args...) over `rows` rows of `lanes` lanes each (Note [GPU
// row reductions]) on `device`'s current stream, with `dynamic_shmem`
// bytes of dynamic shared memory per block; nothing when rows == 0.
template <class... P, class... A>
void launchRows(void (*kernel)(P...), int64_t rows, int lanes, bool slots_fastest, size_t dynamic_shmem, int device,
                A&&... args) {
  if (rows <= 0) return;
  launchRowsSplit(kernel, rows, lanes, slots_fastest, dynamic_shmem, 1, device, std::forward<A>(args)...);
}

// Note [Split reductions]
// A row per block leaves the device idle when there are few rows and each
// is long: sum(x) of 16M elements is one row, and a [4, 4M] -> [4]
// reduction is four. Then each row is split into `splits` parts of
// contiguous reduced indices, one block each (blockIdx.y); a first kernel
// writes each part's Partial to a scratch tensor on the device, and a
// second reduces each row's partials, in part order, with the same merge
// (sums wrap for integers, Welford's merge for var/std, extrema keep the
// lower index on ties and let NaN win), then finishes the result (mean's
// division, var's divisor, std's root) exactly as the one-kernel path.
// No atomics: results are deterministic for a device and shape. splitsFor
// chooses: parts enough for kSplitBlocksPerSm blocks on every
// multiprocessor, each giving every lane of its row at least
// kSplitMinPerLane elements (fewer would spend more on the second kernel
// and the scratch than they save): kSplitMinElements for a row walked by
// all kReduceThreads lanes. Columns (slots fastest) have few lanes per row,
// 8 for the bias gradient of a [1024, 768] product (sum over the 1024
// rows), so each lane walks many more of the row's elements one after
// another, each read waiting on memory: there the same rule splits rows
// that are far shorter (that sum: 24 blocks, 128 reads per lane unsplit; 16
// parts, 384 blocks, 8 reads per lane split, on an H100's 132).
inline constexpr int64_t kSplitMinPerLane = 8;
inline constexpr int64_t kSplitMinElements = kSplitMinPerLane * kReduceThreads;
inline constexpr int kSplitBlocksPerSm = 8;

// Parts per row for rows of `num_red` elements walked by `lanes` lanes
// each and served by `row_blocks` blocks (rowBlocks) on `sm_count`
// multiprocessors; 1: no split.
inline int64_t splitsFor(int64_t row_blocks, int64_t num_red, int lanes, int sm_count) {
  const int64_t target = static_cast<int64_t>(sm_count) * kSplitBlocksPerSm;
  if (row_blocks >= target) return 1;
  const int64_t by_work = num_red / (kSplitMinPerLane * lanes);
  const int64_t by_device = (target + row_blocks - 1) / row_blocks;
  return std::max<int64_t>(1, std::min(by_work, by_device));
}

// The first row of this block's current group and the loop step, for
//   for (int64_t first = firstRow(t); first < rows; first += rowStep(t))
__device__ inline int64_t firstRow(const RowLane& t) { return static_cast<int64_t>(blockIdx.x) * t.slots; }
__device__ inline int64_t rowStep(const RowLane& t) { return static_cast<int64_t>(gridDim.x) * t.slots; }

}  // namespace bp_gpu
