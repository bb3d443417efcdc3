// Conformance specs of the backward ops: gelu_backward,
// _softmax_backward_data, _log_softmax_backward_data,
// embedding_dense_backward, layer_norm_backward, batch_norm_backward,
// conv2d_backward, max_pool2d_backward and avg_pool2d_backward (Note
// [Conformance specs]).
//
// Note [Backward op specs]
// A backward op is a standard op a vendor may implement natively (Note
// [Backward ops], Note [Window op gradients]), so it is certified as any
// other op, on its own, and not only through the gradient forms of the ops
// whose formulas call it (Note [Gradient forms]). Its samples are its
// forward op's: every sample the forward's spec certifies that does not
// raise and has a floating input, with an output gradient of random values
// shaped as the forward's result (and, for (log_)softmax, the forward's
// output as the reference computes it), so a geometry the forward is
// certified on is one its gradient is certified on. Samples of the
// backward's own options follow (output_mask, padding_idx,
// scale_grad_by_freq, input_dtype), then calls that must raise. The
// references are the gradients written out in double: loops over the same
// windows, rows and channels as the forwards' references, not a
// composition of other ops. A result a call's output_mask leaves out is not
// checked (Expected::masked): a kernel may leave it undefined or compute it.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"

namespace backplane::conformance {
namespace {

using Sizes = std::vector<int64_t>;
using Mask = std::vector<bool>;

const OpSpec& specOf(const std::string& op) {
  for (const OpSpec& s : allSpecs())
    if (s.op == op) return s;
  BP_THROW(kInternal, "conformance: no spec for ", op, ", which a backward op's spec builds on");
}

bool isFloating(ScalarType t) {
  return t == ScalarType::Float32 || t == ScalarType::Float64 || t == ScalarType::Float16 || t == ScalarType::BFloat16;
}

// The forward's samples a gradient is certified on: those that return,
// with a floating first argument.
std::vector<Sample> forwardSamples(const std::string& op) {
  std::vector<Sample> out;
  for (Sample& s : specOf(op).samples()) {
    if (s.must_raise || !s.args[0].isTensor() || !isFloating(s.args[0].toTensor().dtype())) continue;
    out.push_back(std::move(s));
  }
  return out;
}

// The shape of the forward's first result for sample `s`.
Sizes forwardShape(const std::string& op, const Sample& s) { return specOf(op).reference(s)[0].sizes; }

std::pair<int64_t, int64_t> pairOf(const IValue& v, std::pair<int64_t, int64_t> otherwise) {
  const Sizes& l = v.toIntList();
  if (l.empty()) return otherwise;
  return {l[0], l.size() == 1 ? l[0] : l[1]};
}

// The dtype a kernel computes a floating dtype in: float32 for the 16-bit
// ones (PyTorch's opmath), else itself.
ScalarType opmath(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 ? ScalarType::Float32 : t;
}

// A result of `values` (rounded to dtype), or one the mask leaves out.
Expected result(Sizes sizes, ScalarType dtype, const std::vector<double>& values, bool wanted = true) {
  Expected e;
  e.sizes = std::move(sizes);
  e.dtype = dtype;
  e.masked = !wanted;
  if (!wanted) return e;
  for (double v : values) e.values.push_back(roundTo(dtype, v));
  return e;
}

// The default tolerance of `t`, widened for sums of `terms` terms of
// magnitude up to 4 computed in `compute`'s precision: the slack
// eps * (4 * terms + 2) of Note [Conformance specs]'s conv2d.
Tolerance sumTolerance(ScalarType t, ScalarType compute, double terms) {
  Tolerance tol = defaultTolerance(t);
  tol.atol += machineEpsilon(compute) * (4 * terms + 2);
  return tol;
}

void addSpec(std::vector<OpSpec>& specs, std::string op, std::function<std::vector<Sample>()> samples,
             Reference reference, std::function<Tolerance(ScalarType, const Sample&)> tolerance) {
  OpSpec spec;
  spec.op = std::move(op);
  spec.family = "backward";
  spec.samples = std::move(samples);
  spec.reference = std::move(reference);
  spec.tolerance = std::move(tolerance);
  specs.push_back(std::move(spec));
}

// --- gelu_backward(grad_output, self, *, approximate)

double geluDerivative(double x, bool tanh_form) {
  if (tanh_form) {
    const double k = std::sqrt(2 / std::numbers::pi), c = 0.044715;
    const double t = std::tanh(k * (x + c * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x);
  }
  const double cdf = 0.5 * (1 + std::erf(x / std::numbers::sqrt2));
  const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
  return cdf + x * pdf;
}

std::vector<Sample> geluBackwardSamples() {
  Rng rng(seedFor("bp::gelu_backward"));
  std::vector<Sample> out;
  for (const Sample& f : forwardSamples("bp::gelu")) {
    const Tensor& x = f.args[0].toTensor();
    const IValue approximate = f.args.size() > 1 ? f.args[1] : IValue("none");
    out.push_back(makeSample(f.name, {randomTensor(rng, sizesOf(x), x.dtype()), x, approximate}));
  }
  // Far tails: the pdf underflows and x * x overflows float16 (the kernels
  // compute 16-bit dtypes in float32).
  for (ScalarType dt : kFloatTypes) {
    for (const char* approximate : {"none", "tanh"}) {
      const Tensor x = hostTensor({-300, -30, -9, 9, 30, 300}, {6}, dt);
      out.push_back(
          makeSample(std::string("tails +-9, 30, 300") + dtypeSuffix(dt) + " approximate='" + approximate + "'",
                     {randomTensor(rng, {6}, dt), x, IValue(approximate)}));
    }
  }
  const ScalarType f32 = ScalarType::Float32;
  const Tensor x = randomTensor(rng, {3, 4}, f32);
  out.push_back(raising("grad_output [4,3] for self [3,4]", {randomTensor(rng, {4, 3}, f32), x, IValue("none")},
                        "grad_output must have self's shape"));
  out.push_back(raising("float64 grad_output, float32 self",
                        {randomTensor(rng, {3, 4}, ScalarType::Float64), x, IValue("none")},
                        "grad_output and self dtypes differ"));
  out.push_back(raising("approximate='fast'", {randomTensor(rng, {3, 4}, f32), x, IValue("fast")},
                        "approximate must be 'none' or 'tanh'"));
  out.push_back(
      raising("int32 tensors",
              {randomTensor(rng, {3}, ScalarType::Int32), randomTensor(rng, {3}, ScalarType::Int32), IValue("none")},
              "gelu_backward takes floating dtypes only"));
  return out;
}

std::vector<Expected> geluBackwardReference(const Sample& s) {
  const Tensor& x = s.args[1].toTensor();
  const bool tanh_form = s.args[2].toString() == "tanh";
  const std::vector<double> g = valuesOf(s.args[0].toTensor()), xv = valuesOf(x);
  std::vector<double> r(xv.size());
  for (size_t i = 0; i < r.size(); ++i) r[i] = g[i] * geluDerivative(xv[i], tanh_form);
  return {result(sizesOf(x), x.dtype(), r)};
}

// --- _softmax_backward_data and _log_softmax_backward_data(grad_output,
//     output, dim, input_dtype)

// The forward's output for sample `f`, as its reference computes it.
Tensor softmaxOutput(const std::string& forward, const Sample& f) {
  const Expected y = specOf(forward).reference(f)[0];
  return hostTensor(y.values, y.sizes, y.dtype);
}

std::vector<Sample> softmaxBackwardSamples(bool log) {
  const std::string forward = log ? "bp::log_softmax.int" : "bp::softmax.int";
  const std::string op = log ? "bp::_log_softmax_backward_data" : "bp::_softmax_backward_data";
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  for (const Sample& f : forwardSamples(forward)) {
    const Tensor y = softmaxOutput(forward, f);
    out.push_back(makeSample(f.name, {randomTensor(rng, sizesOf(y), y.dtype()), y, f.args[1], y.dtype()}));
  }
  // A 16-bit input whose (log_)softmax was taken in float32 (PyTorch's
  // half_to_float): the gradient comes back in the input's dtype.
  const ScalarType f32 = ScalarType::Float32;
  for (ScalarType input_dtype : {ScalarType::Float16, ScalarType::BFloat16}) {
    Sample f = makeSample("", {randomTensor(rng, {5, 9}, f32), int64_t{1}, IValue()});
    const Tensor y = softmaxOutput(forward, f);
    out.push_back(makeSample("float32 output, input_dtype=" + std::string(scalarTypeName(input_dtype)),
                             {randomTensor(rng, {5, 9}, f32), y, int64_t{1}, input_dtype}));
  }
  const Tensor y = softmaxOutput(forward, makeSample("", {randomTensor(rng, {3, 4}, f32), int64_t{1}, IValue()}));
  auto raise = [&](std::string name, Tensor grad, Tensor output, int64_t dim, ScalarType input_dtype,
                   std::string reason) {
    out.push_back(raising(std::move(name), {std::move(grad), std::move(output), dim, input_dtype}, std::move(reason)));
  };
  raise("grad_output [4,3] for output [3,4]", randomTensor(rng, {4, 3}, f32), y, 1, f32,
        "grad_output must have output's shape");
  raise("float64 grad_output, float32 output", randomTensor(rng, {3, 4}, ScalarType::Float64), y, 1, f32,
        "grad_output and output dtypes differ");
  raise("dim 2 of a 2-d output", randomTensor(rng, {3, 4}, f32), y, 2, f32, "dimension out of range");
  raise("input_dtype=int64", randomTensor(rng, {3, 4}, f32), y, 1, ScalarType::Int64, "input_dtype must be floating");
  raise("int32 tensors", randomTensor(rng, {3, 4}, ScalarType::Int32), randomTensor(rng, {3, 4}, ScalarType::Int32), 1,
        f32, "the tensors must be floating point");
  return out;
}

// softmax's: output * (grad - sum(grad * output)); log_softmax's:
// grad - exp(output) * sum(grad), along dim.
std::vector<Expected> softmaxBackwardReference(bool log, const Sample& s) {
  const Tensor& y = s.args[1].toTensor();
  const std::vector<double> g = valuesOf(s.args[0].toTensor()), yv = valuesOf(y);
  const int64_t nd = y.dim();
  const int64_t d = nd == 0 ? 0 : (s.args[2].toInt() + nd) % nd;
  const int64_t n = nd == 0 ? 1 : y.size(d);
  int64_t inner = 1;
  for (int64_t i = d + 1; i < nd; ++i) inner *= y.size(i);
  const int64_t outer = n * inner == 0 ? 0 : y.numel() / (n * inner);
  std::vector<double> r(yv.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * n + j) * inner + i); };
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += log ? g[at(j)] : g[at(j)] * yv[at(j)];
      for (int64_t j = 0; j < n; ++j) {
        r[at(j)] = log ? g[at(j)] - std::exp(yv[at(j)]) * sum : yv[at(j)] * (g[at(j)] - sum);
      }
    }
  }
  return {result(sizesOf(y), s.args[3].toScalarType(), r)};
}

