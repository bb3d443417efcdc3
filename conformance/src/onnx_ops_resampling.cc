// Spatial resampling in the ONNX -> standard-op table (Note [ONNX op
// mapping] in onnx_ops.cc): Resize, GridSample and AffineGrid. How the
// entries read a node: onnx_node_args.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/core/scalar_type.h"
#include "backplane/ops/ops.h"
#include "onnx_node_args.h"

namespace backplane::conformance::onnx {
namespace {

// Resize (opset 11 on), nearest and linear: separable, one axis at a time,
// each output position's source coordinate (and linear weight) computed on
// the host as ONNX's reference does, then index_select (and a weighted sum
// of the two neighbours, edges clamped) on the device.
NodeRun resize(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (n.opset < 11) return unsupported("Resize: opset < 11 (its nearest rounding differs) is not mapped");
  const std::string mode = n.stringAttr("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic") {
    return unsupported("Resize: unknown mode '" + mode + "'");
  }
  if (n.intAttr("antialias", 0) != 0) return unsupported("Resize: antialias has no standard op");
  if (mode != "nearest" && !isFloatingType(x.dtype())) return unsupported("Resize: " + mode + " on integers");
  const double cubic_a = n.floatAttr("cubic_coeff_a", -0.75);
  const bool exclude_outside = n.intAttr("exclude_outside", 0) != 0;
  const std::string ctm = n.stringAttr("coordinate_transformation_mode", "half_pixel");
  const std::string nearest_mode = n.stringAttr("nearest_mode", "round_prefer_floor");
  const std::string policy = n.stringAttr("keep_aspect_ratio_policy", "stretch");
  const int64_t r = x.dim();
  Ints axes = n.intsAttr("axes").value_or(allAxes(r));
  for (int64_t& a : axes) a = normAxis(n, a, r);
  auto given = [&](size_t i) -> const Tensor* {
    const Tensor* t = optionalInput(in, i);
    return t && t->numel() > 0 ? t : nullptr;
  };
  std::vector<double> scale(static_cast<size_t>(r), 1.0);
  Ints out = sizesOf(x);
  if (const Tensor* sz = given(3)) {
    const Ints sizes = intsOf(*sz);
    BP_CHECK(sizes.size() == axes.size(), "Resize: ", sizes.size(), " sizes for ", axes.size(), " axes");
    if (policy == "stretch") {
      for (size_t i = 0; i < axes.size(); ++i) {
        out[axes[i]] = sizes[i];
        scale[axes[i]] = static_cast<double>(sizes[i]) / static_cast<double>(x.size(axes[i]));
      }
    } else if (policy == "not_larger" || policy == "not_smaller") {
      double common = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
      for (size_t i = 0; i < axes.size(); ++i) {
        const double ratio = static_cast<double>(sizes[i]) / static_cast<double>(x.size(axes[i]));
        common = policy == "not_larger" ? std::min(common, ratio) : std::max(common, ratio);
      }
      for (int64_t a : axes) {
        scale[a] = common;
        out[a] = static_cast<int64_t>(std::min(std::floor(common * static_cast<double>(x.size(a)) + 0.5), 0x1p62));
      }
    } else {
      return unsupported("Resize: unknown keep_aspect_ratio_policy '" + policy + "'");
    }
  } else if (const Tensor* sc = given(2)) {
    const std::vector<double> scales = sc->toVector<double>();
    BP_CHECK(scales.size() == axes.size(), "Resize: ", scales.size(), " scales for ", axes.size(), " axes");
    for (size_t i = 0; i < axes.size(); ++i) {
      BP_CHECK(scales[i] > 0, "Resize: scale ", scales[i], " is not positive");
      scale[axes[i]] = scales[i];
      // Clamped before the cast (one past int64 is undefined); the cap refuses it below.
      out[axes[i]] =
          static_cast<int64_t>(std::min(std::floor(scales[i] * static_cast<double>(x.size(axes[i]))), 0x1p62));
    }
  } else {
    return unsupported("Resize: neither scales nor sizes given");
  }
  std::vector<double> roi;
  if (ctm == "tf_crop_and_resize") {
    const Tensor* roi_t = given(1);
    if (!roi_t) return unsupported("Resize: tf_crop_and_resize without roi");
    const std::vector<double> given_roi = roi_t->toVector<double>();
    BP_CHECK(given_roi.size() == 2 * axes.size(), "Resize: roi has ", given_roi.size(), " values for ", axes.size(),
             " axes");
    roi.assign(static_cast<size_t>(2 * r), 0.0);
    for (int64_t d = 0; d < r; ++d) roi[static_cast<size_t>(r + d)] = 1.0;
    for (size_t i = 0; i < axes.size(); ++i) {
      roi[static_cast<size_t>(axes[i])] = given_roi[i];
      roi[static_cast<size_t>(r + axes[i])] = given_roi[i + axes.size()];
    }
  } else if (ctm != "half_pixel" && ctm != "half_pixel_symmetric" && ctm != "pytorch_half_pixel" &&
             ctm != "align_corners" && ctm != "asymmetric") {
    return unsupported("Resize: coordinate_transformation_mode '" + ctm + "'");
  }
  if (nearest_mode != "round_prefer_floor" && nearest_mode != "round_prefer_ceil" && nearest_mode != "floor" &&
      nearest_mode != "ceil") {
    return unsupported("Resize: nearest_mode '" + nearest_mode + "'");
  }
  checkCreation(n, out, x.dtype());
  // The host's sampling positions along each axis (three int64 per output
  // position), which an empty other axis does not make smaller.
  for (int64_t a = 0; a < r; ++a) checkCreation(n, {out[a], 3}, ScalarType::Int64, "the sampling positions");
  const double extrapolation = n.floatAttr("extrapolation_value", 0.0);
  Tensor y = x;
  Tensor outside;  // where tf_crop_and_resize samples outside the input
  for (int64_t a = 0; a < r; ++a) {
    const int64_t in_len = x.size(a), out_len = out[a];
    if (out_len == in_len && scale[a] == 1.0 && roi.empty()) continue;
    if (in_len == 0) return unsupported("Resize: an empty axis");
    // As the reference: the scaled width (not the integer one) in the ratios.
    const double sc = scale[a], in_d = static_cast<double>(in_len), out_d = static_cast<double>(out_len);
    const double out_f = sc * in_d;
    Ints i0(static_cast<size_t>(out_len)), i1(static_cast<size_t>(out_len)), bad(static_cast<size_t>(out_len), 0);
    std::vector<double> weight(static_cast<size_t>(out_len), 0.0);
    // Cubic: four taps floor-1 .. floor+2 (edges clamped) with Keys' weights.
    std::vector<Ints> taps(4, Ints(static_cast<size_t>(out_len)));
    std::vector<std::vector<double>> tap_weight(4, std::vector<double>(static_cast<size_t>(out_len)));
    for (int64_t o = 0; o < out_len; ++o) {
      const double xr = static_cast<double>(o);
      double xo = 0;
      if (ctm == "half_pixel") {
        xo = (xr + 0.5) / sc - 0.5;
      } else if (ctm == "half_pixel_symmetric") {
        const double adjustment = out_d / (sc * in_d), center = in_d / 2;
        xo = center * (1 - adjustment) + (xr + 0.5) / sc - 0.5;
      } else if (ctm == "pytorch_half_pixel") {
        xo = out_f != 1 ? (xr + 0.5) / sc - 0.5 : -0.5;
      } else if (ctm == "align_corners") {
        xo = out_f == 1 ? 0.0 : xr * (in_d - 1) / (out_f - 1);
      } else if (ctm == "asymmetric") {
        xo = xr / sc;
      } else {
        const double start = roi[static_cast<size_t>(a)], end = roi[static_cast<size_t>(r + a)];
        xo = start * (in_d - 1) +
             (out_f == 1 ? (end - start) * (in_d - 1) / 2 : xr * (end - start) * (in_d - 1) / (out_f - 1));
        if (xo < 0 || xo > in_d - 1) bad[static_cast<size_t>(o)] = 1;
      }
      const double fl = std::floor(xo), frac = xo - fl;
      auto clampIndex = [&](double v) { return static_cast<int64_t>(std::clamp(v, 0.0, in_d - 1)); };
      if (mode == "nearest") {
        double pick = fl;
        if (nearest_mode == "round_prefer_floor") pick = frac > 0.5 ? fl + 1 : fl;
        if (nearest_mode == "round_prefer_ceil") pick = frac >= 0.5 ? fl + 1 : fl;
        if (nearest_mode == "ceil") pick = std::ceil(xo);
        i0[static_cast<size_t>(o)] = clampIndex(pick);
      } else if (mode == "linear") {
        i0[static_cast<size_t>(o)] = clampIndex(fl);
        i1[static_cast<size_t>(o)] = clampIndex(fl + 1);
        weight[static_cast<size_t>(o)] = frac;
      } else {
        const double A = cubic_a, t = frac, u = 1 - frac;
        double c[4] = {((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A, ((A + 2) * t - (A + 3)) * t * t + 1,
                       ((A + 2) * u - (A + 3)) * u * u + 1,
                       ((A * (u + 1) - 5 * A) * (u + 1) + 8 * A) * (u + 1) - 4 * A};
        double total = 0;
        for (int k = 0; k < 4; ++k) {
          const double at = fl - 1 + k;
          if (exclude_outside && (at < 0 || at > in_d - 1)) c[k] = 0;
          total += c[k];
        }
        for (int k = 0; k < 4; ++k) {
          taps[k][static_cast<size_t>(o)] = clampIndex(fl - 1 + k);
          tap_weight[k][static_cast<size_t>(o)] = exclude_outside ? c[k] / total : c[k];
        }
      }
    }
    Ints shape(static_cast<size_t>(r), 1);
    shape[a] = out_len;
    auto weights = [&](const std::vector<double>& v) {
      return Tensor(tensorFromVector(v, {out_len}, Device(DeviceType::CPU))).to(x.device(), x.dtype()).reshape(shape);
    };
    const Tensor first = y.index_select(a, int64Tensor(i0, {out_len}, x.device()));
    if (mode == "nearest") {
      y = first;
    } else if (mode == "cubic") {
      Tensor acc;
      for (int k = 0; k < 4; ++k) {
        Tensor term = y.index_select(a, int64Tensor(taps[k], {out_len}, x.device())) * weights(tap_weight[k]);
        acc = acc.defined() ? acc + term : term;
      }
      y = acc;
    } else {
      Tensor w = Tensor(tensorFromVector(weight, {out_len}, Device(DeviceType::CPU))).to(x.device(), x.dtype());
      w = w.reshape(shape);
      const Tensor second = y.index_select(a, int64Tensor(i1, {out_len}, x.device()));
      y = first * (Scalar(1.0) - w) + second * w;
    }
    if (!roi.empty()) {
      Tensor b = int64Tensor(bad, {out_len}, x.device()).gt(Scalar(int64_t{0})).reshape(shape);
      outside = outside.defined() ? logical_or(outside, b) : b;
    }
  }
  if (outside.defined()) y = where(outside, full_like(y, Scalar(extrapolation)), y);
  return outputs({y});
}

// AffineGrid: each output position's normalized coordinates (x fastest,
// then y, then z; linspace(-1, 1) with align_corners, pixel centres
// without), with a 1 appended, times theta transposed.
NodeRun affineGrid(const NodeTest& n, const NodeInputs& in) {
  Tensor theta = input(n, in, 0);
  const Ints size = intsOf(input(n, in, 1));
  if (!isFloatingType(theta.dtype())) return unsupported("AffineGrid: integer theta");
  const size_t spatial = size.size() >= 2 ? size.size() - 2 : 0;
  if (spatial != 2 && spatial != 3) return unsupported("AffineGrid: size must be [N, C, H, W] or [N, C, D, H, W]");
  const bool align = n.intAttr("align_corners", 0) != 0;
  const TensorOptions opts{.dtype = theta.dtype(), .device = theta.device()};
  // The coordinates along one dim of length len.
  auto coords = [&](int64_t len) {
    Tensor i = arange(len, opts);
    if (align) return len == 1 ? zeros({1}, opts) : i * (2.0 / static_cast<double>(len - 1)) - 1.0;
    return (i * 2.0 + 1.0) / static_cast<double>(len) - 1.0;
  };
  Ints dims(size.begin() + 2, size.end());  // [H, W] or [D, H, W]
  {
    // The base grid, [positions, r + 1], and the output, [N, positions..., r].
    Ints grid_shape = dims, out_shape{size[0]};
    grid_shape.push_back(static_cast<int64_t>(dims.size()) + 1);
    checkCreation(n, grid_shape, theta.dtype(), "the base grid");
    out_shape.insert(out_shape.end(), dims.begin(), dims.end());
    out_shape.push_back(static_cast<int64_t>(dims.size()));
    checkCreation(n, out_shape, theta.dtype());
  }
  std::vector<Tensor> columns;  // x, y (, z), 1, each over every position
  const size_t r = dims.size();
  for (size_t j = 0; j < r; ++j) {
    // Coordinate j (x first) varies along dim r - 1 - j.
    Ints shape(r, 1);
    shape[r - 1 - j] = dims[r - 1 - j];
    columns.push_back(coords(dims[r - 1 - j]).reshape(shape).expand(dims).reshape({product(dims, 0, r), 1}));
  }
  columns.push_back(ones({product(dims, 0, r), 1}, opts));
  Tensor base = cat(columns, 1);                     // [positions, r + 1]
  Tensor grid = base.matmul(theta.transpose(1, 2));  // [N, positions, r]
  Ints out{size[0]};
  out.insert(out.end(), dims.begin(), dims.end());
  out.push_back(static_cast<int64_t>(r));
  return outputs({grid.reshape(out)});
}

// Reflects x into [lo, hi] as ONNX's reference (_gs_reflect) does.
Tensor reflectInto(const Tensor& x, double lo, double hi) {
  const double range = hi - lo;
  Tensor below = x.lt(Scalar(lo)), above = x.gt(Scalar(hi));
  Tensor dx = where(below, Scalar(lo) - x, x - hi);
  Tensor times = (dx / range).trunc();
  Tensor rest = dx - times * range;
  Tensor even = times.remainder(full_like(times, Scalar(2.0))).eq(Scalar(0.0));
  Tensor from_below = where(even, rest + lo, Scalar(hi) - rest);
  Tensor from_above = where(even, Scalar(hi) - rest, rest + lo);
  return where(below, from_below, where(above, from_above, x));
}

// GridSample (2-d and 3-d): the grid's normalized coordinates to pixel
// coordinates, padded (border: clamped, reflection: reflected), then the
// taps of the interpolation (nearest: round half to even; linear: 2 per
// dim; cubic: 4 per dim, Keys' A = -0.75) gathered from the flattened image
// with elementwise ops, each tap's index padded the same way (zeros: the tap
// counts 0 outside), weighted and summed.
NodeRun gridSample(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0), grid = input(n, in, 1);
  const int64_t k = x.dim() - 2;
  if ((k != 2 && k != 3) || grid.dim() != k + 2 || grid.size(-1) != k) {
    return unsupported("GridSample: needs a 4-d or 5-d X and a matching grid");
  }
  if (!isFloatingType(x.dtype()) || !isFloatingType(grid.dtype())) return unsupported("GridSample: integer input");
  std::string mode = n.stringAttr("mode", n.opset < 20 ? "bilinear" : "linear");
  if (mode == "bilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  if (mode != "linear" && mode != "nearest" && mode != "cubic") return unsupported("GridSample: mode '" + mode + "'");
  if (mode == "cubic" && k != 2) return unsupported("GridSample: cubic is 2-d only");
  const std::string padding = n.stringAttr("padding_mode", "zeros");
  if (padding != "zeros" && padding != "border" && padding != "reflection") {
    return unsupported("GridSample: padding_mode '" + padding + "'");
  }
  const bool align = n.intAttr("align_corners", 0) != 0;
  const int64_t batch = x.size(0), channels = x.size(1);
  Ints out_spatial(grid.sizes().begin() + 1, grid.sizes().end() - 1);
  const int64_t positions = product(out_spatial, 0, out_spatial.size());
  Tensor g = grid.to(x.dtype()).reshape({batch, positions, k});
  // Per spatial dim j of X (0 = the first, D or H), its pixel coordinate.
  std::vector<Tensor> coord(static_cast<size_t>(k));
  std::vector<double> lo(static_cast<size_t>(k)), hi(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    const double len = static_cast<double>(x.size(2 + j));
    Tensor c = g.select(2, k - 1 - j);  // the grid lists x (the last dim) first
    c = align ? (c + 1.0) / 2.0 * (len - 1) : ((c + 1.0) * len - 1.0) / 2.0;
    lo[j] = align ? 0.0 : -0.5;
    hi[j] = align ? len - 1 : len - 0.5;
    if (padding == "border") c = c.clamp(0.0, len - 1);
    if (padding == "reflection") c = reflectInto(c, lo[j], hi[j]);
    coord[j] = c;
  }
  // Per dim, the taps: (index as a float tensor, weight).
  std::vector<std::vector<std::pair<Tensor, Tensor>>> taps(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    const Tensor& c = coord[j];
    if (mode == "nearest") {
      taps[j].push_back({c.round(), ones_like(c)});
      continue;
    }
    Tensor fl = c.floor(), t = c - fl;
    if (mode == "linear") {
      taps[j].push_back({fl, Scalar(1.0) - t});
      taps[j].push_back({fl + 1.0, t});
      continue;
    }
    const double A = -0.75;
    Tensor u = Scalar(1.0) - t;
    taps[j].push_back({fl - 1.0, (((t + 1.0) * A - 5 * A) * (t + 1.0) + 8 * A) * (t + 1.0) - 4 * A});
    taps[j].push_back({fl, ((t * (A + 2)) - (A + 3)) * t * t + 1.0});
    taps[j].push_back({fl + 1.0, ((u * (A + 2)) - (A + 3)) * u * u + 1.0});
    taps[j].push_back({fl + 2.0, (((u + 1.0) * A - 5 * A) * (u + 1.0) + 8 * A) * (u + 1.0) - 4 * A});
  }
  Tensor image = x.reshape({batch, channels, product(sizesOf(x), 2, static_cast<size_t>(x.dim()))});
  Tensor result;
  std::vector<size_t> pick(static_cast<size_t>(k), 0);
  while (true) {
    Tensor flat, weight, valid;
    for (int64_t j = 0; j < k; ++j) {
      const double len = static_cast<double>(x.size(2 + j));
      Tensor idx = taps[j][pick[j]].first;
      if (padding == "zeros") {
        Tensor inside = logical_and(idx.ge(Scalar(0.0)), idx.le(Scalar(len - 1)));
        valid = valid.defined() ? logical_and(valid, inside) : inside;
        idx = idx.clamp(0.0, len - 1);
      } else if (padding == "border") {
        idx = idx.clamp(0.0, len - 1);
      } else {
        idx = reflectInto(idx, lo[j], hi[j]).trunc().clamp(0.0, len - 1);
      }
      Tensor as_int = idx.to(ScalarType::Int64);
      flat = flat.defined() ? flat * Scalar(x.size(2 + j)) + as_int : as_int;
      const Tensor& w = taps[j][pick[j]].second;
      weight = weight.defined() ? weight * w : w;
    }
    if (valid.defined()) weight = where(valid, weight, zeros_like(weight));
    Tensor value = image.gather(2, flat.unsqueeze(1).expand({batch, channels, positions}).contiguous());
    Tensor term = value * weight.unsqueeze(1);
    result = result.defined() ? result + term : term;
    int64_t j = k - 1;
    while (j >= 0 && ++pick[j] == taps[j].size()) pick[j--] = 0;
    if (j < 0) break;
  }
  Ints shape{batch, channels};
  shape.insert(shape.end(), out_spatial.begin(), out_spatial.end());
  return outputs({result.reshape(shape)});
}

}  // namespace

void registerResamplingNodes() {
  registerNode("Resize", [](const NodeTest& n, const NodeInputs& in, Device) { return resize(n, in); });
  registerNode("AffineGrid", [](const NodeTest& n, const NodeInputs& in, Device) { return affineGrid(n, in); });
  registerNode("GridSample", [](const NodeTest& n, const NodeInputs& in, Device) { return gridSample(n, in); });
}

}  // namespace backplane::conformance::onnx
