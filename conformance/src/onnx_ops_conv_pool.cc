// Convolution and pooling in the ONNX -> standard-op table (Note [ONNX op
// mapping] in onnx_ops.cc): Conv, ConvTranspose, MaxPool, AveragePool,
// LpPool, GlobalMaxPool, GlobalAveragePool, MaxUnpool and Col2Im (from
// ONNX's nn domain). How the entries read a node: onnx_node_args.h.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backplane/core/checked_math.h"
#include "backplane/core/error.h"
#include "backplane/core/scalar_type.h"
#include "backplane/ops/ops.h"
#include "onnx_node_args.h"

namespace backplane::conformance::onnx {
namespace {

struct Window {
  Ints kernel, stride, dilation, pad_begin, pad_end;
};

// The kernel, strides, dilations and (begin, end) pads of a 1-d or 2-d
// window over the spatial dims of `x` (auto_pad resolved as ONNX does),
// or the reason it is unsupported.
std::optional<std::string> windowOf(const NodeTest& n, const Tensor& x, const Ints& kernel, Window& w) {
  const size_t s = kernel.size();
  w.kernel = kernel;
  w.stride = n.intsAttr("strides").value_or(Ints(s, 1));
  w.dilation = n.intsAttr("dilations").value_or(Ints(s, 1));
  Ints pads = n.intsAttr("pads").value_or(Ints(2 * s, 0));
  if (w.stride.size() != s || w.dilation.size() != s || pads.size() != 2 * s) {
    return n.op_type + ": strides, dilations or pads do not match the kernel's rank";
  }
  w.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(s));
  w.pad_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(s), pads.end());
  for (size_t i = 0; i < s; ++i) {
    if (w.stride[i] < 1 || w.dilation[i] < 1 || w.kernel[i] < 1) {
      return n.op_type + ": kernel sizes, strides and dilations must be positive";
    }
  }
  const std::string auto_pad = n.stringAttr("auto_pad", "NOTSET");
  if (auto_pad == "VALID") {
    std::fill(w.pad_begin.begin(), w.pad_begin.end(), 0);
    std::fill(w.pad_end.begin(), w.pad_end.end(), 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < s; ++i) {
      const int64_t in = x.size(static_cast<int64_t>(i) + 2);
      const int64_t out = (in + w.stride[i] - 1) / w.stride[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * w.stride[i] + (w.kernel[i] - 1) * w.dilation[i] + 1 - in);
      w.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[i] = total - w.pad_begin[i];
    }
  } else if (auto_pad != "NOTSET" && !auto_pad.empty()) {
    return n.op_type + ": unknown auto_pad '" + auto_pad + "'";
  }
  for (size_t i = 0; i < s; ++i) {
    if (w.pad_begin[i] < 0 || w.pad_end[i] < 0) {
      return n.op_type + ": pads must be non-negative";
    }
  }
  return std::nullopt;
}

// A 1-d window as the 2-d one over [N, C, 1, L].
void widen1d(Window& w) {
  w.kernel.insert(w.kernel.begin(), 1);
  w.stride.insert(w.stride.begin(), 1);
  w.dilation.insert(w.dilation.begin(), 1);
  w.pad_begin.insert(w.pad_begin.begin(), 0);
  w.pad_end.insert(w.pad_end.begin(), 0);
}

// torch's pad list (last dim first) padding the two spatial dims of a 4-d input.
Ints spatialPadList(const Window& w) { return {w.pad_begin[1], w.pad_end[1], w.pad_begin[0], w.pad_end[0]}; }

bool symmetric(const Window& w) { return w.pad_begin == w.pad_end; }

