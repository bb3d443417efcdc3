// The ops that create tensors in the ONNX -> standard-op table (Note [ONNX
// op mapping] in onnx_ops.cc): Range, ConstantOfShape, EyeLike and the
// HannWindow, HammingWindow and BlackmanWindow windows. How the entries read
// a node: onnx_node_args.h.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "backplane/core/error.h"
#include "backplane/core/scalar_type.h"
#include "backplane/ops/ops.h"
#include "onnx_node_args.h"

namespace backplane::conformance::onnx {
namespace {

NodeRun rangeNode(const NodeTest& n, const NodeInputs& in) {
  Tensor start = input(n, in, 0), limit = input(n, in, 1), delta = input(n, in, 2);
  const ScalarType dt = start.dtype();
  const TensorOptions opts{.dtype = dt, .device = start.device()};
  // max(ceil((limit - start) / delta), 0) elements, in double: an estimate
  // good enough for the cap, which it must not overflow to pass.
  const double d = delta.item<double>();
  BP_CHECK(d != 0 && std::isfinite(d), "Range: delta ", d, " (it must be finite and not 0)");
  const double count = std::ceil((limit.item<double>() - start.item<double>()) / d);
  if (count > 0) checkCreation(n, {count < 0x1p62 ? static_cast<int64_t>(count) : int64_t{1} << 62}, dt);
  if (isFloatingType(dt)) {
    return outputs({arange(start.item<double>(), limit.item<double>(), delta.item<double>(), opts)});
  }
  BP_CHECK(delta.item<int64_t>() != 0, "Range: delta 0");
  return outputs({arange(start.item<int64_t>(), limit.item<int64_t>(), delta.item<int64_t>(), opts)});
}

NodeRun constantOfShape(const NodeTest& n, const NodeInputs& in, Device device) {
  const Ints shape = intsOf(input(n, in, 0));
  Tensor value = zeros({1}, {.device = device});
  if (auto it = n.attributes.find("value"); it != n.attributes.end()) {
    const Tensor* v = std::get_if<Tensor>(&it->second);
    BP_CHECK(v != nullptr && v->numel() == 1, "ConstantOfShape: value must be a one-element tensor");
    value = v->to(device);
  }
  checkCreation(n, shape, value.dtype());
  return outputs({value.reshape({}).expand(shape).contiguous()});
}

// Hann, Hamming and Blackman windows: alpha - beta cos(2 pi n / N')
// (+ 0.08 cos(4 pi n / N') for Blackman), N' = size (periodic) or size - 1,
// computed in float64 as the reference, then converted.
constexpr double kPi = 3.14159265358979323846;

NodeRun windowNode(const NodeTest& n, const NodeInputs& in, Device device) {
  const int64_t size = input(n, in, 0).item<int64_t>();
  BP_CHECK(size >= 0, n.op_type, ": size ", size, " is negative");
  checkCreation(n, {size}, ScalarType::Float64, "the window");
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

}  // namespace

void registerCreationNodes() {
  registerNode("Range", [](const NodeTest& n, const NodeInputs& in, Device) { return rangeNode(n, in); });
  registerNode("ConstantOfShape",
               [](const NodeTest& n, const NodeInputs& in, Device d) { return constantOfShape(n, in, d); });
  for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    registerNode(w, [](const NodeTest& n, const NodeInputs& in, Device d) { return windowNode(n, in, d); });
  }
  registerNode("EyeLike", [](const NodeTest& n, const NodeInputs& in, Device) { return eyeLike(n, in); });
}

}  // namespace backplane::conformance::onnx
