// Family "backward": the ops derivative formulas call where a fused kernel
// beats a composition of elementwise ops (Note [Backward ops]).

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <string>
#include <tuple>

#include "backplane/ops/ops.h"
#include "families.h"
#include "meta.h"
#include "structured.h"

namespace backplane::ops {

// Note [Backward ops]
// gelu_backward, _softmax_backward_data, _log_softmax_backward_data and
// embedding_dense_backward have PyTorch's schemas and meanings: the
// gradient of gelu's input from the output's gradient and the input, the
// gradient of (log_)softmax's input from the output's gradient and the
// output, and embedding's weight gradient from the output's gradient and the
// indices. Each is a standard op with a
// shape rule (meta) and a composite written with other standard ops, so
// every device computes it without a fallback; a plugin may implement it
// natively (the CPU plugin does, one pass over the data instead of the
// composite's several). The derivative formulas of gelu, softmax and
// log_softmax call them (dispatcher/ops/src/derivatives.cc).
//
// layer_norm_backward is Backplane's own: PyTorch's native_layer_norm_backward
// takes the mean and rstd its forward saved and a bool[3] mask, but
// Backplane's layer_norm returns only its result, so this op recomputes a
// row's statistics from the input (one pass over data the kernel reads
// anyway) and always returns all three gradients: the input's, and
// sum(grad * xhat) and sum(grad) over the leading dims (the weight's and the
// bias's, in the weight's dtype, the input's without one). layer_norm's
// formula calls it when the input needs a gradient; when only the
// parameters do, it sums without it.
namespace {

void checkPair(const std::string& op, const Tensor& grad, const char* grad_name, const Tensor& other,
               const char* other_name) {
  BP_CHECK(grad.defined(), op, ": argument '", grad_name, "' is undefined; pass a tensor");
  BP_CHECK(other.defined(), op, ": argument '", other_name, "' is undefined; pass a tensor");
  commonDevice(op, {{grad_name, &grad}, {other_name, &other}});
  BP_CHECK(grad.sizes() == other.sizes(), op, ": '", grad_name, "' has shape ", shapeString(grad.sizes()), " but '",
           other_name, "' has shape ", shapeString(other.sizes()), "; they must match");
  BP_CHECK(grad.dtype() == other.dtype(), op, ": '", grad_name, "' has dtype ", scalarTypeName(grad.dtype()), " but '",
           other_name, "' has dtype ", scalarTypeName(other.dtype()), "; they must match");
}

void geluBackwardMeta(const Tensor& grad_output, const Tensor& self, std::string_view approximate) {
  const std::string& op = qualified<"gelu_backward">();
  checkPair(op, grad_output, "grad_output", self, "self");
  checkDtypes(op, standardOp<"gelu_backward">(), {{"grad_output", &grad_output}, {"self", &self}});
  BP_CHECK(approximate == "none" || approximate == "tanh", op, ": approximate must be 'none' or 'tanh', but got '",
           approximate, "'");
}

// grad * d/dx gelu(x): cdf(x) + x * pdf(x), or the tanh form's derivative.
// 16-bit dtypes compute in float32 and round once (PyTorch's opmath): x * x
// would overflow float16 from |x| = 256.
Tensor geluBackwardComposite(const Tensor& grad, const Tensor& x, std::string_view approximate) {
  if (grad.dtype() == ScalarType::Float16 || grad.dtype() == ScalarType::BFloat16)
    return geluBackwardComposite(grad.to(ScalarType::Float32), x.to(ScalarType::Float32), approximate).to(grad.dtype());
  if (approximate == "tanh") {
    const double k = std::sqrt(2.0 / std::numbers::pi), c = 0.044715;
    Tensor x2 = x * x;
    Tensor t = ((x + x2 * x * c) * k).tanh();
    Tensor left = (t + 1) * 0.5;
    Tensor right = x * 0.5 * (1 - t * t) * ((x2 * (3 * c) + 1) * k);
    return grad * (left + right);
  }
  Tensor cdf = ((x * (1 / std::numbers::sqrt2)).erf() + 1) * 0.5;
  Tensor pdf = (x * x * -0.5).exp() * (1 / std::sqrt(2 * std::numbers::pi));
  return grad * (cdf + x * pdf);
}

template <FixedString Name>
void softmaxBackwardMeta(const Tensor& grad_output, const Tensor& output, int64_t dim, ScalarType input_dtype) {
  const std::string& op = qualified<Name>();
  checkPair(op, grad_output, "grad_output", output, "output");
  checkDtypes(op, standardOp<Name>(), {{"grad_output", &grad_output}, {"output", &output}});
  wrapDim(op, dim, std::max<int64_t>(output.dim(), 1));
  BP_CHECK(isFloatingType(input_dtype), op, ": input_dtype must be a floating dtype, but got ",
           scalarTypeName(input_dtype));
}

// (grad - sum(grad * y, dim)) * y, in input_dtype.
Tensor softmaxBackwardComposite(const Tensor& grad, const Tensor& y, int64_t dim, ScalarType input_dtype) {
  Tensor r = (grad - (grad * y).sum({dim}, /*keepdim=*/true)) * y;
  return r.dtype() == input_dtype ? r : r.to(input_dtype);
}

// grad - exp(y) * sum(grad, dim), in input_dtype.
Tensor logSoftmaxBackwardComposite(const Tensor& grad, const Tensor& y, int64_t dim, ScalarType input_dtype) {
  Tensor r = grad - y.exp() * grad.sum({dim}, /*keepdim=*/true);
  return r.dtype() == input_dtype ? r : r.to(input_dtype);
}

// embedding's weight gradient: row r is the sum of grad_output's rows whose
// index is r (none for padding_idx), each divided by how often its index
// occurs when scale_grad_by_freq.
void embeddingDenseBackwardMeta(const Tensor& grad_output, const Tensor& indices, int64_t num_weights,
                                int64_t padding_idx, bool /*scale_grad_by_freq*/) {
  const std::string& op = qualified<"embedding_dense_backward">();
  BP_CHECK(grad_output.defined(), op, ": argument 'grad_output' is undefined; pass a tensor");
  BP_CHECK(indices.defined(), op, ": argument 'indices' is undefined; pass a tensor");
  commonDevice(op, {{"grad_output", &grad_output}, {"indices", &indices}});
  checkDtypes(op, standardOp<"embedding_dense_backward">(), {{"grad_output", &grad_output}, {"indices", &indices}});
  BP_CHECK(num_weights >= 0, op, ": num_weights must be >= 0, got ", num_weights);
  BP_CHECK(grad_output.dim() == indices.dim() + 1 &&
               std::equal(indices.sizes().begin(), indices.sizes().end(), grad_output.sizes().begin()),
           op, ": grad_output has shape ", shapeString(grad_output.sizes()), " but indices has shape ",
           shapeString(indices.sizes()), "; grad_output must be indices' shape plus the embedding dim");
  (void)padding_idx;  // any value: an index no row has pads nothing
}

Tensor embeddingDenseBackwardComposite(const Tensor& grad_output, const Tensor& indices, int64_t num_weights,
                                       int64_t padding_idx, bool scale_grad_by_freq) {
  using ScatterAddSig = Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&);
  const auto& scatter_add = BP_STANDARD_OP("scatter_add", ScatterAddSig);
  const int64_t dim = grad_output.size(-1);
  const Tensor idx = indices.to(ScalarType::Int64).reshape({-1});
  Tensor rows = grad_output.reshape({-1, dim});
  if (padding_idx >= 0) rows = rows.masked_fill(idx.eq(padding_idx).unsqueeze(1), 0);
  const TensorOptions options{grad_output.dtype(), grad_output.device()};
  if (scale_grad_by_freq && idx.numel() > 0) {
    const Tensor counts = scatter_add.call(zeros({num_weights}, options), 0, idx, ones({idx.numel()}, options));
    rows = rows / counts.index_select(0, idx).unsqueeze(1);
  }
  return scatter_add.call(zeros({num_weights, dim}, options), 0, idx.unsqueeze(1).expand({idx.size(0), dim}), rows);
}

void layerNormBackwardMeta(const Tensor& grad_output, const Tensor& input, IntArrayRef normalized_shape,
                           const std::optional<Tensor>& weight, double eps) {
  const std::string& op = qualified<"layer_norm_backward">();
  checkPair(op, grad_output, "grad_output", input, "input");
  const Tensor& w = orUndefined(weight);
  commonDevice(op, {{"grad_output", &grad_output}, {"input", &input}, {"weight", &w}});
  checkDtypes(op, standardOp<"layer_norm_backward">(),
              {{"grad_output", &grad_output}, {"input", &input}, {"weight", &w}});
  checkNormalizedShape(op, input, normalized_shape, {{&w, "weight"}}, eps);
}

// The input's gradient rstd * (g - mean(g) - xhat * mean(g * xhat)) with
// g = grad * weight, and the parameters' sums, over [rows, m] views. 16-bit
// dtypes compute in float32 and round once.
std::tuple<Tensor, Tensor, Tensor> layerNormBackwardComposite(const Tensor& grad_output, const Tensor& input,
                                                              IntArrayRef normalized_shape,
                                                              const std::optional<Tensor>& weight, double eps) {
  const ScalarType dtype = input.dtype();
  const bool narrow = dtype == ScalarType::Float16 || dtype == ScalarType::BFloat16;
  const ScalarType param_dtype = weight && weight->defined() ? weight->dtype() : dtype;
  int64_t m = 1;
  for (int64_t s : normalized_shape) m *= s;
  const Tensor x = (narrow ? input.to(ScalarType::Float32) : input).reshape({-1, m});
  const Tensor grad = (narrow ? grad_output.to(ScalarType::Float32) : grad_output).reshape({-1, m});
  const Tensor centered = x - x.mean({1}, /*keepdim=*/true);
  const Tensor rstd = ((centered * centered).mean({1}, /*keepdim=*/true) + eps).rsqrt();
  const Tensor xhat = centered * rstd;
  const Tensor g = weight && weight->defined() ? grad * weight->to(grad.dtype()).reshape({m}) : grad;
  Tensor grad_input = (g - g.mean({1}, true) - xhat * (g * xhat).mean({1}, true)) * rstd;
  Tensor grad_weight = (grad * xhat).sum({0}).reshape(normalized_shape);
  Tensor grad_bias = grad.sum({0}).reshape(normalized_shape);
  return {grad_input.reshape(input.sizes()).to(dtype), grad_weight.to(param_dtype), grad_bias.to(param_dtype)};
}

}  // namespace

