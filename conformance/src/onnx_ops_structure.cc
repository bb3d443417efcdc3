// The table's entries for ONNX's structural ops: reductions, arg-reductions,
// matrix products, convolution and pooling, normalizations, softmax, and
// the gather/scatter, shape and data-movement ops (Note [ONNX op mapping]).
//
// Each entry reads the attributes (and the inputs that carry attributes
// from some opset on: axes, shapes, pads, k) on the host, decides
// "unsupported" before calling any op where no standard op expresses the
// node exactly, and composes Backplane's standard ops on the device under
// test.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/onnx_ops.h"
#include "backplane/core/error.h"
#include "backplane/core/scalar_type.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"

namespace backplane::conformance::onnx {
namespace {

using Ints = std::vector<int64_t>;

const Tensor* optionalInput(const NodeInputs& in, size_t i) { return i < in.size() && in[i] ? &*in[i] : nullptr; }

Tensor input(const NodeTest& n, const NodeInputs& in, size_t i) {
  const Tensor* t = optionalInput(in, i);
  BP_CHECK(t != nullptr, n.op_type, ": input ", i, " is required but missing");
  return *t;
}

bool wantsOutput(const NodeTest& n, size_t i) { return i < n.outputs.size() && !n.outputs[i].empty(); }

Ints intsOf(const Tensor& t) { return t.toVector<int64_t>(); }

// An ONNX axis in [-rank, rank) as a dim in [0, rank).
int64_t normAxis(const NodeTest& n, int64_t axis, int64_t rank) {
  BP_CHECK(axis >= -rank && axis < std::max<int64_t>(rank, 1), n.op_type, ": axis ", axis, " is out of range for rank ",
           rank);
  return axis < 0 ? axis + rank : axis;
}

Ints normAxes(const NodeTest& n, Ints axes, int64_t rank) {
  for (int64_t& a : axes) a = normAxis(n, a, rank);
  std::sort(axes.begin(), axes.end());
  BP_CHECK(std::adjacent_find(axes.begin(), axes.end()) == axes.end(), n.op_type, ": an axis is repeated");
  return axes;
}

Ints allAxes(int64_t rank) {
  Ints r(static_cast<size_t>(rank));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

Ints sizesOf(const Tensor& t) { return Ints(t.sizes().begin(), t.sizes().end()); }

int64_t product(const Ints& v, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= v[i];
  return p;
}

// A host int64 vector as a 1-d tensor on `device`.
Tensor int64Tensor(const Ints& v, IntArrayRef sizes, Device device) {
  return Tensor(tensorFromVector(v, sizes, Device(DeviceType::CPU))).to(device);
}

// Calls a standard op with no C++ function in ops.h, by name.
Tensor callOp(const std::string& name, Stack stack) {
  Dispatcher::singleton().findOpOrThrow("bp::" + name).callBoxed(stack);
  return Tensor(stack.at(0).toTensor());
}

// Squeezes `dims` (ascending) out of t, last first.
Tensor squeezeDims(Tensor t, const Ints& dims) {
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) t = t.squeeze(*it);
  return t;
}

// --- Reductions.

enum class Reduce { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

NodeRun reduce(const NodeTest& n, const NodeInputs& in, Reduce kind, int64_t axes_input_since) {
  Tensor x = input(n, in, 0);
  const bool keep = n.intAttr("keepdims", 1) != 0;
  Ints axes;
  if (n.opset >= axes_input_since) {
    if (const Tensor* a = optionalInput(in, 1)) axes = intsOf(*a);
  } else if (auto a = n.intsAttr("axes")) {
    axes = *a;
  }
  if (axes.empty()) {
    if (n.opset >= axes_input_since && n.intAttr("noop_with_empty_axes", 0) != 0) return outputs({x});
    axes = allAxes(x.dim());
  }
  axes = normAxes(n, axes, x.dim());
  const bool floating = isFloatingType(x.dtype());
  if (!floating &&
      (kind == Reduce::Mean || kind == Reduce::L2 || kind == Reduce::LogSum || kind == Reduce::LogSumExp)) {
    return unsupported(n.op_type + ": integer input (" + std::string(scalarTypeName(x.dtype())) +
                       "): ONNX keeps the integer dtype, which no standard op's result has");
  }
  // A reduction over an empty set gives the reduction's identity (ONNX 18).
  const Ints sizes = sizesOf(x);
  bool empty_set = false;
  for (int64_t a : axes) empty_set = empty_set || sizes[a] == 0;
  if (empty_set) {
    Ints out;
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (std::binary_search(axes.begin(), axes.end(), d)) {
        if (keep) out.push_back(1);
      } else {
        out.push_back(sizes[d]);
      }
    }
    double identity = 0;
    const double inf = std::numeric_limits<double>::infinity();
    switch (kind) {
      case Reduce::Prod: identity = 1; break;
      case Reduce::Max: identity = -inf; break;
      case Reduce::Min: identity = inf; break;
      case Reduce::LogSum:
      case Reduce::LogSumExp: identity = -inf; break;
      case Reduce::Mean: return unsupported(n.op_type + ": the mean of an empty set is undefined");
      default: break;
    }
    if (!floating && std::isinf(identity)) {
      return unsupported(n.op_type + ": an empty reduction of an integer input has no infinity to give");
    }
    return outputs({full(out, Scalar(identity), {.dtype = x.dtype(), .device = x.device()})});
  }
  const ScalarType dt = x.dtype();
  switch (kind) {
    case Reduce::Sum: return outputs({x.sum(axes, keep, dt)});
    case Reduce::Mean: return outputs({x.mean(axes, keep)});
    case Reduce::Max: return outputs({x.amax(axes, keep)});
    case Reduce::Min: return outputs({x.amin(axes, keep)});
    case Reduce::Prod: {
      Tensor t = x;
      for (auto it = axes.rbegin(); it != axes.rend(); ++it) t = t.prod(*it, true, dt);
      return outputs({keep ? t : squeezeDims(t, axes)});
    }
    case Reduce::L1: return outputs({x.abs().sum(axes, keep, dt)});
    case Reduce::L2: return outputs({(x * x).sum(axes, keep, dt).sqrt()});
    case Reduce::SumSquare: return outputs({(x * x).sum(axes, keep, dt)});
    case Reduce::LogSum: return outputs({x.sum(axes, keep, dt).log()});
    case Reduce::LogSumExp: {
      // log(sum(exp(x - m))) + m with m the max (0 where infinite), as
      // torch.logsumexp: the same value without overflowing exp.
      Tensor m = x.amax(axes, true);
      m = where(m.isinf(), zeros_like(m), m);
      Tensor r = (x - m).exp().sum(axes, true, dt).log() + m;
      return outputs({keep ? r : squeezeDims(r, axes)});
    }
  }
  return unsupported(n.op_type + ": unknown reduction");
}

NodeRun argReduce(const NodeTest& n, const NodeInputs& in, bool is_max) {
  Tensor x = input(n, in, 0);
  if (x.dim() == 0) return unsupported(n.op_type + ": a 0-d input has no axis to reduce");
  const int64_t axis = normAxis(n, n.intAttr("axis", 0), x.dim());
  const bool keep = n.intAttr("keepdims", 1) != 0;
  if (x.size(axis) == 0) return unsupported(n.op_type + ": the axis is empty, so there is no index to give");
  if (n.intAttr("select_last_index", 0) == 0) return outputs({is_max ? x.argmax(axis, keep) : x.argmin(axis, keep)});
  // The last extremum is the first one of the reversed axis.
  Tensor f = x.flip({axis});
  Tensor r = is_max ? f.argmax(axis, keep) : f.argmin(axis, keep);
  return outputs({Scalar(x.size(axis) - 1) - r});
}

// --- Matrix products.

NodeRun gemm(const NodeTest& n, const NodeInputs& in) {
  Tensor a = input(n, in, 0), b = input(n, in, 1);
  const double alpha = n.floatAttr("alpha", 1.0), beta = n.floatAttr("beta", 1.0);
  if (a.dim() != 2 || b.dim() != 2) return unsupported("Gemm: A and B must be 2-d");
  if (!isFloatingType(a.dtype()) && (alpha != 1.0 || beta != 1.0)) {
    return unsupported("Gemm: alpha/beta other than 1 on an integer input would promote to float");
  }
  if (n.intAttr("transA", 0) != 0) a = a.t();
  if (n.intAttr("transB", 0) != 0) b = b.t();
  Tensor r = a.matmul(b);
  if (alpha != 1.0) r = r * alpha;
  if (const Tensor* c = optionalInput(in, 2)) r = r + (beta != 1.0 ? *c * beta : *c);
  return outputs({r});
}

// --- Convolution and pooling.

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

// --- Normalizations.

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

// Softmax, LogSoftmax and Hardmax: along `axis` from opset 13, and before
// it over the input flattened to 2-d at `axis` (default 1).
template <typename F>
NodeRun softmaxLike(const NodeTest& n, const NodeInputs& in, F along) {
  Tensor x = input(n, in, 0);
  if (x.dim() == 0) return unsupported(n.op_type + ": a 0-d input");
  if (n.opset >= 13) return outputs({along(x, normAxis(n, n.intAttr("axis", -1), x.dim()))});
  const int64_t axis = normAxis(n, n.intAttr("axis", 1), x.dim());
  const Ints sizes = sizesOf(x);
  Tensor flat = x.reshape(
      {product(sizes, 0, static_cast<size_t>(axis)), product(sizes, static_cast<size_t>(axis), sizes.size())});
  return outputs({along(flat, 1).reshape(sizes)});
}

// --- Indexing.

// Indices with the negative ones counted from the end of a dim of size `n`, as int64.
Tensor wrapIndices(const Tensor& idx, int64_t size) {
  Tensor i = idx.to(ScalarType::Int64);
  return where(i.lt(Scalar(int64_t{0})), i + Scalar(size), i);
}

NodeRun gatherNode(const NodeTest& n, const NodeInputs& in) {
  Tensor data = input(n, in, 0), idx = input(n, in, 1);
  if (data.dim() == 0) return unsupported("Gather: a 0-d data input");
  const int64_t axis = normAxis(n, n.intAttr("axis", 0), data.dim());
  Tensor i = wrapIndices(idx, data.size(axis));
  Tensor picked = data.index_select(axis, i.reshape({i.numel()}));
  const Ints ds = sizesOf(data), is = sizesOf(idx);
  Ints shape(ds.begin(), ds.begin() + axis);
  shape.insert(shape.end(), is.begin(), is.end());
  shape.insert(shape.end(), ds.begin() + axis + 1, ds.end());
  return outputs({picked.reshape(shape)});
}

NodeRun gatherElements(const NodeTest& n, const NodeInputs& in) {
  Tensor data = input(n, in, 0);
  const int64_t axis = normAxis(n, n.intAttr("axis", 0), data.dim());
  return outputs({data.gather(axis, wrapIndices(input(n, in, 1), data.size(axis)))});
}

// Scatters `updates` into `data` along `dim` at `idx` (scatter_add's
// layout) in the order ONNX's reference does, one update after another:
// `group[e]` (row-major over the updates) numbers the earlier updates with
// the same target, so each group has distinct targets and lands in one
// replacing step (scatter_add onto zeros, picked where hit), combined with
// the data by `reduction`: none (the last update wins), mul, max or min.
Tensor scatterInOrder(Tensor data, int64_t dim, const Tensor& idx, const Tensor& updates, const Ints& group,
                      const std::string& reduction) {
  const int64_t groups = group.empty() ? 0 : *std::max_element(group.begin(), group.end()) + 1;
  for (int64_t g = 0; g < groups; ++g) {
    Ints in_group(group.size());
    for (size_t e = 0; e < group.size(); ++e) in_group[e] = group[e] == g ? 1 : 0;
    Tensor count = int64Tensor(in_group, updates.sizes(), updates.device());
    Tensor hit = callOp("scatter_add", {zeros_like(data, {.dtype = ScalarType::Int64}), dim, idx, count});
    Tensor placed = callOp(
        "scatter_add", {zeros_like(data), dim, idx, where(count.gt(Scalar(int64_t{0})), updates, zeros_like(updates))});
    Tensor combined = reduction == "mul"   ? data * placed
                      : reduction == "max" ? maximum(data, placed)
                      : reduction == "min" ? minimum(data, placed)
                                           : placed;
    data = where(hit.gt(Scalar(int64_t{0})), combined, data);
  }
  return data;
}

// For each key, how many earlier keys equal it.
Ints occurrenceNumbers(const Ints& keys) {
  std::map<int64_t, int64_t> seen;
  Ints r(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) r[i] = seen[keys[i]]++;
  return r;
}

NodeRun scatterElements(const NodeTest& n, const NodeInputs& in) {
  Tensor data = input(n, in, 0), updates = input(n, in, 2);
  const int64_t axis = normAxis(n, n.intAttr("axis", 0), data.dim());
  const std::string reduction = n.stringAttr("reduction", "none");
  Tensor idx = wrapIndices(input(n, in, 1), data.size(axis));
  if (reduction == "add") return outputs({callOp("scatter_add", {data, axis, idx, updates})});
  if (reduction != "none" && reduction != "mul" && reduction != "max" && reduction != "min") {
    return unsupported(n.op_type + ": unknown reduction '" + reduction + "'");
  }
  // Each update's target in data (row-major), from the indices on the host.
  const Ints index = intsOf(idx), isz = sizesOf(idx), dsz = sizesOf(data);
  Ints targets(index.size()), coord(isz.size(), 0);
  for (size_t e = 0; e < index.size(); ++e) {
    int64_t flat = 0;
    for (size_t d = 0; d < isz.size(); ++d)
      flat = flat * dsz[d] + (static_cast<int64_t>(d) == axis ? index[e] : coord[d]);
    targets[e] = flat;
    for (size_t d = isz.size(); d-- > 0;) {
      if (++coord[d] < isz[d]) break;
      coord[d] = 0;
    }
  }
  return outputs({scatterInOrder(data, axis, idx, updates, occurrenceNumbers(targets), reduction)});
}

// --- Shapes and data movement.

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
    out.push_back(reps[d] * x.size(d));
  }
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

NodeRun rangeNode(const NodeTest& n, const NodeInputs& in) {
  Tensor start = input(n, in, 0), limit = input(n, in, 1), delta = input(n, in, 2);
  const ScalarType dt = start.dtype();
  const TensorOptions opts{.dtype = dt, .device = start.device()};
  if (isFloatingType(dt)) {
    return outputs({arange(start.item<double>(), limit.item<double>(), delta.item<double>(), opts)});
  }
  BP_CHECK(delta.item<int64_t>() != 0, "Range: delta 0");
  return outputs({arange(start.item<int64_t>(), limit.item<int64_t>(), delta.item<int64_t>(), opts)});
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

NodeRun constantOfShape(const NodeTest& n, const NodeInputs& in, Device device) {
  const Ints shape = intsOf(input(n, in, 0));
  Tensor value = zeros({1}, {.device = device});
  if (auto it = n.attributes.find("value"); it != n.attributes.end()) {
    const Tensor* v = std::get_if<Tensor>(&it->second);
    BP_CHECK(v != nullptr && v->numel() == 1, "ConstantOfShape: value must be a one-element tensor");
    value = v->to(device);
  }
  return outputs({value.reshape({}).expand(shape).contiguous()});
}

NodeRun topkNode(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  // bp::topk takes no uint16/32/64 (PyTorch 2.x's rule for those dtypes).
  if (x.dtype() == ScalarType::UInt16 || x.dtype() == ScalarType::UInt32 || x.dtype() == ScalarType::UInt64)
    return unsupported(strCat("TopK: ", scalarTypeName(x.dtype()), " input; bp::topk serves no uint16/32/64"));
  const int64_t k = n.opset >= 10 ? input(n, in, 1).item<int64_t>() : n.intAttr("k", 0);
  const int64_t axis = normAxis(n, n.intAttr("axis", -1), x.dim());
  const bool largest = n.intAttr("largest", 1) != 0;
  // sorted=0 leaves the order to the implementation; sorted is one such order.
  auto [values, indices] = x.topk(k, axis, largest, true);
  return outputs({values, indices});
}

NodeRun cumsumNode(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (x.dim() == 0) return unsupported("CumSum: a 0-d input");
  const int64_t axis = normAxis(n, input(n, in, 1).item<int64_t>(), x.dim());
  const bool reverse = n.intAttr("reverse", 0) != 0, exclusive = n.intAttr("exclusive", 0) != 0;
  Tensor t = reverse ? x.flip({axis}) : x;
  Tensor c = t.cumsum(axis, x.dtype());
  if (exclusive && x.size(axis) > 0) {
    // Shifted by one along the axis, a zero first: exact, unlike c - x.
    Ints zero_shape = sizesOf(x);
    zero_shape[axis] = 1;
    c = cat({zeros(zero_shape, {.dtype = x.dtype(), .device = x.device()}), c.narrow(axis, 0, x.size(axis) - 1)}, axis);
  }
  return outputs({reverse ? c.flip({axis}) : c});
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

// CumProd by one multiply per step along the axis (no scan op multiplies):
// the products in the reference's order.
constexpr int64_t kMaxCumProdSteps = 4096;

NodeRun cumprodNode(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (x.dim() == 0) return unsupported("CumProd: a 0-d input");
  const int64_t axis = normAxis(n, input(n, in, 1).item<int64_t>(), x.dim());
  const int64_t len = x.size(axis);
  if (len > kMaxCumProdSteps) {
    return unsupported("CumProd: an axis of " + std::to_string(len) + " steps (one multiply op per step, at most " +
                       std::to_string(kMaxCumProdSteps) + ")");
  }
  if (len == 0) return outputs({x.clone()});
  const bool reverse = n.intAttr("reverse", 0) != 0, exclusive = n.intAttr("exclusive", 0) != 0;
  Tensor t = reverse ? x.flip({axis}) : x;
  std::vector<Tensor> steps;
  if (exclusive) steps.push_back(ones_like(t.narrow(axis, 0, 1)));
  Tensor running = t.narrow(axis, 0, 1);
  steps.push_back(running);
  for (int64_t i = 1; i < len - (exclusive ? 1 : 0); ++i) {
    running = running * t.narrow(axis, i, 1);
    steps.push_back(running);
  }
  Tensor c = cat(steps, axis);
  return outputs({reverse ? c.flip({axis}) : c});
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
    shape.push_back((x.size(static_cast<int64_t>(i) + 2) - 1) * stride[i] + (*ks)[i] - pads[i] - pads[i + s]);
  }
  if (const Tensor* o = optionalInput(in, 2); o && intsOf(*o) != shape) {
    return unsupported("MaxUnpool: an output_shape other than the inferred one is not mapped");
  }
  // The indices are flat positions in the whole output; the rest is 0.
  Tensor flat = zeros({product(shape, 0, shape.size())}, {.dtype = x.dtype(), .device = x.device()});
  Tensor idx = indices.to(ScalarType::Int64).reshape({indices.numel()});
  return outputs({callOp("scatter_add", {flat, int64_t{0}, idx, x.reshape({x.numel()})}).reshape(shape)});
}

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
        out[a] = static_cast<int64_t>(std::floor(common * static_cast<double>(x.size(a)) + 0.5));
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
      out[axes[i]] = static_cast<int64_t>(std::floor(scales[i] * static_cast<double>(x.size(axes[i]))));
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

// Hann, Hamming and Blackman windows: alpha - beta cos(2 pi n / N')
// (+ 0.08 cos(4 pi n / N') for Blackman), N' = size (periodic) or size - 1,
// computed in float64 as the reference, then converted.
constexpr double kPi = 3.14159265358979323846;

NodeRun windowNode(const NodeTest& n, const NodeInputs& in, Device device) {
  const int64_t size = input(n, in, 0).item<int64_t>();
  BP_CHECK(size >= 0, n.op_type, ": size ", size, " is negative");
  const auto dtype = dtypeOfOnnxElementType(n.intAttr("output_datatype", 1));
  if (!dtype) return unsupported(n.op_type + ": output_datatype has no Backplane dtype");
  const double denom = static_cast<double>(n.intAttr("periodic", 1) != 0 ? size : size - 1);
  Tensor k = arange(size, {.dtype = ScalarType::Float64, .device = device}) * (2 * kPi) / denom;
  Tensor y;
  if (n.op_type == "HannWindow") {
    y = Scalar(0.5) - k.cos() * 0.5;
  } else if (n.op_type == "HammingWindow") {
    const double alpha = 25.0 / 46.0;
    y = Scalar(alpha) - k.cos() * (1 - alpha);
  } else {
    y = Scalar(0.42) - k.cos() * 0.5 + (k * 2.0).cos() * 0.08;
  }
  return outputs({y.to(*dtype)});
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
  std::vector<Tensor> columns;              // x, y (, z), 1, each over every position
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

// NegativeLogLikelihoodLoss on log-probabilities [N, C, d...] and targets
// [N, d...]: -input[n, target, d] * weight[target], 0 at ignore_index;
// "mean" divides the sum by the summed weights of the counted targets.
NodeRun nllLoss(const NodeTest& n, const Tensor& log_prob, const Tensor& target, const Tensor* weight) {
  if (log_prob.dim() < 2 || target.dim() != log_prob.dim() - 1) {
    return unsupported(n.op_type + ": needs input [N, C, ...] and target [N, ...]");
  }
  const std::string reduction = n.stringAttr("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return unsupported(n.op_type + ": reduction '" + reduction + "'");
  }
  Tensor t = target.to(ScalarType::Int64);
  Tensor ignored = zeros_like(t, {.dtype = ScalarType::Bool});
  if (n.has("ignore_index")) ignored = t.eq(Scalar(n.intAttr("ignore_index", 0)));
  Tensor safe = where(ignored, zeros_like(t), t);
  Tensor picked = log_prob.gather(1, safe.unsqueeze(1)).squeeze(1);
  Tensor w = weight ? weight->to(log_prob.dtype()).index_select(0, safe.reshape({safe.numel()})).reshape(safe.sizes())
                    : ones_like(picked);
  w = where(ignored, zeros_like(w), w);
  Tensor loss = -(picked * w);
  if (reduction == "none") return outputs({loss});
  if (reduction == "sum") return outputs({loss.sum(log_prob.dtype())});
  return outputs({loss.sum(log_prob.dtype()) / w.sum(log_prob.dtype())});
}

NodeRun softmaxCrossEntropy(const NodeTest& n, const NodeInputs& in) {
  Tensor scores = input(n, in, 0);
  if (scores.dim() < 2 || !isFloatingType(scores.dtype())) return unsupported(n.op_type + ": needs float [N, C, ...]");
  Tensor log_prob = scores.log_softmax(1);
  NodeRun r = nllLoss(n, log_prob, input(n, in, 1), optionalInput(in, 2));
  if (r.supported && n.outputs.size() > 1) r.outputs.push_back(wantsOutput(n, 1) ? log_prob : Tensor());
  return r;
}

// Attention (opset 23): as ONNX's reference: 3-d inputs split into heads,
// past keys/values prepended (the present outputs), K/V heads repeated for
// grouped queries, sqrt(scale) on Q and on K, the causal, boolean or additive
// masks and nonpad_kv_seqlen as an additive bias, softcap, softmax, then V;
// qk_matmul_output at the stage qk_matmul_output_mode names.
NodeRun attention(const NodeTest& n, const NodeInputs& in) {
  Tensor q = input(n, in, 0), k = input(n, in, 1), v = input(n, in, 2);
  if (q.dim() != k.dim() || q.dim() != v.dim() || (q.dim() != 3 && q.dim() != 4)) {
    return unsupported("Attention: Q, K and V must all be 3-d or all 4-d");
  }
  if (!isFloatingType(q.dtype())) return unsupported("Attention: integer inputs");
  if (n.has("softmax_precision")) return unsupported("Attention: softmax_precision is not mapped");
  const bool three_d = q.dim() == 3;
  const int64_t batch = q.size(0);
  auto heads = [&](const Tensor& t, int64_t h) {
    return t.reshape({batch, t.size(1), h, t.size(2) / h}).permute({0, 2, 1, 3});
  };
  if (three_d) {
    const int64_t qh = n.intAttr("q_num_heads", 0), kvh = n.intAttr("kv_num_heads", 0);
    if (qh < 1 || kvh < 1 || q.size(2) % qh != 0 || k.size(2) % kvh != 0 || v.size(2) % kvh != 0) {
      return unsupported("Attention: 3-d inputs need q_num_heads and kv_num_heads dividing their hidden sizes");
    }
    q = heads(q, qh);
    k = heads(k, kvh);
    v = heads(v, kvh);
  }
  int64_t past_len = 0;
  if (const Tensor* past = optionalInput(in, 4)) {
    past_len = past->size(2);
    k = cat({*past, k}, 2);
  }
  if (const Tensor* past = optionalInput(in, 5)) v = cat({*past, v}, 2);
  const Tensor present_k = k, present_v = v;
  const int64_t q_heads = q.size(1), kv_heads = k.size(1);
  if (q_heads != kv_heads) {
    if (kv_heads < 1 || q_heads % kv_heads != 0) return unsupported("Attention: q heads not a multiple of kv heads");
    const int64_t rep = q_heads / kv_heads;
    auto repeat = [&](const Tensor& t) {
      return t.unsqueeze(2)
          .expand({t.size(0), kv_heads, rep, t.size(2), t.size(3)})
          .reshape({t.size(0), q_heads, t.size(2), t.size(3)});
    };
    k = repeat(k);
    v = repeat(v);
  }
  const int64_t q_len = q.size(2), kv_len = k.size(2);
  const double scale = n.has("scale") ? n.floatAttr("scale", 1.0) : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const double root = std::sqrt(scale);
  const TensorOptions opts{.dtype = q.dtype(), .device = q.device()};
  const double neg_inf = -std::numeric_limits<double>::infinity();
  Tensor bias = zeros({q_len, kv_len}, opts);
  if (n.intAttr("is_causal", 0) != 0) {
    Tensor rows = arange(q_len, {.dtype = ScalarType::Int64, .device = q.device()}).unsqueeze(1);
    Tensor cols = arange(kv_len, {.dtype = ScalarType::Int64, .device = q.device()}).unsqueeze(0);
    // Query i sees the past keys and the new ones up to i.
    bias = where(cols.gt(rows + Scalar(past_len)), full_like(bias, Scalar(neg_inf)), bias);
  }
  if (const Tensor* mask = optionalInput(in, 3)) {
    Tensor m = mask->dtype() == ScalarType::Bool
                   ? where(*mask, zeros_like(*mask, opts), full_like(*mask, Scalar(neg_inf), opts))
                   : mask->to(q.dtype());
    // A mask shorter than the keys counts the rest as masked out.
    if (m.size(-1) < kv_len) m = pad(m, {0, kv_len - m.size(-1)}, "constant", neg_inf);
    bias = bias + m;
  }
  if (const Tensor* lens = optionalInput(in, 6)) {
    Tensor cols = arange(kv_len, {.dtype = ScalarType::Int64, .device = q.device()}).reshape({1, 1, 1, kv_len});
    Tensor past_end = cols.ge(lens->to(ScalarType::Int64).reshape({batch, 1, 1, 1}));
    bias = bias + where(past_end, full({1}, Scalar(neg_inf), opts), zeros({1}, opts));
  }
  Tensor qk = (q * root).matmul((k * root).transpose(-2, -1));
  const int64_t mode = n.intAttr("qk_matmul_output_mode", 0);
  Tensor staged = qk;
  // softcap caps the products before the masks add (a masked -inf stays -inf).
  Tensor capped = qk;
  if (n.has("softcap") && n.floatAttr("softcap", 0.0) != 0.0) {
    const double cap = n.floatAttr("softcap", 0.0);
    capped = (qk / cap).tanh() * cap;
  }
  if (mode == 1) staged = capped;
  Tensor scores = capped + bias;
  if (mode == 2) staged = scores;
  Tensor probs = scores.softmax(-1);
  if (mode == 3) staged = probs;
  if (mode < 0 || mode > 3) return unsupported("Attention: qk_matmul_output_mode " + std::to_string(mode));
  Tensor y = probs.matmul(v);
  if (three_d) y = y.permute({0, 2, 1, 3}).reshape({batch, q_len, -1});
  std::vector<Tensor> outs{y};
  const Tensor extra[] = {present_k, present_v, staged};
  for (size_t i = 1; i < n.outputs.size() && i <= 3; ++i) outs.push_back(wantsOutput(n, i) ? extra[i - 1] : Tensor());
  return outputs(std::move(outs));
}

// RotaryEmbedding (opset 23) as ONNX's reference: X as [B, S, H, D], the
// first rotary_embedding_dim of each head rotated by the cos/sin caches
// (picked by position_ids when given), halves or interleaved pairs.
NodeRun rotaryEmbedding(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0), cos_cache = input(n, in, 1), sin_cache = input(n, in, 2);
  if (!isFloatingType(x.dtype())) return unsupported("RotaryEmbedding: integer input");
  const Ints original = sizesOf(x);
  if (x.dim() == 4) {
    x = x.permute({0, 2, 1, 3});
  } else if (x.dim() == 3) {
    const int64_t heads = n.intAttr("num_heads", 0);
    if (heads < 1 || x.size(2) % heads != 0) return unsupported("RotaryEmbedding: 3-d input needs num_heads");
    x = x.reshape({x.size(0), x.size(1), heads, x.size(2) / heads});
  } else {
    return unsupported("RotaryEmbedding: the input must be 3-d or 4-d");
  }
  const int64_t batch = x.size(0), seq = x.size(1), head = x.size(3);
  int64_t rot = n.intAttr("rotary_embedding_dim", 0);
  if (rot == 0) rot = head;
  if (rot < 2 || rot > head || rot % 2 != 0) return unsupported("RotaryEmbedding: rotary_embedding_dim");
  Tensor cos = cos_cache, sin = sin_cache;
  if (const Tensor* ids = optionalInput(in, 3)) {
    Tensor flat = ids->to(ScalarType::Int64).reshape({ids->numel()});
    cos = cos.index_select(0, flat).reshape({batch, seq, -1});
    sin = sin.index_select(0, flat).reshape({batch, seq, -1});
  }
  cos = cos.narrow(-1, 0, rot / 2).unsqueeze(2);
  sin = sin.narrow(-1, 0, rot / 2).unsqueeze(2);
  Tensor rotate = x.narrow(3, 0, rot);
  const bool interleaved = n.intAttr("interleaved", 0) != 0;
  Tensor x1 = interleaved ? rotate.slice(3, 0, rot, 2) : rotate.narrow(3, 0, rot / 2);
  Tensor x2 = interleaved ? rotate.slice(3, 1, rot, 2) : rotate.narrow(3, rot / 2, rot / 2);
  Tensor real = cos * x1 - sin * x2, imag = sin * x1 + cos * x2;
  Tensor rotated = interleaved ? stack({real, imag}, -1).reshape({batch, seq, x.size(2), rot}) : cat({real, imag}, 3);
  Tensor y = rot == head ? rotated : cat({rotated, x.narrow(3, rot, head - rot)}, 3);
  return outputs({original.size() == 3 ? y.reshape(original) : y.permute({0, 2, 1, 3}).contiguous()});
}

// TensorScatter (a cache update): for each batch b, update's slices along
// `axis` written from write_indices[b] on (modulo the axis in circular
// mode); the rest of past_cache kept.
NodeRun tensorScatter(const NodeTest& n, const NodeInputs& in) {
  Tensor cache = input(n, in, 0), update = input(n, in, 1);
  if (cache.dim() < 2 || update.dim() != cache.dim()) return unsupported("TensorScatter: ranks of cache and update");
  const int64_t axis = normAxis(n, n.intAttr("axis", -2), cache.dim());
  if (axis == 0) return unsupported("TensorScatter: the axis is the batch dim");
  const std::string mode = n.stringAttr("mode", "linear");
  if (mode != "linear" && mode != "circular") return unsupported("TensorScatter: mode '" + mode + "'");
  const int64_t batch = cache.size(0), max_len = cache.size(axis), len = update.size(axis);
  Ints starts(static_cast<size_t>(batch), 0);
  if (const Tensor* w = optionalInput(in, 2)) starts = intsOf(*w);
  BP_CHECK(static_cast<int64_t>(starts.size()) == batch, "TensorScatter: ", starts.size(),
           " write indices for a batch of ", batch);
  Ints positions(static_cast<size_t>(batch * len));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < len; ++s) {
      int64_t at = starts[b] + s;
      if (mode == "circular") at = ((at % max_len) + max_len) % max_len;
      BP_CHECK(at >= 0 && at < max_len, "TensorScatter: write position ", at, " is outside the cache's ", max_len);
      positions[static_cast<size_t>(b * len + s)] = at;
    }
  }
  Ints shape(static_cast<size_t>(cache.dim()), 1);
  shape[0] = batch;
  shape[axis] = len;
  Tensor idx = int64Tensor(positions, {batch, len}, cache.device()).reshape(shape).expand(update.sizes()).contiguous();
  return outputs({scatterInOrder(cache, axis, idx, update, Ints(static_cast<size_t>(update.numel()), 0), "none")});
}