// softmax's sum of grad * output has terms adding up to at most 2 in
// magnitude (the outputs sum to 1); log_softmax's sums the gradient's n
// terms, each up to 2. Both in the tensors' dtype (a composite rounds each
// op to it).
Tolerance softmaxBackwardTolerance(bool log, ScalarType t, const Sample& s) {
  const Tensor& y = s.args[1].toTensor();
  const int64_t nd = y.dim();
  const double n = nd == 0 ? 1 : static_cast<double>(y.size((s.args[2].toInt() + nd) % nd));
  Tolerance tol = defaultTolerance(t);
  tol.atol += std::max(machineEpsilon(y.dtype()), machineEpsilon(t)) * (log ? 8 * std::sqrt(n) + 8 : 16);
  return tol;
}

// --- embedding_dense_backward(grad_output, indices, num_weights,
//     padding_idx, scale_grad_by_freq)

Tensor indexTensor(Rng& rng, const Sizes& sizes, int64_t rows, ScalarType dt = ScalarType::Int64) {
  std::vector<double> v(static_cast<size_t>(numelOf(sizes)));
  for (double& i : v) i = static_cast<double>(rng.integer(0, rows - 1));
  return hostTensor(v, sizes, dt);
}

std::vector<Sample> embeddingBackwardSamples() {
  Rng rng(seedFor("bp::embedding_dense_backward"));
  std::vector<Sample> out;
  auto add = [&](std::string name, const Tensor& indices, int64_t rows, int64_t dim, ScalarType dt,
                 int64_t padding_idx = -1, bool scale = false) {
    Sizes g = sizesOf(indices);
    g.push_back(dim);
    out.push_back(
        makeSample(std::move(name) + dtypeSuffix(dt), {randomTensor(rng, g, dt), indices, rows, padding_idx, scale}));
  };
  for (ScalarType dt : kFloatTypes) {
    // 12 indices into 5 rows: every row taken more than once on average.
    add("[3,4] indices into 5 rows of 6", indexTensor(rng, {3, 4}, 5), 5, 6, dt);
    add("padding_idx 2, scale_grad_by_freq", indexTensor(rng, {3, 4}, 5), 5, 6, dt, 2, true);
  }
  const ScalarType f32 = ScalarType::Float32;
  add("[8] indices", indexTensor(rng, {8}, 7), 7, 3, f32);
  add("int32 indices", indexTensor(rng, {2, 5}, 4, ScalarType::Int32), 4, 3, f32);
  add("padding_idx 0", indexTensor(rng, {2, 5}, 3), 3, 4, f32, 0);
  add("scale_grad_by_freq", indexTensor(rng, {2, 5}, 3), 3, 4, ScalarType::Float64, -1, true);
  add("padding_idx 9 (no index is 9)", indexTensor(rng, {6}, 4), 4, 2, f32, 9);
  add("rows no index takes [4] indices into 50 rows", indexTensor(rng, {4}, 50), 50, 3, f32);
  add("0-d index", hostTensor({2}, {}, ScalarType::Int64), 3, 4, f32);
  add("empty indices [0]", indexTensor(rng, {0}, 3), 3, 4, f32);
  add("no rows, empty indices", indexTensor(rng, {0}, 1), 0, 4, f32);
  add("sliced indices (step 2)", indexTensor(rng, {3, 8}, 6).slice(1, 0, std::nullopt, 2), 6, 5, f32);
  add("large [4096] indices into 1000 rows of 256", indexTensor(rng, {4096}, 1000), 1000, 256, f32);
  out.push_back(
      makeSample("transposed grad_output float32",
                 {randomTensor(rng, {5, 6}, f32).t(), indexTensor(rng, {6}, 4), int64_t{4}, int64_t{-1}, false}));

  auto raise = [&](std::string name, Tensor grad, Tensor indices, int64_t rows, std::string reason) {
    out.push_back(
        raising(std::move(name), {std::move(grad), std::move(indices), rows, int64_t{-1}, false}, std::move(reason)));
  };
  raise("index 5 of 5 rows", randomTensor(rng, {2, 3}, f32), hostTensor({1, 5}, {2}, ScalarType::Int64), 5,
        "index out of range");
  raise("grad_output [3,3] for indices [2]", randomTensor(rng, {3, 3}, f32), indexTensor(rng, {2}, 5), 5,
        "grad_output must be indices' shape plus the embedding dim");
  raise("float32 indices", randomTensor(rng, {2, 3}, f32), hostTensor({1, 2}, {2}, f32), 5,
        "indices must be an integer tensor");
  raise("int64 grad_output", randomTensor(rng, {2, 3}, ScalarType::Int64), indexTensor(rng, {2}, 5), 5,
        "grad_output must be floating point");
  raise("num_weights -1", randomTensor(rng, {0, 3}, f32), indexTensor(rng, {0}, 1), -1, "num_weights must be >= 0");
  return out;
}

