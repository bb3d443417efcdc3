#include "backplane/ops/derivatives.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <optional>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/standard_ops.h"
#include "structured.h"

namespace backplane {

const char* differentiabilityName(Differentiability d) {
  switch (d) {
    case Differentiability::Formula: return "formula";
    case Differentiability::NonDifferentiable: return "non_differentiable";
    case Differentiability::NotImplemented: return "not_implemented";
    case Differentiability::Composite: return "composite";
    case Differentiability::OutVariant: return "out_variant";
    case Differentiability::Inplace: return "inplace";
  }
  return "?";
}

// ------------------------------------------------------- DerivativeContext

DerivativeContext::DerivativeContext(const FunctionSchema& schema, absl::Span<const IValue> arguments,
                                     const std::vector<Tensor>& results, const std::vector<Tensor>& grads,
                                     uint64_t needs_mask)
    : schema_(schema),
      arguments_(arguments),
      results_(results),
      grads_(grads),
      needs_mask_(needs_mask),
      input_grads_(schema.arguments().size()) {}

size_t DerivativeContext::indexOf(std::string_view name) const {
  const auto& args = schema_.arguments();
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == name) return i;
  BP_THROW(kInternal, "the derivative formula of ", schema_.name().qualifiedName(), " names argument '", name,
           "', which its schema ", schema_.toString(), " does not have");
}

const Tensor& DerivativeContext::grad(size_t result) const {
  BP_CHECK(result < grads_.size(), schema_.name().qualifiedName(), ": no result ", result);
  return grads_[result];
}
const Tensor& DerivativeContext::result(size_t i) const {
  if (check_) check_->checkResult(i);
  BP_CHECK(i < results_.size(), schema_.name().qualifiedName(), ": no result ", i);
  return results_[i];
}
const IValue& DerivativeContext::argument(std::string_view name) const {
  const size_t i = indexOf(name);
  if (check_) check_->checkArgument(i);
  return arguments_[i];
}
const Tensor& DerivativeContext::tensor(std::string_view name) const {
  return static_cast<const Tensor&>(argument(name).toTensor());
}
std::optional<Tensor> DerivativeContext::optionalTensor(std::string_view name) const {
  const IValue& v = argument(name);
  if (v.isNone() || !v.toTensor().defined()) return std::nullopt;
  return Tensor(v.toTensor());
}
std::vector<Tensor> DerivativeContext::tensorList(std::string_view name) const {
  const auto& l = argument(name).toTensorList();
  return std::vector<Tensor>(l.begin(), l.end());
}
Scalar DerivativeContext::scalar(std::string_view name) const { return argument(name).toScalar(); }
std::optional<Scalar> DerivativeContext::optionalScalar(std::string_view name) const {
  const IValue& v = argument(name);
  if (v.isNone()) return std::nullopt;
  return v.toScalar();
}
int64_t DerivativeContext::integer(std::string_view name) const { return argument(name).toInt(); }
std::optional<int64_t> DerivativeContext::optionalInteger(std::string_view name) const {
  const IValue& v = argument(name);
  if (v.isNone()) return std::nullopt;
  return v.toInt();
}
double DerivativeContext::real(std::string_view name) const { return argument(name).toDouble(); }
std::optional<double> DerivativeContext::optionalReal(std::string_view name) const {
  const IValue& v = argument(name);
  if (v.isNone()) return std::nullopt;
  return v.toDouble();
}
bool DerivativeContext::boolean(std::string_view name) const { return argument(name).toBool(); }
std::vector<int64_t> DerivativeContext::ints(std::string_view name) const {
  const IValue& v = argument(name);
  if (v.isNone()) return {};
  const auto& l = v.toIntList();
  return std::vector<int64_t>(l.begin(), l.end());
}
std::string DerivativeContext::string(std::string_view name) const {
  const IValue& v = argument(name);
  return v.isNone() ? std::string() : std::string(v.toString());
}
bool DerivativeContext::needs(std::string_view name) const {
  const size_t i = indexOf(name);
  return i < 64 && ((needs_mask_ >> i) & 1);
}
void DerivativeContext::set(std::string_view name, Tensor grad) {
  auto& slot = input_grads_[indexOf(name)];
  slot.clear();
  slot.push_back(std::move(grad));
}
void DerivativeContext::setList(std::string_view name, std::vector<Tensor> grads) {
  input_grads_[indexOf(name)] = std::move(grads);
}

// ------------------------------------------------------------- helpers

Tensor sumToSize(const Tensor& grad, IntArrayRef sizes) {
  if (grad.sizes() == sizes) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(sizes.size());
  BP_CHECK(lead >= 0, "sumToSize: a gradient of sizes ", grad.sizes(), " cannot be summed to sizes ", sizes);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (int64_t i = 0; i < static_cast<int64_t>(sizes.size()); ++i) {
    const int64_t g = grad.size(lead + i);
    if (sizes[i] == 1 && g != 1) {
      dims.push_back(lead + i);
    } else {
      BP_CHECK(sizes[i] == g, "sumToSize: a gradient of sizes ", grad.sizes(), " cannot be summed to sizes ", sizes);
    }
  }
  Tensor r = dims.empty() ? grad : grad.sum(dims, /*keepdim=*/true);
  if (lead > 0 || r.sizes() != sizes) r = r.reshape(sizes);
  return r;
}

namespace {

using Ctx = DerivativeContext;
constexpr auto F = Differentiability::Formula;
constexpr auto ND = Differentiability::NonDifferentiable;
constexpr auto NI = Differentiability::NotImplemented;
constexpr auto C = Differentiability::Composite;

// The dims a reduction reduced: `dim` (all of self's for none or empty), wrapped.
std::vector<int64_t> reducedDims(const Tensor& self, const std::vector<int64_t>& dim) {
  std::vector<int64_t> out;
  if (dim.empty()) {
    for (int64_t i = 0; i < self.dim(); ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dim) out.push_back(self.dim() == 0 ? 0 : (d < 0 ? d + self.dim() : d));
  std::sort(out.begin(), out.end());
  return out;
}
// `g` (a reduction's gradient) with the reduced dims put back as size 1.
Tensor unsqueezeReduced(Tensor g, const Tensor& self, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim || self.dim() == 0) return g;
  for (int64_t d : dims) g = g.unsqueeze(d);
  return g;
}
int64_t countOf(const Tensor& self, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= self.dim() == 0 ? 1 : self.size(d);
  return n;
}
Tensor zerosOf(const Tensor& t) { return zeros_like(t); }

using ScatterAddSig = Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&);
Tensor scatterAdd(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return BP_STANDARD_OP("scatter_add", ScatterAddSig).call(self, dim, index, src);
}
using PadSig = Tensor(const Tensor&, IntArrayRef, const Scalar&);

// The gradient of a scatter's src: grad read back at index, with zeros where
// src is larger than index (only index's extent of src is read).
Tensor gatheredToSource(const Tensor& grad, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor g = grad.gather(dim, index);
  if (g.sizes() == src.sizes()) return g;
  std::vector<int64_t> pad;
  for (int64_t d = src.dim() - 1; d >= 0; --d) {
    pad.push_back(0);
    pad.push_back(src.size(d) - g.size(d));
  }
  return BP_STANDARD_OP("constant_pad_nd", PadSig).call(g, pad, Scalar(0));
}

