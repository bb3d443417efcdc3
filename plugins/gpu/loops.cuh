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
//   * Paths: the general walk above is one of three; Note [Contiguous
//     elementwise loops] says when the others run.
//
// Note [Contiguous elementwise loops]
// Most elementwise calls are dense: after merging, every operand is one
// dimension of stride 1 (or stride 0: a single element broadcast, or a
// scalar). For those, the host picks one of two contiguous paths before the
// launch (chooseLoopPath), as PyTorch's CUDA loops do:
//
//   * kVectorized, when every streamed pointer is aligned to a whole vector:
//     each thread moves kUnroll vectors of kVec elements per operand, where
//     kVec = 16 / (the widest operand's element size), so the widest operand
//     moves 16 bytes per load or store (ld/st.global.v4 on NVIDIA), and all
//     loads of a tile are issued before any result is computed. A block's
//     tile is kBlockSize * kUnroll * kVec elements, vector u of thread t at
//     tile offset (u * kBlockSize + t) * kVec: neighbouring threads touch
//     neighbouring vectors, so each warp's access is one contiguous span.
//   * kUnrolled, when some pointer is not so aligned (a view starting at
//     element 1): the same tiles, element by element (still kUnroll * kVec
//     independent loads in flight per thread, no index math).
//   * kStrided: everything else, through the OffsetCalculator.
//
// The last, partial tile of both contiguous paths runs element by element
// (a uniform branch per block). The path is a template parameter, so a
// kernel is instantiated three times per storage type, not per op: the
// strided path's index math would otherwise cost the dense paths registers.
// Conversions (copyCast) have only the vectorized and strided paths: a
// misaligned converting copy is rare, and the 1-dimensional strided walk
// costs it one multiply per operand. What every path computes per element
// is the same functor, so results do not depend on the path; the tests
// compare each path with the CPU plugin (elementwise_test.cc) and run the
// loops on the simulator directly (plugins/gpu/tests/loops_test.cc).
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
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
  int ndim;                      // >= 1
  bool narrow;                   // every index and offset fits 31 bits
  int64_t sizes[kMaxDims];       // innermost first
  int64_t strides[kMaxDims][N];  // element strides, [dimension][operand]

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
    BP_PLUGIN_CHECK(r < kMaxDims, op, ": tensors of ", shape.size(), " dimensions are not supported on ", BP_GPU_NAME,
                    " (at most ", kMaxDims, " after merging contiguous dimensions)");
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

// The lines of `x` and `out` (one shape) along dimension `d`, for kernels
// that run one line per thread or block (cumsum, softmax): an
// OffsetCalculator over every other dimension gives each line's start in
// both; `len` elements per line, `count` lines, each tensor's element step
// along a line. A 0-d tensor is one line of one element.
struct LinesAlong {
  OffsetCalculator<2> lines;
  int64_t len, count, in_step, out_step;
};
inline LinesAlong linesAlong(const char* op, const bp::Tensor& x, const bp::Tensor& out, int64_t d) {
  const int64_t nd = x.dim();
  int64_t sizes[kMaxDims], in_strides[kMaxDims], out_strides[kMaxDims];
  size_t k = 0;
  for (int64_t i = 0; i < nd; ++i) {
    if (i == d) continue;
    sizes[k] = x.size(i);
    in_strides[k] = x.stride(i);
    out_strides[k++] = out.stride(i);
  }
  LinesAlong l{};
  l.lines = makeOffsetCalculator<2>(op, bp::IntList(sizes, k), {in_strides, out_strides});
  l.len = nd == 0 ? 1 : x.size(d);
  l.count = x.numel() / l.len;
  l.in_step = nd == 0 ? 0 : x.stride(d);
  l.out_step = nd == 0 ? 0 : out.stride(d);
  return l;
}

// An input of an elementwise kernel: elements at `ptr` (at the offsets an
// OffsetCalculator gives), or, where ptr is null, `value` for every element
// (a scalar, or a 0-d cpu tensor read on the host). Storage values: kernels
// load() them into their compute type.
template <class T>
struct Operand {
  const T* ptr;
  T value;
  BP_GPU_HD T operator[](int64_t offset) const { return ptr != nullptr ? ptr[offset] : value; }
};

// Calls f(i) for i in [0, n), each index on one thread of the grid.
template <class F>
__device__ inline void gridStride(int64_t n, F&& f) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) f(i);
}

// Launches kernel(args...) with enough kBlockSize-thread blocks for n
// elements, `per_thread` of them on each thread (capped: the kernels loop
// over the grid) on `device`'s current stream. n == 0 launches nothing.
template <class... P, class... A>
void launchElements(void (*kernel)(P...), int64_t n, int per_thread, int device, A&&... args) {
  if (n <= 0) return;
  DeviceGuard guard(device);
  const int64_t cap = static_cast<int64_t>(limits(device).sm_count) * kBlocksPerSm;
  const int64_t per_block = int64_t{kBlockSize} * per_thread;
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((n + per_block - 1) / per_block, cap));
  launch(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kBlockSize), 0, currentStream(device),
         std::forward<A>(args)...);
}