NodeRun conv(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0), weight = input(n, in, 1);
  const Tensor* bias = optionalInput(in, 2);
  if (x.dim() != 3 && x.dim() != 4) return unsupported("Conv: only 1-d and 2-d convolutions have a standard op");
  if (weight.dim() != x.dim()) return unsupported("Conv: W's rank differs from X's");
  const bool one_d = x.dim() == 3;
  Ints kernel(weight.sizes().begin() + 2, weight.sizes().end());
  if (auto ks = n.intsAttr("kernel_shape"); ks && *ks != kernel) {
    return unsupported("Conv: kernel_shape differs from W's spatial shape");
  }
  Window w;
  if (auto why = windowOf(n, x, kernel, w)) return unsupported(*why);
  if (one_d) {
    x = x.unsqueeze(2);
    weight = weight.unsqueeze(2);
    widen1d(w);
  }
  Ints padding = w.pad_begin;
  if (!symmetric(w)) {
    x = pad(x, spatialPadList(w));
    padding = {0, 0};
  }
  std::optional<Tensor> b;
  if (bias) b = *bias;
  Tensor y = conv2d(x, weight, b, w.stride, padding, w.dilation, n.intAttr("group", 1));
  return outputs({one_d ? y.squeeze(2) : y});
}

// An average pool as depthwise convolutions with a window of ones over the
// zero-padded input (conv2d has dilations and takes any pads): the window's
// sum over the window's size, or over the count of its unpadded elements
// (count_include_pad=0). `x` is [N, C, H, W]; no ceil_mode.
Tensor averageByConvolution(const Tensor& x, const Window& w, bool count_include_pad) {
  const Ints pads = spatialPadList(w);
  const int64_t c = x.size(1);
  const TensorOptions opts{.dtype = x.dtype(), .device = x.device()};
  Tensor sum =
      conv2d(pad(x, pads), ones({c, 1, w.kernel[0], w.kernel[1]}, opts), std::nullopt, w.stride, {0, 0}, w.dilation, c);
  if (count_include_pad) return sum / static_cast<double>(w.kernel[0] * w.kernel[1]);
  Tensor mask = pad(ones({1, 1, x.size(2), x.size(3)}, opts), pads);
  Tensor count = conv2d(mask, ones({1, 1, w.kernel[0], w.kernel[1]}, opts), std::nullopt, w.stride, {0, 0}, w.dilation);
  return sum / count;
}

