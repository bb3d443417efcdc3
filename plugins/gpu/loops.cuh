#pragma once
// Note [GPU elementwise loops]
// The GPU kernels of creation, elementwise and data movement walk tensors
// the same way: one thread per element of an iteration shape (out's, or
// index's for gather/scatter), in a grid-stride loop, where each operand's
// element offset comes from an OffsetCalculator built on the host:
//
//   * Geometry: per operand, element strides aligned to the iteration
//     shape (0 where it broadcasts); size-1 dimensions dropped and adjacent
//     dimensions merged wherever every operand steps through them as one,
//     so a contiguous or simply broadcast problem is a single dimension and
//     costs one multiply per operand. At most kMaxDims dimensions (after
//     merging) ride in the kernel's parameters; no device memory is needed.
//   * Index math: a linear (row-major) index becomes coordinates by
//     division, innermost dimension first. When every index and every
//     operand's largest offset fit in 31 bits (all but huge tensors), the
//     divisions run in 32 bits, several times cheaper on GPUs than 64-bit
//     ones; the choice is a flag read uniformly by every thread, not a
//     second kernel instantiation.
//   * Instantiations: kernels are templated on the storage type (or the
//     element size, for kernels that only move elements) and take the
//     operation as a runtime enum switched on uniformly, so compile time
//     grows with dtypes, not with ops x dtypes.
//   * A linear index is the element's row-major position, which random
//     draws and arange need (Note [The Philox stream]); merging dimensions
//     keeps row-major order.
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "dtypes.cuh"
#include "runtime.h"

namespace bp_gpu {

// Dimensions an iteration shape may have (PyTorch's TensorIterator limit).
inline constexpr int kMaxDims = 25;
// Threads per block of the elementwise kernels.
inline constexpr int kBlockSize = 256;
// Resident blocks per multiprocessor worth launching; the grid-stride loop
// covers the rest, so a huge tensor does not launch millions of blocks.
inline constexpr int kBlocksPerSm = 16;

template <int N>
struct Offsets {
  int64_t v[N];
};

// Element offsets of N operands for a linear index of an iteration shape
// (Note [GPU elementwise loops]). Trivially copyable: passed to kernels by
// value.
template <int N>
struct OffsetCalculator {
  int ndim;                         // >= 1
  bool narrow;                      // every index and offset fits 31 bits
  int64_t sizes[kMaxDims];          // innermost first
  int64_t strides[kMaxDims][N];     // element strides, [dimension][operand]

