// Shapes and data movement in the ONNX -> standard-op table (Note [ONNX op
// mapping] in onnx_ops.cc): Concat, Split, Transpose, Reshape, Flatten,
// Squeeze, Unsqueeze, Expand, Slice, Tile, Pad, CenterCropPad, DepthToSpace,
// SpaceToDepth, ReverseSequence, Trilu, Shape and Size (from ONNX's tensor
// domain). How the entries read a node: onnx_node_args.h.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "backplane/core/checked_math.h"
#include "backplane/core/error.h"
#include "backplane/core/scalar_type.h"
#include "backplane/ops/ops.h"
#include "onnx_node_args.h"

namespace backplane::conformance::onnx {
namespace {

NodeRun concat(const NodeTest& n, const NodeInputs& in) {
  std::vector<Tensor> ts;
  for (size_t i = 0; i < in.size(); ++i) ts.push_back(input(n, in, i));
  if (ts.empty()) return unsupported("Concat: no inputs");
  const int64_t axis = normAxis(n, n.intAttr("axis", n.opset < 4 ? 1 : 0), ts[0].dim());
  return outputs({cat(ts, axis)});
}

NodeRun split(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  const int64_t axis = normAxis(n, n.intAttr("axis", 0), x.dim());
  const int64_t size = x.size(axis);
  Ints parts;
  if (n.opset >= 13) {
    if (const Tensor* s = optionalInput(in, 1)) parts = intsOf(*s);
  } else if (auto s = n.intsAttr("split")) {
    parts = *s;
  } else if (const Tensor* s2 = optionalInput(in, 1)) {
    parts = intsOf(*s2);  // opset 2-12 took it as an attribute; opset 1 also as an input
  }
  if (parts.empty()) {
    const int64_t k = n.has("num_outputs") ? n.intAttr("num_outputs", 1) : static_cast<int64_t>(n.outputs.size());
    BP_CHECK(k >= 1, "Split: ", k, " outputs");
    if (n.has("num_outputs")) {
      const int64_t chunk = (size + k - 1) / k;
      for (int64_t i = 0; i < k; ++i) parts.push_back(std::max<int64_t>(0, std::min(chunk, size - i * chunk)));
    } else {
      BP_CHECK(size % k == 0, "Split: axis of size ", size, " does not split evenly into ", k, " outputs");
      parts.assign(static_cast<size_t>(k), size / k);
    }
  }
  BP_CHECK(std::accumulate(parts.begin(), parts.end(), int64_t{0}) == size, "Split: the split sizes do not add up to ",
           size);
  std::vector<Tensor> outs;
  int64_t at = 0;
  for (int64_t p : parts) {
    outs.push_back(x.narrow(axis, at, p));
    at += p;
  }
  return outputs(std::move(outs));
}

NodeRun transposeNode(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  Ints perm = n.intsAttr("perm").value_or(Ints{});
  if (perm.empty()) {
    for (int64_t d = x.dim() - 1; d >= 0; --d) perm.push_back(d);
  }
  return outputs({x.permute(perm)});
}

NodeRun reshapeNode(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  Ints shape = n.opset >= 5 ? intsOf(input(n, in, 1)) : n.intsAttr("shape").value_or(Ints{});
  const bool allow_zero = n.intAttr("allowzero", 0) != 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allow_zero) {
      BP_CHECK(static_cast<int64_t>(i) < x.dim(), "Reshape: a 0 at dim ", i, " copies a dim the input lacks");
      shape[i] = x.size(static_cast<int64_t>(i));
    }
  }
  return outputs({x.reshape(shape)});
}

NodeRun flattenNode(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  int64_t axis = n.intAttr("axis", 1);
  BP_CHECK(axis >= -x.dim() && axis <= x.dim(), "Flatten: axis ", axis, " is out of range for rank ", x.dim());
  if (axis < 0) axis += x.dim();
  const Ints s = sizesOf(x);
  return outputs(
      {x.reshape({product(s, 0, static_cast<size_t>(axis)), product(s, static_cast<size_t>(axis), s.size())})});
}