// The gradient of reflection_padNd / replication_padNd: each padded dim (the
// last first, as `pad` lists them) is a gather of the input along it, output
// position o copying input position r(o), o - before mirrored at the edges
// (reflect: without repeating the edge) or clamped to them (replicate); its
// gradient sums each output position's gradient onto r(o) (scatter_add along
// the dim). The dims are independent, so one scatter per dim.
Tensor edgePadGrad(const Tensor& grad, const Tensor& self, const std::vector<int64_t>& pad, bool reflect) {
  Tensor g = grad;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const int64_t d = self.dim() - 1 - static_cast<int64_t>(i);
    const int64_t n = self.size(d), before = pad[2 * i], len = g.size(d);
    std::vector<int64_t> source(static_cast<size_t>(len));
    for (int64_t o = 0; o < len; ++o) {
      int64_t j = o - before;
      if (reflect)
        j = j < 0 ? -j : j >= n ? 2 * (n - 1) - j : j;
      else
        j = std::clamp<int64_t>(j, 0, n - 1);
      source[static_cast<size_t>(o)] = j;
    }
    std::vector<int64_t> along(static_cast<size_t>(g.dim()), 1);
    along[static_cast<size_t>(d)] = len;
    const Tensor index = Tensor(tensorFromVector(source, {len})).to(g.device()).reshape(along).expand(g.sizes());
    std::vector<int64_t> shape(g.sizes().begin(), g.sizes().end());
    shape[static_cast<size_t>(d)] = n;
    g = scatterAdd(zeros(shape, {g.dtype(), g.device()}), d, index, g);
  }
  return g;
}

// maximum's (max) or minimum's gradient for argument `mine` against
// `theirs`: grad where `mine` wins, half of it on a tie.
// g * s, or g itself when s is 1 (add's and addmm's usual alpha and beta:
// no pass over the gradient for nothing).
Tensor scaledBy(const Tensor& g, const Scalar& s) { return s.to<double>() == 1.0 ? g : g * s; }

// A matrix whose memory is its transpose's, contiguous: linear's weight.t().
bool isTransposedMatrix(const Tensor& m) {
  return m.dim() == 2 && m.size(0) > 1 && m.size(1) > 1 && m.stride(0) == 1 && m.stride(1) == m.size(0);
}
// The gradients of self @ mat2. Each is computed in the layout of its input
// when that is a transposed matrix, so that the transpose's own backward
// hands the base (linear's weight) a contiguous gradient: no copy, and the
// leaf's accumulator keeps it as it is (PyTorch's mm backward does the same).
Tensor mmSelfGrad(const Tensor& grad, const Tensor& self, const Tensor& mat2) {
  return isTransposedMatrix(self) ? mat2.mm(grad.t()).t() : grad.mm(mat2.t());
}
Tensor mmMat2Grad(const Tensor& grad, const Tensor& self, const Tensor& mat2) {
  return isTransposedMatrix(mat2) ? grad.t().mm(self).t() : self.t().mm(grad);
}

Tensor pairwiseExtremumGrad(const Ctx& c, const char* mine, const char* theirs, bool max) {
  const Tensor &a = c.tensor(mine), &b = c.tensor(theirs);
  const ScalarType dt = c.grad().dtype();
  return c.grad() * ((max ? a.gt(b) : a.lt(b)).to(dt) + a.eq(b).to(dt) * 0.5);
}

// Gradient of a reduction to a max/min: split evenly among the elements
// equal to the result.
Tensor extremumGrad(const Ctx& c, const Tensor& self, const std::vector<int64_t>& dim, bool keepdim) {
  const std::vector<int64_t> dims = reducedDims(self, dim);
  Tensor value = unsqueezeReduced(c.result(), self, dims, keepdim);
  Tensor g = unsqueezeReduced(c.grad(), self, dims, keepdim);
  Tensor mask = self.eq(value).to(g.dtype());
  Tensor count = dims.empty() ? mask : mask.sum(dims, /*keepdim=*/true);
  return mask * g / count;
}

// var/std over `dim` with `correction`.
Tensor varGrad(const Ctx& c, const Tensor& self, const std::vector<int64_t>& dim, double correction, bool keepdim,
               bool is_std) {
  const std::vector<int64_t> dims = reducedDims(self, dim);
  const double n = static_cast<double>(countOf(self, dims));
  Tensor g = unsqueezeReduced(c.grad(), self, dims, keepdim);
  Tensor centered = self - self.mean(dims, /*keepdim=*/true);
  Tensor r = g * centered * (2.0 / std::max(n - correction, 0.0));
  if (is_std) {
    // Where the deviation is 0 the gradient is 0 (PyTorch's convention), not 0 / 0.
    const Tensor deviation = unsqueezeReduced(c.result(), self, dims, keepdim);
    r = (r / (deviation * 2)).masked_fill(deviation.eq(0), 0);
  }
  return r;
}

// x's normalization over `dims`, as the normalization layers compute it:
// xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps) (biased variance);
// computed once for the formulas that need both.
struct Normalization {
  Tensor xhat, rstd;
  Normalization(const Tensor& x, const std::vector<int64_t>& dims, double eps) {
    Tensor centered = x - x.mean(dims, /*keepdim=*/true);
    rstd = ((centered * centered).mean(dims, /*keepdim=*/true) + eps).rsqrt();
    xhat = centered * rstd;
  }
};

// The correction of var.correction / std.correction.
double correctionOf(const Ctx& c) {
  std::optional<Scalar> s = c.optionalScalar("correction");
  return s ? s->to<double>() : 1.0;
}