// Row r of the result sums grad_output's rows whose index is r, none for
// padding_idx, each divided by how often its index occurs when
// scale_grad_by_freq.
std::vector<Expected> embeddingBackwardReference(const Sample& s) {
  const Tensor& grad = s.args[0].toTensor();
  const std::vector<double> g = valuesOf(grad), idx = valuesOf(s.args[1].toTensor());
  const int64_t rows = s.args[2].toInt(), padding_idx = s.args[3].toInt();
  const bool scale = s.args[4].toBool();
  const int64_t dim = grad.size(-1);
  std::vector<double> count(static_cast<size_t>(rows), 0), r(static_cast<size_t>(rows * dim), 0);
  for (double i : idx) count[static_cast<size_t>(i)] += 1;
  for (size_t k = 0; k < idx.size(); ++k) {
    const auto row = static_cast<int64_t>(idx[k]);
    if (row == padding_idx) continue;
    const double f = scale ? 1 / count[static_cast<size_t>(row)] : 1;
    for (int64_t j = 0; j < dim; ++j) r[static_cast<size_t>(row * dim + j)] += f * g[k * static_cast<size_t>(dim) + j];
  }
  return {result({rows, dim}, grad.dtype(), r)};
}

// A row sums as many terms as its index occurs, in the gradient's dtype
// (a composite scatters in it).
Tolerance embeddingBackwardTolerance(ScalarType t, const Sample& s) {
  std::vector<double> count(static_cast<size_t>(std::max<int64_t>(s.args[2].toInt(), 1)), 0);
  double most = 1;
  for (double i : valuesOf(s.args[1].toTensor())) most = std::max(most, count[static_cast<size_t>(i)] += 1);
  return sumTolerance(t, t, most);
}

