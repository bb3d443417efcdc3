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

// Launches kernel(args...) over `rows` rows of `lanes` lanes each (Note [GPU
// row reductions]) on `device`'s current stream; nothing when rows == 0.
template <class... P, class... A>
void launchRows(void (*kernel)(P...), int64_t rows, int lanes, bool slots_fastest, int device, A&&... args) {
  if (rows <= 0) return;
  const int slots = kReduceThreads / lanes;
  DeviceGuard guard(device);
  // Enough blocks to fill the device several times over; the grid-stride
  // loop covers the rest.
  const int64_t cap = static_cast<int64_t>(limits(device).sm_count) * 16;
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((rows + slots - 1) / slots, cap));
  const dim3 block = slots_fastest ? dim3(static_cast<unsigned>(slots), static_cast<unsigned>(lanes))
                                   : dim3(static_cast<unsigned>(lanes), static_cast<unsigned>(slots));
  launch(kernel, dim3(static_cast<unsigned>(blocks)), block, 0, currentStream(device), std::forward<A>(args)...);
}

// The first row of this block's current group and the loop step, for
//   for (int64_t first = firstRow(t); first < rows; first += rowStep(t))
__device__ inline int64_t firstRow(const RowLane& t) { return static_cast<int64_t>(blockIdx.x) * t.slots; }
__device__ inline int64_t rowStep(const RowLane& t) { return static_cast<int64_t>(gridDim.x) * t.slots; }

}  // namespace bp_gpu
