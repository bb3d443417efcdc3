#pragma once
// SECOND's VoxelBackBone8x (as in OpenPCDet): the 3-D sparse backbone of
// most LiDAR detectors, written with sparse_conv.h and the application API
// (backplane/ops/ops.h), so the same code runs on whichever device its tensors
// are on.
//
//   std::vector<SparseConvLayer> layers = voxelBackBone8x(/*in_channels=*/4);
//   BackboneWeights weights = BackboneWeights::random(layers, seed).to(dev);
//   SparseTensor out = runBackbone(weights, SparseTensor::fromScan(scan, dev));
//
// Each layer is a sparse convolution without bias, then batch norm in
// inference form (a per-channel affine: scale, shift), then ReLU: the
// elementwise part runs through the standard ops mul, add and relu.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sparse_conv.h"

namespace sparse_lidar {

struct SparseConvLayer {
  std::string name;  // "conv2.0"
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  ConvGeometry geometry;
  bool subm = false;
  std::string indice_key;  // layers with one key share a rulebook (Note [Rulebook sharing])
};

// VoxelBackBone8x: a submanifold conv to 16 channels, then four stages, each
// a strided sparse conv (stride 2; the first stage has none) followed by
// submanifold convs, at 16, 32, 64 and 64 channels, and conv_out, a (3, 1, 1)
// conv with stride (2, 1, 1) to 128 channels. On KITTI's grid [41, 1600,
// 1408] the stages run at [41, 1600, 1408], [21, 800, 704], [11, 400, 352]
// and [5, 200, 176], and the output is [2, 200, 176]: 8x down in y and x.
std::vector<SparseConvLayer> voxelBackBone8x(int64_t in_channels);

// One layer's parameters, float32, on one device.
struct LayerWeights {
  Tensor filters;  // [kD, kH, kW, Cin, Cout]
  Tensor scale;    // [Cout]: batch norm's gamma / sqrt(running_var + eps)
  Tensor shift;    // [Cout]: beta - running_mean * scale
};

struct BackboneWeights {
  std::vector<SparseConvLayer> layers;
  std::vector<LayerWeights> weights;  // weights[i] belongs to layers[i]

  // Weights drawn on the CPU after backplane::manualSeed(seed). Filters are
  // normal with variance 2 / (9 * Cin): LiDAR sites lie on surfaces, where
  // about 9 of a 3x3x3 kernel's 27 offsets find a neighbour, so this keeps
  // activations of order 1 through the ReLUs (He initialisation counted over
  // the neighbours that exist). Scales are near 1 and shifts near 0, off by
  // enough that a kernel ignoring them would be caught.
  static BackboneWeights random(const std::vector<SparseConvLayer>& layers, uint64_t seed);
  BackboneWeights to(Device device) const;
};

// What runBackbone reports after each layer: its index in weights.layers,
// the rulebook it used and its output. Called after the layer's ops were
// issued (the device may still be running them).
using LayerCallback = std::function<void(size_t layer, const Rulebook& rulebook, const SparseTensor& output)>;

// The backbone over `input` (features [N, layers[0].in_channels] on the
// weights' device); returns the last layer's output. Rulebooks are built
// once per indice_key per call.
SparseTensor runBackbone(const BackboneWeights& weights, const SparseTensor& input,
                         const LayerCallback& after_layer = nullptr);

// One layer: conv through `rulebook`, then scale, shift and ReLU.
SparseTensor runLayer(const LayerWeights& weights, const SparseTensor& input, const Rulebook& rulebook);

}  // namespace sparse_lidar
