#include "sparse_conv.h"

#include <tuple>
#include <utility>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/dispatch/dispatcher.h"

namespace sparse_lidar {

using namespace backplane;

namespace {

using GetIndicePairsSig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, int64_t, IntArrayRef, IntArrayRef,
                                                             IntArrayRef, IntArrayRef, IntArrayRef, bool);
using IndiceConvSig = Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, bool, bool);

IntArrayRef ref(const Shape3& s) { return {s.data(), s.size()}; }

// The typed handle of one of the plugin's ops, with an error that says what
// to do when the plugin is not loaded.
template <typename Sig>
TypedOperatorHandle<Sig> spconvOp(std::string_view name) {
  const std::optional<OperatorHandle> op = Dispatcher::singleton().findOp(name);
  BP_CHECK(op && op->hasSchema(), name,
           " is not defined: the sparse-convolution plugin (backplane_spconv) is not loaded. Build it (it lands in "
           "the build tree's plugin directory, which backplane::Runtime searches) or put its directory on "
           "BACKPLANE_PLUGIN_PATH");
  return op->typed<Sig>();
}

}  // namespace

SparseTensor SparseTensor::fromScan(const VoxelScan& scan, Device device) {
  return {Tensor(tensorFromVector(scan.features, {scan.numVoxels(), scan.channels})).to(device),
          Tensor(tensorFromVector(scan.indices, {scan.numVoxels(), 4})).to(device), scan.spatial_shape,
          scan.batch_size};
}

SparseTensor SparseTensor::to(Device device) const {
  return {features.to(device), indices.to(device), spatial_shape, batch_size};
}

Shape3 ConvGeometry::outputShape(const Shape3& in) const {
  Shape3 out{};
  for (size_t d = 0; d < 3; ++d) {
    const int64_t span = dilation[d] * (kernel[d] - 1) + 1;
    BP_CHECK(in[d] + 2 * padding[d] >= span, "ConvGeometry: a kernel spanning ", span, " cells (size ", kernel[d],
             ", dilation ", dilation[d], ") does not fit dimension ", d, " of the grid (", in[d], " cells, padding ",
             padding[d], ")");
    out[d] = (in[d] + 2 * padding[d] - span) / stride[d] + 1;
  }
  return out;
}

int64_t Rulebook::totalPairs() const {
  int64_t total = 0;
  for (int32_t n : pair_num.toVector<int32_t>()) total += n;
  return total;
}

Rulebook buildRulebook(const SparseTensor& input, const ConvGeometry& geometry, bool subm) {
  static const auto get_indice_pairs = spconvOp<GetIndicePairsSig>("spconv::get_indice_pairs");
  auto [out_indices, pairs, pair_num] =
      get_indice_pairs.call(input.indices, input.batch_size, ref(input.spatial_shape), ref(geometry.kernel),
                            ref(geometry.stride), ref(geometry.padding), ref(geometry.dilation), subm);
  const Shape3 out_shape = subm ? input.spatial_shape : geometry.outputShape(input.spatial_shape);
  return {std::move(out_indices), std::move(pairs), std::move(pair_num), out_shape, geometry, subm};
}

const Rulebook* RulebookCache::find(std::string_view key) const {
  const auto it = rulebooks_.find(key);
  return it == rulebooks_.end() ? nullptr : &it->second;
}

const Rulebook& RulebookCache::insert(std::string_view key, Rulebook rulebook) {
  const auto [it, inserted] = rulebooks_.emplace(std::string(key), std::move(rulebook));
  BP_CHECK(inserted, "RulebookCache: indice_key '", key, "' already holds a rulebook");
  return it->second;
}

const Rulebook& rulebookFor(const SparseTensor& input, const ConvGeometry& geometry, bool subm, RulebookCache& cache,
                            std::string_view indice_key) {
  BP_CHECK(!indice_key.empty(), "rulebookFor: the indice_key must not be empty");
  if (const Rulebook* cached = cache.find(indice_key)) {
    // Note [Rulebook sharing]: a key names one set of sites and one geometry.
    BP_CHECK(cached->geometry == geometry && cached->subm == subm, "indice_key '", indice_key,
             "' holds the rulebook of another convolution (kernel, stride, padding, dilation or subm differ): give "
             "this layer its own key");
    BP_CHECK(cached->pairs.size(2) == input.numVoxels(), "indice_key '", indice_key, "' holds a rulebook over ",
             cached->pairs.size(2), " sites, but the input has ", input.numVoxels(),
             ": give this layer its own key, or clear the cache for a new input");
    return *cached;
  }
  return cache.insert(indice_key, buildRulebook(input, geometry, subm));
}

SparseTensor applyConv(const SparseTensor& input, const Tensor& filters, const Rulebook& rulebook) {
  static const auto indice_conv = spconvOp<IndiceConvSig>("spconv::indice_conv");
  Tensor features = indice_conv.call(input.features, filters, rulebook.pairs, rulebook.pair_num, rulebook.numOut(),
                                     /*inverse=*/false, rulebook.subm);
  return {std::move(features), rulebook.out_indices, rulebook.out_spatial_shape, input.batch_size};
}

SparseTensor sparseConv3d(const SparseTensor& input, const Tensor& filters, const ConvGeometry& geometry, bool subm,
                          RulebookCache& cache, std::string_view indice_key) {
  return applyConv(input, filters, rulebookFor(input, geometry, subm, cache, indice_key));
}

}  // namespace sparse_lidar