// --- layer_norm_backward(grad_output, input, normalized_shape, weight, eps)

std::vector<Sample> layerNormBackwardSamples() {
  Rng rng(seedFor("bp::layer_norm_backward"));
  std::vector<Sample> out;
  // layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)
  for (const Sample& f : forwardSamples("bp::layer_norm")) {
    const Tensor& x = f.args[0].toTensor();
    out.push_back(makeSample(f.name, {randomTensor(rng, sizesOf(x), x.dtype()), x, f.args[1], f.args[2], f.args[4]}));
  }
  const ScalarType f32 = ScalarType::Float32;
  const Tensor x = randomTensor(rng, {2, 3, 4}, f32);
  auto raise = [&](std::string name, Tensor grad, Sizes shape, IValue w, std::string reason) {
    out.push_back(
        raising(std::move(name), {std::move(grad), x, std::move(shape), std::move(w), 1e-5}, std::move(reason)));
  };
  raise("grad_output [2,4,3] for input [2,3,4]", randomTensor(rng, {2, 4, 3}, f32), {4}, IValue(),
        "grad_output must have the input's shape");
  raise("float64 grad_output", randomTensor(rng, {2, 3, 4}, ScalarType::Float64), {4}, IValue(),
        "grad_output and input dtypes differ");
  raise("normalized_shape [3] for trailing dim 4", randomTensor(rng, {2, 3, 4}, f32), {3}, IValue(),
        "normalized_shape mismatch");
  raise("weight [3] for normalized_shape [4]", randomTensor(rng, {2, 3, 4}, f32), {4}, randomTensor(rng, {3}, f32),
        "weight size mismatch");
  return out;
}

