#pragma once
// Vectorised softmax and log_softmax of float32 rows, and the exp they use
// (Note [Softmax kernels] in softmax_rows.cc).

#include <cstdint>

namespace bp_cpu {

// Softmax (with `log`: log_softmax) of the n contiguous floats at x into the
// n contiguous floats at y; y may be x.
void softmaxRow(bool log, const float* x, float* y, int64_t n);

// The same for w <= kSoftmaxColumns rows side by side: element j of row c
// is x[j * xs + c] and goes to y[j * ys + c]; y may be x (with ys == xs).
inline constexpr int64_t kSoftmaxColumns = 16;
void softmaxColumns(bool log, const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t w);

// exp of n floats (x may be y): within 1 ulp of exp's float64 value rounded
// to float32, subnormal results included; exp(0) is exactly 1.
void expFloats(const float* x, float* y, int64_t n);

}  // namespace bp_cpu
