// The normalizations in the ONNX -> standard-op table (Note [ONNX op
// mapping] in onnx_ops.cc): BatchNormalization, InstanceNormalization,
// LayerNormalization, GroupNormalization, RMSNormalization, LpNormalization,
// MeanVarianceNormalization and LRN (from ONNX's nn domain). How the entries
// read a node: onnx_node_args.h.
#include <cstdint>
#include <utility>
#include <vector>

#include "backplane/core/scalar_type.h"
#include "backplane/ops/ops.h"
#include "onnx_node_args.h"

namespace backplane::conformance::onnx {
namespace {

// [C] as [1, C, 1, ...] for an input of `rank`.
Tensor channelView(const Tensor& p, int64_t rank) {
  Ints shape(static_cast<size_t>(rank), 1);
  shape[1] = p.numel();
  return p.reshape(shape);
}

NodeRun batchNorm(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  const bool training = n.intAttr("training_mode", 0) != 0;
  if (n.opset < 14) {
    // Before opset 14 the extra outputs were training statistics of another definition.
    for (size_t i = 1; i < n.outputs.size(); ++i) {
      if (wantsOutput(n, i)) return unsupported("BatchNormalization: opset < 14 training outputs past Y");
    }
  }
  if (n.opset < 9 && n.intAttr("spatial", 1) == 0) {
    return unsupported("BatchNormalization: spatial=0 (per-activation statistics)");
  }
  if (x.dim() < 2) return unsupported("BatchNormalization: the input has no channel dim");
  const double eps = n.floatAttr("epsilon", 1e-5);
  const int64_t r = x.dim();
  Tensor scale = channelView(input(n, in, 1), r), b = channelView(input(n, in, 2), r);
  Tensor mean = channelView(input(n, in, 3), r), var = channelView(input(n, in, 4), r);
  if (!training) {
    // As ONNX's reference: (x - mean) / sqrt(var + eps) * scale + B.
    return outputs({(x - mean) / (var + eps).sqrt() * scale + b});
  }
  // Training: the batch's statistics (biased variance) normalize, and the
  // running ones move towards them by 1 - momentum.
  const double momentum = n.floatAttr("momentum", 0.9);
  Ints dims{0};
  for (int64_t d = 2; d < r; ++d) dims.push_back(d);
  Tensor batch_mean = x.mean(dims, true);
  Tensor centered = x - batch_mean;
  Tensor batch_var = (centered * centered).mean(dims, true);
  std::vector<Tensor> outs{centered / (batch_var + eps).sqrt() * scale + b};
  const Ints c{x.size(1)};
  if (n.outputs.size() > 1) {
    outs.push_back(wantsOutput(n, 1) ? (mean * momentum + batch_mean * (1 - momentum)).reshape(c) : Tensor());
  }
  if (n.outputs.size() > 2) {
    outs.push_back(wantsOutput(n, 2) ? (var * momentum + batch_var * (1 - momentum)).reshape(c) : Tensor());
  }
  return outputs(std::move(outs));
}

NodeRun instanceNorm(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (x.dim() < 3) return unsupported("InstanceNormalization: the input has no spatial dims");
  const double eps = n.floatAttr("epsilon", 1e-5);
  Ints dims;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Tensor mean = x.mean(dims, true);
  Tensor d = x - mean;
  Tensor var = (d * d).mean(dims, true);
  const int64_t r = x.dim();
  return outputs({d / (var + eps).sqrt() * channelView(input(n, in, 1), r) + channelView(input(n, in, 2), r)});
}

NodeRun layerNorm(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (x.dim() == 0) return unsupported("LayerNormalization: a 0-d input");
  const int64_t axis = normAxis(n, n.intAttr("axis", -1), x.dim());
  const double eps = n.floatAttr("epsilon", 1e-5);
  const auto stash = dtypeOfOnnxElementType(n.intAttr("stash_type", 1));
  if (!stash || !isFloatingType(*stash)) return unsupported("LayerNormalization: stash_type is not a float type");
  if (!isFloatingType(x.dtype())) return unsupported("LayerNormalization: integer input");
  Ints dims;
  for (int64_t d = axis; d < x.dim(); ++d) dims.push_back(d);
  // ONNX's function body: in the stash type, D = X - mean, InvStdDev =
  // 1 / sqrt(mean(D * D) + eps), Normalized = D * InvStdDev; then back to
  // X's type, times Scale, plus B.
  Tensor xs = x.to(*stash);
  Tensor mean = xs.mean(dims, true);
  Tensor d = xs - mean;
  Tensor inv_std = Scalar(1.0) / ((d * d).mean(dims, true) + eps).sqrt();
  Tensor y = (d * inv_std).to(x.dtype()) * input(n, in, 1);
  if (const Tensor* b = optionalInput(in, 2)) y = y + *b;
  std::vector<Tensor> outs{y};
  if (n.outputs.size() > 1) outs.push_back(wantsOutput(n, 1) ? mean : Tensor());
  if (n.outputs.size() > 2) outs.push_back(wantsOutput(n, 2) ? inv_std : Tensor());
  return outputs(std::move(outs));
}

NodeRun lrn(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (x.dim() < 2 || !isFloatingType(x.dtype())) return unsupported("LRN: needs a float [N, C, ...] input");
  const int64_t size = n.intAttr("size", 0);
  if (size < 1) return unsupported("LRN: size must be positive");
  const double alpha = n.floatAttr("alpha", 1e-4), beta = n.floatAttr("beta", 0.75), bias = n.floatAttr("bias", 1.0);
  // The channels c - floor((size-1)/2) .. c + ceil((size-1)/2), those past the ends counting 0.
  Ints list;
  for (int64_t d = x.dim() - 1; d >= 2; --d) list.insert(list.end(), {0, 0});
  list.insert(list.end(), {(size - 1) / 2, size - 1 - (size - 1) / 2});
  Tensor sq = pad(x * x, list);
  Tensor sum = sq.narrow(1, 0, x.size(1));
  for (int64_t j = 1; j < size; ++j) sum = sum + sq.narrow(1, j, x.size(1));
  return outputs({x / (sum * (alpha / static_cast<double>(size)) + bias).pow(Scalar(beta))});
}

NodeRun meanVarianceNorm(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (!isFloatingType(x.dtype())) return unsupported("MeanVarianceNormalization: integer input");
  const Ints axes = normAxes(n, n.intsAttr("axes").value_or(Ints{0, 2, 3}), x.dim());
  // ONNX's function body: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9).
  Tensor mean = x.mean(axes, true);
  Tensor std_dev = ((x * x).mean(axes, true) - mean * mean).sqrt();
  return outputs({(x - mean) / (std_dev + 1e-9)});
}

NodeRun rmsNorm(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (x.dim() == 0) return unsupported("RMSNormalization: a 0-d input");
  if (!isFloatingType(x.dtype())) return unsupported("RMSNormalization: integer input");
  const auto stash = dtypeOfOnnxElementType(n.intAttr("stash_type", 1));
  if (!stash || !isFloatingType(*stash)) return unsupported("RMSNormalization: stash_type is not a float type");
  const int64_t axis = normAxis(n, n.intAttr("axis", -1), x.dim());
  Ints dims;
  for (int64_t d = axis; d < x.dim(); ++d) dims.push_back(d);
  // ONNX's function body: X / sqrt(mean(X * X) + eps) in the stash type, then times Scale.
  Tensor xs = x.to(*stash);
  Tensor inv_rms = Scalar(1.0) / ((xs * xs).mean(dims, true) + n.floatAttr("epsilon", 1e-5)).sqrt();
  return outputs({(xs * inv_rms).to(x.dtype()) * input(n, in, 1)});
}

NodeRun lpNorm(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (x.dim() == 0 || !isFloatingType(x.dtype())) return unsupported("LpNormalization: a 0-d or integer input");
  const int64_t axis = normAxis(n, n.intAttr("axis", -1), x.dim());
  const int64_t p = n.intAttr("p", 2);
  if (p != 1 && p != 2) return unsupported("LpNormalization: p must be 1 or 2");
  Tensor norm = p == 1 ? x.abs().sum({axis}, true) : (x * x).sum({axis}, true).sqrt();
  // A zero norm (an all-zero slice) gives zeros, as ONNX's reference does.
  return outputs({where(norm.eq(Scalar(0.0)), zeros_like(x), x / norm)});
}

NodeRun groupNorm(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (x.dim() < 2 || !isFloatingType(x.dtype()))
    return unsupported("GroupNormalization: needs a float [N, C, ...] input");
  const int64_t groups = n.intAttr("num_groups", 0), c = x.size(1);
  if (groups < 1 || c % groups != 0) return unsupported("GroupNormalization: num_groups does not divide the channels");
  const auto stash = dtypeOfOnnxElementType(n.intAttr("stash_type", 1));
  if (!stash || !isFloatingType(*stash)) return unsupported("GroupNormalization: stash_type is not a float type");
  const Ints sizes = sizesOf(x);
  Tensor g = x.to(*stash).reshape({x.size(0), groups, -1});
  Tensor mean = g.mean({2}, true);
  Tensor d = g - mean;
  Tensor normalized =
      (d / ((d * d).mean({2}, true) + n.floatAttr("epsilon", 1e-5)).sqrt()).reshape(sizes).to(x.dtype());
  Tensor scale = input(n, in, 1), bias = input(n, in, 2);
  if (n.opset < 21) {
    // Opset 18: one scale and bias per group, shared by its channels.
    if (scale.numel() != groups || bias.numel() != groups) {
      return unsupported("GroupNormalization: opset 18 scale/bias must have num_groups entries");
    }
    scale = scale.reshape({groups, 1}).expand({groups, c / groups}).reshape({c});
    bias = bias.reshape({groups, 1}).expand({groups, c / groups}).reshape({c});
  }
  return outputs({normalized * channelView(scale, x.dim()) + channelView(bias, x.dim())});
}

}  // namespace

void registerNormalizationNodes() {
  registerNode("BatchNormalization", [](const NodeTest& n, const NodeInputs& in, Device) { return batchNorm(n, in); });
  registerNode("InstanceNormalization",
               [](const NodeTest& n, const NodeInputs& in, Device) { return instanceNorm(n, in); });
  registerNode("LayerNormalization", [](const NodeTest& n, const NodeInputs& in, Device) { return layerNorm(n, in); });
  registerNode("LRN", [](const NodeTest& n, const NodeInputs& in, Device) { return lrn(n, in); });
  registerNode("MeanVarianceNormalization",
               [](const NodeTest& n, const NodeInputs& in, Device) { return meanVarianceNorm(n, in); });
  registerNode("RMSNormalization", [](const NodeTest& n, const NodeInputs& in, Device) { return rmsNorm(n, in); });
  registerNode("LpNormalization", [](const NodeTest& n, const NodeInputs& in, Device) { return lpNorm(n, in); });
  registerNode("GroupNormalization", [](const NodeTest& n, const NodeInputs& in, Device) { return groupNorm(n, in); });
}

}  // namespace backplane::conformance::onnx