// Per row of m elements, with xhat = (x - mean) * rstd and g = grad *
// weight: the input's gradient rstd * (g - mean(g) - xhat * mean(g *
// xhat)); over the rows, the weight's sum(grad * xhat) and the bias's
// sum(grad), in the weight's dtype (the input's without one).
std::vector<Expected> layerNormBackwardReference(const Sample& s) {
  const Tensor& x = s.args[1].toTensor();
  const Sizes& shape = s.args[2].toIntList();
  const Tensor weight = optionalTensor(s.args[3]);
  const double eps = s.args[4].toDouble();
  const std::vector<double> g = valuesOf(s.args[0].toTensor()), xv = valuesOf(x);
  const std::vector<double> w = weight.defined() ? valuesOf(weight) : std::vector<double>();
  const auto m = static_cast<size_t>(numelOf(shape));
  const size_t rows = m == 0 ? 0 : xv.size() / m;
  std::vector<double> gi(xv.size()), gw(m, 0), gb(m, 0), xhat(m), gp(m);
  for (size_t r = 0; r < rows; ++r) {
    const double* xr = xv.data() + r * m;
    const double* gr = g.data() + r * m;
    double mean = 0, var = 0;
    for (size_t j = 0; j < m; ++j) mean += xr[j];
    mean /= static_cast<double>(m);
    for (size_t j = 0; j < m; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    const double rstd = 1 / std::sqrt(var / static_cast<double>(m) + eps);
    double mean_g = 0, mean_gx = 0;
    for (size_t j = 0; j < m; ++j) {
      xhat[j] = (xr[j] - mean) * rstd;
      gp[j] = w.empty() ? gr[j] : gr[j] * w[j];
      mean_g += gp[j];
      mean_gx += gp[j] * xhat[j];
      gw[j] += gr[j] * xhat[j];
      gb[j] += gr[j];
    }
    mean_g /= static_cast<double>(m);
    mean_gx /= static_cast<double>(m);
    for (size_t j = 0; j < m; ++j) gi[r * m + j] = rstd * (gp[j] - mean_g - xhat[j] * mean_gx);
  }
  const ScalarType param = weight.defined() ? weight.dtype() : x.dtype();
  return {result(sizesOf(x), x.dtype(), gi), result(shape, param, gw), result(shape, param, gb)};
}

// Sums over a row (m terms) and over the rows.
Tolerance layerNormBackwardTolerance(ScalarType t, const Sample& s) {
  const Tensor& x = s.args[1].toTensor();
  const int64_t m = numelOf(s.args[2].toIntList());
  const int64_t rows = m == 0 ? 0 : x.numel() / m;
  return sumTolerance(t, opmath(x.dtype()), static_cast<double>(std::max(m, rows)));
}

// --- batch_norm_backward(grad_output, input, weight, running_mean,
//     running_var, training, eps, output_mask)

const Mask kAll = {true, true, true};

std::vector<Sample> batchNormBackwardSamples() {
  Rng rng(seedFor("bp::batch_norm_backward"));
  std::vector<Sample> out;
  // batch_norm(input, weight, bias, running_mean, running_var, training,
  // momentum, eps, cudnn_enabled)
  const std::vector<Sample> forward = forwardSamples("bp::batch_norm");
  auto add = [&](std::string name, const Sample& f, const Mask& mask) {
    const Tensor& x = f.args[0].toTensor();
    out.push_back(makeSample(std::move(name), {randomTensor(rng, sizesOf(x), x.dtype()), x, f.args[1], f.args[3],
                                               f.args[4], f.args[5], f.args[7], mask}));
  };
  for (const Sample& f : forward) add(f.name, f, kAll);
  // The masks, on the first training and evaluation samples.
  for (size_t i : {size_t{0}, size_t{1}}) {
    for (const Mask& mask :
         {Mask{true, false, false}, Mask{false, true, true}, Mask{false, false, true}, Mask{false, false, false}}) {
      std::string text = " output_mask [";
      for (bool b : mask) text += b ? "T" : "F";
      add(forward[i].name + text + "]", forward[i], mask);
    }
  }
  const ScalarType f32 = ScalarType::Float32;
  const Tensor x = randomTensor(rng, {2, 3, 4}, f32), c3 = randomTensor(rng, {3}, f32);
  const Tensor v3 = randomTensor(rng, {3}, f32, {0.5, 2});
  auto raise = [&](std::string name, Tensor grad, IValue rm, IValue rv, bool training, std::string reason) {
    out.push_back(raising(std::move(name), {std::move(grad), x, c3, std::move(rm), std::move(rv), training, 1e-5, kAll},
                          std::move(reason)));
  };
  raise("grad_output [2,4,3] for input [2,3,4]", randomTensor(rng, {2, 4, 3}, f32), c3, v3, true,
        "grad_output must have the input's shape");
  raise("float64 grad_output", randomTensor(rng, {2, 3, 4}, ScalarType::Float64), c3, v3, true,
        "grad_output and input dtypes differ");
  raise("eval without running stats", randomTensor(rng, {2, 3, 4}, f32), IValue(), IValue(), false,
        "evaluation needs the running stats");
  raise("running_mean of 4 for 3 channels", randomTensor(rng, {2, 3, 4}, f32), randomTensor(rng, {4}, f32), v3, false,
        "running_mean size mismatch");
  return out;
}

// Per channel (dim 1), over the batch and every position: with the batch's
// statistics (training, or no running ones) the input's gradient is
// rstd * (g - mean(g) - xhat * mean(g * xhat)) for g = grad * weight, else
// g * rsqrt(running_var + eps); the weight's is sum(grad * xhat), the
// bias's sum(grad), in the weight's dtype (the input's without one).
std::vector<Expected> batchNormBackwardReference(const Sample& s) {
  const Tensor& x = s.args[1].toTensor();
  const Tensor weight = optionalTensor(s.args[2]);
  const Tensor running_mean = optionalTensor(s.args[3]), running_var = optionalTensor(s.args[4]);
  const bool batch_stats = s.args[5].toBool() || !running_mean.defined();
  const double eps = s.args[6].toDouble();
  const std::vector<bool>& mask = s.args[7].toBoolList();
  const std::vector<double> g = valuesOf(s.args[0].toTensor()), xv = valuesOf(x);
  const auto c = static_cast<size_t>(x.size(1));
  const size_t inner = c == 0 || xv.empty() ? 1 : xv.size() / (static_cast<size_t>(x.size(0)) * c);
  auto channel = [&](size_t i) { return (i / inner) % c; };
  std::vector<double> mean(c, 0), var(c, 0), count(c, 0);
  if (batch_stats) {
    for (size_t i = 0; i < xv.size(); ++i) {
      mean[channel(i)] += xv[i];
      count[channel(i)] += 1;
    }
    for (size_t k = 0; k < c; ++k) mean[k] /= count[k];
    for (size_t i = 0; i < xv.size(); ++i) var[channel(i)] += std::pow(xv[i] - mean[channel(i)], 2);
    for (size_t k = 0; k < c; ++k) var[k] /= count[k];
  } else {
    mean = valuesOf(running_mean);
    var = valuesOf(running_var);
    for (size_t i = 0; i < xv.size(); ++i) count[channel(i)] += 1;
  }
  const std::vector<double> w = weight.defined() ? valuesOf(weight) : std::vector<double>(c, 1);
  std::vector<double> rstd(c), gw(c, 0), gb(c, 0), mean_g(c, 0), mean_gx(c, 0), gi(xv.size());
  for (size_t k = 0; k < c; ++k) rstd[k] = 1 / std::sqrt(var[k] + eps);
  auto xhat = [&](size_t i) { return (xv[i] - mean[channel(i)]) * rstd[channel(i)]; };
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t k = channel(i);
    gw[k] += g[i] * xhat(i);
    gb[k] += g[i];
    mean_g[k] += g[i] * w[k] / count[k];
    mean_gx[k] += g[i] * w[k] * xhat(i) / count[k];
  }
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t k = channel(i);
    const double gp = g[i] * w[k];
    gi[i] = batch_stats ? rstd[k] * (gp - mean_g[k] - xhat(i) * mean_gx[k]) : gp * rstd[k];
  }
  const ScalarType param = weight.defined() ? weight.dtype() : x.dtype();
  const Sizes cs{static_cast<int64_t>(c)};
  return {result(sizesOf(x), x.dtype(), gi, mask[0]), result(cs, param, gw, mask[1]), result(cs, param, gb, mask[2])};
}