// ------------------------------------------ Note [Contiguous elementwise loops]

enum class LoopPath : int32_t { kVectorized, kUnrolled, kStrided };

// Vectors per thread per tile on the contiguous paths.
inline constexpr int kUnroll = 2;

// Elements per vector for operands of storage types E...: a 16-byte vector
// of the widest.
template <class... E>
inline constexpr int kVecOf = 16 / static_cast<int>(std::max({sizeof(E)...}));

#if defined(BP_GPU_SIM)
#define BP_GPU_UNROLL
#else
#define BP_GPU_UNROLL _Pragma("unroll")
#endif

// kN elements of T, aligned as a whole: one vector load or store.
template <class T, int kN>
struct alignas(sizeof(T) * kN) Chunk {
  T v[kN];
};

// Elements [i, i + kN) of `a`: one aligned chunk when kVector, else kN
// loads; a's value everywhere when a.ptr is null.
template <int kN, bool kVector, class T>
__device__ inline Chunk<T, kN> loadChunk(const Operand<T>& a, int64_t i) {
  Chunk<T, kN> c;
  if (a.ptr == nullptr) {
    BP_GPU_UNROLL
    for (int e = 0; e < kN; ++e) c.v[e] = a.value;
  } else if constexpr (kVector) {
    c = *reinterpret_cast<const Chunk<T, kN>*>(a.ptr + i);
  } else {
    BP_GPU_UNROLL
    for (int e = 0; e < kN; ++e) c.v[e] = a.ptr[i + e];
  }
  return c;
}

// One input's share of a tile on one thread: kUnroll chunks.
template <class T, int kN>
struct TileRegs {
  Chunk<T, kN> c[kUnroll];
};

template <int kVec, bool kVector, class T>
__device__ inline TileRegs<T, kVec> loadTile(const Operand<T>& a, const int64_t (&at)[kUnroll]) {
  TileRegs<T, kVec> r;
  BP_GPU_UNROLL
  for (int u = 0; u < kUnroll; ++u) r.c[u] = loadChunk<kVec, kVector>(a, at[u]);
  return r;
}

// Computes and stores one thread's share of a whole tile from its loaded inputs.
template <int kVec, bool kVector, class Out, class F, class... In>
__device__ inline void storeTile(Out* out, const int64_t (&at)[kUnroll], const F& f, const TileRegs<In, kVec>&... in) {
  BP_GPU_UNROLL
  for (int u = 0; u < kUnroll; ++u) {
    Chunk<Out, kVec> r;
    BP_GPU_UNROLL
    for (int e = 0; e < kVec; ++e) r.v[e] = f(in.c[u].v[e]...);
    if constexpr (kVector) {
      *reinterpret_cast<Chunk<Out, kVec>*>(out + at[u]) = r;
    } else {
      BP_GPU_UNROLL
      for (int e = 0; e < kVec; ++e) out[at[u] + e] = r.v[e];
    }
  }
}

// out[i] = f(in[i]...) for i in [0, n) on a contiguous path: whole tiles
// of blockDim.x * kUnroll * kVec elements by chunks (every load of a tile is
// issued before f runs: loadTile's results are storeTile's arguments), the
// last partial tile element by element. Inputs of stride 0 arrive as values.
template <bool kVector, class Out, class F, class... In>
__device__ inline void denseLoop(int64_t n, Out* out, const F& f, const Operand<In>&... in) {
  constexpr int kVec = kVecOf<Out, In...>;
  const int64_t tile = static_cast<int64_t>(blockDim.x) * kUnroll * kVec;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * tile; base < n; base += tile * gridDim.x) {
    if (base + tile <= n) {
      int64_t at[kUnroll];
      BP_GPU_UNROLL
      for (int u = 0; u < kUnroll; ++u) at[u] = base + (static_cast<int64_t>(u) * blockDim.x + threadIdx.x) * kVec;
      storeTile<kVec, kVector>(out, at, f, loadTile<kVec, kVector>(in, at)...);
    } else {
      for (int64_t i = base + threadIdx.x; i < n; i += blockDim.x) out[i] = f(in[i]...);
    }
  }
}

// A stride-0 input of a contiguous path as a value: each thread reads the
// one element once.
template <class T>
__device__ inline Operand<T> resolveBroadcast(const Operand<T>& a, int64_t stride) {
  return a.ptr != nullptr && stride == 0 ? Operand<T>{nullptr, a.ptr[0]} : a;
}

