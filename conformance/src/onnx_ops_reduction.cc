// The reductions in the ONNX -> standard-op table (Note [ONNX op mapping]
// in onnx_ops.cc): ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
// ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp, ArgMax
// and ArgMin (ONNX's reduction domain). How the entries read a node:
// onnx_node_args.h.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "backplane/core/scalar_type.h"
#include "backplane/ops/ops.h"
#include "onnx_node_args.h"

namespace backplane::conformance::onnx {
namespace {

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

}  // namespace

void registerReductionNodes() {
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
}

}  // namespace backplane::conformance::onnx