// ConvTranspose as a convolution (1-d and 2-d): the input with stride - 1
// zeros between its elements, padded by dilation * (kernel - 1) less the
// pads (output_padding more at the end), convolved at stride 1 with the
// kernel flipped and its in/out channels swapped within each group.
NodeRun convTranspose(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0), weight = input(n, in, 1);
  const Tensor* bias = optionalInput(in, 2);
  if (x.dim() != 3 && x.dim() != 4) return unsupported("ConvTranspose: only 1-d and 2-d have a standard op");
  if (weight.dim() != x.dim()) return unsupported("ConvTranspose: W's rank differs from X's");
  const size_t s = static_cast<size_t>(x.dim() - 2);
  const int64_t groups = n.intAttr("group", 1);
  Ints kernel(weight.sizes().begin() + 2, weight.sizes().end());
  if (auto ks = n.intsAttr("kernel_shape"); ks && *ks != kernel) {
    return unsupported("ConvTranspose: kernel_shape differs from W's spatial shape");
  }
  Ints stride = n.intsAttr("strides").value_or(Ints(s, 1));
  Ints dilation = n.intsAttr("dilations").value_or(Ints(s, 1));
  Ints out_pad = n.intsAttr("output_padding").value_or(Ints(s, 0));
  Ints pads = n.intsAttr("pads").value_or(Ints(2 * s, 0));
  if (stride.size() != s || dilation.size() != s || out_pad.size() != s || pads.size() != 2 * s) {
    return unsupported("ConvTranspose: strides, dilations, output_padding or pads do not match the kernel's rank");
  }
  for (size_t i = 0; i < s; ++i) {
    if (stride[i] < 1 || dilation[i] < 1 || kernel[i] < 1 || out_pad[i] < 0) {
      return unsupported("ConvTranspose: kernel, strides and dilations must be positive, output_padding not negative");
    }
  }
  if (groups < 1 || weight.size(0) % groups != 0 || x.size(1) != weight.size(0)) {
    return unsupported("ConvTranspose: W's input channels do not match X's channels and group");
  }
  const std::string auto_pad = n.stringAttr("auto_pad", "NOTSET");
  auto out_shape = n.intsAttr("output_shape");
  if (out_shape && out_shape->size() == s + 2) out_shape->erase(out_shape->begin(), out_shape->begin() + 2);
  if (out_shape && out_shape->size() != s) return unsupported("ConvTranspose: output_shape's rank");
  Ints begin(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(s));
  Ints end(pads.begin() + static_cast<std::ptrdiff_t>(s), pads.end());
  for (size_t i = 0; i < s; ++i) {
    const int64_t in_size = x.size(static_cast<int64_t>(i) + 2), eff = (kernel[i] - 1) * dilation[i] + 1;
    if (out_shape || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // The pads that give the wanted output size, split as ONNX does.
      const int64_t target = out_shape ? (*out_shape)[i] : in_size * stride[i];
      // A negative total (an output larger than the natural one) halves
      // towards negative infinity, as ONNX's reference (Python's //) does.
      const int64_t total = stride[i] * (in_size - 1) + out_pad[i] + eff - target;
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      if (auto_pad == "SAME_UPPER") {
        begin[i] = half;
        end[i] = total - half;
      } else {
        begin[i] = total - half;
        end[i] = half;
      }
    } else if (auto_pad == "VALID") {
      begin[i] = end[i] = 0;
    } else if (auto_pad != "NOTSET" && !auto_pad.empty()) {
      return unsupported("ConvTranspose: unknown auto_pad '" + auto_pad + "'");
    }
  }
  const bool one_d = s == 1;
  if (one_d) {
    x = x.unsqueeze(2);
    weight = weight.unsqueeze(2);
    for (Ints* v : {&kernel, &stride, &dilation, &begin, &end, &out_pad})
      v->insert(v->begin(), v == &kernel || v == &stride || v == &dilation ? 1 : 0);
  }
  {
    Ints spread = sizesOf(x);
    for (int64_t i = 0; i < 2; ++i)
      spread[2 + i] = checkedMul(spread[2 + i], stride[i], "ConvTranspose's spread input");
    checkCreation(n, spread, x.dtype(), "the input spread out by the strides");
  }
  // stride - 1 zeros after each element, the trailing ones cut.
  Tensor z = x;
  for (int64_t i = 0; i < 2; ++i) {
    if (stride[i] == 1) continue;
    const int64_t d = 2 + i, size = z.size(d);
    Ints spread = sizesOf(z);
    spread[d] = size * stride[i];
    Ints pad_list = i == 0 ? Ints{0, 0, 0, stride[i] - 1} : Ints{0, stride[i] - 1};
    z = pad(z.unsqueeze(d + 1), pad_list).reshape(spread).narrow(d, 0, (size - 1) * stride[i] + 1);
  }
  Ints around;
  for (int64_t i = 1; i >= 0; --i) {
    around.push_back(dilation[i] * (kernel[i] - 1) - begin[i]);
    around.push_back(dilation[i] * (kernel[i] - 1) - end[i] + out_pad[i]);
  }
  z = pad(z, around);
  const int64_t c_in = weight.size(0), m_per_group = weight.size(1);
  Tensor w2 = weight.reshape({groups, c_in / groups, m_per_group, kernel[0], kernel[1]})
                  .transpose(1, 2)
                  .reshape({groups * m_per_group, c_in / groups, kernel[0], kernel[1]})
                  .flip({2, 3});
  std::optional<Tensor> b;
  if (bias) b = *bias;
  Tensor y = conv2d(z, w2, b, {1, 1}, {0, 0}, dilation, groups);
  return outputs({one_d ? y.squeeze(2) : y});
}

enum class Pooling { Max, Average, SumOfPowers };