Ints axesArg(const NodeTest& n, const NodeInputs& in, int64_t input_since) {
  if (n.opset >= input_since) {
    const Tensor* a = optionalInput(in, 1);
    return a ? intsOf(*a) : Ints{};
  }
  return n.intsAttr("axes").value_or(Ints{});
}

NodeRun squeezeNode(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  Ints axes = axesArg(n, in, 13);
  if (axes.empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (x.size(d) == 1) axes.push_back(d);
    }
  }
  axes = normAxes(n, axes, x.dim());
  for (int64_t a : axes) BP_CHECK(x.size(a) == 1, "Squeeze: dim ", a, " has size ", x.size(a), ", not 1");
  return outputs({squeezeDims(x, axes)});
}

NodeRun unsqueezeNode(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  const Ints axes = normAxes(n, axesArg(n, in, 13), x.dim() + static_cast<int64_t>(axesArg(n, in, 13).size()));
  for (int64_t a : axes) x = x.unsqueeze(a);
  return outputs({x});
}

NodeRun expandNode(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  const Ints shape = intsOf(input(n, in, 1));
  const Ints xs = sizesOf(x);
  const size_t r = std::max(shape.size(), xs.size());
  Ints out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t a = i + xs.size() >= r ? xs[i + xs.size() - r] : 1;
    const int64_t b = i + shape.size() >= r ? shape[i + shape.size() - r] : 1;
    BP_CHECK(a == b || a == 1 || b == 1, "Expand: shape ", b, " does not broadcast with the input's ", a);
    out[i] = a == 1 ? b : a;
  }
  checkCreation(n, out, x.dtype());
  return outputs({x.expand(out).contiguous()});
}

NodeRun sliceNode(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  Ints starts, ends, axes, steps;
  if (n.opset >= 10) {
    starts = intsOf(input(n, in, 1));
    ends = intsOf(input(n, in, 2));
    if (const Tensor* a = optionalInput(in, 3)) axes = intsOf(*a);
    if (const Tensor* s = optionalInput(in, 4)) steps = intsOf(*s);
  } else {
    starts = n.intsAttr("starts").value_or(Ints{});
    ends = n.intsAttr("ends").value_or(Ints{});
    axes = n.intsAttr("axes").value_or(Ints{});
  }
  BP_CHECK(starts.size() == ends.size(), "Slice: starts and ends differ in length");
  if (axes.empty()) axes = allAxes(static_cast<int64_t>(starts.size()));
  if (steps.empty()) steps.assign(starts.size(), 1);
  BP_CHECK(axes.size() == starts.size() && steps.size() == starts.size(),
           "Slice: axes or steps differ in length from starts");
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t a = normAxis(n, axes[i], x.dim());
    const int64_t dim = x.size(a);
    BP_CHECK(steps[i] != 0, "Slice: step 0");
    // A step past the dim's length picks only the start: clamping it keeps
    // the arithmetic below from overflowing.
    const int64_t step = std::clamp<int64_t>(steps[i], -std::max<int64_t>(dim, 1), std::max<int64_t>(dim, 1));
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      const int64_t len = e > s ? (e - s + step - 1) / step : 0;
      x = len == 0 ? x.narrow(a, 0, 0) : x.slice(a, s, s + (len - 1) * step + 1, step);
    } else {
      if (dim == 0) continue;
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      const int64_t len = s > e ? (s - e - step - 1) / -step : 0;
      if (len == 0) {
        x = x.narrow(a, 0, 0);
      } else {
        // Backwards from s: forwards from dim-1-s in the reversed dim.
        const int64_t fs = dim - 1 - s;
        x = x.flip({a}).slice(a, fs, fs + (len - 1) * -step + 1, -step);
      }
    }
  }
  return outputs({x});
}

