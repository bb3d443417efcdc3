#pragma once
// A plain reference for the backbone's layers: sparse convolution written as
// loops in double precision over a hash map of sites, from the definition
// (an output site of a regular convolution is active iff some active input
// reaches it; a submanifold convolution's outputs are its inputs). It calls
// no Backplane operator and builds no rulebook, so it shares no kernel (and
// no bug) with what it checks.

#include <cstdint>
#include <vector>

#include "backbone.h"

namespace sparse_lidar {

// Sites and features on the host.
struct HostSparse {
  std::vector<int32_t> indices;  // [N, 4] (batch, z, y, x)
  std::vector<double> features;  // [N, channels]
  int64_t channels = 0;
  Shape3 spatial_shape{};
  int64_t batch_size = 0;

  int64_t numVoxels() const { return static_cast<int64_t>(indices.size() / 4); }
  // A SparseTensor's tensors read back.
  static HostSparse from(const SparseTensor& t);
};

// One layer (convolution, scale, shift, ReLU) on `input`. Output sites come
// in the order sparseConv3d gives them (subm: the input's; regular: sorted by
// (batch, z, y, x)). Features are computed for every `row_step`-th output
// row only (rows 0, row_step, ...; the others are left 0), so that a large
// layer can be spot-checked cheaply; the sites are always all computed.
HostSparse referenceLayer(const SparseConvLayer& layer, const LayerWeights& weights, const HostSparse& input,
                          int64_t row_step = 1);

// How far `actual` is from `expected` (rows [0, row_step, ...] only): the
// largest |difference| over the largest |expected| (or 1 if that is
// smaller), and where. Sites must be equal (same rows in the same order),
// else Error is thrown naming the first row that differs.
struct LayerDifference {
  double max_rel = 0;  // +infinity on a NaN or an infinity
  int64_t row = -1, channel = -1;
};
LayerDifference compareLayer(const HostSparse& actual, const HostSparse& expected, int64_t row_step = 1);

// Note [Backbone tolerance]
// Features are float32: each output sums up to 27 * Cin (1728) products,
// and the twelve layers compound their rounding; a device's GEMMs may sum in
// another order than the CPU's. Differences relative to the layer's largest
// feature stay near 1e-6 (float32 against double, or two devices); 1e-4
// leaves room and is still far below a real error (one wrong weight, a missed
// or extra pair: 1e-2 and up).
inline constexpr double kFeatureTolerance = 1e-4;

}  // namespace sparse_lidar
