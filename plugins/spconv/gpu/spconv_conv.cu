// The sparse-convolution conv kernels on the GPU: spconv::indice_conv and
// spconv::indice_conv_backward.
//
// Note [Sparse convolution kernels on the GPU]
// A convolution is, per kernel offset k, dst[d] += src[s] @ B[k] over the
// offset's pairs (s, d): for the forward, src = features, d = the output
// rows, B[k] = W[k] ([Cin, Cout]); for the input gradient, src = out_grad,
// d = the input rows, B[k] = W[k]^T (transposed once per call into a
// [K, Cout, Cin] copy, so every kernel reads B row-major and coalesced).
// inverse=True swaps the rulebook's rows, nothing else.
//
// No call waits for the device: indice_pair_num stays there. Kernels are
// launched over the rulebook's capacity P for every offset at once (grid x
// = tiles x K) and a block past its offset's count leaves at once. For the
// same reason the GPU does not check the rulebook's contents as the CPU
// kernels do (rows in range, no row twice per offset, the subm centre the
// identity: that needs the host to read the pairs). It trusts them as
// get_indice_pairs builds them, except that a pair whose row falls outside
// the tensors is skipped, so that no kernel touches memory outside them.
// The shape, dtype and device checks are the CPU's (../checks.cc), with the
// same messages.
//
// Two ways to run the sum, both a tiled GEMM of 64 rows x 64 columns per
// 128-thread block (each thread 8 x 4 results, the reduction dimension
// walked 16 at a time through shared memory, where the operands sit already
// converted to the accumulator type: float, or double for float64):
//
// * Gather-GEMM-scatter (the default for float32 and float64): a block takes
//   64 pairs of one offset and a 64-column tile of Cout, gathers its source
//   rows straight from global memory into the shared tile (no gathered copy
//   of any offset is ever written out), multiplies by the tile of B[k], and
//   atomicAdds its 64 x 64 results into the destination rows. Every FLOP is
//   a real pair's. The order in which offsets reach a row is the device's,
//   so results may differ in the last bits from run to run: this is what
//   the deterministic mode (Note [Deterministic mode] in runtime.h) turns
//   off.
// * Output stationary (deterministic mode, and always for float16 and
//   bfloat16, whose atomicAdd is not portable): the rulebook is first turned
//   into the offset map [K, num_dst] (Note [Offset maps]); a block owns 64
//   destination rows x 64 columns, walks the offsets k = 0 .. K-1 in order,
//   gathers the sources the map names (zeros where it has none; a (tile,
//   offset) the map leaves empty is skipped as a whole), and writes each
//   result once, rounded once from its float accumulator. No atomics, a
//   fixed order: the same bits every run. It pays for the map and for the
//   rows of a tile that an offset does not reach.
//
// With subm=True the centre offset pairs every site with itself, so it is
// one dense product through the dispatcher's bp::mm.out on this device
// (cuBLAS on CUDA, the plugin's tiled GEMM on HIP and the simulator), which
// writes the destination first; the sparse kernels then skip the centre
// (output stationary: starting from the centre's result, so the order is
// the CPU's, centre first). float16 and bfloat16 keep the centre inside the
// output-stationary kernel instead, so that each result is rounded to 16
// bits once, not twice. Without subm the gather-GEMM-scatter destination is
// zeroed first.
//
// filters_grad[k] = sum over the pairs of offset k of src[s]^T out_grad[d]:
// the reduction runs over pairs, so the pairs are split into chunks; a block
// per (chunk, offset, 64 x 64 tile of [Cin, Cout]) sums its chunk in pair
// order into a float (double) partial, and a second kernel adds each
// element's partials in chunk order and rounds once. Deterministic in both
// modes and without atomics. The split aims at ~1024 blocks with chunks of
// at least 256 pairs, so the partials take at most 16 MiB (32 for float64)
// or, when the offsets and tiles alone make that many blocks, one
// accumulator-typed copy of the filters. The subm centre is again one dense
// product, features^T @ out_grad.
//
// The max pooling kernels are deterministic in every mode (spconv_pool.cu,
// Note [Sparse max pooling on the GPU]).
#include <algorithm>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "spconv_device.cuh"
#include "spconv_gpu.h"

