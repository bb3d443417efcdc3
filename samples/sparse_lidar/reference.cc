#include "reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <unordered_map>

#include "backplane/core/error.h"

namespace sparse_lidar {

using namespace backplane;

namespace {

int64_t siteKey(int64_t b, const Shape3& site, const Shape3& shape) {
  return ((b * shape[0] + site[0]) * shape[1] + site[1]) * shape[2] + site[2];
}

}  // namespace

HostSparse HostSparse::from(const SparseTensor& t) {
  return {t.indices.toVector<int32_t>(), t.features.toVector<double>(), t.features.size(1), t.spatial_shape,
          t.batch_size};
}

HostSparse referenceLayer(const SparseConvLayer& layer, const LayerWeights& weights, const HostSparse& in,
                          int64_t row_step) {
  BP_CHECK(row_step >= 1, "referenceLayer: row_step must be at least 1, got ", row_step);
  BP_CHECK(in.channels == layer.in_channels, "referenceLayer: ", layer.name, " takes ", layer.in_channels,
           " channels, the input has ", in.channels);
  const ConvGeometry& g = layer.geometry;
  const int64_t cin = layer.in_channels, cout = layer.out_channels;
  const std::vector<double> filters = weights.filters.toVector<double>();  // [kD, kH, kW, Cin, Cout]
  const std::vector<double> scale = weights.scale.toVector<double>(), shift = weights.shift.toVector<double>();

  HostSparse out;
  out.channels = cout;
  out.batch_size = in.batch_size;
  out.spatial_shape = layer.subm ? in.spatial_shape : g.outputShape(in.spatial_shape);

  // (output site key, input row, kernel offset) for every input that reaches
  // an output through an offset.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> contributions;
  std::unordered_map<int64_t, int64_t> input_rows;  // site key -> row; used by subm
  if (layer.subm) {
    for (int64_t r = 0; r < in.numVoxels(); ++r) {
      const int32_t* s = &in.indices[static_cast<size_t>(r) * 4];
      input_rows.emplace(siteKey(s[0], {s[1], s[2], s[3]}, in.spatial_shape), r);
    }
  }
  for (int64_t r = 0; r < in.numVoxels(); ++r) {
    const int32_t* s = &in.indices[static_cast<size_t>(r) * 4];
    const Shape3 site = {s[1], s[2], s[3]};
    for (int64_t kz = 0; kz < g.kernel[0]; ++kz) {
      for (int64_t ky = 0; ky < g.kernel[1]; ++ky) {
        for (int64_t kx = 0; kx < g.kernel[2]; ++kx) {
          const Shape3 k = {kz, ky, kx};
          const int64_t offset = (kz * g.kernel[1] + ky) * g.kernel[2] + kx;
          Shape3 other{};
          bool valid = true;
          for (size_t d = 0; d < 3 && valid; ++d) {
            if (layer.subm) {
              // A centred kernel: output o reads input o + (k - (K - 1) / 2) * dilation, so
              // input s feeds output s - (k - (K - 1) / 2) * dilation.
              other[d] = site[d] - (k[d] - (g.kernel[d] - 1) / 2) * g.dilation[d];
              valid = other[d] >= 0 && other[d] < in.spatial_shape[d];
            } else {
              // Output o reads input o * stride - padding + k * dilation.
              const int64_t scaled = site[d] + g.padding[d] - k[d] * g.dilation[d];
              other[d] = scaled / g.stride[d];
              valid = scaled >= 0 && scaled % g.stride[d] == 0 && other[d] < out.spatial_shape[d];
            }
          }
          if (!valid) continue;
          const int64_t key = siteKey(s[0], other, out.spatial_shape);
          // Submanifold outputs exist only where an input does.
          if (layer.subm && !input_rows.contains(key)) continue;
          contributions.emplace_back(key, r, offset);
        }
      }
    }
  }
  std::sort(contributions.begin(), contributions.end());

  // Output rows: subm keeps the input's; a regular conv's are the distinct keys, sorted.
  std::unordered_map<int64_t, int64_t> output_rows;
  if (layer.subm) {
    out.indices = in.indices;
    output_rows = input_rows;
  } else {
    for (size_t c = 0; c < contributions.size(); ++c) {
      const int64_t key = std::get<0>(contributions[c]);
      if (c > 0 && key == std::get<0>(contributions[c - 1])) continue;
      output_rows.emplace(key, out.numVoxels());
      int64_t rest = key;
      Shape3 site{};
      for (int d = 2; d >= 0; --d) {
        site[static_cast<size_t>(d)] = rest % out.spatial_shape[static_cast<size_t>(d)];
        rest /= out.spatial_shape[static_cast<size_t>(d)];
      }
      out.indices.insert(out.indices.end(), {static_cast<int32_t>(rest), static_cast<int32_t>(site[0]),
                                             static_cast<int32_t>(site[1]), static_cast<int32_t>(site[2])});
    }
  }

  std::vector<double> sums(static_cast<size_t>(out.numVoxels() * cout), 0.0);
  for (const auto& [key, in_row, offset] : contributions) {
    const int64_t o = output_rows.at(key);
    if (o % row_step != 0) continue;
    const double* x = &in.features[static_cast<size_t>(in_row * cin)];
    const double* w = &filters[static_cast<size_t>(offset * cin * cout)];
    double* y = &sums[static_cast<size_t>(o * cout)];
    for (int64_t i = 0; i < cin; ++i) {
      for (int64_t c = 0; c < cout; ++c) y[c] += x[i] * w[i * cout + c];
    }
  }
  out.features.assign(sums.size(), 0.0);
  for (int64_t o = 0; o < out.numVoxels(); o += row_step) {
    for (int64_t c = 0; c < cout; ++c) {
      const size_t e = static_cast<size_t>(o * cout + c);
      out.features[e] = std::max(0.0, sums[e] * scale[static_cast<size_t>(c)] + shift[static_cast<size_t>(c)]);
    }
  }
  return out;
}

LayerDifference compareLayer(const HostSparse& actual, const HostSparse& expected, int64_t row_step) {
  BP_CHECK(actual.numVoxels() == expected.numVoxels(), "compareLayer: ", actual.numVoxels(), " output sites, ",
           expected.numVoxels(), " expected");
  for (int64_t r = 0; r < expected.numVoxels(); ++r) {
    const auto a = actual.indices.begin() + r * 4, e = expected.indices.begin() + r * 4;
    BP_CHECK(std::equal(a, a + 4, e), "compareLayer: output row ", r, " is at (", a[0], ", ", a[1], ", ", a[2], ", ",
             a[3], "), expected (", e[0], ", ", e[1], ", ", e[2], ", ", e[3], ")");
  }
  BP_CHECK(actual.channels == expected.channels, "compareLayer: ", actual.channels, " channels, ", expected.channels,
           " expected");
  const int64_t c = expected.channels;
  double scale = 1.0;
  for (int64_t r = 0; r < expected.numVoxels(); r += row_step) {
    for (int64_t j = 0; j < c; ++j)
      scale = std::max(scale, std::abs(expected.features[static_cast<size_t>(r * c + j)]));
  }
  LayerDifference d;
  for (int64_t r = 0; r < expected.numVoxels(); r += row_step) {
    for (int64_t j = 0; j < c; ++j) {
      const size_t e = static_cast<size_t>(r * c + j);
      const double rel = std::abs(actual.features[e] - expected.features[e]) / scale;
      if (!std::isfinite(rel)) return {std::numeric_limits<double>::infinity(), r, j};
      if (rel > d.max_rel) d = {rel, r, j};
    }
  }
  return d;
}

}  // namespace sparse_lidar