std::vector<OpDerivative> buildTable() {
  std::vector<OpDerivative> t;
  auto formula = [&](std::string op, std::vector<DerivativeFormula> f, const char* note = "",
                     uint64_t nondiff_results = 0) {
    t.push_back({std::move(op), F, std::move(f), note, nondiff_results});
  };
  auto nondiff = [&](std::initializer_list<const char*> ops, const char* why) {
    for (const char* op : ops) t.push_back({op, ND, {}, why});
  };
  auto composite = [&](std::initializer_list<const char*> ops) {
    for (const char* op : ops)
      t.push_back({op, C, {}, "differentiated through the standard ops its composite kernel calls"});
  };
  auto notImplemented = [&](std::initializer_list<const char*> ops, const char* why) {
    for (const char* op : ops) t.push_back({op, NI, {}, why});
  };

  // --- Arithmetic.
  formula("add.Tensor",
          {{"self", "grad", [](Ctx& c) { c.set("self", c.grad()); }},
           {"other", "grad * alpha", [](Ctx& c) { c.set("other", scaledBy(c.grad(), c.scalar("alpha"))); }}});
  formula("add.Scalar", {{"self", "grad", [](Ctx& c) { c.set("self", c.grad()); }}});
  formula("sub.Tensor",
          {{"self", "grad", [](Ctx& c) { c.set("self", c.grad()); }},
           {"other", "-grad * alpha", [](Ctx& c) { c.set("other", c.grad() * -c.scalar("alpha").to<double>()); }}});
  formula("sub.Scalar", {{"self", "grad", [](Ctx& c) { c.set("self", c.grad()); }}});
  formula("rsub.Scalar",
          {{"self", "-grad * alpha", [](Ctx& c) { c.set("self", c.grad() * -c.scalar("alpha").to<double>()); }}});
  formula("mul.Tensor", {{"self", "grad * other", [](Ctx& c) { c.set("self", c.grad() * c.tensor("other")); }},
                         {"other", "grad * self", [](Ctx& c) { c.set("other", c.grad() * c.tensor("self")); }}});
  formula("mul.Scalar", {{"self", "grad * other", [](Ctx& c) { c.set("self", c.grad() * c.scalar("other")); }}});
  for (const char* op : {"div.Tensor", "true_divide.Tensor"}) {
    formula(op, {{"self", "grad / other", [](Ctx& c) { c.set("self", c.grad() / c.tensor("other")); }},
                 {"other", "-grad * self / (other * other)", [](Ctx& c) {
                    const Tensor& o = c.tensor("other");
                    c.set("other", -c.grad() * c.tensor("self") / (o * o));
                  }}});
  }
  for (const char* op : {"div.Scalar", "true_divide.Scalar"})
    formula(op, {{"self", "grad / other", [](Ctx& c) { c.set("self", c.grad() / c.scalar("other")); }}});
  formula("div.Tensor_mode",
          {{"self", "grad / other without rounding_mode, else zeros",
            [](Ctx& c) {
              c.set("self", c.string("rounding_mode").empty() ? c.grad() / c.tensor("other") : zerosOf(c.grad()));
            }},
           {"other", "-grad * self / other^2 without rounding_mode, else zeros", [](Ctx& c) {
              const Tensor& o = c.tensor("other");
              c.set("other", c.string("rounding_mode").empty() ? -c.grad() * c.tensor("self") / (o * o)
                                                               : zerosOf(o).to(c.grad().dtype()));
            }}});
  formula("div.Scalar_mode",
          {{"self", "grad / other without rounding_mode, else zeros", [](Ctx& c) {
              c.set("self", c.string("rounding_mode").empty() ? c.grad() / c.scalar("other") : zerosOf(c.grad()));
            }}});
  formula("remainder.Tensor", {{"self", "grad", [](Ctx& c) { c.set("self", c.grad()); }},
                               {"other", "-grad * floor_divide(self, other)", [](Ctx& c) {
                                  c.set("other", -c.grad() * c.tensor("self").floor_divide(c.tensor("other")));
                                }}});
  formula("remainder.Scalar", {{"self", "grad", [](Ctx& c) { c.set("self", c.grad()); }}});
  formula("fmod.Tensor", {{"self", "grad", [](Ctx& c) { c.set("self", c.grad()); }},
                          {"other", "-grad * trunc(self / other)", [](Ctx& c) {
                             c.set("other", -c.grad() * (c.tensor("self") / c.tensor("other")).trunc());
                           }}});
  formula("fmod.Scalar", {{"self", "grad", [](Ctx& c) { c.set("self", c.grad()); }}});
  formula("neg", {{"self", "-grad", [](Ctx& c) { c.set("self", -c.grad()); }}});
  formula("abs", {{"self", "grad * sign(self)", [](Ctx& c) { c.set("self", c.grad() * c.tensor("self").sign()); }}});
  formula("pow.Tensor_Scalar",
          {{"self", "grad * exponent * self^(exponent - 1)", [](Ctx& c) {
              const Scalar e = c.scalar("exponent");
              const double ed = e.to<double>();
              c.set("self", ed == 0 ? zerosOf(c.grad()) : c.grad() * ed * c.tensor("self").pow(Scalar(ed - 1)));
            }}});
  formula("pow.Tensor_Tensor",
          {{"self", "grad * exponent * self^(exponent - 1)",
            [](Ctx& c) {
              const Tensor& e = c.tensor("exponent");
              c.set("self", (c.grad() * e * c.tensor("self").pow(e - 1)).masked_fill(e.eq(0), 0));
            }},
           {"exponent", "grad * result * log(self) (0 where self = 0 and exponent >= 0)", [](Ctx& c) {
              const Tensor& s = c.tensor("self");
              Tensor r = c.grad() * c.result() * s.log();
              c.set("exponent", r.masked_fill(logical_and(s.eq(0), c.tensor("exponent").ge(0)), 0));
            }}});
  // maximum / minimum: the gradient goes to the operand that won, half to
  // each on a tie (PyTorch's).
  formula("maximum", {{"self", "grad where self > other, half of it where equal",
                       [](Ctx& c) { c.set("self", pairwiseExtremumGrad(c, "self", "other", true)); }},
                      {"other", "grad where other > self, half of it where equal",
                       [](Ctx& c) { c.set("other", pairwiseExtremumGrad(c, "other", "self", true)); }}});
  formula("minimum", {{"self", "grad where self < other, half of it where equal",
                       [](Ctx& c) { c.set("self", pairwiseExtremumGrad(c, "self", "other", false)); }},
                      {"other", "grad where other < self, half of it where equal",
                       [](Ctx& c) { c.set("other", pairwiseExtremumGrad(c, "other", "self", false)); }}});
  formula("clamp", {{"self", "grad where min <= self <= max, else 0", [](Ctx& c) {
                       const Tensor& s = c.tensor("self");
                       Tensor g = c.grad();
                       if (auto lo = c.optionalScalar("min")) g = g.masked_fill(s.lt(*lo), 0);
                       if (auto hi = c.optionalScalar("max")) g = g.masked_fill(s.gt(*hi), 0);
                       c.set("self", g);
                     }}});
  formula("where.self", {{"self", "where(condition, grad, 0)",
                          [](Ctx& c) { c.set("self", c.grad().masked_fill(c.tensor("condition").logical_not(), 0)); }},
                         {"other", "where(condition, 0, grad)",
                          [](Ctx& c) { c.set("other", c.grad().masked_fill(c.tensor("condition"), 0)); }}});
  formula("masked_fill.Scalar", {{"self", "grad masked to 0 where mask",
                                  [](Ctx& c) { c.set("self", c.grad().masked_fill(c.tensor("mask"), 0)); }}});
  formula("masked_fill.Tensor", {{"self", "grad masked to 0 where mask",
                                  [](Ctx& c) { c.set("self", c.grad().masked_fill(c.tensor("mask"), 0)); }},
                                 {"value", "sum of grad where mask", [](Ctx& c) {
                                    c.set("value", c.grad().masked_fill(c.tensor("mask").logical_not(), 0).sum());
                                  }}});
  for (const char* op : {"floor", "ceil", "trunc", "round", "round.decimals", "sign"})
    formula(op, {{"self", "zeros (piecewise constant)", [](Ctx& c) { c.set("self", zerosOf(c.grad())); }}});

  // --- Unary math and activations.
  formula("exp", {{"self", "grad * result", [](Ctx& c) { c.set("self", c.grad() * c.result()); }}});
  formula("log", {{"self", "grad / self", [](Ctx& c) { c.set("self", c.grad() / c.tensor("self")); }}});
  formula("sqrt", {{"self", "grad / (2 * result)", [](Ctx& c) { c.set("self", c.grad() / (c.result() * 2)); }}});
  formula("rsqrt", {{"self", "-0.5 * grad * result^3", [](Ctx& c) {
                       const Tensor& r = c.result();
                       c.set("self", c.grad() * r * r * r * -0.5);
                     }}});
  formula("sin", {{"self", "grad * cos(self)", [](Ctx& c) { c.set("self", c.grad() * c.tensor("self").cos()); }}});
  formula("cos", {{"self", "-grad * sin(self)", [](Ctx& c) { c.set("self", -c.grad() * c.tensor("self").sin()); }}});
  formula("tanh", {{"self", "grad * (1 - result^2)", [](Ctx& c) {
                      const Tensor& r = c.result();
                      c.set("self", c.grad() * (1 - r * r));
                    }}});
  formula("sigmoid", {{"self", "grad * result * (1 - result)", [](Ctx& c) {
                         const Tensor& r = c.result();
                         c.set("self", c.grad() * r * (1 - r));
                       }}});
  formula("relu", {{"self", "grad where result > 0",
                    [](Ctx& c) { c.set("self", c.grad().masked_fill(c.result().le(0), 0)); }}});
  formula("gelu",
          {{"self", "gelu_backward(grad, self, approximate)", [](Ctx& c) {
              using Sig = Tensor(const Tensor&, const Tensor&, std::string_view);
              c.set("self",
                    BP_STANDARD_OP("gelu_backward", Sig).call(c.grad(), c.tensor("self"), c.string("approximate")));
            }}});
  formula("silu", {{"self", "grad * s * (1 + self * (1 - s)), s = sigmoid(self)", [](Ctx& c) {
                      const Tensor& x = c.tensor("self");
                      Tensor s = x.sigmoid();
                      c.set("self", c.grad() * s * (x * (1 - s) + 1));
                    }}});
  formula("erf", {{"self", "grad * 2 / sqrt(pi) * exp(-self^2)", [](Ctx& c) {
                     const Tensor& x = c.tensor("self");
                     c.set("self", c.grad() * (x * x * -1).exp() * (2 / std::sqrt(std::numbers::pi)));
                   }}});
  formula("leaky_relu", {{"self", "grad where self > 0, else grad * negative_slope", [](Ctx& c) {
                            const Tensor& x = c.tensor("self");
                            const double slope = c.scalar("negative_slope").to<double>();
                            Tensor pos = x.gt(0).to(c.grad().dtype());
                            c.set("self", c.grad() * (pos + (1 - pos) * slope));
                          }}});
  formula("hardtanh",
          {{"self", "grad where min_val < self < max_val", [](Ctx& c) {
              const Tensor& x = c.tensor("self");
              c.set("self",
                    c.grad().masked_fill(x.le(c.scalar("min_val")), 0).masked_fill(x.ge(c.scalar("max_val")), 0));
            }}});
  formula("elu",
          {{"self", "grad * scale * input_scale * exp(self * input_scale) * alpha where self <= 0, else grad * scale",
            [](Ctx& c) {
              const Tensor& x = c.tensor("self");
              const double a = c.scalar("alpha").to<double>(), s = c.scalar("scale").to<double>(),
                           is = c.scalar("input_scale").to<double>();
              Tensor pos = x.gt(0).to(c.grad().dtype());
              Tensor neg = (x * is).exp() * (a * s * is);
              c.set("self", c.grad() * (pos * s + (1 - pos) * neg));
            }}});
  formula("softplus", {{"self", "grad * sigmoid(beta * self) where beta * self <= threshold, else grad", [](Ctx& c) {
                          const Tensor& x = c.tensor("self");
                          const double b = c.scalar("beta").to<double>(), th = c.scalar("threshold").to<double>();
                          Tensor z = x * b;
                          Tensor s = z.sigmoid();
                          Tensor lin = z.gt(th).to(c.grad().dtype());
                          c.set("self", c.grad() * (lin + (1 - lin) * s));
                        }}});
  formula("nan_to_num", {{"self", "grad where self is finite, else 0", [](Ctx& c) {
                            c.set("self", c.grad().masked_fill(c.tensor("self").isfinite().logical_not(), 0));
                          }}});

  // --- Linear algebra.
  formula("mm", {{"self", "grad @ mat2^T",
                  [](Ctx& c) { c.set("self", mmSelfGrad(c.grad(), c.tensor("self"), c.tensor("mat2"))); }},
                 {"mat2", "self^T @ grad",
                  [](Ctx& c) { c.set("mat2", mmMat2Grad(c.grad(), c.tensor("self"), c.tensor("mat2"))); }}});
  formula("bmm", {{"self", "grad @ mat2^T (per batch)",
                   [](Ctx& c) { c.set("self", c.grad().bmm(c.tensor("mat2").transpose(1, 2))); }},
                  {"mat2", "self^T @ grad (per batch)",
                   [](Ctx& c) { c.set("mat2", c.tensor("self").transpose(1, 2).bmm(c.grad())); }}});
  formula("addmm",
          {{"self", "grad * beta", [](Ctx& c) { c.set("self", scaledBy(c.grad(), c.scalar("beta"))); }},
           {"mat1", "alpha * grad @ mat2^T",
            [](Ctx& c) {
              c.set("mat1", scaledBy(mmSelfGrad(c.grad(), c.tensor("mat1"), c.tensor("mat2")), c.scalar("alpha")));
            }},
           {"mat2", "alpha * mat1^T @ grad", [](Ctx& c) {
              c.set("mat2", scaledBy(mmMat2Grad(c.grad(), c.tensor("mat1"), c.tensor("mat2")), c.scalar("alpha")));
            }}});
  composite({"matmul", "linear", "_addmm_activation", "dropout", "einsum"});

  // --- Reductions.
  formula("sum", {{"self", "grad expanded to self's sizes",
                   [](Ctx& c) { c.set("self", c.grad().expand(c.tensor("self").sizes())); }}});
  formula("sum.dim_IntList", {{"self", "grad expanded over dim", [](Ctx& c) {
                                 const Tensor& s = c.tensor("self");
                                 const auto dims = reducedDims(s, c.ints("dim"));
                                 c.set("self",
                                       unsqueezeReduced(c.grad(), s, dims, c.boolean("keepdim")).expand(s.sizes()));
                               }}});
  formula("mean", {{"self", "grad expanded to self's sizes / numel", [](Ctx& c) {
                      const Tensor& s = c.tensor("self");
                      c.set("self", c.grad().expand(s.sizes()) / static_cast<double>(std::max<int64_t>(s.numel(), 1)));
                    }}});
  formula("mean.dim", {{"self", "grad expanded over dim / count", [](Ctx& c) {
                          const Tensor& s = c.tensor("self");
                          const auto dims = reducedDims(s, c.ints("dim"));
                          c.set("self", unsqueezeReduced(c.grad(), s, dims, c.boolean("keepdim")).expand(s.sizes()) /
                                            static_cast<double>(countOf(s, dims)));
                        }}});
  formula("amax", {{"self", "grad split evenly among the maxima", [](Ctx& c) {
                      c.set("self", extremumGrad(c, c.tensor("self"), c.ints("dim"), c.boolean("keepdim")));
                    }}});
  formula("amin", {{"self", "grad split evenly among the minima", [](Ctx& c) {
                      c.set("self", extremumGrad(c, c.tensor("self"), c.ints("dim"), c.boolean("keepdim")));
                    }}});
  formula("var", {{"self", "grad * 2 * (self - mean) / (N - correction)", [](Ctx& c) {
                     c.set("self", varGrad(c, c.tensor("self"), {}, c.boolean("unbiased") ? 1 : 0, false, false));
                   }}});
  formula("var.dim", {{"self", "grad * 2 * (self - mean) / (N - correction)", [](Ctx& c) {
                         c.set("self", varGrad(c, c.tensor("self"), c.ints("dim"), c.boolean("unbiased") ? 1 : 0,
                                               c.boolean("keepdim"), false));
                       }}});
  formula("var.correction",
          {{"self", "grad * 2 * (self - mean) / (N - correction)", [](Ctx& c) {
              c.set("self", varGrad(c, c.tensor("self"), c.ints("dim"), correctionOf(c), c.boolean("keepdim"), false));
            }}});
  formula("std", {{"self", "grad * (self - mean) / (result * (N - correction))", [](Ctx& c) {
                     c.set("self", varGrad(c, c.tensor("self"), {}, c.boolean("unbiased") ? 1 : 0, false, true));
                   }}});
  formula("std.dim", {{"self", "grad * (self - mean) / (result * (N - correction))", [](Ctx& c) {
                         c.set("self", varGrad(c, c.tensor("self"), c.ints("dim"), c.boolean("unbiased") ? 1 : 0,
                                               c.boolean("keepdim"), true));
                       }}});
  formula("std.correction",
          {{"self", "grad * (self - mean) / (result * (N - correction))", [](Ctx& c) {
              c.set("self", varGrad(c, c.tensor("self"), c.ints("dim"), correctionOf(c), c.boolean("keepdim"), true));
            }}});
  formula("cumsum", {{"self", "reverse cumsum of grad along dim", [](Ctx& c) {
                        const int64_t d = c.integer("dim");
                        c.set("self", c.grad().flip({d}).cumsum(d).flip({d}));
                      }}});
  formula("softmax.int", {{"self", "_softmax_backward_data(grad, result, dim, result.dtype)", [](Ctx& c) {
                             using Sig = Tensor(const Tensor&, const Tensor&, int64_t, ScalarType);
                             c.set("self", BP_STANDARD_OP("_softmax_backward_data", Sig)
                                               .call(c.grad(), c.result(), c.integer("dim"), c.result().dtype()));
                           }}});
  formula("log_softmax.int", {{"self", "_log_softmax_backward_data(grad, result, dim, result.dtype)", [](Ctx& c) {
                                 using Sig = Tensor(const Tensor&, const Tensor&, int64_t, ScalarType);
                                 c.set("self", BP_STANDARD_OP("_log_softmax_backward_data", Sig)
                                                   .call(c.grad(), c.result(), c.integer("dim"), c.result().dtype()));
                               }}});
  notImplemented(
      {"gelu_backward", "_softmax_backward_data", "_log_softmax_backward_data", "embedding_dense_backward",
       "layer_norm_backward", "conv2d_backward", "max_pool2d_backward", "avg_pool2d_backward", "batch_norm_backward"},
      "a backward op: differentiating it again (double backward) has no formula yet");
  // The values of sort and topk: the gradient scattered back by the indices
  // (result 1, which carries none).
  for (const char* op : {"sort", "sort.stable", "topk"})
    formula(op,
            {{"self", "grad scattered back by indices",
              [](Ctx& c) {
                const Tensor& s = c.tensor("self");
                c.set("self", scatterAdd(zeros(s.sizes(), {c.grad().dtype(), c.grad().device()}), c.integer("dim"),
                                         c.result(1), c.grad()));
              }}},
            "", /*nondiff_results=*/0b10);
  // max.dim and min.dim: the gradient goes to the index each row returned
  // (result 1, which carries none), not split among ties as amax's is: as
  // PyTorch's value_selecting_reduction_backward.
  for (const char* op : {"max.dim", "min.dim"})
    formula(op,
            {{"self", "grad at the returned indices",
              [](Ctx& c) {
                const Tensor& s = c.tensor("self");
                if (s.dim() == 0) {
                  c.set("self", c.grad().reshape({}));
                  return;
                }
                const int64_t d = c.integer("dim") < 0 ? c.integer("dim") + s.dim() : c.integer("dim");
                Tensor g = c.grad(), index = c.result(1);
                if (!c.boolean("keepdim")) {
                  g = g.unsqueeze(d);
                  index = index.unsqueeze(d);
                }
                c.set("self", scatterAdd(zeros(s.sizes(), {g.dtype(), g.device()}), d, index, g));
              }}},
            "", /*nondiff_results=*/0b10);
  // max(self) as amax (ties share the gradient, as PyTorch's max());
  // max.other as maximum.
  composite({"max", "min", "max.other", "min.other"});
  notImplemented({"prod", "prod.dim_int", "cumprod"}, "the product's gradient (with zeros in self) has no formula yet");

  // --- Data movement.
  formula("cat", {{"tensors", "grad split along dim", [](Ctx& c) {
                     std::vector<Tensor> ts = c.tensorList("tensors");
                     int64_t d = c.integer("dim");
                     std::vector<Tensor> grads;
                     int64_t start = 0;
                     const Tensor& g = c.grad();
                     if (d < 0) d += g.dim();
                     for (const Tensor& x : ts) {
                       if (x.dim() == 1 && x.size(0) == 0) {  // legacy empty tensors take no slice
                         grads.emplace_back();
                         continue;
                       }
                       grads.push_back(g.narrow(d, start, x.size(d)));
                       start += x.size(d);
                     }
                     c.setList("tensors", std::move(grads));
                   }}});
  formula("stack", {{"tensors", "grad selected along dim", [](Ctx& c) {
                       const size_t n = c.tensorList("tensors").size();
                       int64_t d = c.integer("dim");
                       const Tensor& g = c.grad();
                       if (d < 0) d += g.dim();
                       std::vector<Tensor> grads;
                       for (size_t i = 0; i < n; ++i) grads.push_back(g.select(d, static_cast<int64_t>(i)));
                       c.setList("tensors", std::move(grads));
                     }}});
  formula("index_select", {{"self", "zeros with grad added at index along dim", [](Ctx& c) {
                              const Tensor& s = c.tensor("self");
                              const Tensor& g = c.grad();
                              int64_t d = c.integer("dim");
                              if (s.dim() == 0) {
                                c.set("self", g.reshape({}));
                                return;
                              }
                              if (d < 0) d += s.dim();
                              std::vector<int64_t> shape(static_cast<size_t>(g.dim()), 1);
                              shape[static_cast<size_t>(d)] = -1;
                              Tensor idx = c.tensor("index").to(ScalarType::Int64).reshape(shape).expand(g.sizes());
                              c.set("self", scatterAdd(zeros(s.sizes(), {g.dtype(), g.device()}), d, idx, g));
                            }}});
  formula(
      "gather",
      {{"self", "zeros with grad added at index along dim", [](Ctx& c) {
          const Tensor& s = c.tensor("self");
          const Tensor& g = c.grad();
          c.set("self", scatterAdd(zeros(s.sizes(), {g.dtype(), g.device()}), c.integer("dim"), c.tensor("index"), g));
        }}});
  formula("scatter_add", {{"self", "grad", [](Ctx& c) { c.set("self", c.grad()); }},
                          {"src", "grad gathered at index (zeros where src reaches past index)", [](Ctx& c) {
                             c.set("src",
                                   gatheredToSource(c.grad(), c.integer("dim"), c.tensor("index"), c.tensor("src")));
                           }}});
  formula("scatter.src",
          {{"self", "grad with zeros where src was written",
            [](Ctx& c) { c.set("self", c.grad().scatter(c.integer("dim"), c.tensor("index"), Scalar(0))); }},
           {"src", "grad gathered at index (zeros where src reaches past index)", [](Ctx& c) {
              c.set("src", gatheredToSource(c.grad(), c.integer("dim"), c.tensor("index"), c.tensor("src")));
            }}});
  formula("scatter.value", {{"self", "grad with zeros where value was written", [](Ctx& c) {
                               c.set("self", c.grad().scatter(c.integer("dim"), c.tensor("index"), Scalar(0)));
                             }}});
  formula(
      "embedding",
      {{"weight", "embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq)", [](Ctx& c) {
          using Sig = Tensor(const Tensor&, const Tensor&, int64_t, int64_t, bool);
          c.set("weight", BP_STANDARD_OP("embedding_dense_backward", Sig)
                              .call(c.grad(), c.tensor("indices"), c.tensor("weight").size(0), c.integer("padding_idx"),
                                    c.boolean("scale_grad_by_freq")));
        }}});
  formula("flip", {{"self", "grad flipped back", [](Ctx& c) { c.set("self", c.grad().flip(c.ints("dims"))); }}});
  formula("constant_pad_nd", {{"self", "grad cropped by the negated pad", [](Ctx& c) {
                                 std::vector<int64_t> p = c.ints("pad");
                                 for (int64_t& x : p) x = -x;
                                 c.set("self", BP_STANDARD_OP("constant_pad_nd", PadSig).call(c.grad(), p, Scalar(0)));
                               }}});
  for (const char* op : {"to.device", "to.dtype", "to.dtype_layout", "to.other"})
    formula(op, {{"self", "grad converted to self's device and dtype", [](Ctx& c) {
                    const Tensor& s = c.tensor("self");
                    c.set("self", c.grad().to(s.device(), s.dtype()));
                  }}});
  // copy_ and its functional form copy (Note [Derived out= forms]), which
  // reads only self's shape, dtype and device.
  for (const auto& [op, self] : {std::pair{"copy_", "zeros (overwritten)"}, std::pair{"copy", "zeros (not read)"}}) {
    formula(op, {{"self", self, [](Ctx& c) { c.set("self", zerosOf(c.grad())); }},
                 {"src", "grad converted to src's device and dtype", [](Ctx& c) {
                    const Tensor& s = c.tensor("src");
                    c.set("src", c.grad().to(s.device(), s.dtype()));
                  }}});
  }
  formula("_copy_on_device_", {{"self", "zeros (overwritten)", [](Ctx& c) { c.set("self", zerosOf(c.grad())); }},
                               {"src", "grad", [](Ctx& c) { c.set("src", c.grad()); }}});
  for (const auto& [op, self] :
       {std::pair{"fill_.Scalar", "zeros (overwritten)"}, std::pair{"zero_", "zeros (overwritten)"},
        std::pair{"fill.Scalar", "zeros (not read)"}, std::pair{"zero", "zeros (not read)"}})
    formula(op, {{"self", self, [](Ctx& c) { c.set("self", zerosOf(c.grad())); }}});

  // --- nn ops whose backward needs backward kernels (conv, pooling, norms).
  formula("layer_norm",
          {{"input, weight, bias",
            "layer_norm_backward(grad, input, normalized_shape, weight, eps): input: rstd * (g - mean(g) - xhat * "
            "mean(g * xhat)), g = grad * weight; weight: sum(grad * xhat); bias: sum(grad) (over the leading dims); "
            "without the input's, the parameters' sums alone",
            [](Ctx& c) {
              const Tensor& x = c.tensor("input");
              const std::vector<int64_t> shape = c.ints("normalized_shape");
              if (c.needs("input")) {
                using Sig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, IntArrayRef,
                                                               const std::optional<Tensor>&, double);
                auto [gi, gw, gb] = BP_STANDARD_OP("layer_norm_backward", Sig)
                                        .call(c.grad(), x, shape, c.optionalTensor("weight"), c.real("eps"));
                c.set("input", std::move(gi));
                if (c.needs("weight")) c.set("weight", std::move(gw));
                if (c.needs("bias")) c.set("bias", std::move(gb));
                return;
              }
              const int64_t k = static_cast<int64_t>(shape.size());
              std::vector<int64_t> dims;
              for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
              if (c.needs("bias")) c.set("bias", c.grad());
              if (c.needs("weight")) c.set("weight", c.grad() * Normalization(x, dims, c.real("eps")).xhat);
            }}});
  formula("batch_norm",
          {{"input, weight, bias",
            "batch_norm_backward(grad, input, weight, running_mean, running_var, training, eps, output_mask): "
            "training: as layer_norm over every dim but the channels (dim 1); evaluation: grad * weight * "
            "rsqrt(running_var + eps); weight: sum(grad * xhat); bias: sum(grad)",
            [](Ctx& c) {
              using Sig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const std::optional<Tensor>&,
                                                             const std::optional<Tensor>&, const std::optional<Tensor>&,
                                                             bool, double, std::array<bool, 3>);
              const std::array<bool, 3> mask{c.needs("input"), c.needs("weight"), c.needs("bias")};
              auto [gi, gw, gb] =
                  BP_STANDARD_OP("batch_norm_backward", Sig)
                      .call(c.grad(), c.tensor("input"), c.optionalTensor("weight"), c.optionalTensor("running_mean"),
                            c.optionalTensor("running_var"), c.boolean("training"), c.real("eps"), mask);
              if (mask[0]) c.set("input", std::move(gi));
              if (mask[1]) c.set("weight", std::move(gw));
              if (mask[2]) c.set("bias", std::move(gb));
            }}});
  // The window ops (Note [Window op gradients], backward_nn.cc).
  formula("conv2d",
          {{"input, weight, bias",
            "conv2d_backward(grad, input, weight, stride, padding, dilation, groups, output_mask): input: the full "
            "correlation of grad (dilated by stride) with the flipped, channel-swapped weight, cropped; weight: "
            "conv2d of the input (channels as batch) with grad as the kernel, stride and dilation exchanged; "
            "bias: sum(grad) over batch and space",
            [](Ctx& c) {
              using Sig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&, IntArrayRef,
                                                             IntArrayRef, IntArrayRef, int64_t, std::array<bool, 3>);
              const std::array<bool, 3> mask{c.needs("input"), c.needs("weight"), c.needs("bias")};
              auto [gi, gw, gb] = BP_STANDARD_OP("conv2d_backward", Sig)
                                      .call(c.grad(), c.tensor("input"), c.tensor("weight"), c.ints("stride"),
                                            c.ints("padding"), c.ints("dilation"), c.integer("groups"), mask);
              if (mask[0]) c.set("input", std::move(gi));
              if (mask[1]) c.set("weight", std::move(gw));
              if (mask[2]) c.set("bias", std::move(gb));
            }}});
  formula("max_pool2d", {{"self",
                          "max_pool2d_backward(grad, self, kernel_size, stride, padding, dilation, ceil_mode): grad "
                          "to the first maximum of each window",
                          [](Ctx& c) {
                            using Sig = Tensor(const Tensor&, const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef,
                                               IntArrayRef, bool);
                            c.set("self", BP_STANDARD_OP("max_pool2d_backward", Sig)
                                              .call(c.grad(), c.tensor("self"), c.ints("kernel_size"), c.ints("stride"),
                                                    c.ints("padding"), c.ints("dilation"), c.boolean("ceil_mode")));
                          }}});
  formula("avg_pool2d", {{"self",
                          "avg_pool2d_backward(grad, self, kernel_size, stride, padding, ceil_mode, count_include_pad, "
                          "divisor_override): grad / the window's divisor, to every element of the window",
                          [](Ctx& c) {
                            using Sig = Tensor(const Tensor&, const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef,
                                               bool, bool, std::optional<int64_t>);
                            c.set("self",
                                  BP_STANDARD_OP("avg_pool2d_backward", Sig)
                                      .call(c.grad(), c.tensor("self"), c.ints("kernel_size"), c.ints("stride"),
                                            c.ints("padding"), c.boolean("ceil_mode"), c.boolean("count_include_pad"),
                                            c.optionalInteger("divisor_override")));
                          }}});
  for (const char* op : {"reflection_pad1d", "reflection_pad2d", "reflection_pad3d"})
    formula(op, {{"self", "grad summed back onto the positions each padded element mirrors", [](Ctx& c) {
                    c.set("self", edgePadGrad(c.grad(), c.tensor("self"), c.ints("padding"), /*reflect=*/true));
                  }}});
  for (const char* op : {"replication_pad1d", "replication_pad2d", "replication_pad3d"})
    formula(op, {{"self", "grad summed back onto the edge element each padded element repeats", [](Ctx& c) {
                    c.set("self", edgePadGrad(c.grad(), c.tensor("self"), c.ints("padding"), /*reflect=*/false));
                  }}});
  composite({"pad"});
  // A 0-d tensor of the number and where.self (elementwise.cc).
  composite({"where.ScalarOther", "where.ScalarSelf"});
  nondiff({"where.Scalar"}, "its only tensor is the bool condition");

  // --- No gradient.
  nondiff({"eq.Scalar", "eq.Tensor", "ne.Scalar", "ne.Tensor", "lt.Scalar", "lt.Tensor", "le.Scalar", "le.Tensor",
           "gt.Scalar", "gt.Tensor", "ge.Scalar", "ge.Tensor", "isnan", "isinf", "isfinite"},
          "a comparison: its bool result carries no gradient");
  nondiff({"logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and.Scalar", "bitwise_and.Tensor",
           "bitwise_or.Scalar", "bitwise_or.Tensor", "bitwise_xor.Scalar", "bitwise_xor.Tensor", "bitwise_not", "all",
           "all.dim", "all.dims", "any", "any.dim", "any.dims"},
          "a logical or bitwise op: integer and bool results carry no gradient");
  nondiff({"argmax", "argmin"}, "an index: integer results carry no gradient");
  // Advanced indexing (indexing.cc): composites over index_select, scatter_
  // and scatter_add, whose formulas give the gradients.
  composite({"index.Tensor", "index_put", "repeat_interleave.self_int", "repeat_interleave.self_Tensor"});
  // Structured ones (their functional form calls the out= kernel, which
  // records no gradient): formulas of their own, as PyTorch's.
  formula("tril",
          {{"self", "grad.tril(diagonal)", [](Ctx& c) { c.set("self", c.grad().tril(c.integer("diagonal"))); }}});
  formula("triu",
          {{"self", "grad.triu(diagonal)", [](Ctx& c) { c.set("self", c.grad().triu(c.integer("diagonal"))); }}});
  formula("roll", {{"self", "grad rolled back", [](Ctx& c) {
                      std::vector<int64_t> back = c.ints("shifts");
                      for (int64_t& v : back) v = -v;
                      c.set("self", c.grad().roll(back, c.ints("dims")));
                    }}});
  formula("repeat", {{"self", "grad summed over the repeats", [](Ctx& c) {
                        const Tensor& self = c.tensor("self");
                        const std::vector<int64_t> repeats = c.ints("repeats");
                        const size_t lead = repeats.size() - static_cast<size_t>(self.dim());
                        std::vector<int64_t> split, repeated;
                        for (size_t k = 0; k < repeats.size(); ++k) {
                          split.push_back(repeats[k]);
                          split.push_back(k < lead ? 1 : self.size(static_cast<int64_t>(k - lead)));
                          repeated.push_back(static_cast<int64_t>(2 * k));
                        }
                        c.set("self", c.grad().reshape(split).sum(repeated).reshape(self.sizes()));
                      }}});
  formula("masked_select", {{"self", "grad scattered back to the selected places, summed to self's shape", [](Ctx& c) {
                               const Tensor& self = c.tensor("self");
                               const Tensor& mask = c.tensor("mask");
                               const Tensor ones_like_both = (zeros_like(self) + mask.to(self.dtype()));
                               const Tensor flat_mask = mask.expand(ones_like_both.sizes()).reshape({-1});
                               const Tensor positions = flat_mask.nonzero().reshape({-1});
                               const Tensor flat = zeros_like(ones_like_both).reshape({-1});
                               const Tensor g = flat.index_add(0, positions, c.grad());
                               c.set("self", sumToSize(g.reshape(ones_like_both.sizes()), self.sizes()));
                             }}});
  formula("index_add", {{"self", "grad", [](Ctx& c) { c.set("self", c.grad()); }},
                        {"source", "grad.index_select(dim, index) * alpha", [](Ctx& c) {
                           const Tensor& g = c.grad();
                           const Tensor rows = g.dim() == 0 ? g.reshape({1}) : g;
                           const int64_t dim = c.integer("dim");
                           const int64_t d = dim < 0 ? dim + rows.dim() : dim;
                           const Tensor picked = rows.index_select(d, c.tensor("index").reshape({-1}));
                           c.set("source", scaledBy(picked, c.scalar("alpha")).reshape(c.tensor("source").sizes()));
                         }}});
  nondiff({"repeat_interleave.Tensor"}, "indices: integer results carry no gradient");
  // norm (reduction.cc) differentiates through abs, pow/sqrt and sum; at a
  // zero vector the 2-norm's gradient is NaN (sqrt's at 0), where PyTorch
  // gives 0.
  composite({"norm"});
  nondiff({"nonzero"}, "indices: integer results carry no gradient");
  nondiff({"isclose"}, "a comparison: bool results carry no gradient");
  nondiff({"_unique2"}, "distinct values and integer positions: not differentiable (as in PyTorch)");
  nondiff({"argsort", "argsort.stable"}, "indices: integer results carry no gradient");
  nondiff({"floor_divide", "floor_divide.Scalar"}, "piecewise constant with integer steps, as PyTorch");
  nondiff({"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
           "arange", "arange.start", "arange.start_step", "eye", "eye.m", "linspace"},
          "a creation op: the result depends on no tensor's values");
  nondiff({"_fused_sgd_", "_fused_adamw_"},
          "an optimizer step (Note [Optimizer ops]): it updates parameters in place outside the graph; call it under "
          "no_grad, as the optimizer classes of backplane/autograd/optim.h do");
  nondiff({"rand", "rand_like", "randn", "randn_like", "_philox_bernoulli_", "_philox_normal_", "_philox_uniform_",
           "bernoulli_.float", "bernoulli.p", "normal_", "uniform_", "normal_functional", "uniform"},
          "a random draw: the result depends on no tensor's values");
  return t;
}

