#pragma once
// Matrix products on cuBLAS for the CUDA plugin (compiled only in the CUDA
// build, BP_GPU_CUDA); plugins/gpu/linalg.cu decides which products come
// here (Note [cuBLAS products] in cublas_gemm.cu).
#include <algorithm>
#include <cstdint>

#include "gpu/gemm.cuh"

namespace bp_gpu {

// Whether cuBLAS computes products in `dtype`: float32, float16, bfloat16,
// float64 (not the integers).
bool cublasTakes(bp::ScalarType dtype);

// Whether the matrices of `m` are in a layout BLAS takes as is: row-major
// (sc == 1, sr >= cols) or column-major (sr == 1, sc >= rows). Size-1 dims get the stride that makes them so (their
// stride is never used), which is why `m` is updated.
inline bool blasLayout(MatrixView& m) {
  if (m.rows == 1) m.sr = m.sc == 1 ? m.cols : 1;
  if (m.cols == 1) m.sc = m.sr == 1 ? m.rows : 1;
  if (m.rows == 1 && m.cols == 1) m.sr = m.sc = 1;
  return (m.sc == 1 && m.sr >= std::max<int64_t>(m.cols, 1)) || (m.sr == 1 && m.sc >= std::max<int64_t>(m.rows, 1));
}

// C = alpha * A @ B (+ beta * C when s.use_beta) on `device`'s current
// stream, for cublasTakes(dtype), all three views in blasLayout(), K > 0.
// allow_tf32: float32 may run on TF32 tensor cores (Note [TF32 matrix
// products] in linalg.cu). Returns false, queuing nothing, when a size,
// leading dimension or batch stride exceeds cuBLAS's 32-bit arguments.
// Throws bp::Error on a cuBLAS failure.
bool cublasGemm(MatrixView a, MatrixView b, MatrixView c, bp::ScalarType dtype, const GemmScalars& s, bool allow_tf32,
                int device);

}  // namespace bp_gpu