NodeRun tileNode(const NodeTest& n, const NodeInputs& in) {
  if (n.opset < 6) return unsupported("Tile: opset < 6 (tiles/axis inputs)");
  Tensor x = input(n, in, 0);
  const Ints reps = intsOf(input(n, in, 1));
  BP_CHECK(static_cast<int64_t>(reps.size()) == x.dim(), "Tile: repeats has ", reps.size(),
           " entries for an input of rank ", x.dim());
  // [d0, d1] -> [1, d0, 1, d1] -> [r0, d0, r1, d1] -> [r0 * d0, r1 * d1].
  Ints inter, expanded, out;
  for (int64_t d = 0; d < x.dim(); ++d) {
    inter.insert(inter.end(), {1, x.size(d)});
    expanded.insert(expanded.end(), {reps[d], x.size(d)});
  }
  checkCreation(n, expanded, x.dtype());  // [r0, d0, r1, d1]: the output's elements, without overflow
  for (int64_t d = 0; d < x.dim(); ++d) out.push_back(reps[d] * x.size(d));
  return outputs({x.reshape(inter).expand(expanded).reshape(out)});
}

NodeRun padNode(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  const std::string mode = n.stringAttr("mode", "constant");
  Ints pads, axes;
  double value = 0;
  if (n.opset >= 11) {
    pads = intsOf(input(n, in, 1));
    if (const Tensor* v = optionalInput(in, 2)) value = v->item<double>();
    if (const Tensor* a = optionalInput(in, 3)) axes = intsOf(*a);
  } else {
    pads = n.intsAttr(n.opset < 2 ? "paddings" : "pads").value_or(Ints{});
    value = n.floatAttr("value", 0.0);
  }
  const int64_t r = x.dim();
  if (axes.empty()) axes = allAxes(r);
  for (int64_t& a : axes) a = normAxis(n, a, r);
  BP_CHECK(pads.size() == 2 * axes.size(), "Pad: ", pads.size(), " pads for ", axes.size(), " axes");
  Ints begin(static_cast<size_t>(r), 0), end(static_cast<size_t>(r), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    begin[axes[i]] = pads[i];
    end[axes[i]] = pads[i + axes.size()];
  }
  {
    Ints out = sizesOf(x);
    for (int64_t d = 0; d < r; ++d) {
      out[d] = checkedAdd(checkedAdd(out[d], begin[d], "Pad's output size"), end[d], "Pad's output size");
    }
    checkCreation(n, out, x.dtype());
  }
  int64_t first = r;  // the first padded dim
  for (int64_t d = 0; d < r; ++d) {
    if (begin[d] != 0 || end[d] != 0) {
      first = d;
      break;
    }
  }
  if (first == r) return outputs({x});
  Ints list;  // torch's order: the last dim first
  for (int64_t d = r - 1; d >= first; --d) list.insert(list.end(), {begin[d], end[d]});
  if (mode == "constant") {
    const Scalar v = isFloatingType(x.dtype()) ? Scalar(value) : Scalar(static_cast<int64_t>(value));
    return outputs({callOp("constant_pad_nd", {x, list, v})});
  }
  if (mode != "reflect" && mode != "edge" && mode != "wrap") {
    return unsupported("Pad: mode '" + mode + "' has no standard op");
  }
  if (std::any_of(list.begin(), list.end(), [](int64_t p) { return p < 0; })) {
    return unsupported("Pad: negative pads in mode '" + mode + "'");
  }
  if (mode == "wrap") {
    // Circular: the dim's last `begin` elements before it, its first `end` after.
    for (int64_t d = first; d < r; ++d) {
      const int64_t size = x.size(d);
      if (begin[d] > size || end[d] > size) return unsupported("Pad: a wrap pad longer than its dim");
      x = cat({x.narrow(d, size - begin[d], begin[d]), x, x.narrow(d, 0, end[d])}, d);
    }
    return outputs({x});
  }
  const int64_t padded = r - first;
  if (padded > 3) return unsupported("Pad: mode '" + mode + "' pads at most the last 3 dims");
  // reflection_pad/replication_pad take one leading batch dim: fold the
  // unpadded leading dims into it.
  const Ints s = sizesOf(x);
  Ints folded{product(s, 0, static_cast<size_t>(first))};
  folded.insert(folded.end(), s.begin() + first, s.end());
  Tensor y = pad(x.reshape(folded), list, mode == "reflect" ? "reflect" : "replicate");
  Ints out(s.begin(), s.begin() + first);
  out.insert(out.end(), y.sizes().begin() + 1, y.sizes().end());
  return outputs({y.reshape(out)});
}