// The backward ops each formula calls (Note [Backward ops]), for
// `backplane ops --schemas`.
std::vector<OpDerivative> withBackwardOps(std::vector<OpDerivative> t) {
  for (OpDerivative& d : t) {
    if (d.op == "gelu") d.backward_ops = {"bp::gelu_backward"};
    if (d.op == "softmax.int") d.backward_ops = {"bp::_softmax_backward_data"};
    if (d.op == "log_softmax.int") d.backward_ops = {"bp::_log_softmax_backward_data"};
    if (d.op == "embedding") d.backward_ops = {"bp::embedding_dense_backward"};
    if (d.op == "layer_norm") d.backward_ops = {"bp::layer_norm_backward"};
    if (d.op == "conv2d") d.backward_ops = {"bp::conv2d_backward"};
    if (d.op == "batch_norm") d.backward_ops = {"bp::batch_norm_backward"};
    if (d.op == "max_pool2d") d.backward_ops = {"bp::max_pool2d_backward"};
    if (d.op == "avg_pool2d") d.backward_ops = {"bp::avg_pool2d_backward"};
  }
  return t;
}

// Note [What a node saves]
// A node keeps what its formulas read, as PyTorch's generated nodes do:
// add's keeps no tensor, relu's only its result, mm's its two inputs but not
// its result. Keeping less costs less at the call (no alias of the result
// to make, no clone of an in-place op's self) and frees memory sooner, and
// an in-place write to a tensor no formula reads is no error at backward.
// OpDerivative::saves says what the formulas read; an op not listed here
// keeps every tensor argument and every result. A formula that reads what
// its declaration leaves out is a Backplane bug: the node raises an internal
// error naming the op and the argument, and the gradchecks, which run every
// formula, catch it.
std::vector<OpDerivative> withSaves(std::vector<OpDerivative> t) {
  static const absl::flat_hash_map<std::string_view, const char*> kSaves = {
      // Gradients that are grad times constants.
      {"add.Tensor", ""},
      {"add.Scalar", ""},
      {"sub.Tensor", ""},
      {"sub.Scalar", ""},
      {"rsub.Scalar", ""},
      {"mul.Scalar", ""},
      {"div.Scalar", ""},
      {"true_divide.Scalar", ""},
      {"neg", ""},
      {"floor", ""},
      {"ceil", ""},
      {"trunc", ""},
      {"round", ""},
      {"round.decimals", ""},
      {"sign", ""},
      {"flip", ""},
      {"tril", ""},
      {"triu", ""},
      {"roll", ""},
      {"constant_pad_nd", ""},
      {"_copy_on_device_", ""},
      {"fill_.Scalar", ""},
      {"zero_", ""},
      {"fill.Scalar", ""},
      {"zero", ""},
      // The inputs, not the result.
      {"mul.Tensor", "self, other"},
      {"div.Tensor", "self, other"},
      {"true_divide.Tensor", "self, other"},
      {"mm", "self, mat2"},
      {"bmm", "self, mat2"},
      {"addmm", "mat1, mat2"},
      {"gelu", "self"},
      {"silu", "self"},
      {"erf", "self"},
      {"log", "self"},
      {"sin", "self"},
      {"cos", "self"},
      {"abs", "self"},
      {"where.self", "condition"},
      {"masked_fill.Scalar", "mask"},
      {"masked_fill.Tensor", "mask"},
      {"copy_", "src"},
      {"copy", "src"},
      {"cat", "tensors"},
      {"stack", "tensors"},
      {"embedding", "weight, indices"},
      {"index_select", "self, index"},
      {"gather", "self, index"},
      {"scatter_add", "index, src"},
      {"scatter.src", "index, src"},
      {"scatter.value", "index"},
      {"sum", "self"},
      {"sum.dim_IntList", "self"},
      {"mean", "self"},
      {"mean.dim", "self"},
      {"conv2d", "input, weight"},
      {"max_pool2d", "self"},
      {"avg_pool2d", "self"},
      // The result, not the inputs.
      {"exp", "result"},
      {"sqrt", "result"},
      {"rsqrt", "result"},
      {"tanh", "result"},
      {"sigmoid", "result"},
      {"relu", "result"},
      {"softmax.int", "result"},
      {"log_softmax.int", "result"},
  };
  for (OpDerivative& d : t) {
    auto it = kSaves.find(d.op);
    if (it != kSaves.end()) d.saves = it->second;
  }
  return t;
}