template <LoopPath kPath, class Out, class F, class... In, size_t... K>
__device__ inline void elementwiseLoopImpl(std::index_sequence<K...>, const OffsetCalculator<1 + sizeof...(In)>& walk,
                                           int64_t n, Out* out, const F& f, const Operand<In>&... in) {
  if constexpr (kPath == LoopPath::kStrided) {
    gridStride(n, [&](int64_t i) {
      const Offsets<1 + sizeof...(In)> o = walk.get(i);
      out[o.v[0]] = f(in[o.v[K + 1]]...);
    });
  } else if (n > 0) {  // (a stride-0 input has an element to read)
    denseLoop<kPath == LoopPath::kVectorized>(n, out, f, resolveBroadcast(in, walk.strides[0][K + 1])...);
  }
}

// out = f(in...) elementwise over the `n` elements `walk` describes, on the
// path the host chose for them (chooseLoopPath). f maps the inputs' storage
// values to out's storage value; every path calls it on the same values.
template <LoopPath kPath, class Out, class F, class... In>
__device__ inline void elementwiseLoop(const OffsetCalculator<1 + sizeof...(In)>& walk, int64_t n, Out* out, const F& f,
                                       const Operand<In>&... in) {
  elementwiseLoopImpl<kPath>(std::index_sequence_for<In...>{}, walk, n, out, f, in...);
}

// The kernel of elementwiseLoop, for functors that need nothing else.
template <LoopPath kPath, class F, class Out, class... In>
__global__ void elementwiseKernel(OffsetCalculator<1 + sizeof...(In)> walk, int64_t n, Out* out, F f,
                                  Operand<In>... in) {
  elementwiseLoop<kPath>(walk, n, out, f, in...);
}

// The path for `walk`'s N operands (operand 0 is out) at `pointers` (null:
// a scalar) whose vectors are vec_bytes[k] bytes: contiguous when one
// dimension remains after merging and out steps 1 through it, every input
// 0 or 1; vectorized when, in addition, every stepping pointer is aligned
// to its vector (Note [Contiguous elementwise loops]).
template <int N>
LoopPath chooseLoopPath(const OffsetCalculator<N>& walk, const std::array<const void*, N>& pointers,
                        const std::array<size_t, N>& vec_bytes) {
  if (walk.ndim != 1) return LoopPath::kStrided;
  const bool single = walk.sizes[0] == 1;  // one element: any strides do
  bool aligned = true;
  for (int k = 0; k < N; ++k) {
    const int64_t stride = single ? (k == 0 ? 1 : 0) : walk.strides[0][k];
    if (stride != 1 && (k == 0 || stride != 0)) return LoopPath::kStrided;
    if (pointers[k] != nullptr && stride == 1)
      aligned = aligned && reinterpret_cast<uintptr_t>(pointers[k]) % vec_bytes[k] == 0;
  }
  return aligned ? LoopPath::kVectorized : LoopPath::kUnrolled;
}

// The path of an elementwise call writing `out` from inputs `in`.
template <class Out, class... In>
LoopPath chooseLoopPath(const OffsetCalculator<1 + sizeof...(In)>& walk, const Out* out, const Operand<In>&... in) {
  constexpr size_t kVec = kVecOf<Out, In...>;
  return chooseLoopPath<1 + sizeof...(In)>(walk, {static_cast<const void*>(out), static_cast<const void*>(in.ptr)...},
                                           {kVec * sizeof(Out), kVec * sizeof(In)...});
}

// Launches the kernel `Kernels::get<path>()` (one instantiation per path,
// as ElementwiseKernels) over n elements on `device`, with the grid its
// path needs.
template <class Kernels, class Out, class... In, class... A>
void launchOnPath(LoopPath path, int64_t n, int device, A&&... args) {
  constexpr int kTile = kUnroll * kVecOf<Out, In...>;
  switch (path) {
    case LoopPath::kVectorized:
      return launchElements(Kernels::template get<LoopPath::kVectorized>(), n, kTile, device, std::forward<A>(args)...);
    case LoopPath::kUnrolled:
      return launchElements(Kernels::template get<LoopPath::kUnrolled>(), n, kTile, device, std::forward<A>(args)...);
    case LoopPath::kStrided:
      return launchElements(Kernels::template get<LoopPath::kStrided>(), n, 1, device, std::forward<A>(args)...);
  }
}

template <class F, class Out, class... In>
struct ElementwiseKernels {
  template <LoopPath kPath>
  static auto get() {
    return &elementwiseKernel<kPath, F, Out, In...>;
  }
};

// out = f(in...) over the n elements of `walk` on `device`, on the path
// chooseLoopPath picks.
template <class Out, class F, class... In>
void launchElementwise(const OffsetCalculator<1 + sizeof...(In)>& walk, int64_t n, int device, Out* out, const F& f,
                       const Operand<In>&... in) {
  launchOnPath<ElementwiseKernels<F, Out, In...>, Out, In...>(chooseLoopPath(walk, out, in...), n, device, walk, n, out,
                                                              f, in...);
}

}  // namespace bp_gpu