NodeRun shapeNode(const NodeTest& n, const NodeInputs& in, Device device) {
  Tensor x = input(n, in, 0);
  const int64_t r = x.dim();
  auto clampEnd = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
  const int64_t s = clampEnd(n.intAttr("start", 0)), e = clampEnd(n.intAttr("end", r));
  Ints dims;
  for (int64_t d = s; d < e; ++d) dims.push_back(x.size(d));
  return outputs({int64Tensor(dims, {static_cast<int64_t>(dims.size())}, device)});
}

NodeRun triluNode(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (x.dim() < 2) return unsupported("Trilu: the input must be at least 2-d");
  const int64_t k = optionalInput(in, 1) ? optionalInput(in, 1)->item<int64_t>() : 0;
  const TensorOptions opts{.dtype = ScalarType::Int64, .device = x.device()};
  Tensor diff = arange(x.size(-1), opts).unsqueeze(0) - arange(x.size(-2), opts).unsqueeze(1);
  Tensor keep = n.intAttr("upper", 1) != 0 ? diff.ge(Scalar(k)) : diff.le(Scalar(k));
  return outputs({where(keep, x, zeros_like(x))});
}

NodeRun centerCropPad(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  const Ints shape = intsOf(input(n, in, 1));
  Ints axes = n.intsAttr("axes").value_or(allAxes(static_cast<int64_t>(shape.size())));
  BP_CHECK(axes.size() == shape.size(), "CenterCropPad: shape has ", shape.size(), " entries for ", axes.size(),
           " axes");
  {
    Ints out = sizesOf(x);
    for (size_t i = 0; i < axes.size(); ++i) out[normAxis(n, axes[i], x.dim())] = shape[i];
    checkCreation(n, out, x.dtype());
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = normAxis(n, axes[i], x.dim()), dim = x.size(a), want = shape[i];
    BP_CHECK(want >= 0, "CenterCropPad: a negative size");
    if (want < dim) {
      x = x.narrow(a, (dim - want) / 2, want);
    } else if (want > dim) {
      const int64_t before = (want - dim) / 2;
      Ints zero_shape = sizesOf(x);
      zero_shape[a] = before;
      Ints after_shape = sizesOf(x);
      after_shape[a] = want - dim - before;
      const TensorOptions opts{.dtype = x.dtype(), .device = x.device()};
      x = cat({zeros(zero_shape, opts), x, zeros(after_shape, opts)}, a);
    }
  }
  return outputs({x});
}

NodeRun depthToSpace(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  const int64_t b = n.intAttr("blocksize", 0);
  if (x.dim() != 4 || b < 1 || b > x.size(1) || x.size(1) % (b * b) != 0) {
    return unsupported("DepthToSpace: needs a 4-d input whose channels divide by blocksize^2");
  }
  const int64_t N = x.size(0), C = x.size(1) / (b * b), H = x.size(2), W = x.size(3);
  const std::string mode = n.stringAttr("mode", "DCR");
  Tensor t;
  if (mode == "DCR") {
    t = x.reshape({N, b, b, C, H, W}).permute({0, 3, 4, 1, 5, 2});
  } else if (mode == "CRD") {
    t = x.reshape({N, C, b, b, H, W}).permute({0, 1, 4, 2, 5, 3});
  } else {
    return unsupported("DepthToSpace: unknown mode '" + mode + "'");
  }
  return outputs({t.reshape({N, C, H * b, W * b})});
}