struct Index {
  std::vector<OpDerivative> table = withSaves(withBackwardOps(buildTable()));
  absl::flat_hash_map<std::string, const OpDerivative*> by_name;
  std::vector<std::unique_ptr<OpDerivative>> derived;
  Index() {
    for (const OpDerivative& d : table) by_name.emplace(d.op, &d);
  }
};
Index& index() {
  static Index* i = new Index();
  return *i;
}

}  // namespace

const std::vector<OpDerivative>& derivativeTable() { return index().table; }

const OpDerivative* findDerivative(std::string_view op) {
  const std::string prefix = strCat(kStandardNamespace, "::");
  if (op.starts_with(prefix)) op.remove_prefix(prefix.size());
  static const auto* all = [] {
    auto* m = new absl::flat_hash_map<std::string, const OpDerivative*>(index().by_name);
    // Note [Derivative declarations]: out= and in-place forms follow from
    // the schema.
    static const OpDerivative kOut{"",
                                   Differentiability::OutVariant,
                                   {},
                                   "an out= form: arguments that require grad are refused at the call; "
                                   "call the functional form"};
    for (const StandardOp& s : standardOperators()) {
      const std::string name = s.schema.substr(0, s.schema.find('('));
      if (m->contains(name)) continue;
      // An out= form: a keyword-only argument it writes (whatever its name:
      // out, indices, grad_input, max_values, out0).
      const std::vector<Argument> args = valueOrThrow(FunctionSchema::parse(strCat("bp::", s.schema))).arguments();
      if (std::any_of(args.begin(), args.end(), [](const Argument& a) { return a.isOut(); })) {
        m->emplace(name, &kOut);
        continue;
      }
      const size_t dot = name.find('.');
      const std::string base = name.substr(0, dot), overload = dot == std::string::npos ? "" : name.substr(dot);
      if (base.size() > 1 && base.back() == '_') {
        // In-place forms whose functional op has another overload name.
        static const absl::flat_hash_map<std::string, std::string> kRenamed = {
            {"pow_.Scalar", "pow.Tensor_Scalar"},
            {"pow_.Tensor", "pow.Tensor_Tensor"},
            {"floor_divide_.Tensor", "floor_divide"}};
        auto renamed = kRenamed.find(name);
        const std::string functional =
            renamed != kRenamed.end() ? renamed->second : base.substr(0, base.size() - 1) + overload;
        auto it = index().by_name.find(functional);
        if (it != index().by_name.end()) {
          auto d = std::make_unique<OpDerivative>(*it->second);
          d->op = name;
          d->kind = it->second->kind == Differentiability::Formula ? Differentiability::Inplace : it->second->kind;
          d->note = it->second->kind == Differentiability::Formula ? "" : it->second->note;
          m->emplace(name, d.get());
          index().derived.push_back(std::move(d));
        }
      }
    }
    return m;
  }();
  auto it = all->find(std::string(op));
  return it == all->end() ? nullptr : it->second;
}

}  // namespace backplane