Tolerance batchNormBackwardTolerance(ScalarType t, const Sample& s) {
  const Tensor& x = s.args[1].toTensor();
  const int64_t per_channel = x.size(1) == 0 ? 0 : x.numel() / x.size(1);
  return sumTolerance(t, opmath(x.dtype()), static_cast<double>(per_channel));
}

// --- conv2d_backward(grad_output, input, weight, stride, padding, dilation,
//     groups, output_mask)

std::vector<Sample> conv2dBackwardSamples() {
  Rng rng(seedFor("bp::conv2d_backward"));
  std::vector<Sample> out;
  // conv2d(input, weight, bias, stride, padding, dilation, groups)
  const std::vector<Sample> forward = forwardSamples("bp::conv2d");
  auto add = [&](std::string name, const Sample& f, const Mask& mask) {
    const Tensor& x = f.args[0].toTensor();
    out.push_back(makeSample(std::move(name), {randomTensor(rng, forwardShape("bp::conv2d", f), x.dtype()), x,
                                               f.args[1], f.args[3], f.args[4], f.args[5], f.args[6], mask}));
  };
  for (const Sample& f : forward) add(f.name, f, kAll);
  for (const Mask& mask : {Mask{true, false, false}, Mask{false, true, false}, Mask{false, false, true},
                           Mask{false, true, true}, Mask{false, false, false}}) {
    std::string text = " output_mask [";
    for (bool b : mask) text += b ? "T" : "F";
    add(forward[0].name + text + "]", forward[0], mask);
  }
  const ScalarType f32 = ScalarType::Float32;
  auto raise = [&](std::string name, Sizes grad, ScalarType grad_dt, Sizes weight, std::string reason) {
    out.push_back(raising(std::move(name),
                          {randomTensor(rng, grad, grad_dt), randomTensor(rng, {1, 2, 5, 5}, f32),
                           randomTensor(rng, weight, f32), Sizes{1}, Sizes{0}, Sizes{1}, int64_t{1}, kAll},
                          std::move(reason)));
  };
  raise("grad_output [1,3,4,4] for an output [1,3,3,3]", {1, 3, 4, 4}, f32, {3, 2, 3, 3},
        "grad_output must have the forward's output shape");
  raise("float64 grad_output", {1, 3, 3, 3}, ScalarType::Float64, {3, 2, 3, 3}, "grad_output and input dtypes differ");
  raise("3 input channels for a weight of 3", {1, 3, 3, 3}, f32, {3, 3, 3, 3}, "channel count mismatch");
  return out;
}

