#pragma once
// A small application layer over the sparse-convolution plugin's ops
// (plugins/spconv: spconv::get_indice_pairs, spconv::indice_conv), in the
// shape spconv's Python API has: a SparseTensor, and convolutions that build
// their rulebook once per indice_key and reuse it.
//
//   SparseTensor x = SparseTensor::fromScan(syntheticKittiScan(seed), dev);
//   RulebookCache rulebooks;
//   SparseTensor y = sparseConv3d(x, filters, {.kernel = {3, 3, 3}}, /*subm=*/true, rulebooks, "subm1");
//
// The ops run on the device of the tensors, through the dispatcher: natively
// where the plugin has kernels for it, through the CPU fallback elsewhere.
// The plugin must be loaded (backplane::Runtime loads it from the default
// plugin directory or BACKPLANE_PLUGIN_PATH).

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "backplane/ops/tensor.h"
#include "lidar_synth.h"

namespace sparse_lidar {

using backplane::Device;
using backplane::Tensor;

using Shape3 = std::array<int64_t, 3>;  // (z, y, x), i.e. (D, H, W)

// Active sites of a batch of 3-D grids and their features.
struct SparseTensor {
  Tensor features;         // [N, C] float32
  Tensor indices;          // [N, 4] int32 (batch, z, y, x), on the features' device
  Shape3 spatial_shape{};  // of each batch item's grid
  int64_t batch_size = 0;

  int64_t numVoxels() const { return indices.size(0); }
  // A scan's voxels and features, on `device`.
  static SparseTensor fromScan(const VoxelScan& scan, Device device);
  // The same tensors on `device`.
  SparseTensor to(Device device) const;
};

// Kernel size, stride, padding and dilation of a 3-D convolution, per (z, y, x).
struct ConvGeometry {
  Shape3 kernel = {3, 3, 3};
  Shape3 stride = {1, 1, 1};
  Shape3 padding = {0, 0, 0};
  Shape3 dilation = {1, 1, 1};

  int64_t kernelVolume() const { return kernel[0] * kernel[1] * kernel[2]; }
  // The grid a regular convolution maps `in` to: per dimension
  // (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1, as dense
  // convolution (and spconv) have it. Throws backplane::Error if the kernel
  // does not fit the padded grid.
  Shape3 outputShape(const Shape3& in) const;
  friend bool operator==(const ConvGeometry&, const ConvGeometry&) = default;
};

// Which input row feeds which output row through which kernel offset: what
// spconv::get_indice_pairs returns, with what it was built for.
struct Rulebook {
  Tensor out_indices;  // [M, 4] int32: the output sites (for subm, the input's own)
  Tensor pairs;        // [K, 2, N] int32 (spconv::get_indice_pairs)
  Tensor pair_num;     // [K] int32: the valid pairs of each offset
  Shape3 out_spatial_shape{};
  ConvGeometry geometry;
  bool subm = false;

  int64_t numOut() const { return out_indices.size(0); }
  // Sum of pair_num (read back to the host): the rows each GEMM of the
  // convolution multiplies, summed over offsets.
  int64_t totalPairs() const;
};

// Builds the rulebook of a regular (subm = false) or submanifold convolution
// over `input`'s sites.
Rulebook buildRulebook(const SparseTensor& input, const ConvGeometry& geometry, bool subm);

// Rulebooks by spconv's indice_key. Note [Rulebook sharing]: in a backbone,
// consecutive submanifold convolutions on one set of sites have the same
// rulebook, so spconv lets layers name a key and builds it once per forward
// pass; a strided convolution's key is also what its inverse reuses. Keys are
// the caller's promise that the sites are the same: start a new cache (or
// clear()) for a new input.
class RulebookCache {
 public:
  // The rulebook stored under `key`, or nullptr.
  const Rulebook* find(std::string_view key) const;
  // Stores `rulebook` under `key` (which must be new) and returns it.
  const Rulebook& insert(std::string_view key, Rulebook rulebook);
  size_t size() const { return rulebooks_.size(); }
  void clear() { rulebooks_.clear(); }

 private:
  std::map<std::string, Rulebook, std::less<>> rulebooks_;
};

// The rulebook stored in `cache` under `indice_key` (non-empty) if there is
// one: it must have been built with the same geometry and subm, over as many
// sites as `input` has, or Error is thrown. Otherwise builds it, stores it
// and returns it.
const Rulebook& rulebookFor(const SparseTensor& input, const ConvGeometry& geometry, bool subm, RulebookCache& cache,
                            std::string_view indice_key);

// `input` convolved through `rulebook` (built over input's sites) with
// filters [kD, kH, kW, Cin, Cout] float32 on input's device, without bias:
// features [rulebook.numOut(), Cout] at rulebook.out_indices.
SparseTensor applyConv(const SparseTensor& input, const Tensor& filters, const Rulebook& rulebook);

// A sparse 3-D convolution without bias, as spconv's SparseConv3d (subm =
// false: outputs at every site some input reaches, in (batch, z, y, x)
// order) and SubMConv3d (subm = true: outputs at the input's sites, in its
// order; odd kernel sizes, centred): applyConv through rulebookFor.
SparseTensor sparseConv3d(const SparseTensor& input, const Tensor& filters, const ConvGeometry& geometry, bool subm,
                          RulebookCache& cache, std::string_view indice_key);

}  // namespace sparse_lidar