// Pooling over any number of spatial dims, with no pooling op: the
// input padded (-inf for max, 0 otherwise; ceil_mode's overhang too), then
// one strided slice per kernel offset, combined with maximum or add. An
// average divides by the same windows summed over a mask of what counts
// (the input, plus the pads when count_include_pad; never the overhang).
// `x` is [N, C, spatial...], floating.
// For Max, `indices` (when given) receives each maximum's flat position in
// x (the first in window order on ties), as MaxPool's Indices: row-major,
// or with the last two dims column-major (H fastest) when `column_major`.
Tensor slidingPool(const Tensor& x, const Window& w, Pooling kind, bool ceil_mode, bool count_include_pad,
                   Tensor* indices = nullptr, bool column_major = false) {
  const size_t s = w.kernel.size();
  Ints out(s), extra(s);
  for (size_t i = 0; i < s; ++i) {
    const int64_t in = x.size(static_cast<int64_t>(i) + 2), eff = (w.kernel[i] - 1) * w.dilation[i] + 1;
    const int64_t span = in + w.pad_begin[i] + w.pad_end[i] - eff;
    BP_CHECK(span >= 0, "pooling: the window (", eff, ") is larger than the padded input (", span + eff, ")");
    out[i] = (ceil_mode ? (span + w.stride[i] - 1) / w.stride[i] : span / w.stride[i]) + 1;
    // As PyTorch and ONNX: no window may start in the end padding.
    if (ceil_mode && (out[i] - 1) * w.stride[i] >= in + w.pad_begin[i]) --out[i];
    extra[i] = std::max<int64_t>(0, (out[i] - 1) * w.stride[i] + eff - (span + eff));
  }
  auto padList = [&](bool with_pads, bool with_extra_as_pad) {
    Ints list;
    for (size_t i = s; i-- > 0;) {
      list.push_back(with_pads ? w.pad_begin[i] : 0);
      list.push_back((with_pads ? w.pad_end[i] : 0) + (with_extra_as_pad ? extra[i] : 0));
    }
    return list;
  };
  // The strided slice of `t` at each kernel offset, in window (row-major) order.
  auto slices = [&](const Tensor& t) {
    std::vector<Tensor> result;
    Ints offset(s, 0);
    while (true) {
      Tensor v = t;
      for (size_t i = 0; i < s; ++i) {
        const int64_t start = offset[i] * w.dilation[i];
        v = v.slice(static_cast<int64_t>(i) + 2, start, start + (out[i] - 1) * w.stride[i] + 1, w.stride[i]);
      }
      result.push_back(v);
      size_t i = s;
      while (i > 0 && ++offset[i - 1] == w.kernel[i - 1]) offset[--i] = 0;
      if (i == 0) return result;
    }
  };
  auto windows = [&](const Tensor& t, bool take_max) {
    Tensor acc;
    for (const Tensor& v : slices(t)) acc = !acc.defined() ? v.clone() : take_max ? maximum(acc, v) : acc + v;
    return acc;
  };
  if (kind == Pooling::Max) {
    Tensor padded = pad(x, padList(true, true), "constant", -std::numeric_limits<double>::infinity());
    Tensor best = windows(padded, true);
    if (indices) {
      const TensorOptions int64_opts{.dtype = ScalarType::Int64, .device = x.device()};
      Tensor grid =
          column_major
              ? arange(x.numel(), int64_opts).reshape({x.size(0), x.size(1), x.size(3), x.size(2)}).transpose(2, 3)
              : arange(x.numel(), int64_opts).reshape(x.sizes());
      grid = callOp("constant_pad_nd", {grid, padList(true, true), Scalar(int64_t{-1})});
      const std::vector<Tensor> values = slices(padded), positions = slices(grid);
      Tensor found = zeros_like(best, {.dtype = ScalarType::Bool});
      Tensor idx = zeros_like(best, {.dtype = ScalarType::Int64});
      for (size_t j = 0; j < values.size(); ++j) {
        Tensor take = logical_and(logical_not(found), values[j].eq(best));
        idx = where(take, positions[j], idx);
        found = logical_or(found, take);
      }
      *indices = idx;
    }
    return best;
  }
  Tensor sum = windows(pad(x, padList(true, true)), false);
  if (kind == Pooling::SumOfPowers) return sum;
  Ints mask_shape(s + 2, 1);
  for (size_t i = 0; i < s; ++i) mask_shape[i + 2] = x.size(static_cast<int64_t>(i) + 2);
  Tensor mask = ones(mask_shape, {.dtype = x.dtype(), .device = x.device()});
  // Counted: the input, and the pads when count_include_pad; never the overhang.
  mask = count_include_pad ? pad(pad(mask, padList(true, false), "constant", 1.0), padList(false, true))
                           : pad(mask, padList(true, true));
  return sum / windows(mask, false);
}