namespace bp_spconv_gpu {

namespace {

using bp::ScalarType;
using bp::Tensor;
using bp_gpu::opmath_t;

inline constexpr int kRows = 64;      // rows of a block's tile: pairs, destination rows, or Cin (filters_grad)
inline constexpr int kCols = 64;      // columns: the product's output channels
inline constexpr int kDepth = 16;     // the reduction dimension's step through shared memory
inline constexpr int kThreads = 128;  // 16 (columns) x 8 (rows)
inline constexpr int kMicroRows = 8, kMicroCols = 4;
static_assert(kRows == 8 * kMicroRows && kCols == 16 * kMicroCols && kThreads == 128, "tile layout");
// Thread (tx, ty) = (tid % 16, tid / 16) computes rows ty * 8 + i (i < 8) and
// columns tx + 16 j (j < 4) of the tile: its 8 rows are adjacent in shared
// memory (two 16-byte loads per step, the same for the half-warp), its
// columns interleave with its neighbours' (conflict-free loads, and stores
// and atomics of a warp to 16 adjacent columns of 2 rows).
// The operand tiles are held transposed, [depth][row]; a row of them is
// padded by 4 (16 bytes) so the row loads stay aligned while the transposing
// stores spread over the banks.
inline constexpr int kRowStride = kRows + 4;

// The operands of dst[d] += src[s] @ B[k]: src [num_src, src_cols], B [K,
// src_cols, dst_cols], dst [num_dst, dst_cols], all contiguous.
struct ProductOperands {
  const void* src;
  const void* b;
  void* dst;
  int64_t num_src, num_dst, src_cols, dst_cols;
};

// One 16-deep step of a tile's product: acc[i][j] += xs[c][row i] * bs[c][col j]
// (the layout above).
template <class Acc>
__device__ inline void multiplyStep(const Acc (*xs)[kRowStride], const Acc (*bs)[kCols], int tx, int ty,
                                    Acc (&acc)[kMicroRows][kMicroCols]) {
  BP_GPU_UNROLL
  for (int c = 0; c < kDepth; ++c) {
    Acc fx[kMicroRows], fb[kMicroCols];
    BP_GPU_UNROLL
    for (int i = 0; i < kMicroRows; ++i) fx[i] = xs[c][ty * kMicroRows + i];
    BP_GPU_UNROLL
    for (int j = 0; j < kMicroCols; ++j) fb[j] = bs[c][tx + 16 * j];
    BP_GPU_UNROLL
    for (int i = 0; i < kMicroRows; ++i) {
      BP_GPU_UNROLL
      for (int j = 0; j < kMicroCols; ++j) acc[i][j] += fx[i] * fb[j];
    }
  }
}

// Loads the step at column c0 of the reduction: xs[c][r] = src[rows[r], c0 +
// c] (0 for a row of -1 or past src_cols), bs[c][n] = b[c0 + c, col0 + n].
// Consecutive threads read consecutive columns of a row: coalesced.
template <class T, class Acc>
__device__ inline void loadStep(const ProductOperands& o, const int32_t* rows, const T* bk, int64_t c0, int64_t col0,
                                int tid, Acc (*xs)[kRowStride], Acc (*bs)[kCols]) {
  const T* src = static_cast<const T*>(o.src);
  for (int e = tid; e < kRows * kDepth; e += kThreads) {
    const int r = e / kDepth, c = e % kDepth;
    const int64_t s = rows[r], col = c0 + c;
    xs[c][r] = s >= 0 && col < o.src_cols ? static_cast<Acc>(bp_gpu::load(src[s * o.src_cols + col])) : Acc(0);
  }
  for (int e = tid; e < kDepth * kCols; e += kThreads) {
    const int c = e / kCols, n = e % kCols;
    const int64_t row = c0 + c, col = col0 + n;
    bs[c][n] =
        row < o.src_cols && col < o.dst_cols ? static_cast<Acc>(bp_gpu::load(bk[row * o.dst_cols + col])) : Acc(0);
  }
}

// Gather-GEMM-scatter (Note [Sparse convolution kernels on the GPU]): grid
// x = pair tiles x K, y = column tiles; float and double only (atomicAdd).
template <class T>
__global__ void gatherGemmScatterKernel(ProductOperands o, DeviceRulebook rb, int src_row, int64_t tiles,
                                        int64_t skip_k) {
  using Acc = opmath_t<T>;
  __shared__ __align__(16) Acc xs[kDepth][kRowStride];
  __shared__ __align__(16) Acc bs[kDepth][kCols];
  __shared__ int32_t src_rows[kRows];
  __shared__ int32_t dst_rows[kRows];
  const int64_t k = blockIdx.x / tiles;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x % tiles) * kRows;
  const int64_t n = rb.count(k);
  if (k == skip_k || j0 >= n) return;  // the whole block leaves
  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kCols;
  if (tid < kRows) {
    int32_t s = -1, d = -1;
    if (j0 + tid < n) {
      s = rb.row(k, src_row)[j0 + tid];
      d = rb.row(k, 1 - src_row)[j0 + tid];
      if (!rb.pairInRange(k, j0 + tid, src_row, s, d, o.num_src, o.num_dst)) s = d = -1;  // recorded, skipped
    }
    src_rows[tid] = s;
    dst_rows[tid] = d;
  }
  __syncthreads();
  Acc acc[kMicroRows][kMicroCols];
  for (int i = 0; i < kMicroRows; ++i)
    for (int j = 0; j < kMicroCols; ++j) acc[i][j] = Acc(0);
  const T* bk = static_cast<const T*>(o.b) + k * o.src_cols * o.dst_cols;
  for (int64_t c0 = 0; c0 < o.src_cols; c0 += kDepth) {
    loadStep<T, Acc>(o, src_rows, bk, c0, col0, tid, xs, bs);
    __syncthreads();
    multiplyStep<Acc>(xs, bs, tx, ty, acc);
    __syncthreads();
  }
  T* dst = static_cast<T*>(o.dst);
  for (int i = 0; i < kMicroRows; ++i) {
    const int64_t d = dst_rows[ty * kMicroRows + i];
    if (d < 0) continue;
    for (int j = 0; j < kMicroCols; ++j) {
      const int64_t col = col0 + tx + 16 * j;
      if (col < o.dst_cols) atomicAdd(&dst[d * o.dst_cols + col], acc[i][j]);
    }
  }
}

// Output stationary (Note [Sparse convolution kernels on the GPU]): grid x =
// destination row tiles, y = column tiles; map is [K, num_dst]. With
// `accumulate` the sums start from dst (the subm centre's product).
template <class T>
__global__ void outputStationaryKernel(ProductOperands o, const int32_t* map, int64_t K, int64_t skip_k,
                                       bool accumulate) {
  using Acc = opmath_t<T>;
  __shared__ __align__(16) Acc xs[kDepth][kRowStride];
  __shared__ __align__(16) Acc bs[kDepth][kCols];
  __shared__ int32_t src_rows[kRows];
  __shared__ int live;  // whether some row of the tile has a source at this offset
  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows, col0 = static_cast<int64_t>(blockIdx.y) * kCols;
  T* dst = static_cast<T*>(o.dst);
  Acc acc[kMicroRows][kMicroCols];
  for (int i = 0; i < kMicroRows; ++i) {
    const int64_t d = row0 + ty * kMicroRows + i;
    for (int j = 0; j < kMicroCols; ++j) {
      const int64_t col = col0 + tx + 16 * j;
      acc[i][j] = accumulate && d < o.num_dst && col < o.dst_cols
                      ? static_cast<Acc>(bp_gpu::load(dst[d * o.dst_cols + col]))
                      : Acc(0);
    }
  }
  for (int64_t k = 0; k < K; ++k) {
    if (k == skip_k) continue;
    if (tid < kRows) src_rows[tid] = row0 + tid < o.num_dst ? map[k * o.num_dst + row0 + tid] : -1;
    if (tid == 0) live = 0;
    __syncthreads();
    if (tid < kRows && src_rows[tid] >= 0) live = 1;
    __syncthreads();
    if (live == 0) {  // the same value for every thread: nothing changes it before the next barrier
      __syncthreads();
      continue;
    }
    const T* bk = static_cast<const T*>(o.b) + k * o.src_cols * o.dst_cols;
    for (int64_t c0 = 0; c0 < o.src_cols; c0 += kDepth) {
      loadStep<T, Acc>(o, src_rows, bk, c0, col0, tid, xs, bs);
      __syncthreads();
      multiplyStep<Acc>(xs, bs, tx, ty, acc);
      __syncthreads();
    }
    __syncthreads();  // (src_cols == 0: no step's barrier ends the offset)
  }
  for (int i = 0; i < kMicroRows; ++i) {
    const int64_t d = row0 + ty * kMicroRows + i;
    if (d >= o.num_dst) continue;
    for (int j = 0; j < kMicroCols; ++j) {
      const int64_t col = col0 + tx + 16 * j;
      if (col < o.dst_cols) dst[d * o.dst_cols + col] = bp_gpu::store<T>(acc[i][j]);
    }
  }
}

// The operands of filters_grad[k] = sum over pairs of x[in]^T g[out]:
// x [num_in, cin], g [num_out, cout], partial [splits, K, cin, cout].
struct FilterGradOperands {
  const void* x;
  const void* g;
  void* partial;
  int64_t num_in, num_out, cin, cout;
};

// One chunk of one offset's pairs, one 64 x 64 tile of [Cin, Cout]: grid x =
// splits x K, y = Cin tiles x Cout tiles.
template <class T>
__global__ void filterGradKernel(FilterGradOperands o, DeviceRulebook rb, int in_row, int64_t splits, int64_t chunk,
                                 int64_t cout_tiles, int64_t skip_k) {
  using Acc = opmath_t<T>;
  __shared__ __align__(16) Acc xs[kDepth][kRowStride];  // [pair][ci]
  __shared__ __align__(16) Acc gs[kDepth][kCols];       // [pair][co]
  const int64_t k = blockIdx.x / splits, split = blockIdx.x % splits;
  const int64_t begin = split * chunk, count = rb.count(k), end = begin + chunk < count ? begin + chunk : count;
  if (k == skip_k || begin >= end) return;  // the whole block leaves (its partial is never read)
  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;
  const int64_t ci0 = static_cast<int64_t>(blockIdx.y) / cout_tiles * kRows;
  const int64_t co0 = static_cast<int64_t>(blockIdx.y) % cout_tiles * kCols;
  const int32_t *ins = rb.row(k, in_row), *outs = rb.row(k, 1 - in_row);
  const T* x = static_cast<const T*>(o.x);
  const T* g = static_cast<const T*>(o.g);
  Acc acc[kMicroRows][kMicroCols];
  for (int i = 0; i < kMicroRows; ++i)
    for (int j = 0; j < kMicroCols; ++j) acc[i][j] = Acc(0);
  for (int64_t j0 = begin; j0 < end; j0 += kDepth) {
    // Consecutive threads read consecutive channels of one pair's row.
    for (int e = tid; e < kDepth * kRows; e += kThreads) {
      const int p = e / kRows, c = e % kRows;
      const int64_t j = j0 + p, ci = ci0 + c;
      int64_t i = -1, d = -1;
      if (j < end) {
        i = ins[j];
        d = outs[j];
      }
      const bool valid = j < end && rb.pairInRange(k, j, in_row, i, d, o.num_in, o.num_out);
      xs[p][c] = valid && ci < o.cin ? static_cast<Acc>(bp_gpu::load(x[i * o.cin + ci])) : Acc(0);
    }
    for (int e = tid; e < kDepth * kCols; e += kThreads) {
      const int p = e / kCols, c = e % kCols;
      const int64_t j = j0 + p, co = co0 + c;
      int64_t i = -1, d = -1;
      if (j < end) {
        i = ins[j];
        d = outs[j];
      }
      const bool valid = j < end && rb.pairInRange(k, j, in_row, i, d, o.num_in, o.num_out);
      gs[p][c] = valid && co < o.cout ? static_cast<Acc>(bp_gpu::load(g[d * o.cout + co])) : Acc(0);
    }
    __syncthreads();
    multiplyStep<Acc>(xs, gs, tx, ty, acc);
    __syncthreads();
  }
  Acc* partial = static_cast<Acc*>(o.partial) + (split * rb.K + k) * o.cin * o.cout;
  for (int i = 0; i < kMicroRows; ++i) {
    const int64_t ci = ci0 + ty * kMicroRows + i;
    if (ci >= o.cin) continue;
    for (int j = 0; j < kMicroCols; ++j) {
      const int64_t co = co0 + tx + 16 * j;
      if (co < o.cout) partial[ci * o.cout + co] = acc[i][j];
    }
  }
}

// filters_grad[e] = the partials of element e (= (k Cin + ci) Cout + co)
// summed in chunk order over the chunks offset k has; the skipped offset is
// left alone.
template <class T>
__global__ void filterGradReduceKernel(const opmath_t<T>* partial, DeviceRulebook rb, int64_t chunk, int64_t wsize,
                                       int64_t skip_k, T* filters_grad) {
  using Acc = opmath_t<T>;
  const int64_t total = rb.K * wsize;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = e / wsize;
    if (k == skip_k) continue;
    const int64_t used = (rb.count(k) + chunk - 1) / chunk;
    Acc sum = Acc(0);
    for (int64_t s = 0; s < used; ++s) sum += partial[s * total + e];
    filters_grad[e] = bp_gpu::store<T>(sum);
  }
}