  BP_GPU_HD Offsets<N> get(int64_t linear) const {
    Offsets<N> o;
    if (narrow) {
      uint32_t off[N] = {};
      uint32_t rem = static_cast<uint32_t>(linear);
      for (int d = 0; d < ndim; ++d) {
        uint32_t i = rem;
        if (d + 1 < ndim) {  // the outermost coordinate is what remains
          const uint32_t size = static_cast<uint32_t>(sizes[d]);
          rem = i / size;
          i -= rem * size;
        }
        for (int k = 0; k < N; ++k) off[k] += i * static_cast<uint32_t>(strides[d][k]);
      }
      for (int k = 0; k < N; ++k) o.v[k] = off[k];
    } else {
      for (int k = 0; k < N; ++k) o.v[k] = 0;
      int64_t rem = linear;
      for (int d = 0; d < ndim; ++d) {
        int64_t i = rem;
        if (d + 1 < ndim) {
          rem = i / sizes[d];
          i -= rem * sizes[d];
        }
        for (int k = 0; k < N; ++k) o.v[k] += i * strides[d][k];
      }
    }
    return o;
  }
};

// An OffsetCalculator for iteration shape `shape` where strides[k][d] is
// operand k's element stride along dimension d of `shape` (0 where it
// broadcasts). Throws if more than kMaxDims dimensions remain after merging.
template <int N>
OffsetCalculator<N> makeOffsetCalculator(const char* op, bp::IntList shape,
                                         const std::array<const int64_t*, N>& strides) {
  OffsetCalculator<N> c{};
  int r = 0;
  int64_t numel = 1;
  for (size_t d = shape.size(); d-- > 0;) {  // innermost first
    const int64_t size = shape[d];
    numel *= size;
    if (size == 1) continue;
    bool merge = r > 0;
    for (int k = 0; k < N && merge; ++k) merge = strides[k][d] == c.strides[r - 1][k] * c.sizes[r - 1];
    if (merge) {
      c.sizes[r - 1] *= size;
      continue;
    }
    BP_PLUGIN_CHECK(r < kMaxDims, op, ": tensors of ", shape.size(), " dimensions are not supported on ",
                    BP_GPU_NAME, " (at most ", kMaxDims, " after merging contiguous dimensions)");
    c.sizes[r] = size;
    for (int k = 0; k < N; ++k) c.strides[r][k] = strides[k][d];
    ++r;
  }
  if (r == 0) {  // 0-d, or every dimension of size 1: one element
    c.sizes[0] = 1;
    r = 1;
  }
  c.ndim = r;
  constexpr int64_t kNarrowLimit = int64_t{1} << 31;
  c.narrow = numel < kNarrowLimit;
  for (int k = 0; k < N; ++k) {
    int64_t last = 0;  // the largest offset of operand k
    for (int d = 0; d < r; ++d) last += (c.sizes[d] - 1) * c.strides[d][k];
    c.narrow = c.narrow && last < kNarrowLimit;
  }
  return c;
}

// t's element strides for the `ndim` dimensions of a shape it broadcasts
// to (aligned from the right; 0 where t has size 1 or no dimension), into
// `out` (ndim entries). A null t is a scalar: all 0.
inline void broadcastStrides(const bp::Tensor* t, size_t ndim, int64_t* out) {
  const int64_t lead = static_cast<int64_t>(ndim) - (t == nullptr ? 0 : t->dim());
  for (int64_t d = 0; d < static_cast<int64_t>(ndim); ++d)
    out[d] = t == nullptr || d < lead || t->size(d - lead) == 1 ? 0 : t->stride(d - lead);
}

// An OffsetCalculator over `shape` for operands that broadcast to it (null:
// a scalar operand).
template <int N>
OffsetCalculator<N> makeOffsetCalculator(const char* op, bp::IntList shape,
                                         const std::array<const bp::Tensor*, N>& operands) {
  BP_PLUGIN_CHECK(shape.size() <= static_cast<size_t>(kMaxDims), op, ": tensors of ", shape.size(),
                  " dimensions are not supported on ", BP_GPU_NAME, " (at most ", kMaxDims, ")");
  int64_t aligned[N][kMaxDims];
  std::array<const int64_t*, N> strides;
  for (int k = 0; k < N; ++k) {
    broadcastStrides(operands[k], shape.size(), aligned[k]);
    strides[k] = aligned[k];
  }
  return makeOffsetCalculator<N>(op, shape, strides);
}

// An input of an elementwise kernel: elements at `ptr` (at the offsets an
// OffsetCalculator gives), or, where ptr is null, `value` for every element
// (a scalar, or a 0-d cpu tensor read on the host).
template <class T>
struct Operand {
  const T* ptr;
  opmath_t<T> value;
  BP_GPU_HD opmath_t<T> operator[](int64_t offset) const { return ptr != nullptr ? load(ptr[offset]) : value; }
};

// Calls f(i) for i in [0, n), each index on one thread of the grid.
template <class F>
__device__ inline void gridStride(int64_t n, F&& f) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) f(i);
}

// Launches kernel(args...) with enough kBlockSize-thread blocks for n
// elements (capped: the kernels loop with gridStride) on `device`'s current
// stream. n == 0 launches nothing.
template <class... P, class... A>
void launchElements(void (*kernel)(P...), int64_t n, int device, A&&... args) {
  if (n <= 0) return;
  DeviceGuard guard(device);
  const int64_t cap = static_cast<int64_t>(limits(device).sm_count) * kBlocksPerSm;
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((n + kBlockSize - 1) / kBlockSize, cap));
  launch(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kBlockSize), 0, currentStream(device),
         std::forward<A>(args)...);
}

}  // namespace bp_gpu