NodeRun pool(const NodeTest& n, const NodeInputs& in, bool is_max) {
  Tensor x = input(n, in, 0);
  if (x.dim() < 3) return unsupported(n.op_type + ": the input has no spatial dims");
  const ScalarType dtype = x.dtype();
  // A max picks an element, so one of up to 32 bits pools exactly as float64.
  const bool exact_in_double = is_max && isIntegralType(dtype, false) && elementSize(dtype) <= 4;
  if (!isFloatingType(dtype) && !exact_in_double) {
    return unsupported(n.op_type + ": " + std::string(scalarTypeName(dtype)) + " input; the pooling ops take floats");
  }
  const bool wants_indices = is_max && wantsOutput(n, 1);
  const bool column_major = n.intAttr("storage_order", 0) != 0;
  if (wants_indices && column_major && x.dim() != 4) {
    return unsupported("MaxPool: column-major Indices (storage_order=1) are mapped for 2-d pooling only");
  }
  auto ks = n.intsAttr("kernel_shape");
  if (!ks || static_cast<int64_t>(ks->size()) != x.dim() - 2) {
    return unsupported(n.op_type + ": kernel_shape is missing or does not match the input's rank");
  }
  Window w;
  if (auto why = windowOf(n, x, *ks, w)) return unsupported(*why);
  bool ceil_mode = n.intAttr("ceil_mode", 0) != 0;
  const bool count_include_pad = n.intAttr("count_include_pad", 0) != 0;
  if (x.dim() > 4 || wants_indices) {
    // 3-d and more, or the Indices: no pooling op; strided slices combined.
    if (exact_in_double) x = x.to(ScalarType::Float64);
    Tensor idx;
    Tensor y = slidingPool(x, w, is_max ? Pooling::Max : Pooling::Average, ceil_mode, count_include_pad,
                           wants_indices ? &idx : nullptr, column_major);
    if (exact_in_double) y = y.to(dtype);
    return outputs(wants_indices ? std::vector<Tensor>{y, idx} : std::vector<Tensor>{y});
  }
  const bool one_d = x.dim() == 3;
  if (one_d) {
    x = x.unsqueeze(2);
    widen1d(w);
  }
  if (exact_in_double) x = x.to(ScalarType::Float64);
  // ceil_mode changes nothing where the windows tile the padded input exactly.
  bool tiles = true;
  for (size_t i = 0; i < 2; ++i) {
    const int64_t span =
        x.size(static_cast<int64_t>(i) + 2) + w.pad_begin[i] + w.pad_end[i] - (w.kernel[i] - 1) * w.dilation[i] - 1;
    tiles = tiles && span >= 0 && span % w.stride[i] == 0;
  }
  if (tiles) ceil_mode = false;
  // torch pads at most half the (dilated) window on each side, the same on
  // both; other pads are applied first: -inf for max (never picked), and
  // for an average, convolutions count what they must. With ceil_mode
  // there, strided slices pool instead.
  bool fits = symmetric(w);
  for (size_t i = 0; i < 2; ++i) fits = fits && w.pad_begin[i] <= ((w.kernel[i] - 1) * w.dilation[i] + 1) / 2;
  const bool dilated = std::any_of(w.dilation.begin(), w.dilation.end(), [](int64_t d) { return d != 1; });
  Tensor y;
  if (ceil_mode && (!fits || (!is_max && dilated))) {
    y = slidingPool(x, w, is_max ? Pooling::Max : Pooling::Average, true, count_include_pad);
  } else if (!is_max && (dilated || !fits)) {
    y = averageByConvolution(x, w, count_include_pad);
  } else if (is_max && !fits) {
    y = callOp("max_pool2d", {pad(x, spatialPadList(w), "constant", -std::numeric_limits<double>::infinity()), w.kernel,
                              w.stride, Ints{0, 0}, w.dilation, false});
  } else if (is_max) {
    y = callOp("max_pool2d", {x, w.kernel, w.stride, w.pad_begin, w.dilation, ceil_mode});
  } else {
    y = callOp("avg_pool2d", {x, w.kernel, w.stride, w.pad_begin, ceil_mode, count_include_pad});
  }
  if (exact_in_double) y = y.to(dtype);
  return outputs({one_d ? y.squeeze(2) : y});
}

