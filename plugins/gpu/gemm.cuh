#pragma once
// Note [Tiled GEMM]
// Our own matrix product kernel, C[b] = alpha * A[b] @ B[b] (+ beta * C[b]),
// for every dtype the matrix products take. The HIP plugin and the
// simulator run every product on it; the CUDA plugin runs the products
// cuBLAS does not take (integers) and those whose result is not in a BLAS
// layout (plugins/cuda/cublas_gemm.h).
//   * Operands are batches of strided matrices (MatrixView): element
//     (b, r, c) at b * sb + r * sr + c * sc, so transposed views, slices and a
//     broadcast batch (sb == 0) need no copies.
//   * A block computes a kTileM x kTileN tile of C with kGemmThreads threads,
//     each a 4 x 4 micro-tile; the K dimension is walked in steps of kTileK
//     through shared memory, where the operands are held already converted
//     to the accumulator type. Edges (sizes that are not multiples of the
//     tile) read zeros, so K == 0 gives C = beta * C.
//   * Accumulation: float for float16/bfloat16/float32, double for float64,
//     uint64 for integers (wrapping; the low bits are PyTorch's wrapping int
//     arithmetic), rounded once when stored.
//   * beta == 0 (use_beta false) never reads C, so NaN in it does not
//     propagate (as PyTorch).
//   * Grid: x walks the C tiles (2^31 - 1 blocks), y the batch in a
//     grid-stride loop (65535 at most in y on CUDA).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "dtypes.cuh"
#include "runtime.h"

namespace bp_gpu {

// A batch of strided matrices; strides in elements. batch == 1 matrices
// take sb == 0 (broadcast against a larger batch).
struct MatrixView {
  void* data;
  int64_t batch, rows, cols;
  int64_t sb, sr, sc;
};

// One operand of a product: the tensor whose memory the view reads (kept
// alive) and the view.
struct GemmOperand {
  bp::Tensor tensor;
  MatrixView view;
};

// C = alpha * A @ B (+ beta * C when use_beta) in `dtype`, queued on
// `device`'s current stream: cuBLAS where the CUDA plugin can use it, our
// tiled kernel otherwise (linalg.cu). The views must describe memory of that
// device; C must not overlap A or B. mm, bmm, addmm, linear and conv2d
// (conv_pool.cu) run on it.
void gemm(const char* op, const GemmOperand& a, const GemmOperand& b, const MatrixView& c, ScalarType dtype,
          const bp::Scalar& alpha, const bp::Scalar& beta, bool use_beta, int device);

// alpha and beta of a product: as double for the floating dtypes, as int64
// for the integral ones (the host's rule has required integers there).
struct GemmScalars {
  double alpha, beta;
  int64_t alpha_int, beta_int;
  bool use_beta;  // false: C = alpha * A @ B, C is not read
};

inline constexpr int kTileM = 64, kTileN = 64, kTileK = 16;
inline constexpr int kGemmThreads = 256;  // 16 x 16 threads, 4 x 4 outputs each
inline constexpr int kMicro = 4;
static_assert(kTileM == 16 * kMicro && kTileN == 16 * kMicro && kGemmThreads == 256, "tile layout");

template <class T>
using gemm_acc_t = std::conditional_t<kIsFloating<T>, opmath_t<T>, uint64_t>;

template <class T>
__global__ void gemmTiledKernel(MatrixView a, MatrixView b, MatrixView c, GemmScalars s) {
  using Acc = gemm_acc_t<T>;
  __shared__ Acc tile_a[kTileK][kTileM];
  __shared__ Acc tile_b[kTileK][kTileN];
  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;
  const int64_t M = c.rows, N = c.cols, K = a.cols;
  const int64_t tiles_n = (N + kTileN - 1) / kTileN;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) / tiles_n * kTileM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) % tiles_n * kTileN;
  Acc alpha, beta;
  if constexpr (kIsFloating<T>) {
    alpha = static_cast<Acc>(s.alpha);
    beta = static_cast<Acc>(s.beta);
  } else {
    alpha = static_cast<Acc>(s.alpha_int);
    beta = static_cast<Acc>(s.beta_int);
  }
  for (int64_t batch = blockIdx.y; batch < c.batch; batch += gridDim.y) {
    const T* pa = static_cast<const T*>(a.data) + batch * a.sb;
    const T* pb = static_cast<const T*>(b.data) + batch * b.sb;
    T* pc = static_cast<T*>(c.data) + batch * c.sb;
    Acc acc[kMicro][kMicro];
    for (int i = 0; i < kMicro; ++i)
      for (int j = 0; j < kMicro; ++j) acc[i][j] = Acc(0);
    for (int64_t k0 = 0; k0 < K; k0 += kTileK) {
      // Consecutive threads read consecutive k of A and n of B: coalesced
      // for row-major operands.
      for (int e = tid; e < kTileM * kTileK; e += kGemmThreads) {
        const int r = e / kTileK, k = e % kTileK;
        const int64_t gr = row0 + r, gk = k0 + k;
        tile_a[k][r] = gr < M && gk < K ? static_cast<Acc>(load(pa[gr * a.sr + gk * a.sc])) : Acc(0);
      }
      for (int e = tid; e < kTileK * kTileN; e += kGemmThreads) {
        const int k = e / kTileN, n = e % kTileN;
        const int64_t gk = k0 + k, gn = col0 + n;
        tile_b[k][n] = gk < K && gn < N ? static_cast<Acc>(load(pb[gk * b.sr + gn * b.sc])) : Acc(0);
      }
      __syncthreads();
      for (int k = 0; k < kTileK; ++k) {
        Acc fa[kMicro], fb[kMicro];
        for (int i = 0; i < kMicro; ++i) fa[i] = tile_a[k][ty + 16 * i];
        for (int j = 0; j < kMicro; ++j) fb[j] = tile_b[k][tx + 16 * j];
        for (int i = 0; i < kMicro; ++i)
          for (int j = 0; j < kMicro; ++j) acc[i][j] += fa[i] * fb[j];
      }
      __syncthreads();
    }
    for (int i = 0; i < kMicro; ++i) {
      const int64_t r = row0 + ty + 16 * i;
      if (r >= M) continue;
      for (int j = 0; j < kMicro; ++j) {
        const int64_t n = col0 + tx + 16 * j;
        if (n >= N) continue;
        T& out = pc[r * c.sr + n * c.sc];
        Acc v = alpha * acc[i][j];
        if (s.use_beta) v += beta * static_cast<Acc>(load(out));
        out = store<T>(v);
      }
    }
  }
}

// Queues the product on `device`'s current stream. The views must describe
// memory of that device; C must not overlap A or B (the host's rule).
template <class T>
void gemmTiled(const MatrixView& a, const MatrixView& b, const MatrixView& c, const GemmScalars& s, int device) {
  if (c.batch == 0 || c.rows == 0 || c.cols == 0) return;
  const int64_t tiles = (c.rows + kTileM - 1) / kTileM * ((c.cols + kTileN - 1) / kTileN);
  BP_PLUGIN_CHECK(tiles <= INT32_MAX, "matrix product of ", c.rows, " x ", c.cols, " is too large for one launch on ",
                  BP_GPU_NAME);
  DeviceGuard guard(device);
  launch(&gemmTiledKernel<T>,
         dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(std::min<int64_t>(c.batch, 65535))),
         dim3(kGemmThreads), 0, currentStream(device), a, b, c, s);
}

}  // namespace bp_gpu