NodeRun spaceToDepth(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  const int64_t b = n.intAttr("blocksize", 0);
  if (x.dim() != 4 || b < 1 || x.size(2) % b != 0 || x.size(3) % b != 0) {
    return unsupported("SpaceToDepth: needs a 4-d input whose height and width divide by blocksize");
  }
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2) / b, W = x.size(3) / b;
  return outputs({x.reshape({N, C, H, b, W, b}).permute({0, 3, 5, 1, 2, 4}).reshape({N, C * b * b, H, W})});
}

NodeRun reverseSequence(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (x.dim() < 2) return unsupported("ReverseSequence: the input must be at least 2-d");
  const int64_t batch_axis = normAxis(n, n.intAttr("batch_axis", 1), x.dim());
  const int64_t time_axis = normAxis(n, n.intAttr("time_axis", 0), x.dim());
  const Ints lens = intsOf(input(n, in, 1));
  const int64_t batch = x.size(batch_axis), time = x.size(time_axis);
  BP_CHECK(static_cast<int64_t>(lens.size()) == batch, "ReverseSequence: ", lens.size(),
           " sequence lengths for a batch of ", batch);
  // The source time step of each (time, batch): reversed within the length.
  Ints src(static_cast<size_t>(time * batch));
  for (int64_t t = 0; t < time; ++t) {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = std::clamp<int64_t>(lens[b], 0, time);
      src[t * batch + b] = t < len ? len - 1 - t : t;
    }
  }
  Ints shape(static_cast<size_t>(x.dim()), 1);
  shape[time_axis] = time;
  shape[batch_axis] = batch;
  Tensor idx = int64Tensor(src, {time, batch}, x.device());
  if (time_axis > batch_axis) idx = idx.t();
  idx = idx.reshape(shape).expand(x.sizes()).contiguous();
  return outputs({x.gather(time_axis, idx)});
}

}  // namespace

void registerDataMovementNodes() {
  registerNode("Concat", [](const NodeTest& n, const NodeInputs& in, Device) { return concat(n, in); });
  registerNode("Split", [](const NodeTest& n, const NodeInputs& in, Device) { return split(n, in); });
  registerNode("Transpose", [](const NodeTest& n, const NodeInputs& in, Device) { return transposeNode(n, in); });
  registerNode("Reshape", [](const NodeTest& n, const NodeInputs& in, Device) { return reshapeNode(n, in); });
  registerNode("Flatten", [](const NodeTest& n, const NodeInputs& in, Device) { return flattenNode(n, in); });
  registerNode("Squeeze", [](const NodeTest& n, const NodeInputs& in, Device) { return squeezeNode(n, in); });
  registerNode("Unsqueeze", [](const NodeTest& n, const NodeInputs& in, Device) { return unsqueezeNode(n, in); });
  registerNode("Expand", [](const NodeTest& n, const NodeInputs& in, Device) { return expandNode(n, in); });
  registerNode("Slice", [](const NodeTest& n, const NodeInputs& in, Device) { return sliceNode(n, in); });
  registerNode("Tile", [](const NodeTest& n, const NodeInputs& in, Device) { return tileNode(n, in); });
  registerNode("Pad", [](const NodeTest& n, const NodeInputs& in, Device) { return padNode(n, in); });
  registerNode("Shape", [](const NodeTest& n, const NodeInputs& in, Device d) { return shapeNode(n, in, d); });
  registerNode("Size", [](const NodeTest& n, const NodeInputs& in, Device d) {
    return outputs({int64Tensor({input(n, in, 0).numel()}, {}, d)});
  });
  registerNode("Trilu", [](const NodeTest& n, const NodeInputs& in, Device) { return triluNode(n, in); });
  registerNode("CenterCropPad", [](const NodeTest& n, const NodeInputs& in, Device) { return centerCropPad(n, in); });
  registerNode("DepthToSpace", [](const NodeTest& n, const NodeInputs& in, Device) { return depthToSpace(n, in); });
  registerNode("SpaceToDepth", [](const NodeTest& n, const NodeInputs& in, Device) { return spaceToDepth(n, in); });
  registerNode("ReverseSequence",
               [](const NodeTest& n, const NodeInputs& in, Device) { return reverseSequence(n, in); });
}

}  // namespace backplane::conformance::onnx