NodeRun lpPool(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (x.dim() < 3 || !isFloatingType(x.dtype())) return unsupported("LpPool: needs a float input with spatial dims");
  auto ks = n.intsAttr("kernel_shape");
  if (!ks || static_cast<int64_t>(ks->size()) != x.dim() - 2) {
    return unsupported("LpPool: kernel_shape is missing or does not match the input's rank");
  }
  Window w;
  if (auto why = windowOf(n, x, *ks, w)) return unsupported(*why);
  const double p = static_cast<double>(n.intAttr("p", 2));
  if (p < 1) return unsupported("LpPool: p must be at least 1");
  // (sum over the window of |x|^p)^(1/p), the pads counting 0.
  Tensor sum = slidingPool(x.abs().pow(Scalar(p)), w, Pooling::SumOfPowers, n.intAttr("ceil_mode", 0) != 0, true);
  return outputs({sum.pow(Scalar(1.0 / p))});
}

NodeRun globalPool(const NodeTest& n, const NodeInputs& in, bool is_max) {
  Tensor x = input(n, in, 0);
  if (x.dim() < 3) return unsupported(n.op_type + ": the input has no spatial dims");
  Ints dims;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return outputs({is_max ? x.amax(dims, true) : x.mean(dims, true)});
}

NodeRun maxUnpool(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0), indices = input(n, in, 1);
  if (x.dim() < 3) return unsupported("MaxUnpool: the input has no spatial dims");
  const size_t s = static_cast<size_t>(x.dim() - 2);
  auto ks = n.intsAttr("kernel_shape");
  if (!ks || ks->size() != s) return unsupported("MaxUnpool: kernel_shape is missing or does not match the input");
  const Ints stride = n.intsAttr("strides").value_or(Ints(s, 1));
  const Ints pads = n.intsAttr("pads").value_or(Ints(2 * s, 0));
  if (stride.size() != s || pads.size() != 2 * s) return unsupported("MaxUnpool: strides or pads of the wrong rank");
  Ints shape{x.size(0), x.size(1)};
  for (size_t i = 0; i < s; ++i) {
    const int64_t spread = checkedMul(x.size(static_cast<int64_t>(i) + 2) - 1, stride[i], "MaxUnpool's output size");
    shape.push_back(checkedAdd(spread, (*ks)[i] - pads[i] - pads[i + s], "MaxUnpool's output size"));
  }
  checkCreation(n, shape, x.dtype());
  if (const Tensor* o = optionalInput(in, 2); o && intsOf(*o) != shape) {
    return unsupported("MaxUnpool: an output_shape other than the inferred one is not mapped");
  }
  // The indices are flat positions in the whole output; the rest is 0.
  Tensor flat = zeros({product(shape, 0, shape.size())}, {.dtype = x.dtype(), .device = x.device()});
  Tensor idx = indices.to(ScalarType::Int64).reshape({indices.numel()});
  return outputs({callOp("scatter_add", {flat, int64_t{0}, idx, x.reshape({x.numel()})}).reshape(shape)});
}

