#pragma once
// A plain reference for encoderLayer: the same layer as loops in double
// precision over the same weights, read back with Tensor::toVector. It calls
// no Backplane operator, so it shares no kernel (and no bug) with what it
// checks. Masking is written differently on purpose: padded keys are skipped
// rather than filled with kMaskedScore.

#include <cstdint>
#include <vector>

#include "encoder.h"
#include "sample_app.h"

namespace encoder {

// The layer's output for sequences [0, num_sequences) of `batch` (each
// sequence is independent of the others), row-major [num_sequences, seq,
// hidden]. Throws backplane::Error if num_sequences is out of range.
std::vector<double> referenceEncoderLayer(const EncoderWeights& weights, const EncoderBatch& batch,
                                          int64_t num_sequences);

// Note [Encoder tolerance]
// Outputs leave a final layer_norm, so they are of order 1, and one
// absolute tolerance fits all of them. The layer is computed in float32: each
// matmul sums K = hidden (768) or ffn (3072) products, each op rounds its
// result, and a device's kernels may sum in another order than the CPU's
// (blocked GEMMs, tree reductions in softmax and layer_norm), so two correct
// float32 runs differ by about 1e-6 here, and float32 against double by
// a few 1e-6 (BERT-base: 4e-6). 1e-4 leaves room for that and for larger
// configs, and is still far below what a real error does (in encoder_test.cc
// one weight changed by 0.1 moves an output by 4e-2).
inline constexpr double kOutputTolerance = 1e-4;
// With TF32 matrix products (Note [TF32 matrix products] in
// plugins/gpu/linalg.cu: BACKPLANE_CUDA_ALLOW_TF32=1) every GEMM input is
// rounded to 10 mantissa bits, a relative error of up to 2^-11 (4.9e-4) per
// operand instead of float32's 6e-8. Over the layer's chain of six linears
// and two batched products the outputs of order 1 then move by about 1e-3
// (1.4e-3 measured on an H100 for BERT-base); 1e-2 leaves room for other
// configs and is still below what a real error does (4e-2, above).
inline constexpr double kTf32OutputTolerance = 1e-2;

// How results are compared (samples/sample_app/sample_app.h).
using sample::compareResults;
using sample::Difference;

}  // namespace encoder