const bp::Operator& mmOut() {
  static const bp::Operator op = bp::Operator::find("bp::mm.out");
  return op;
}

// A tile count as a grid dimension y (65535 at most on CUDA).
unsigned gridY(const char* op, int64_t tiles) {
  BP_PLUGIN_CHECK(tiles <= 65535, op, ": ", tiles * kCols, " channels are more than the ", BP_GPU_NAME,
                  " kernels take (", 65535 * kCols, ")");
  return static_cast<unsigned>(tiles);
}

// dst (num_dst x dst_cols, on the call's device) = the sparse product of
// Note [Sparse convolution kernels on the GPU]; with subm, `centre` writes
// the centre offset's dense product into dst.
template <class Centre>
void sparseProduct(const char* op, const CallContext& call, ScalarType dtype, const ProductOperands& o,
                   const DeviceRulebook& rb, int src_row, bool subm, Centre&& centre) {
  const bool reduced = dtype == ScalarType::Float16 || dtype == ScalarType::BFloat16;
  const bool centre_gemm = subm && !reduced;
  const int64_t skip_k = centre_gemm ? rb.K / 2 : -1;
  if (centre_gemm) centre();
  const unsigned col_tiles = gridY(op, (o.dst_cols + kCols - 1) / kCols);
  if (!reduced && !bp_gpu::deterministic()) {
    if (!centre_gemm) {
      bp_gpu::check(
          gpuMemsetAsync(o.dst, 0, static_cast<size_t>(o.num_dst * o.dst_cols) * bp::elementSize(dtype), call.stream),
          op);
    }
    const int64_t tiles = (rb.P + kRows - 1) / kRows;
    visitFloat(dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!bp_gpu::kIsReduced<T>) {
        bp_gpu::launch(&gatherGemmScatterKernel<T>, dim3(gridX(op, tiles * rb.K, kThreads), col_tiles), dim3(kThreads),
                       0, call.stream, o, rb, src_row, tiles, skip_k);
      }
    });
    return;
  }
  const Tensor map = offsetMap(op, call, rb, src_row, o.num_src, o.num_dst);
  const int64_t tiles = (o.num_dst + kRows - 1) / kRows;
  visitFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    bp_gpu::launch(&outputStationaryKernel<T>, dim3(gridX(op, tiles, kThreads), col_tiles), dim3(kThreads), 0,
                   call.stream, o, map.numel() == 0 ? nullptr : map.device_ptr<const int32_t>(), rb.K, skip_k,
                   centre_gemm);
  });
}

