// Conformance specs of the linalg family: mm, bmm, matmul, addmm, _addmm_activation and linear
// (Note [Conformance specs]).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"
#include "backplane/core/scalar.h"

namespace backplane::conformance {
namespace {

// Every dtype the matrix products take (bool is refused, as in PyTorch).
const ScalarType kF = ScalarType::Float32;

// --- Reference: torch.matmul in double.

struct Product {
  std::vector<int64_t> sizes;
  std::vector<double> values;
};

// matmul(a, b): a 1-d a is a row and a 1-d b a column, their dimension
// dropped from the result; batch dimensions broadcast. mm and bmm are the
// 2-d and 3-d cases.
Product matmulValues(const Tensor& a, const Tensor& b) {
  std::vector<int64_t> as = sizesOf(a), bs = sizesOf(b);
  const bool row = as.size() == 1, column = bs.size() == 1;
  if (row) as.insert(as.begin(), 1);
  if (column) bs.push_back(1);
  const int64_t n = as[as.size() - 2], k = as.back(), m = bs.back();
  const std::vector<int64_t> batch_a(as.begin(), as.end() - 2), batch_b(bs.begin(), bs.end() - 2);
  const std::vector<int64_t> batch = broadcastShape(batch_a, batch_b);
  const int64_t batches = numelOf(batch);
  Product p;
  p.sizes = batch;
  if (!row) p.sizes.push_back(n);
  if (!column) p.sizes.push_back(m);
  const std::vector<double> av = valuesOf(a), bv = valuesOf(b);
  p.values.assign(static_cast<size_t>(batches * n * m), 0.0);
  for (int64_t bi = 0; bi < batches; ++bi) {
    const double* A = av.data() + broadcastIndex(batch_a, batch, bi) * n * k;
    const double* B = bv.data() + broadcastIndex(batch_b, batch, bi) * k * m;
    double* C = p.values.data() + bi * n * m;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t l = 0; l < k; ++l)
        for (int64_t j = 0; j < m; ++j) C[i * m + j] += A[i * k + l] * B[l * m + j];
  }
  return p;
}

// alpha * product + beta * c (c broadcast to the product; beta == 0 ignores
// c, NaN included, as PyTorch), rounded to dtype.
Expected combine(Product p, ScalarType dtype, double alpha, const Tensor& c = Tensor(), double beta = 0) {
  const bool add = c.defined() && beta != 0;
  const std::vector<double> cv = add ? valuesOf(c) : std::vector<double>();
  const std::vector<int64_t> cs = add ? sizesOf(c) : std::vector<int64_t>();
  for (size_t i = 0; i < p.values.size(); ++i) {
    double v = alpha * p.values[i];
    if (add) v += beta * cv[static_cast<size_t>(broadcastIndex(cs, p.sizes, static_cast<int64_t>(i)))];
    p.values[i] = roundTo(dtype, v);
  }
  return Expected{std::move(p.sizes), dtype, std::move(p.values)};
}

double scalarArg(const Sample& s, size_t i, double fallback) {
  return i < s.args.size() ? s.args[i].toScalar().toDouble() : fallback;
}

// --- Tolerance

double maxAbs(const Tensor& t) {
  double m = 0;
  if (t.defined())
    for (double v : valuesOf(t)) m = std::max(m, std::fabs(v));
  return m;
}

// A sum of K products accumulated in a floating type with unit roundoff u
// is off by at most K * u * sum(|terms|) (Higham's bound, whatever order
// the kernel adds in), so the slack grows with K. `bound` bounds
// sum(|terms|) of every result element (from the operands' largest
// magnitudes). float16 and bfloat16 products accumulate in float32 (oneDNN,
// the CPU plugin's float32 fallback). A composite that rounds a partial
// result to the dtype before the last step (addmm from mm, mul and add, on
// devices without an addmm kernel) adds one unit roundoff of `bound` per
// such rounding. The final rounding to the dtype is the default rtol's.
Tolerance productTolerance(ScalarType t, int64_t k, double bound, int roundings) {
  Tolerance tol = defaultTolerance(t);
  const double u_acc = (t == ScalarType::Float64 ? machineEpsilon(t) : isFloatingType(t) ? machineEpsilon(kF) : 0) / 2;
  tol.atol += (static_cast<double>(k) * u_acc + roundings * machineEpsilon(t) / 2) * bound;
  return tol;
}

Tolerance plainProductTolerance(ScalarType t, const Sample& s) {
  const Tensor& a = s.args[0].toTensor();
  const int64_t k = a.size(-1);
  return productTolerance(t, k, static_cast<double>(k) * maxAbs(a) * maxAbs(s.args[1].toTensor()), 0);
}

// --- Samples

// Operands drawn from [-2, 2] (integers from [-5, 5], [0, 5] for uint8).
Tensor operand(Rng& rng, std::vector<int64_t> sizes, ScalarType dt) { return randomTensor(rng, std::move(sizes), dt); }

Sample pair(std::string name, Tensor a, Tensor b) {
  return makeSample(std::move(name), {IValue(std::move(a)), IValue(std::move(b))});
}

// Operand pairs every matrix-product spec refuses: mixed dtypes and bool.
void addDtypeErrors(Rng& rng, std::vector<Sample>& out, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  out.push_back(raising("float32 with float64",
                        {IValue(operand(rng, a, kF)), IValue(operand(rng, b, ScalarType::Float64))},
                        "the operands' dtypes differ (products do not promote)"));
  out.push_back(raising("bool operands",
                        {IValue(operand(rng, a, ScalarType::Bool)), IValue(operand(rng, b, ScalarType::Bool))},
                        "matrix products do not take bool"));
}

std::vector<Sample> mmSamples() {
  Rng rng(seedFor("bp::mm"));
  std::vector<Sample> out;
  for (ScalarType dt : kNumericTypes) {
    const std::string sx = dtypeSuffix(dt);
    out.push_back(pair("[3,5] @ [5,4]" + sx, operand(rng, {3, 5}, dt), operand(rng, {5, 4}, dt)));
    out.push_back(pair("transposed both" + sx, operand(rng, {5, 3}, dt).t(), operand(rng, {4, 5}, dt).t()));
    out.push_back(pair("sliced mat2 (step 2)" + sx, operand(rng, {2, 6}, dt),
                       operand(rng, {6, 8}, dt).slice(1, 0, std::nullopt, 2)));
  }
  out.push_back(pair("one element", operand(rng, {1, 1}, kF), operand(rng, {1, 1}, kF)));
  out.push_back(pair("row times column", operand(rng, {1, 7}, kF), operand(rng, {7, 1}, kF)));
  out.push_back(pair("column times row", operand(rng, {6, 1}, kF), operand(rng, {1, 5}, kF)));
  out.push_back(pair("K=0: zeros", operand(rng, {3, 0}, kF), operand(rng, {0, 4}, kF)));
  out.push_back(pair("M=0", operand(rng, {0, 5}, kF), operand(rng, {5, 4}, kF)));
  out.push_back(
      pair("expanded mat2 (stride 0 rows)", operand(rng, {3, 5}, kF), operand(rng, {1, 4}, kF).expand({5, 4})));
  out.push_back(pair("K=64 float32", operand(rng, {9, 64}, kF), operand(rng, {64, 7}, kF)));
  out.push_back(pair("large [1100,8] @ [8,1000] float32", operand(rng, {1100, 8}, kF), operand(rng, {8, 1000}, kF)));
  out.push_back(raising("[3,5] @ [4,4]", {IValue(operand(rng, {3, 5}, kF)), IValue(operand(rng, {4, 4}, kF))},
                        "inner dimensions differ"));
  out.push_back(
      raising("1-d self", {IValue(operand(rng, {5}, kF)), IValue(operand(rng, {5, 4}, kF))}, "self is not 2-d"));
  out.push_back(
      raising("3-d mat2", {IValue(operand(rng, {3, 5}, kF)), IValue(operand(rng, {1, 5, 4}, kF))}, "mat2 is not 2-d"));
  addDtypeErrors(rng, out, {3, 5}, {5, 4});
  return out;
}

std::vector<Sample> bmmSamples() {
  Rng rng(seedFor("bp::bmm"));
  std::vector<Sample> out;
  for (ScalarType dt : kNumericTypes) {
    const std::string sx = dtypeSuffix(dt);
    out.push_back(pair("[2,3,5] @ [2,5,4]" + sx, operand(rng, {2, 3, 5}, dt), operand(rng, {2, 5, 4}, dt)));
    out.push_back(pair("transposed matrices" + sx, operand(rng, {2, 5, 3}, dt).transpose(1, 2),
                       operand(rng, {2, 4, 5}, dt).transpose(1, 2)));
  }
  out.push_back(pair("batch in the middle (permuted)", operand(rng, {3, 2, 5}, kF).transpose(0, 1),
                     operand(rng, {5, 2, 4}, kF).permute({1, 0, 2})));
  out.push_back(
      pair("expanded batch (stride 0)", operand(rng, {3, 3, 5}, kF), operand(rng, {1, 5, 4}, kF).expand({3, 5, 4})));
  out.push_back(pair("sliced batch (step 2)", operand(rng, {4, 2, 3}, kF).slice(0, 0, std::nullopt, 2),
                     operand(rng, {2, 3, 2}, kF)));
  out.push_back(pair("one element", operand(rng, {1, 1, 1}, kF), operand(rng, {1, 1, 1}, kF)));
  out.push_back(pair("empty batch", operand(rng, {0, 3, 5}, kF), operand(rng, {0, 5, 4}, kF)));
  out.push_back(pair("K=0: zeros", operand(rng, {2, 3, 0}, kF), operand(rng, {2, 0, 4}, kF)));
  out.push_back(
      pair("large [11,100,8] @ [11,8,1000] float32", operand(rng, {11, 100, 8}, kF), operand(rng, {11, 8, 1000}, kF)));
  out.push_back(raising("batches 2 and 3", {IValue(operand(rng, {2, 3, 5}, kF)), IValue(operand(rng, {3, 5, 4}, kF))},
                        "batch sizes differ"));
  out.push_back(raising("[2,3,5] @ [2,4,4]", {IValue(operand(rng, {2, 3, 5}, kF)), IValue(operand(rng, {2, 4, 4}, kF))},
                        "inner dimensions differ"));
  out.push_back(raising("2-d operands", {IValue(operand(rng, {3, 5}, kF)), IValue(operand(rng, {5, 4}, kF))},
                        "operands are not 3-d"));
  addDtypeErrors(rng, out, {2, 3, 5}, {2, 5, 4});
  return out;
}

std::vector<Sample> matmulSamples() {
  Rng rng(seedFor("bp::matmul"));
  std::vector<Sample> out;
  auto push = [&](std::string name, std::vector<int64_t> a, std::vector<int64_t> b, ScalarType dt) {
    out.push_back(
        pair(std::move(name) + dtypeSuffix(dt), operand(rng, std::move(a), dt), operand(rng, std::move(b), dt)));
  };
  for (ScalarType dt : kNumericTypes) {
    push("[3,5] @ [5,4]", {3, 5}, {5, 4}, dt);
    push("1-d @ 1-d (dot)", {6}, {6}, dt);
    push("batched [2,1,3,5] @ [4,5,2]", {2, 1, 3, 5}, {4, 5, 2}, dt);
  }
  push("1-d @ 2-d", {5}, {5, 3}, kF);
  push("2-d @ 1-d", {4, 5}, {5}, kF);
  push("3-d @ 2-d", {2, 3, 5}, {5, 4}, kF);
  push("2-d @ 3-d", {3, 5}, {2, 5, 4}, kF);
  push("3-d @ 1-d", {2, 3, 5}, {5}, kF);
  push("1-d @ 3-d", {5}, {2, 5, 4}, kF);
  push("4-d @ 1-d", {2, 2, 3, 5}, {5}, kF);
  push("batch [1,3] with [2,1]", {1, 3, 2, 4}, {2, 1, 4, 3}, kF);
  push("batch [2,3] with [3]", {2, 3, 2, 4}, {3, 4, 2}, kF);
  push("1-d @ 1-d of one element", {1}, {1}, kF);
  push("K=0 dot: zero", {0}, {0}, kF);
  push("K=0 batched: zeros", {2, 3, 0}, {0, 4}, kF);
  push("empty batch", {0, 3, 5}, {5, 2}, kF);
  out.push_back(pair("transposed operands", operand(rng, {5, 3}, kF).t(), operand(rng, {2, 4, 5}, kF).transpose(1, 2)));
  out.push_back(
      pair("sliced vector (step 2)", operand(rng, {3, 5}, kF), operand(rng, {10}, kF).slice(0, 0, std::nullopt, 2)));
  out.push_back(pair("expanded batch", operand(rng, {1, 3, 5}, kF).expand({4, 3, 5}), operand(rng, {4, 5, 2}, kF)));
  out.push_back(pair("large [1100,8] @ [8,1000] float32", operand(rng, {1100, 8}, kF), operand(rng, {8, 1000}, kF)));
  out.push_back(raising("0-d self", {IValue(operand(rng, {}, kF)), IValue(operand(rng, {3}, kF))},
                        "matmul needs at least 1-d operands"));
  out.push_back(raising("[3,5] @ [4]", {IValue(operand(rng, {3, 5}, kF)), IValue(operand(rng, {4}, kF))},
                        "inner dimensions differ"));
  out.push_back(raising("batches [2] and [3]",
                        {IValue(operand(rng, {2, 3, 5}, kF)), IValue(operand(rng, {3, 5, 4}, kF))},
                        "batch dimensions do not broadcast"));
  addDtypeErrors(rng, out, {3, 5}, {5, 4});
  return out;
}

// addmm(self, mat1, mat2, beta, alpha) = beta * self + alpha * mat1 @ mat2.
std::vector<Sample> addmmSamples() {
  Rng rng(seedFor("bp::addmm"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, Tensor m1, Tensor m2, std::vector<Scalar> beta_alpha = {}) {
    std::vector<IValue> args = {IValue(std::move(self)), IValue(std::move(m1)), IValue(std::move(m2))};
    for (const Scalar& s : beta_alpha) args.emplace_back(s);
    out.push_back(makeSample(std::move(name), std::move(args)));
  };
  const Scalar two(int64_t{2}), three(int64_t{3});
  for (ScalarType dt : kNumericTypes) {
    const std::string sx = dtypeSuffix(dt);
    push("[3,4] + [3,5] @ [5,4]" + sx, operand(rng, {3, 4}, dt), operand(rng, {3, 5}, dt), operand(rng, {5, 4}, dt));
    push("self [4] broadcast, beta=2, alpha=3" + sx, operand(rng, {4}, dt), operand(rng, {3, 5}, dt),
         operand(rng, {5, 4}, dt), {two, three});
    push("transposed operands, beta=3, alpha=2" + sx, operand(rng, {4, 3}, dt).t(), operand(rng, {5, 3}, dt).t(),
         operand(rng, {4, 5}, dt).t(), {three, two});
  }
  for (ScalarType dt : {kF, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16}) {
    push("beta=0.5, alpha=-1.5" + dtypeSuffix(dt), operand(rng, {3, 4}, dt), operand(rng, {3, 5}, dt),
         operand(rng, {5, 4}, dt), {Scalar(0.5), Scalar(-1.5)});
  }
  const std::vector<double> nans(12, std::numeric_limits<double>::quiet_NaN());
  push("beta=0 ignores NaN in self", hostTensor(nans, {3, 4}, kF), operand(rng, {3, 5}, kF), operand(rng, {5, 4}, kF),
       {Scalar(int64_t{0}), two});
  push("beta=0.0 ignores NaN in broadcast self", hostTensor({nans[0]}, {1}, kF), operand(rng, {3, 5}, kF),
       operand(rng, {5, 4}, kF), {Scalar(0.0), Scalar(1.0)});
  push("self [3,1] broadcast", operand(rng, {3, 1}, kF), operand(rng, {3, 5}, kF), operand(rng, {5, 4}, kF));
  push("0-d self", operand(rng, {}, kF), operand(rng, {3, 5}, kF), operand(rng, {5, 4}, kF));
  push("expanded self", operand(rng, {1, 4}, kF).expand({3, 4}), operand(rng, {3, 5}, kF), operand(rng, {5, 4}, kF));
  push("sliced self and mat1 (step 2)", operand(rng, {3, 8}, kF).slice(1, 0, std::nullopt, 2),
       operand(rng, {6, 5}, kF).slice(0, 0, std::nullopt, 2), operand(rng, {5, 4}, kF));
  push("one element", operand(rng, {1, 1}, kF), operand(rng, {1, 1}, kF), operand(rng, {1, 1}, kF));
  push("K=0: beta * self", operand(rng, {3, 4}, kF), operand(rng, {3, 0}, kF), operand(rng, {0, 4}, kF), {two, three});
  push("K=0, beta=0: zeros", operand(rng, {3, 4}, kF), operand(rng, {3, 0}, kF), operand(rng, {0, 4}, kF),
       {Scalar(int64_t{0}), three});
  push("M=0", operand(rng, {0, 4}, kF), operand(rng, {0, 5}, kF), operand(rng, {5, 4}, kF));
  push("K=64 float32", operand(rng, {9, 7}, kF), operand(rng, {9, 64}, kF), operand(rng, {64, 7}, kF));
  push("large self [1000] + [1100,8] @ [8,1000] float32, beta=0.5", operand(rng, {1000}, kF),
       operand(rng, {1100, 8}, kF), operand(rng, {8, 1000}, kF), {Scalar(0.5), Scalar(int64_t{1})});
  push("large [1100,1000] + [1100,8] @ [8,1000] float32", operand(rng, {1100, 1000}, kF), operand(rng, {1100, 8}, kF),
       operand(rng, {8, 1000}, kF));
  auto bad = [&](std::string name, Tensor self, Tensor m1, Tensor m2, std::string reason, std::vector<Scalar> ba = {}) {
    std::vector<IValue> args = {IValue(std::move(self)), IValue(std::move(m1)), IValue(std::move(m2))};
    for (const Scalar& s : ba) args.emplace_back(s);
    out.push_back(raising(std::move(name), std::move(args), std::move(reason)));
  };
  bad("self [3] with a [3,4] product", operand(rng, {3}, kF), operand(rng, {3, 5}, kF), operand(rng, {5, 4}, kF),
      "self does not broadcast to the product");
  bad("[3,5] @ [4,4]", operand(rng, {3, 4}, kF), operand(rng, {3, 5}, kF), operand(rng, {4, 4}, kF),
      "inner dimensions differ");
  bad("1-d mat1", operand(rng, {4}, kF), operand(rng, {5}, kF), operand(rng, {5, 4}, kF), "mat1 is not 2-d");
  bad("float64 self with float32 matrices", operand(rng, {3, 4}, ScalarType::Float64), operand(rng, {3, 5}, kF),
      operand(rng, {5, 4}, kF), "self's dtype differs from the matrices'");
  bad("float32 with float64 matrices", operand(rng, {3, 4}, kF), operand(rng, {3, 5}, kF),
      operand(rng, {5, 4}, ScalarType::Float64), "the matrices' dtypes differ");
  bad("beta=0.5 for int32", operand(rng, {3, 4}, ScalarType::Int32), operand(rng, {3, 5}, ScalarType::Int32),
      operand(rng, {5, 4}, ScalarType::Int32), "integral products take integral beta and alpha",
      {Scalar(0.5), Scalar(int64_t{1})});
  bad("bool", operand(rng, {3, 4}, ScalarType::Bool), operand(rng, {3, 5}, ScalarType::Bool),
      operand(rng, {5, 4}, ScalarType::Bool), "matrix products do not take bool");
  return out;
}

Expected addmmReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  return combine(matmulValues(s.args[1].toTensor(), s.args[2].toTensor()), self.dtype(), scalarArg(s, 4, 1), self,
                 scalarArg(s, 3, 1));
}

// addmm's result bound scaled by `slope`, with `roundings` roundings to
// the dtype after the product's sums (addmm's sample arguments: self, mat1,
// mat2, beta, alpha).
Tolerance addmmLikeTolerance(ScalarType t, const Sample& s, double slope, int roundings) {
  const Tensor& m1 = s.args[1].toTensor();
  const double beta = scalarArg(s, 3, 1), alpha = scalarArg(s, 4, 1);
  const int64_t k = m1.size(1);
  double bound = std::fabs(alpha) * static_cast<double>(k) * maxAbs(m1) * maxAbs(s.args[2].toTensor());
  if (beta != 0) bound += std::fabs(beta) * maxAbs(s.args[0].toTensor());
  return productTolerance(t, k, slope * bound, roundings);
}

// beta * self and alpha * product may each be rounded to the dtype before
// they are added (the addmm composite).
Tolerance addmmTolerance(ScalarType t, const Sample& s) { return addmmLikeTolerance(t, s, 1, 2); }

// _addmm_activation(self, mat1, mat2, beta, alpha, use_gelu): relu, or the
// exact gelu, of addmm (Note [Fused activation products]). A row self with
// beta = alpha = 1 is the fused form a plugin may serve in one product (the
// CPU plugin's float32 kernel); the others test the composite.
std::vector<Sample> addmmActivationSamples() {
  Rng rng(seedFor("bp::_addmm_activation"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, Tensor m1, Tensor m2, bool gelu, Scalar beta = Scalar(int64_t{1}),
                  Scalar alpha = Scalar(int64_t{1})) {
    out.push_back(makeSample(std::move(name), {IValue(std::move(self)), IValue(std::move(m1)), IValue(std::move(m2)),
                                               IValue(beta), IValue(alpha), IValue(gelu)}));
  };
  for (ScalarType dt : kNumericTypes) {
    const std::string sx = dtypeSuffix(dt);
    push("relu, bias [4], transposed mat2" + sx, operand(rng, {4}, dt), operand(rng, {3, 5}, dt),
         operand(rng, {4, 5}, dt).t(), false);
    push("relu, self [3,4]" + sx, operand(rng, {3, 4}, dt), operand(rng, {3, 5}, dt), operand(rng, {5, 4}, dt), false);
  }
  for (ScalarType dt : {kF, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16}) {
    const std::string sx = dtypeSuffix(dt);
    push("gelu, bias [4], transposed mat2" + sx, operand(rng, {4}, dt), operand(rng, {3, 5}, dt),
         operand(rng, {4, 5}, dt).t(), true);
    push("gelu, bias [1,4]" + sx, operand(rng, {1, 4}, dt), operand(rng, {3, 5}, dt), operand(rng, {5, 4}, dt), true);
    push("gelu, beta=0.5, alpha=2" + sx, operand(rng, {4}, dt), operand(rng, {3, 5}, dt), operand(rng, {5, 4}, dt),
         true, Scalar(0.5), Scalar(2.0));
  }
  push("gelu, 0-d self", operand(rng, {}, kF), operand(rng, {3, 5}, kF), operand(rng, {5, 4}, kF), true);
  push("gelu, sliced bias (step 2)", operand(rng, {8}, kF).slice(0, 0, std::nullopt, 2), operand(rng, {3, 5}, kF),
       operand(rng, {5, 4}, kF), true);
  push("gelu, K=0: gelu(self)", operand(rng, {4}, kF), operand(rng, {3, 0}, kF), operand(rng, {0, 4}, kF), true);
  push("relu, M=0", operand(rng, {4}, kF), operand(rng, {0, 5}, kF), operand(rng, {5, 4}, kF), false);
  for (bool gelu : {false, true}) {
    push(std::string(gelu ? "gelu" : "relu") + ": NaN in mat1 stays NaN in its row", operand(rng, {4}, kF),
         hostTensor({1, std::numeric_limits<double>::quiet_NaN(), 2, 3}, {2, 2}, kF), operand(rng, {2, 4}, kF), gelu);
  }
  push("gelu, large [300,64] @ [64,200]^T-layout + bias [200] float32", operand(rng, {200}, kF),
       operand(rng, {300, 64}, kF), operand(rng, {200, 64}, kF).t(), true);
  auto bad = [&](std::string name, Tensor self, Tensor m1, Tensor m2, bool gelu, std::string reason) {
    out.push_back(raising(std::move(name),
                          {IValue(std::move(self)), IValue(std::move(m1)), IValue(std::move(m2)),
                           IValue(Scalar(int64_t{1})), IValue(Scalar(int64_t{1})), IValue(gelu)},
                          std::move(reason)));
  };
  bad("gelu of int32", operand(rng, {4}, ScalarType::Int32), operand(rng, {3, 5}, ScalarType::Int32),
      operand(rng, {5, 4}, ScalarType::Int32), true, "gelu needs a floating dtype");
  bad("self [3] with a [3,4] product", operand(rng, {3}, kF), operand(rng, {3, 5}, kF), operand(rng, {5, 4}, kF), false,
      "self does not broadcast to the product");
  bad("[3,5] @ [4,4]", operand(rng, {4}, kF), operand(rng, {3, 5}, kF), operand(rng, {4, 4}, kF), true,
      "inner dimensions differ");
  return out;
}

Expected addmmActivationReference(const Sample& s) {
  Expected e = addmmReference(s);
  const bool gelu = s.args[5].toBool();
  for (double& v : e.values)
    v = roundTo(e.dtype, gelu ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))) : std::max(v, 0.0));
  return e;
}

