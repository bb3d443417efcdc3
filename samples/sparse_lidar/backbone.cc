#include "backbone.h"

#include <cmath>
#include <utility>

#include "backplane/core/error.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/random.h"

namespace sparse_lidar {

using namespace backplane;

std::vector<SparseConvLayer> voxelBackBone8x(int64_t in_channels) {
  BP_CHECK(in_channels > 0, "voxelBackBone8x: in_channels must be positive, got ", in_channels);
  // Submanifold convs: 3x3x3, centred (padding 1 is what a centred kernel
  // means at stride 1).
  auto subm = [](std::string name, int64_t in, int64_t out, std::string key) {
    return SparseConvLayer{std::move(name), in, out, {.padding = {1, 1, 1}}, true, std::move(key)};
  };
  auto down = [](std::string name, int64_t in, int64_t out, Shape3 padding, std::string key) {
    return SparseConvLayer{std::move(name), in, out, {.stride = {2, 2, 2}, .padding = padding}, false, std::move(key)};
  };
  return {
      subm("conv_input", in_channels, 16, "subm1"),
      subm("conv1.0", 16, 16, "subm1"),
      down("conv2.0", 16, 32, {1, 1, 1}, "spconv2"),
      subm("conv2.1", 32, 32, "subm2"),
      subm("conv2.2", 32, 32, "subm2"),
      down("conv3.0", 32, 64, {1, 1, 1}, "spconv3"),
      subm("conv3.1", 64, 64, "subm3"),
      subm("conv3.2", 64, 64, "subm3"),
      // No z padding: 11 planes become 5.
      down("conv4.0", 64, 64, {0, 1, 1}, "spconv4"),
      subm("conv4.1", 64, 64, "subm4"),
      subm("conv4.2", 64, 64, "subm4"),
      SparseConvLayer{"conv_out", 64, 128, {.kernel = {3, 1, 1}, .stride = {2, 1, 1}}, false, "spconv_down2"},
  };
}

BackboneWeights BackboneWeights::random(const std::vector<SparseConvLayer>& layers, uint64_t seed) {
  manualSeed(seed);
  BackboneWeights w;
  w.layers = layers;
  for (const SparseConvLayer& l : layers) {
    const Shape3& k = l.geometry.kernel;
    const double stddev = std::sqrt(2.0 / (9.0 * static_cast<double>(l.in_channels)));
    // Each draw takes the next numbers of the seeded stream: the order of
    // the three decides which parameter gets which numbers.
    LayerWeights lw;
    lw.filters = randn({k[0], k[1], k[2], l.in_channels, l.out_channels}) * stddev;
    lw.scale = randn({l.out_channels}) * 0.1 + 1.0;
    lw.shift = randn({l.out_channels}) * 0.1;
    w.weights.push_back(std::move(lw));
  }
  return w;
}

BackboneWeights BackboneWeights::to(Device device) const {
  BackboneWeights w = *this;
  for (LayerWeights& lw : w.weights) {
    lw.filters = lw.filters.to(device);
    lw.scale = lw.scale.to(device);
    lw.shift = lw.shift.to(device);
  }
  return w;
}

SparseTensor runLayer(const LayerWeights& weights, const SparseTensor& input, const Rulebook& rulebook) {
  SparseTensor out = applyConv(input, weights.filters, rulebook);
  out.features = relu(out.features * weights.scale + weights.shift);
  return out;
}

SparseTensor runBackbone(const BackboneWeights& weights, const SparseTensor& input, const LayerCallback& after_layer) {
  BP_CHECK(!weights.layers.empty() && input.features.dim() == 2 &&
               input.features.size(1) == weights.layers.front().in_channels,
           "runBackbone: the input has features ", input.features.sizes(), ", the first layer takes ",
           weights.layers.empty() ? 0 : weights.layers.front().in_channels, " channels");
  RulebookCache rulebooks;
  SparseTensor x = input;
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const SparseConvLayer& layer = weights.layers[i];
    const Rulebook& rulebook = rulebookFor(x, layer.geometry, layer.subm, rulebooks, layer.indice_key);
    x = runLayer(weights.weights[i], x, rulebook);
    if (after_layer) after_layer(i, rulebook, x);
  }
  return x;
}

}  // namespace sparse_lidar