// W[k] of contiguous filters as [Cin, Cout], or transposed as [Cout, Cin].
Tensor weightOf(const Tensor& w, int64_t k, int64_t cin, int64_t cout, bool transposed) {
  const int64_t offset = w.storage_offset() + k * cin * cout;
  if (transposed) return w.as_strided({cout, cin}, {1, cout}, offset);
  return w.as_strided({cin, cout}, {cout, 1}, offset);
}

Tensor indiceConv(const Tensor& features, const Tensor& filters, const Tensor& indice_pairs,
                  const Tensor& indice_pair_num, int64_t num_out, bool inverse, bool subm) {
  constexpr const char* op = "spconv::indice_conv";
  const bp_spconv::ConvShape s =
      bp_spconv::checkConv(op, features, filters, indice_pairs, indice_pair_num, num_out, subm);
  const CallContext call(bp_gpu::callDevice(op, features, "features"));
  checkFloat(op, features, "features");
  Tensor out = Tensor::empty({s.num_out, s.cout}, features.dtype(), call.device);
  if (out.numel() == 0) return out;
  Tensor pairs, counts;
  const DeviceRulebook rb = deviceRulebook(kIndiceConvSites, call.device, indice_pairs, indice_pair_num, pairs, counts);
  const Tensor x = bp_spconv::contiguous(features), w = bp_spconv::contiguous(filters);
  const ProductOperands o{x.data_ptr(), w.data_ptr(), out.data_ptr(), s.num_in, s.num_out, s.cin, s.cout};
  sparseProduct(op, call, features.dtype(), o, rb, inverse ? 1 : 0, subm,
                [&] { mmOut().call(x, weightOf(w, rb.K / 2, s.cin, s.cout, false), out); });
  return out;
}