NodeRun eyeLike(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  if (x.dim() != 2) return unsupported("EyeLike: the input must be 2-d");
  std::optional<ScalarType> dt = x.dtype();
  if (n.has("dtype")) dt = dtypeOfOnnxElementType(n.intAttr("dtype", 1));
  if (!dt) return unsupported("EyeLike: dtype " + std::to_string(n.intAttr("dtype", 0)) + " has no Backplane dtype");
  const TensorOptions opts{.dtype = ScalarType::Int64, .device = x.device()};
  Tensor rows = arange(x.size(0), opts).unsqueeze(1), cols = arange(x.size(1), opts).unsqueeze(0);
  return outputs({(cols - rows).eq(Scalar(n.intAttr("k", 0))).to(*dt)});
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

// --- More normalizations and data movement.

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

NodeRun centerCropPad(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  const Ints shape = intsOf(input(n, in, 1));
  Ints axes = n.intsAttr("axes").value_or(allAxes(static_cast<int64_t>(shape.size())));
  BP_CHECK(axes.size() == shape.size(), "CenterCropPad: shape has ", shape.size(), " entries for ", axes.size(),
           " axes");
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

NodeRun oneHot(const NodeTest& n, const NodeInputs& in) {
  Tensor indices = input(n, in, 0), values = input(n, in, 2);
  const double depth_value = input(n, in, 1).item<double>();
  BP_CHECK(depth_value >= 1 && depth_value < 9.0e18, "OneHot: depth ", depth_value, " is not a positive int64");
  const auto depth = static_cast<int64_t>(depth_value);
  BP_CHECK(values.numel() == 2, "OneHot: values must hold [off, on]");
  const int64_t r = indices.dim() + 1;
  int64_t axis = n.intAttr("axis", -1);
  BP_CHECK(axis >= -r && axis < r, "OneHot: axis ", axis, " is out of range for output rank ", r);
  if (axis < 0) axis += r;
  // Non-integer indices truncate; negative ones count from depth.
  Tensor idx = wrapIndices(indices, depth).unsqueeze(axis);
  Ints shape(static_cast<size_t>(r), 1);
  shape[axis] = depth;
  Tensor pos = arange(depth, {.dtype = ScalarType::Int64, .device = indices.device()}).reshape(shape);
  Tensor flat = values.reshape({2});
  return outputs({where(pos.eq(idx), flat.select(0, 1), flat.select(0, 0))});
}

// The flat row of each index tuple (the last dim of `indices`, k long) in
// data's first `batch + k` dims collapsed, negative entries wrapped.
Tensor linearIndex(const Tensor& indices, const Ints& data_sizes, int64_t batch) {
  const int64_t k = indices.size(-1);
  Tensor idx = indices.to(ScalarType::Int64);
  Tensor linear = zeros_like(idx.select(-1, 0));
  for (int64_t j = 0; j < k; ++j) {
    const int64_t dim = data_sizes[static_cast<size_t>(batch + j)];
    linear = linear * Scalar(dim) + wrapIndices(idx.select(-1, j), dim);
  }
  if (batch > 0) {
    const int64_t per_batch = product(data_sizes, static_cast<size_t>(batch), static_cast<size_t>(batch + k));
    Ints shape(data_sizes.begin(), data_sizes.begin() + batch);
    shape.resize(static_cast<size_t>(linear.dim()), 1);
    Tensor b = arange(product(data_sizes, 0, static_cast<size_t>(batch)),
                      {.dtype = ScalarType::Int64, .device = indices.device()})
                   .reshape(shape);
    linear = linear + b * Scalar(per_batch);
  }
  return linear;
}

NodeRun gatherND(const NodeTest& n, const NodeInputs& in) {
  Tensor data = input(n, in, 0), indices = input(n, in, 1);
  const int64_t batch = n.intAttr("batch_dims", 0);
  if (indices.dim() < 1) return unsupported("GatherND: 0-d indices");
  const int64_t k = indices.size(-1);
  if (batch < 0 || batch + k > data.dim() || batch >= indices.dim()) {
    return unsupported("GatherND: batch_dims and the index length do not fit the data");
  }
  const Ints ds = sizesOf(data), is = sizesOf(indices);
  Ints flat{product(ds, 0, static_cast<size_t>(batch + k))};
  flat.insert(flat.end(), ds.begin() + batch + k, ds.end());
  Tensor linear = linearIndex(indices, ds, batch);
  Ints out(is.begin(), is.end() - 1);
  out.insert(out.end(), ds.begin() + batch + k, ds.end());
  return outputs({data.reshape(flat).index_select(0, linear.reshape({linear.numel()})).reshape(out)});
}

NodeRun scatterND(const NodeTest& n, const NodeInputs& in) {
  Tensor data = input(n, in, 0), indices = input(n, in, 1), updates = input(n, in, 2);
  const std::string reduction = n.stringAttr("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min") {
    return unsupported("ScatterND: unknown reduction '" + reduction + "'");
  }
  if (indices.dim() < 1 || indices.size(-1) > data.dim()) return unsupported("ScatterND: index tuples too long");
  const int64_t k = indices.size(-1);
  const Ints ds = sizesOf(data);
  Ints flat{product(ds, 0, static_cast<size_t>(k))};
  flat.insert(flat.end(), ds.begin() + k, ds.end());
  Tensor linear = linearIndex(indices, ds, 0);
  const int64_t m = linear.numel();
  Ints upd_shape{m};
  upd_shape.insert(upd_shape.end(), ds.begin() + k, ds.end());
  Ints idx_shape(upd_shape.size(), 1);
  idx_shape[0] = m;
  Tensor idx = linear.reshape(idx_shape).expand(upd_shape).contiguous();
  Tensor d = data.reshape(flat), u = updates.reshape(upd_shape);
  if (reduction == "add") return outputs({callOp("scatter_add", {d, int64_t{0}, idx, u}).reshape(ds)});
  // In order, tuple by tuple: each element of a tuple's slice is in its group.
  const Ints tuple_group = occurrenceNumbers(intsOf(linear));
  const int64_t per_tuple = m == 0 ? 0 : u.numel() / m;
  Ints group(static_cast<size_t>(u.numel()));
  for (size_t e = 0; e < group.size(); ++e) group[e] = tuple_group[e / static_cast<size_t>(per_tuple)];
  return outputs({scatterInOrder(d, 0, idx, u, group, reduction).reshape(ds)});
}

NodeRun compress(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  const std::vector<int64_t> cond = intsOf(input(n, in, 1));
  int64_t axis = 0;
  if (n.has("axis")) {
    axis = normAxis(n, n.intAttr("axis", 0), x.dim());
  } else {
    x = x.reshape({x.numel()});
  }
  Ints keep;
  for (size_t i = 0; i < cond.size() && static_cast<int64_t>(i) < x.size(axis); ++i) {
    if (cond[i] != 0) keep.push_back(static_cast<int64_t>(i));
  }
  return outputs({x.index_select(axis, int64Tensor(keep, {static_cast<int64_t>(keep.size())}, x.device()))});
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

void registerStructureNodes() {
  struct R {
    const char* op;
    Reduce kind;
    int64_t axes_input_since;
  };
  for (const R& r :
       {R{"ReduceSum", Reduce::Sum, 13}, R{"ReduceMean", Reduce::Mean, 18}, R{"ReduceMax", Reduce::Max, 18},
        R{"ReduceMin", Reduce::Min, 18}, R{"ReduceProd", Reduce::Prod, 18}, R{"ReduceL1", Reduce::L1, 18},
        R{"ReduceL2", Reduce::L2, 18}, R{"ReduceSumSquare", Reduce::SumSquare, 18},
        R{"ReduceLogSum", Reduce::LogSum, 18}, R{"ReduceLogSumExp", Reduce::LogSumExp, 18}}) {
    registerNode(r.op, [kind = r.kind, since = r.axes_input_since](const NodeTest& n, const NodeInputs& in, Device) {
      return reduce(n, in, kind, since);
    });
  }
  registerNode("ArgMax", [](const NodeTest& n, const NodeInputs& in, Device) { return argReduce(n, in, true); });
  registerNode("ArgMin", [](const NodeTest& n, const NodeInputs& in, Device) { return argReduce(n, in, false); });
  registerNode("MatMul", [](const NodeTest& n, const NodeInputs& in, Device) {
    return outputs({matmul(input(n, in, 0), input(n, in, 1))});
  });
  registerNode("Gemm", [](const NodeTest& n, const NodeInputs& in, Device) { return gemm(n, in); });
  registerNode("Conv", [](const NodeTest& n, const NodeInputs& in, Device) { return conv(n, in); });
  registerNode("ConvTranspose", [](const NodeTest& n, const NodeInputs& in, Device) { return convTranspose(n, in); });
  registerNode("MaxPool", [](const NodeTest& n, const NodeInputs& in, Device) { return pool(n, in, true); });
  registerNode("AveragePool", [](const NodeTest& n, const NodeInputs& in, Device) { return pool(n, in, false); });
  registerNode("LpPool", [](const NodeTest& n, const NodeInputs& in, Device) { return lpPool(n, in); });
  registerNode("GlobalMaxPool",
               [](const NodeTest& n, const NodeInputs& in, Device) { return globalPool(n, in, true); });
  registerNode("GlobalAveragePool",
               [](const NodeTest& n, const NodeInputs& in, Device) { return globalPool(n, in, false); });
  registerNode("BatchNormalization", [](const NodeTest& n, const NodeInputs& in, Device) { return batchNorm(n, in); });
  registerNode("InstanceNormalization",
               [](const NodeTest& n, const NodeInputs& in, Device) { return instanceNorm(n, in); });
  registerNode("LayerNormalization", [](const NodeTest& n, const NodeInputs& in, Device) { return layerNorm(n, in); });
  registerNode("Softmax", [](const NodeTest& n, const NodeInputs& in, Device) {
    return softmaxLike(n, in, [](const Tensor& t, int64_t d) { return t.softmax(d); });
  });
  registerNode("LogSoftmax", [](const NodeTest& n, const NodeInputs& in, Device) {
    return softmaxLike(n, in, [](const Tensor& t, int64_t d) { return t.log_softmax(d); });
  });
  registerNode("Hardmax", [](const NodeTest& n, const NodeInputs& in, Device) {
    // 1 at the first maximum along the axis, 0 elsewhere.
    return softmaxLike(n, in, [](const Tensor& t, int64_t d) {
      Ints shape(static_cast<size_t>(t.dim()), 1);
      shape[d] = t.size(d);
      Tensor pos = arange(t.size(d), {.dtype = ScalarType::Int64, .device = t.device()}).reshape(shape);
      return pos.eq(t.argmax(d, true)).to(t.dtype());
    });
  });
  registerNode("Gather", [](const NodeTest& n, const NodeInputs& in, Device) { return gatherNode(n, in); });
  registerNode("GatherElements", [](const NodeTest& n, const NodeInputs& in, Device) { return gatherElements(n, in); });
  registerNode("ScatterElements",
               [](const NodeTest& n, const NodeInputs& in, Device) { return scatterElements(n, in); });
  registerNode("Scatter", [](const NodeTest& n, const NodeInputs& in, Device) { return scatterElements(n, in); });
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
  registerNode("Range", [](const NodeTest& n, const NodeInputs& in, Device) { return rangeNode(n, in); });
  registerNode("Shape", [](const NodeTest& n, const NodeInputs& in, Device d) { return shapeNode(n, in, d); });
  registerNode("Size", [](const NodeTest& n, const NodeInputs& in, Device d) {
    return outputs({int64Tensor({input(n, in, 0).numel()}, {}, d)});
  });
  registerNode("ConstantOfShape",
               [](const NodeTest& n, const NodeInputs& in, Device d) { return constantOfShape(n, in, d); });
  registerNode("TopK", [](const NodeTest& n, const NodeInputs& in, Device) { return topkNode(n, in); });
  registerNode("CumSum", [](const NodeTest& n, const NodeInputs& in, Device) { return cumsumNode(n, in); });
  registerNode("LRN", [](const NodeTest& n, const NodeInputs& in, Device) { return lrn(n, in); });
  registerNode("MeanVarianceNormalization",
               [](const NodeTest& n, const NodeInputs& in, Device) { return meanVarianceNorm(n, in); });
  registerNode("CumProd", [](const NodeTest& n, const NodeInputs& in, Device) { return cumprodNode(n, in); });
  registerNode("MaxUnpool", [](const NodeTest& n, const NodeInputs& in, Device) { return maxUnpool(n, in); });
  registerNode("Resize", [](const NodeTest& n, const NodeInputs& in, Device) { return resize(n, in); });
  for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    registerNode(w, [](const NodeTest& n, const NodeInputs& in, Device d) { return windowNode(n, in, d); });
  }
  registerNode("Col2Im", [](const NodeTest& n, const NodeInputs& in, Device) { return col2im(n, in); });
  registerNode("AffineGrid", [](const NodeTest& n, const NodeInputs& in, Device) { return affineGrid(n, in); });
  registerNode("GridSample", [](const NodeTest& n, const NodeInputs& in, Device) { return gridSample(n, in); });
  registerNode("NegativeLogLikelihoodLoss", [](const NodeTest& n, const NodeInputs& in, Device) {
    return nllLoss(n, input(n, in, 0), input(n, in, 1), optionalInput(in, 2));
  });
  registerNode("SoftmaxCrossEntropyLoss",
               [](const NodeTest& n, const NodeInputs& in, Device) { return softmaxCrossEntropy(n, in); });
  registerNode("Attention", [](const NodeTest& n, const NodeInputs& in, Device) { return attention(n, in); });
  registerNode("RotaryEmbedding",
               [](const NodeTest& n, const NodeInputs& in, Device) { return rotaryEmbedding(n, in); });
  registerNode("TensorScatter", [](const NodeTest& n, const NodeInputs& in, Device) { return tensorScatter(n, in); });
  registerNode("EyeLike", [](const NodeTest& n, const NodeInputs& in, Device) { return eyeLike(n, in); });
  registerNode("Trilu", [](const NodeTest& n, const NodeInputs& in, Device) { return triluNode(n, in); });
  registerNode("RMSNormalization", [](const NodeTest& n, const NodeInputs& in, Device) { return rmsNorm(n, in); });
  registerNode("LpNormalization", [](const NodeTest& n, const NodeInputs& in, Device) { return lpNorm(n, in); });
  registerNode("GroupNormalization", [](const NodeTest& n, const NodeInputs& in, Device) { return groupNorm(n, in); });
  registerNode("CenterCropPad", [](const NodeTest& n, const NodeInputs& in, Device) { return centerCropPad(n, in); });
  registerNode("DepthToSpace", [](const NodeTest& n, const NodeInputs& in, Device) { return depthToSpace(n, in); });
  registerNode("SpaceToDepth", [](const NodeTest& n, const NodeInputs& in, Device) { return spaceToDepth(n, in); });
  registerNode("OneHot", [](const NodeTest& n, const NodeInputs& in, Device) { return oneHot(n, in); });
  registerNode("GatherND", [](const NodeTest& n, const NodeInputs& in, Device) { return gatherND(n, in); });
  registerNode("ScatterND", [](const NodeTest& n, const NodeInputs& in, Device) { return scatterND(n, in); });
  registerNode("Compress", [](const NodeTest& n, const NodeInputs& in, Device) { return compress(n, in); });
  registerNode("ReverseSequence",
               [](const NodeTest& n, const NodeInputs& in, Device) { return reverseSequence(n, in); });
  registerNode("Einsum", [](const NodeTest&, const NodeInputs&, Device) {
    return unsupported("Einsum: no standard op contracts by an equation");
  });
}

}  // namespace backplane::conformance::onnx
