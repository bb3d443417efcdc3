// Matrix products, the softmax family, TopK, the cumulative sums and
// products and the losses in the ONNX -> standard-op table (Note [ONNX op
// mapping] in onnx_ops.cc): MatMul, Gemm, Einsum (unsupported), Softmax,
// LogSoftmax, Hardmax, TopK, CumSum, CumProd, NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss (from ONNX's math domain). How the entries read a
// node: onnx_node_args.h.
#include <cstdint>
#include <string>
#include <vector>

#include "backplane/core/scalar_type.h"
#include "backplane/core/str_cat.h"
#include "backplane/ops/ops.h"
#include "onnx_node_args.h"

namespace backplane::conformance::onnx {
namespace {

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

}  // namespace

void registerMathNodes() {
  registerNode("MatMul", [](const NodeTest& n, const NodeInputs& in, Device) {
    return outputs({matmul(input(n, in, 0), input(n, in, 1))});
  });
  registerNode("Gemm", [](const NodeTest& n, const NodeInputs& in, Device) { return gemm(n, in); });
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
  registerNode("TopK", [](const NodeTest& n, const NodeInputs& in, Device) { return topkNode(n, in); });
  registerNode("CumSum", [](const NodeTest& n, const NodeInputs& in, Device) { return cumsumNode(n, in); });
  registerNode("CumProd", [](const NodeTest& n, const NodeInputs& in, Device) { return cumprodNode(n, in); });
  registerNode("NegativeLogLikelihoodLoss", [](const NodeTest& n, const NodeInputs& in, Device) {
    return nllLoss(n, input(n, in, 0), input(n, in, 1), optionalInput(in, 2));
  });
  registerNode("SoftmaxCrossEntropyLoss",
               [](const NodeTest& n, const NodeInputs& in, Device) { return softmaxCrossEntropy(n, in); });
  registerNode("Einsum", [](const NodeTest&, const NodeInputs&, Device) {
    return unsupported("Einsum: no standard op contracts by an equation");
  });
}

}  // namespace backplane::conformance::onnx