// filters_grad (contiguous, [K, Cin, Cout] elements) from the pairs
// (Note [Sparse convolution kernels on the GPU]).
void filtersGradient(const char* op, const CallContext& call, const bp_spconv::ConvShape& s, const Tensor& x,
                     const Tensor& g, const DeviceRulebook& rb, int in_row, bool subm, const Tensor& filters_grad) {
  const int64_t cin_tiles = (s.cin + kRows - 1) / kRows, cout_tiles = (s.cout + kCols - 1) / kCols;
  const int64_t tile_blocks = cin_tiles * cout_tiles;
  BP_PLUGIN_CHECK(tile_blocks <= 65535, op, ": filters of ", s.cin, " x ", s.cout, " channels are more than the ",
                  BP_GPU_NAME, " kernels take");
  // Chunks of at least 256 pairs, as many as bring the launch to ~1024 blocks.
  constexpr int64_t kTargetBlocks = 1024, kMinChunk = 256;
  const int64_t max_splits = std::max<int64_t>(1, (rb.P + kMinChunk - 1) / kMinChunk);
  const int64_t splits = std::clamp<int64_t>(kTargetBlocks / (rb.K * tile_blocks), 1, max_splits);
  const int64_t chunk = std::max<int64_t>(kDepth, ((rb.P + splits - 1) / splits + kDepth - 1) / kDepth * kDepth);
  const int64_t skip_k = subm ? rb.K / 2 : -1;
  const int64_t wsize = s.cin * s.cout;
  visitFloat(filters_grad.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    const ScalarType acc_type = std::is_same_v<Acc, double> ? ScalarType::Float64 : ScalarType::Float32;
    const Tensor partial = Tensor::empty({splits, rb.K, s.cin, s.cout}, acc_type, call.device);
    const FilterGradOperands o{x.data_ptr(), g.data_ptr(), partial.data_ptr(), s.num_in, s.num_out, s.cin, s.cout};
    bp_gpu::launch(&filterGradKernel<T>, dim3(gridX(op, splits * rb.K, kThreads), static_cast<unsigned>(tile_blocks)),
                   dim3(kThreads), 0, call.stream, o, rb, in_row, splits, chunk, cout_tiles, skip_k);
    const int64_t blocks = std::min<int64_t>((rb.K * wsize + kMapThreads - 1) / kMapThreads, int64_t{1} << 20);
    bp_gpu::launch(&filterGradReduceKernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(kMapThreads), 0, call.stream,
                   static_cast<const Acc*>(partial.data_ptr()), rb, chunk, wsize, skip_k,
                   static_cast<T*>(filters_grad.data_ptr()));
  });
  if (subm) {  // the centre: features^T @ out_grad, one dense product
    const Tensor xt = x.as_strided({s.cin, s.num_in}, {1, s.cin}, x.storage_offset());
    const int64_t centre = rb.K / 2;
    mmOut().call(xt, g, filters_grad.as_strided({s.cin, s.cout}, {s.cout, 1}, centre * wsize));
  }
}