// addmm's, and one more rounding for the activation (gelu's slope is at
// most about 1.13, so it does not grow the product's error).
Tolerance addmmActivationTolerance(ScalarType t, const Sample& s) { return addmmLikeTolerance(t, s, 1.2, 3); }

// linear(input, weight, bias) = input @ weight.T + bias.
std::vector<Sample> linearSamples() {
  Rng rng(seedFor("bp::linear"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor input, Tensor weight, std::optional<Tensor> bias) {
    std::vector<IValue> args = {IValue(std::move(input)), IValue(std::move(weight))};
    if (bias) args.emplace_back(std::move(*bias));
    out.push_back(makeSample(std::move(name), std::move(args)));
  };
  for (ScalarType dt : kNumericTypes) {
    const std::string sx = dtypeSuffix(dt);
    push("[3,5] with [4,5] and bias [4]" + sx, operand(rng, {3, 5}, dt), operand(rng, {4, 5}, dt),
         operand(rng, {4}, dt));
    push("[2,3,5] without bias" + sx, operand(rng, {2, 3, 5}, dt), operand(rng, {4, 5}, dt), std::nullopt);
    push("transposed input and weight" + sx, operand(rng, {5, 3}, dt).t(), operand(rng, {5, 4}, dt).t(),
         operand(rng, {4}, dt));
  }
  out.push_back(
      makeSample("bias None given", {IValue(operand(rng, {3, 5}, kF)), IValue(operand(rng, {4, 5}, kF)), IValue()}));
  push("1-d input", operand(rng, {5}, kF), operand(rng, {4, 5}, kF), operand(rng, {4}, kF));
  push("1-d weight", operand(rng, {3, 5}, kF), operand(rng, {5}, kF), operand(rng, {}, kF));
  push("1-d input and weight", operand(rng, {5}, kF), operand(rng, {5}, kF), std::nullopt);
  push("0-d bias", operand(rng, {3, 5}, kF), operand(rng, {4, 5}, kF), operand(rng, {}, kF));
  push("bias [1]", operand(rng, {3, 5}, kF), operand(rng, {4, 5}, kF), operand(rng, {1}, kF));
  push("bias [3,4] (the result's shape)", operand(rng, {3, 5}, kF), operand(rng, {4, 5}, kF), operand(rng, {3, 4}, kF));
  push("bias [3,1]", operand(rng, {3, 5}, kF), operand(rng, {4, 5}, kF), operand(rng, {3, 1}, kF));
  push("sliced bias (step 2)", operand(rng, {3, 5}, kF), operand(rng, {4, 5}, kF),
       operand(rng, {8}, kF).slice(0, 0, std::nullopt, 2));
  push("permuted 3-d input", operand(rng, {3, 2, 5}, kF).transpose(0, 1), operand(rng, {4, 5}, kF),
       operand(rng, {4}, kF));
  push("expanded input", operand(rng, {1, 5}, kF).expand({3, 5}), operand(rng, {4, 5}, kF), operand(rng, {4}, kF));
  push("K=0 with bias: the bias", operand(rng, {3, 0}, kF), operand(rng, {4, 0}, kF), operand(rng, {4}, kF));
  push("K=0 without bias: zeros", operand(rng, {3, 0}, kF), operand(rng, {4, 0}, kF), std::nullopt);
  push("no rows", operand(rng, {0, 5}, kF), operand(rng, {4, 5}, kF), operand(rng, {4}, kF));
  push("K=64 float32", operand(rng, {9, 64}, kF), operand(rng, {7, 64}, kF), operand(rng, {7}, kF));
  push("large [1100,8] with [1000,8] and bias [1000] float32", operand(rng, {1100, 8}, kF), operand(rng, {1000, 8}, kF),
       operand(rng, {1000}, kF));
  auto bad = [&](std::string name, Tensor input, Tensor weight, Tensor bias, std::string reason) {
    out.push_back(raising(std::move(name),
                          {IValue(std::move(input)), IValue(std::move(weight)), IValue(std::move(bias))},
                          std::move(reason)));
  };
  bad("in_features 5 and 6", operand(rng, {3, 5}, kF), operand(rng, {4, 6}, kF), operand(rng, {4}, kF),
      "input.size(-1) differs from weight.size(-1)");
  bad("3-d weight", operand(rng, {3, 5}, kF), operand(rng, {1, 4, 5}, kF), operand(rng, {4}, kF),
      "weight is not 1-d or 2-d");
  bad("bias [5] for 4 outputs", operand(rng, {3, 5}, kF), operand(rng, {4, 5}, kF), operand(rng, {5}, kF),
      "bias does not broadcast to the result");
  bad("bias [2,3,4] larger than the result", operand(rng, {3, 5}, kF), operand(rng, {4, 5}, kF),
      operand(rng, {2, 3, 4}, kF), "bias would grow the result");
  bad("0-d input", operand(rng, {}, kF), operand(rng, {4, 1}, kF), operand(rng, {4}, kF), "input is 0-d");
  bad("float64 weight", operand(rng, {3, 5}, kF), operand(rng, {4, 5}, ScalarType::Float64), operand(rng, {4}, kF),
      "weight's dtype differs from input's");
  bad("float64 bias", operand(rng, {3, 5}, kF), operand(rng, {4, 5}, kF), operand(rng, {4}, ScalarType::Float64),
      "bias's dtype differs from input's");
  return out;
}

Tensor biasOf(const Sample& s) { return s.args.size() > 2 && !s.args[2].isNone() ? s.args[2].toTensor() : Tensor(); }

Expected linearReference(const Sample& s) {
  const Tensor& input = s.args[0].toTensor();
  const Tensor& weight = s.args[1].toTensor();
  return combine(matmulValues(input, weight.dim() == 2 ? weight.t() : weight), input.dtype(), 1, biasOf(s), 1);
}

// The bias may be added to a product already rounded to the dtype (the
// linear composite: addmm, or matmul then add).
Tolerance linearTolerance(ScalarType t, const Sample& s) {
  const Tensor& input = s.args[0].toTensor();
  const int64_t k = input.size(-1);
  return productTolerance(t, k,
                          static_cast<double>(k) * maxAbs(input) * maxAbs(s.args[1].toTensor()) + maxAbs(biasOf(s)), 1);
}

// --- einsum: every assignment of the subscripts' values, summed into the
// output's (the definition, in double). "..." becomes upper-case letters
// from 'Z' down, aligned to the right as the operands' broadcast dims.

Expected einsumReference(const Sample& s) {
  std::string eq(s.args[0].toString());
  const std::vector<TensorBase>& list = s.args[1].toTensorList();
  std::vector<Tensor> ts(list.begin(), list.end());
  const size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow), rhs = arrow == std::string::npos ? "" : eq.substr(arrow + 2);
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t c = lhs.find(',', start);
    parts.push_back(lhs.substr(start, c == std::string::npos ? std::string::npos : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  int64_t dots = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const size_t e = parts[i].find("...");
    if (e != std::string::npos) dots = std::max<int64_t>(dots, ts[i].dim() - static_cast<int64_t>(parts[i].size() - 3));
  }
  auto expandDots = [&](const std::string& text, int64_t n) {
    const size_t e = text.find("...");
    if (e == std::string::npos) return text;
    std::string letters;
    for (int64_t k = n; k-- > 0;) letters.push_back(static_cast<char>('Z' - k));
    return text.substr(0, e) + letters + text.substr(e + 3);
  };
  for (size_t i = 0; i < parts.size(); ++i)
    parts[i] = expandDots(parts[i], ts[i].dim() - static_cast<int64_t>(parts[i].size()) + 3);
  std::string out;
  if (arrow != std::string::npos) {
    out = expandDots(rhs, dots);
  } else {
    out = expandDots("...", dots);
    std::string once;
    for (char c = 'A'; c <= 'z'; ++c) {
      if (!std::isalpha(static_cast<unsigned char>(c)) || out.find(c) != std::string::npos) continue;
      int n = 0;
      for (const std::string& p : parts) n += static_cast<int>(std::count(p.begin(), p.end(), c));
      if (n == 1) once.push_back(c);
    }
    out += once;
  }
  std::string labels;  // every subscript, with its size
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < parts.size(); ++i) {
    for (size_t k = 0; k < parts[i].size(); ++k) {
      const int64_t n = ts[i].size(static_cast<int64_t>(k));
      const size_t at = labels.find(parts[i][k]);
      if (at == std::string::npos) {
        labels.push_back(parts[i][k]);
        sizes.push_back(n);
      } else {
        sizes[at] = std::max(sizes[at], n);
      }
    }
  }
  std::vector<int64_t> out_sizes;
  for (char c : out) out_sizes.push_back(sizes[labels.find(c)]);
  std::vector<double> result(static_cast<size_t>(numelOf(out_sizes)), 0.0);
  std::vector<std::vector<double>> values;
  for (const Tensor& t : ts) values.push_back(valuesOf(t));
  std::vector<int64_t> at(labels.size(), 0);
  const int64_t total = numelOf(sizes);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rem = flat;
    for (size_t k = labels.size(); k-- > 0;) {
      at[k] = rem % sizes[k];
      rem /= sizes[k];
    }
    double product = 1;
    for (size_t i = 0; i < parts.size(); ++i) {
      int64_t index = 0;
      for (size_t k = 0; k < parts[i].size(); ++k) {
        const int64_t n = ts[i].size(static_cast<int64_t>(k));
        index = index * n + (n == 1 ? 0 : at[labels.find(parts[i][k])]);
      }
      product *= values[i][static_cast<size_t>(index)];
    }
    int64_t o = 0;
    for (size_t k = 0; k < out.size(); ++k) o = o * out_sizes[k] + at[labels.find(out[k])];
    result[static_cast<size_t>(o)] += product;
  }
  const ScalarType dt = ts[0].dtype();
  for (double& v : result) v = roundTo(dt, v);
  return Expected{out_sizes, dt, std::move(result)};
}