// The gradients of conv2d's reference loops: each product
// input[c, iy, ix] * weight[o, i, ky, kx] that made output[o, y, x]
// sends grad[o, y, x] times the other factor back to each.
std::vector<Expected> conv2dBackwardReference(const Sample& s) {
  const Tensor& go = s.args[0].toTensor();
  const Tensor& x = s.args[1].toTensor();
  const Tensor& w = s.args[2].toTensor();
  const auto [sh, sw] = pairOf(s.args[3], {1, 1});
  const auto [ph, pw] = pairOf(s.args[4], {0, 0});
  const auto [dh, dw] = pairOf(s.args[5], {1, 1});
  const int64_t groups = s.args[6].toInt();
  const std::vector<bool>& mask = s.args[7].toBoolList();
  const std::vector<double> g = valuesOf(go), xv = valuesOf(x), wv = valuesOf(w);
  const bool batched = x.dim() == 4;
  const int64_t n = batched ? x.size(0) : 1, c = x.size(-3), h = x.size(-2), wd = x.size(-1);
  const int64_t oc = w.size(0), icg = w.size(1), kh = w.size(2), kw = w.size(3);
  const int64_t oh = go.size(-2), ow = go.size(-1), ocg = oc / groups;
  std::vector<double> gi(xv.size(), 0), gw(wv.size(), 0), gb(static_cast<size_t>(oc), 0);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t o = 0; o < oc; ++o) {
      const int64_t first_ic = (o / ocg) * icg;
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t xo = 0; xo < ow; ++xo) {
          const double gv = g[static_cast<size_t>(((b * oc + o) * oh + y) * ow + xo)];
          gb[static_cast<size_t>(o)] += gv;
          for (int64_t i = 0; i < icg; ++i) {
            const int64_t plane = (b * c + first_ic + i) * h;
            const int64_t kernel = (o * icg + i) * kh;
            for (int64_t ky = 0; ky < kh; ++ky) {
              const int64_t iy = y * sh - ph + ky * dh;
              if (iy < 0 || iy >= h) continue;
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t ix = xo * sw - pw + kx * dw;
                if (ix < 0 || ix >= wd) continue;
                const auto at_x = static_cast<size_t>((plane + iy) * wd + ix);
                const auto at_w = static_cast<size_t>((kernel + ky) * kw + kx);
                gi[at_x] += gv * wv[at_w];
                gw[at_w] += gv * xv[at_x];
              }
            }
          }
        }
      }
    }
  }
  return {result(sizesOf(x), x.dtype(), gi, mask[0]), result(sizesOf(w), w.dtype(), gw, mask[1]),
          result({oc}, go.dtype(), gb, mask[2])};
}

// The input's gradient sums out_channels / groups * kH * kW terms; the
// weight's and the bias's one per output position of every batch element.
Tolerance conv2dBackwardTolerance(ScalarType t, const Sample& s) {
  const Tensor& go = s.args[0].toTensor();
  const Tensor& w = s.args[2].toTensor();
  const int64_t ocg = w.size(0) / s.args[6].toInt();
  const int64_t per_channel = go.size(-3) == 0 ? 0 : go.numel() / go.size(-3);
  const double terms = static_cast<double>(std::max(ocg * w.size(2) * w.size(3), per_channel));
  return sumTolerance(t, opmath(t), terms);
}

// --- max_pool2d_backward(grad_output, self, kernel_size, stride, padding,
//     dilation, ceil_mode) and avg_pool2d_backward(grad_output, self,
//     kernel_size, stride, padding, ceil_mode, count_include_pad,
//     divisor_override)

enum class Pool { Max, Avg };

std::vector<Sample> poolBackwardSamples(Pool kind) {
  const std::string forward = kind == Pool::Max ? "bp::max_pool2d" : "bp::avg_pool2d";
  Rng rng(seedFor(forward + "_backward"));
  std::vector<Sample> out;
  for (const Sample& f : forwardSamples(forward)) {
    const Tensor& x = f.args[0].toTensor();
    std::vector<IValue> args{randomTensor(rng, forwardShape(forward, f), x.dtype())};
    args.insert(args.end(), f.args.begin(), f.args.end());
    out.push_back(makeSample(f.name, std::move(args)));
  }
  const ScalarType f32 = ScalarType::Float32;
  const Tensor x = randomTensor(rng, {1, 2, 6, 6}, f32);
  auto raise = [&](std::string name, Tensor grad, std::string reason) {
    std::vector<IValue> args{std::move(grad), x, Sizes{2}, Sizes{}, Sizes{0}};
    if (kind == Pool::Max) {
      args.insert(args.end(), {Sizes{1}, false});
    } else {
      args.insert(args.end(), {false, true, IValue()});
    }
    out.push_back(raising(std::move(name), std::move(args), std::move(reason)));
  };
  raise("grad_output [1,2,4,4] for an output [1,2,3,3]", randomTensor(rng, {1, 2, 4, 4}, f32),
        "grad_output must have the forward's output shape");
  raise("float64 grad_output", randomTensor(rng, {1, 2, 3, 3}, ScalarType::Float64),
        "grad_output and self dtypes differ");
  return out;
}