std::tuple<Tensor, Tensor> indiceConvBackward(const Tensor& features, const Tensor& filters, const Tensor& out_grad,
                                              const Tensor& indice_pairs, const Tensor& indice_pair_num, bool inverse,
                                              bool subm) {
  constexpr const char* op = "spconv::indice_conv_backward";
  BP_PLUGIN_CHECK(out_grad.defined() && out_grad.dim() == 2, op, ": out_grad must have shape [num_out, Cout]");
  const bp_spconv::ConvShape s =
      bp_spconv::checkConv(op, features, filters, indice_pairs, indice_pair_num, out_grad.size(0), subm);
  const CallContext call(bp_gpu::callDevice(op, features, "features"));
  checkFloat(op, features, "features");
  BP_PLUGIN_CHECK(out_grad.size(1) == s.cout && out_grad.dtype() == features.dtype(), op, ": out_grad must be ",
                  features.dtype(), " [num_out, ", s.cout, "] (Cout of the filters), got ", out_grad.dtype(), " ",
                  out_grad.sizes());
  checkOnCallDevice(op, out_grad, "out_grad", call.device);
  Tensor input_grad = Tensor::empty({s.num_in, s.cin}, features.dtype(), call.device);
  Tensor filters_grad = Tensor::empty(filters.sizes(), filters.dtype(), call.device);
  Tensor pairs, counts;
  const DeviceRulebook rb =
      deviceRulebook(kIndiceConvBackwardSites, call.device, indice_pairs, indice_pair_num, pairs, counts);
  const Tensor x = bp_spconv::contiguous(features), w = bp_spconv::contiguous(filters),
               g = bp_spconv::contiguous(out_grad);
  const int in_row = inverse ? 1 : 0;
  if (input_grad.numel() > 0) {
    // W^T per offset, [K, Cout, Cin], so the kernels read it row-major.
    const Tensor wt = Tensor::empty({rb.K, s.cout, s.cin}, w.dtype(), call.device);
    bp_gpu::copyCast(op, wt, w.as_strided({rb.K, s.cout, s.cin}, {s.cin * s.cout, 1, s.cout}, w.storage_offset()));
    const ProductOperands o{g.data_ptr(), wt.data_ptr(), input_grad.data_ptr(), s.num_out, s.num_in, s.cout, s.cin};
    sparseProduct(op, call, features.dtype(), o, rb, 1 - in_row, subm,
                  [&] { mmOut().call(g, weightOf(w, rb.K / 2, s.cin, s.cout, true), input_grad); });
  }
  if (filters_grad.numel() > 0) filtersGradient(op, call, s, x, g, rb, in_row, subm, filters_grad);
  return {std::move(input_grad), std::move(filters_grad)};
}

}  // namespace

void registerConvKernels(bp::Library& m, int32_t type) {
  registerKernel(m, "spconv::indice_conv", type, bp::kernel<&indiceConv>());
  registerKernel(m, "spconv::indice_conv_backward", type, bp::kernel<&indiceConvBackward>());
}

}  // namespace bp_spconv_gpu