// Col2Im: each column's block added into the (padded) image with
// scatter_add at positions computed on the host, the pads then cut.
NodeRun col2im(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  const Ints image = intsOf(input(n, in, 1)), block = intsOf(input(n, in, 2));
  const size_t k = image.size();
  if (x.dim() != 3 || block.size() != k || k == 0) return unsupported("Col2Im: needs [N, C*K, L] and matching shapes");
  const Ints dil = n.intsAttr("dilations").value_or(Ints(k, 1)), stride = n.intsAttr("strides").value_or(Ints(k, 1));
  const Ints pads = n.intsAttr("pads").value_or(Ints(2 * k, 0));
  if (dil.size() != k || stride.size() != k || pads.size() != 2 * k) return unsupported("Col2Im: attribute ranks");
  Ints padded(k), blocks(k);
  for (size_t i = 0; i < k; ++i) {
    if (dil[i] < 1 || stride[i] < 1 || block[i] < 1)
      return unsupported("Col2Im: non-positive block, stride or dilation");
    padded[i] = image[i] + pads[i] + pads[i + k];
    blocks[i] = (padded[i] - (dil[i] * (block[i] - 1) + 1)) / stride[i] + 1;
  }
  {
    Ints out{x.size(0), x.size(1)};
    out.insert(out.end(), padded.begin(), padded.end());
    checkCreation(n, out, x.dtype(), "the padded image");
    Ints positions = block;
    positions.insert(positions.end(), blocks.begin(), blocks.end());
    for (int64_t& b : positions) b = std::max<int64_t>(b, 0);
    checkCreation(n, positions, ScalarType::Int64, "the scatter positions");
  }
  const int64_t kernel = product(block, 0, k), cols = product(blocks, 0, k);
  if (x.size(1) % kernel != 0 || x.size(2) != cols) return unsupported("Col2Im: the input does not match the blocks");
  const int64_t channels = x.size(1) / kernel;
  Ints target(static_cast<size_t>(kernel * cols));
  Ints kk(k, 0);
  for (int64_t a = 0; a < kernel; ++a) {
    Ints l(k, 0);
    for (int64_t b = 0; b < cols; ++b) {
      int64_t flat = 0;
      for (size_t i = 0; i < k; ++i) flat = flat * padded[i] + l[i] * stride[i] + kk[i] * dil[i];
      target[static_cast<size_t>(a * cols + b)] = flat;
      for (size_t i = k; i-- > 0;) {
        if (++l[i] < blocks[i]) break;
        l[i] = 0;
      }
    }
    for (size_t i = k; i-- > 0;) {
      if (++kk[i] < block[i]) break;
      kk[i] = 0;
    }
  }
  const int64_t batch = x.size(0);
  Tensor idx =
      int64Tensor(target, {1, 1, kernel * cols}, x.device()).expand({batch, channels, kernel * cols}).contiguous();
  Tensor out = zeros({batch, channels, product(padded, 0, k)}, {.dtype = x.dtype(), .device = x.device()});
  out = callOp("scatter_add", {out, int64_t{2}, idx, x.reshape({batch, channels, kernel * cols})});
  Ints shape{batch, channels};
  shape.insert(shape.end(), padded.begin(), padded.end());
  out = out.reshape(shape);
  for (size_t i = 0; i < k; ++i) out = out.narrow(static_cast<int64_t>(i) + 2, pads[i], image[i]);
  return outputs({out.contiguous()});
}

}  // namespace

void registerConvPoolNodes() {
  registerNode("Conv", [](const NodeTest& n, const NodeInputs& in, Device) { return conv(n, in); });
  registerNode("ConvTranspose", [](const NodeTest& n, const NodeInputs& in, Device) { return convTranspose(n, in); });
  registerNode("MaxPool", [](const NodeTest& n, const NodeInputs& in, Device) { return pool(n, in, true); });
  registerNode("AveragePool", [](const NodeTest& n, const NodeInputs& in, Device) { return pool(n, in, false); });
  registerNode("LpPool", [](const NodeTest& n, const NodeInputs& in, Device) { return lpPool(n, in); });
  registerNode("GlobalMaxPool",
               [](const NodeTest& n, const NodeInputs& in, Device) { return globalPool(n, in, true); });
  registerNode("GlobalAveragePool",
               [](const NodeTest& n, const NodeInputs& in, Device) { return globalPool(n, in, false); });
  registerNode("MaxUnpool", [](const NodeTest& n, const NodeInputs& in, Device) { return maxUnpool(n, in); });
  registerNode("Col2Im", [](const NodeTest& n, const NodeInputs& in, Device) { return col2im(n, in); });
}

}  // namespace backplane::conformance::onnx