// Each window's gradient goes back to the elements it read: max_pool2d's
// to the first (in kh, kw order) equal to the window's maximum or NaN, as
// PyTorch's argmax picks it; avg_pool2d's shared among the window's input
// elements, each share the gradient over the forward's divisor.
std::vector<Expected> poolBackwardReference(Pool kind, const Sample& s) {
  const Tensor& go = s.args[0].toTensor();
  const Tensor& x = s.args[1].toTensor();
  const auto [kh, kw] = pairOf(s.args[2], {1, 1});
  const auto [sh, sw] = pairOf(s.args[3], {kh, kw});
  const auto [ph, pw] = pairOf(s.args[4], {0, 0});
  const auto [dh, dw] = kind == Pool::Max ? pairOf(s.args[5], {1, 1}) : std::pair<int64_t, int64_t>{1, 1};
  const bool count_include_pad = kind == Pool::Avg && s.args[6].toBool();
  // divisor_override, or 0 for none (it is never 0: the meta refuses that).
  const int64_t divisor = kind == Pool::Avg && !s.args[7].isNone() ? s.args[7].toInt() : 0;
  const std::vector<double> g = valuesOf(go), v = valuesOf(x);
  const int64_t h = x.size(-2), w = x.size(-1), oh = go.size(-2), ow = go.size(-1);
  const int64_t planes = h * w == 0 ? 0 : x.numel() / (h * w);
  std::vector<double> gi(v.size(), 0);
  for (int64_t p = 0; p < planes; ++p) {
    const double* in = v.data() + p * h * w;
    double* grad_in = gi.data() + p * h * w;
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        const double gv = g[static_cast<size_t>((p * oh + oy) * ow + ox)];
        if (kind == Pool::Max) {
          double mx = -kInf;
          int64_t pick = -1;
          for (int64_t ky = 0; ky < kh; ++ky) {
            const int64_t iy = oy * sh - ph + ky * dh;
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t ix = ox * sw - pw + kx * dw;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              const double val = in[iy * w + ix];
              if (pick < 0 || (!std::isnan(mx) && (std::isnan(val) || val > mx))) {
                mx = val;
                pick = iy * w + ix;
              }
            }
          }
          if (pick >= 0) grad_in[pick] += gv;
        } else {
          const int64_t y0 = oy * sh - ph, x0 = ox * sw - pw;
          const int64_t y1 = std::min(y0 + kh, h + ph), x1 = std::min(x0 + kw, w + pw);
          const int64_t cy0 = std::max<int64_t>(y0, 0), cx0 = std::max<int64_t>(x0, 0);
          const int64_t cy1 = std::min(y1, h), cx1 = std::min(x1, w);
          const int64_t d = divisor != 0        ? divisor
                            : count_include_pad ? (y1 - y0) * (x1 - x0)
                                                : (cy1 - cy0) * (cx1 - cx0);
          for (int64_t iy = cy0; iy < cy1; ++iy)
            for (int64_t ix = cx0; ix < cx1; ++ix) grad_in[iy * w + ix] += gv / static_cast<double>(d);
        }
      }
    }
  }
  return {result(sizesOf(x), x.dtype(), gi)};
}

// An element sums the shares of every window holding it, in the dtype (a
// composite adds the window offsets' shares in it).
Tolerance poolBackwardTolerance(Pool kind, ScalarType t, const Sample& s) {
  const auto [kh, kw] = pairOf(s.args[2], {1, 1});
  const auto [sh, sw] = pairOf(s.args[3], {kh, kw});
  const auto [dh, dw] = kind == Pool::Max ? pairOf(s.args[5], {1, 1}) : std::pair<int64_t, int64_t>{1, 1};
  auto windows = [](int64_t k, int64_t d, int64_t stride) { return ((k - 1) * d + stride) / stride; };
  return sumTolerance(t, t, static_cast<double>(windows(kh, dh, sh) * windows(kw, dw, sw)));
}

}  // namespace

void addBackwardSpecs(std::vector<OpSpec>& specs) {
  addSpec(specs, "bp::gelu_backward", geluBackwardSamples, geluBackwardReference,
          [](ScalarType t, const Sample&) { return sumTolerance(t, opmath(t), 1); });
  for (bool log : {false, true}) {
    addSpec(
        specs, log ? "bp::_log_softmax_backward_data" : "bp::_softmax_backward_data",
        [log] { return softmaxBackwardSamples(log); },
        [log](const Sample& s) { return softmaxBackwardReference(log, s); },
        [log](ScalarType t, const Sample& s) { return softmaxBackwardTolerance(log, t, s); });
  }
  addSpec(specs, "bp::embedding_dense_backward", embeddingBackwardSamples, embeddingBackwardReference,
          embeddingBackwardTolerance);
  addSpec(specs, "bp::layer_norm_backward", layerNormBackwardSamples, layerNormBackwardReference,
          layerNormBackwardTolerance);
  addSpec(specs, "bp::batch_norm_backward", batchNormBackwardSamples, batchNormBackwardReference,
          batchNormBackwardTolerance);
  addSpec(specs, "bp::conv2d_backward", conv2dBackwardSamples, conv2dBackwardReference, conv2dBackwardTolerance);
  for (Pool kind : {Pool::Max, Pool::Avg}) {
    addSpec(
        specs, kind == Pool::Max ? "bp::max_pool2d_backward" : "bp::avg_pool2d_backward",
        [kind] { return poolBackwardSamples(kind); },
        [kind](const Sample& s) { return poolBackwardReference(kind, s); },
        [kind](ScalarType t, const Sample& s) { return poolBackwardTolerance(kind, t, s); });
  }
}

}  // namespace backplane::conformance