// The samples contract at most 20 terms of at most three factors in [-2, 2],
// each partial product rounded once per operand.
Tolerance einsumTolerance(ScalarType t, const Sample& s) {
  const int operands = static_cast<int>(s.args[1].toTensorList().size());
  return productTolerance(t, 20, 20 * std::pow(2.0, operands), operands);
}

std::vector<Sample> einsumSamples() {
  Rng rng(seedFor("bp::einsum"));
  std::vector<Sample> out;
  auto push = [&](std::string eq, std::vector<std::vector<int64_t>> shapes, ScalarType dt = ScalarType::Float32) {
    std::vector<TensorBase> ts;
    for (auto& s : shapes) ts.push_back(randomTensor(rng, s, dt));
    out.push_back(makeSample(eq + dtypeSuffix(dt), {IValue(eq), IValue(std::move(ts))}));
  };
  for (ScalarType dt : kFloatTypes) push("ij,jk->ik", {{3, 4}, {4, 5}}, dt);
  push("bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}});
  push("bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}});
  push("ij,jk", {{3, 4}, {4, 2}});
  push("ii->i", {{4, 4}});
  push("ii", {{3, 3}});
  push("ij->ji", {{3, 4}});
  push("i,j->ij", {{3}, {4}});
  push("i,i->", {{5}, {5}});
  push("ijk,kl,lm->im", {{2, 3, 4}, {4, 2}, {2, 3}});
  push("...ij,...jk->...ik", {{2, 3, 4}, {4, 5}});
  push("ij,ij->ij (size-1 broadcast)", {{3, 4}, {1, 4}});
  out.back().args[0] = IValue(std::string("ij,ij->ij"));
  push("ij,jk->ik", {{3, 4}, {4, 5}}, ScalarType::Int64);
  auto bad = [&](std::string name, std::string eq, std::vector<std::vector<int64_t>> shapes, std::string reason,
                 ScalarType second = ScalarType::Float32) {
    std::vector<TensorBase> ts;
    for (size_t i = 0; i < shapes.size(); ++i)
      ts.push_back(randomTensor(rng, shapes[i], i == 0 ? ScalarType::Float32 : second));
    out.push_back(raising(std::move(name), {IValue(std::move(eq)), IValue(std::move(ts))}, std::move(reason)));
  };
  bad("two subscripts for a 3-d operand", "ij->i", {{2, 3, 4}}, "subscripts do not match the rank");
  bad("two operands in the equation, one tensor", "ij,jk->ik", {{2, 3}}, "operand count differs");
  bad("a digit as a subscript", "i1->i", {{2, 3}}, "not a letter");
  bad("an output subscript no operand has", "ij->k", {{2, 3}}, "unknown output subscript");
  bad("float32 with float64", "ij,jk->ik", {{2, 3}, {3, 2}}, "dtypes differ", ScalarType::Float64);
  return out;
}

void addSpec(std::vector<OpSpec>& specs, std::string op, std::function<std::vector<Sample>()> samples,
             std::function<Expected(const Sample&)> reference,
             std::function<Tolerance(ScalarType, const Sample&)> tolerance, std::string inplace, std::string out) {
  OpSpec spec;
  spec.op = std::move(op);
  spec.family = "linalg";
  spec.samples = std::move(samples);
  spec.reference = [reference = std::move(reference)](const Sample& s) { return std::vector<Expected>{reference(s)}; };
  spec.tolerance = std::move(tolerance);
  spec.inplace = std::move(inplace);
  spec.out = std::move(out);
  specs.push_back(std::move(spec));
}

Expected plainProduct(const Sample& s) {
  const Tensor& a = s.args[0].toTensor();
  return combine(matmulValues(a, s.args[1].toTensor()), a.dtype(), 1);
}

}  // namespace

void addLinalgSpecs(std::vector<OpSpec>& specs) {
  addSpec(specs, "bp::mm", mmSamples, plainProduct, plainProductTolerance, "", "bp::mm.out");
  addSpec(specs, "bp::bmm", bmmSamples, plainProduct, plainProductTolerance, "", "bp::bmm.out");
  addSpec(specs, "bp::matmul", matmulSamples, plainProduct, plainProductTolerance, "", "bp::matmul.out");
  addSpec(specs, "bp::addmm", addmmSamples, addmmReference, addmmTolerance, "bp::addmm_", "bp::addmm.out");
  addSpec(specs, "bp::linear", linearSamples, linearReference, linearTolerance, "", "");
  addSpec(specs, "bp::_addmm_activation", addmmActivationSamples, addmmActivationReference, addmmActivationTolerance,
          "", "");
  addSpec(specs, "bp::einsum", einsumSamples, einsumReference, einsumTolerance, "", "");
}

}  // namespace backplane::conformance