void addBackwardOps(std::vector<StandardOp>& ops) {
  using K = KernelFunction;
  const ScalarTypeSet kFloating = ScalarTypeSet::floating();
  ops.push_back(StandardOp{"gelu_backward(Tensor grad_output, Tensor self, *, str approximate=\"none\") -> Tensor",
                           K::makeFromFunction(BP_FN(geluBackwardMeta)),
                           K::makeFromFunction(BP_FN(geluBackwardComposite)),
                           "backward",
                           {{"grad_output", kFloating}, {"self", kFloating}}});
  ops.push_back(
      StandardOp{"_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor",
                 K::makeFromFunction(BP_FN(softmaxBackwardMeta<"_softmax_backward_data">)),
                 K::makeFromFunction(BP_FN(softmaxBackwardComposite)),
                 "backward",
                 {{"grad_output", kFloating}, {"output", kFloating}}});
  ops.push_back(StandardOp{
      "_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor",
      K::makeFromFunction(BP_FN(softmaxBackwardMeta<"_log_softmax_backward_data">)),
      K::makeFromFunction(BP_FN(logSoftmaxBackwardComposite)),
      "backward",
      {{"grad_output", kFloating}, {"output", kFloating}}});
  ops.push_back(
      StandardOp{"embedding_dense_backward(Tensor grad_output, Tensor indices, int num_weights, "
                 "int padding_idx, bool scale_grad_by_freq) -> Tensor",
                 K::makeFromFunction(BP_FN(embeddingDenseBackwardMeta)),
                 K::makeFromFunction(BP_FN(embeddingDenseBackwardComposite)),
                 "backward",
                 {{"grad_output", kFloating}, {"indices", {ScalarType::Int32, ScalarType::Int64}}}});
  ops.push_back(
      StandardOp{"layer_norm_backward(Tensor grad_output, Tensor input, int[] normalized_shape, "
                 "Tensor? weight, float eps) -> (Tensor grad_input, Tensor grad_weight, Tensor grad_bias)",
                 K::makeFromFunction(BP_FN(layerNormBackwardMeta)),
                 K::makeFromFunction(BP_FN(layerNormBackwardComposite)),
                 "backward",
                 {{"grad_output", kFloating}, {"input", kFloating}, {"weight", kFloating}}});
  // Out= forms derived from the functional ones (Note [Derived out= forms]).
  ops.push_back(
      derivedOut("gelu_backward.grad_input(Tensor grad_output, Tensor self, *, str approximate=\"none\", Tensor(a!) "
                 "grad_input) -> Tensor(a!)",
                 "gelu_backward"));
  ops.push_back(
      derivedOut("_softmax_backward_data.out(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype, *, "
                 "Tensor(a!) grad_input) -> Tensor(a!)",
                 "_softmax_backward_data"));
  ops.push_back(
      derivedOut("_log_softmax_backward_data.out(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype, "
                 "*, Tensor(a!) out) -> Tensor(a!)",
                 "_log_softmax_backward_data"));
  ops.push_back(
      derivedOut("embedding_dense_backward.out(Tensor grad_output, Tensor indices, int num_weights, int padding_idx, "
                 "bool scale_grad_by_freq, *, Tensor(a!) out) -> Tensor(a!)",
                 "embedding_dense_backward"));
  ops.push_back(derivedOut(
      "layer_norm_backward.out(Tensor grad_output, Tensor input, int[] normalized_shape, Tensor? weight, float eps, *, "
      "Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2) -> (Tensor(a!), Tensor(b!), Tensor(c!))",
      "layer_norm_backward"));
  ops.push_back(
      derivedOut("batch_norm_backward.out(Tensor grad_output, Tensor input, Tensor? weight, Tensor? running_mean, "
                 "Tensor? running_var, bool training, float eps, bool[3] output_mask, *, Tensor(a!) out0, Tensor(b!) "
                 "out1, Tensor(c!) out2) -> (Tensor(a!), Tensor(b!), Tensor(c!))",
                 "batch_norm_backward"));
}

}  // namespace backplane::ops
