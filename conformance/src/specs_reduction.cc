// Conformance specs of the reduction family: sum, mean, amax and amin over
// dims with keepdim (Note [Conformance specs]).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backplane/conformance/spec.h"

namespace backplane::conformance {
namespace {

enum class Kind { Sum, Mean, Max, Min };

// The reduced dims of a sample (wrapped, sorted); empty `dims` reduces all.
std::vector<int64_t> reducedDims(const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
  } else {
    for (int64_t d : dims) out.push_back(d < 0 ? d + std::max<int64_t>(ndim, 1) : d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Expected reduce(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim, Kind kind, ScalarType out_dtype) {
  const std::vector<int64_t> sizes = sizesOf(t);
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  const std::vector<int64_t> red = reducedDims(dims, ndim);
  auto isReduced = [&](int64_t d) { return std::find(red.begin(), red.end(), d) != red.end(); };
  Expected e;
  e.dtype = out_dtype;
  std::vector<int64_t> kept;  // output sizes without keepdim
  for (int64_t d = 0; d < ndim; ++d) {
    if (isReduced(d)) {
      if (keepdim) e.sizes.push_back(1);
    } else {
      kept.push_back(sizes[static_cast<size_t>(d)]);
      e.sizes.push_back(sizes[static_cast<size_t>(d)]);
    }
  }
  const int64_t n_out = numelOf(kept);
  std::vector<double> acc(static_cast<size_t>(n_out),
                          kind == Kind::Max   ? -std::numeric_limits<double>::infinity()
                          : kind == Kind::Min ? std::numeric_limits<double>::infinity()
                                              : 0.0);
  std::vector<bool> nan(static_cast<size_t>(n_out), false);
  const std::vector<double> v = valuesOf(t);
  int64_t per_out = 1;
  for (int64_t d : red) per_out *= ndim == 0 ? 1 : sizes[static_cast<size_t>(d)];
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
    // The output element of input element i: its coordinates in kept dims.
    int64_t rem = i, o = 0, mult = 1;
    for (int64_t d = ndim - 1; d >= 0; --d) {
      const int64_t c = rem % sizes[static_cast<size_t>(d)];
      rem /= sizes[static_cast<size_t>(d)];
      if (!isReduced(d)) {
        o += c * mult;
        mult *= sizes[static_cast<size_t>(d)];
      }
    }
    const double x = v[static_cast<size_t>(i)];
    double& a = acc[static_cast<size_t>(o)];
    if (std::isnan(x)) nan[static_cast<size_t>(o)] = true;
    if (kind == Kind::Max) a = std::max(a, x);
    else if (kind == Kind::Min) a = std::min(a, x);
    else a += x;
  }
  for (int64_t o = 0; o < n_out; ++o) {
    double r = acc[static_cast<size_t>(o)];
    if (kind == Kind::Mean) r = per_out == 0 ? std::nan("") : r / static_cast<double>(per_out);
    if (nan[static_cast<size_t>(o)]) r = std::nan("");
    e.values.push_back(roundTo(out_dtype, r));
  }
  return e;
}

struct DimCase {
  std::vector<int64_t> dims;
  bool keepdim;
  const char* name;
};

std::vector<Sample> reductionSamples(const std::string& op, const std::vector<ScalarType>& dtypes, bool dims_optional,
                                     bool allow_empty_reduction) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  const std::vector<DimCase> cases = {{{1}, false, "dim 1"},          {{0}, true, "dim 0 keepdim"},
                                      {{-1}, false, "dim -1"},        {{0, 2}, false, "dims (0, 2)"},
                                      {{}, false, "all dims ([])"},   {{1, 2}, true, "dims (1, 2) keepdim"}};
  auto dimsValue = [&](const std::vector<int64_t>& d) {
    return dims_optional && d.empty() ? IValue() : IValue(std::vector<int64_t>(d));
  };
  for (ScalarType dt : dtypes) {
    const std::string suffix = " " + std::string(scalarTypeName(dt));
    for (const DimCase& c : cases) {
      Sample s;
      s.name = std::string("[2,3,4] ") + c.name + suffix;
      s.args = {IValue(randomTensor(rng, {2, 3, 4}, dt)), dimsValue(c.dims), IValue(c.keepdim)};
      out.push_back(std::move(s));
    }
    Sample tr;
    tr.name = "transposed [4,3], dim 0" + suffix;
    tr.args = {IValue(randomTensor(rng, {3, 4}, dt).transpose(0, 1)), dimsValue({0}), IValue(false)};
    out.push_back(std::move(tr));
    Sample zero;
    zero.name = "0-d, all dims" + suffix;
    zero.args = {IValue(randomTensor(rng, {}, dt)), dimsValue({}), IValue(false)};
    out.push_back(std::move(zero));
  }
  Sample empty;
  empty.name = "empty [0,3] over dim 1";
  empty.args = {IValue(randomTensor(rng, {0, 3}, ScalarType::Float32)), dimsValue({1}), IValue(false)};
  out.push_back(std::move(empty));
  if (allow_empty_reduction) {
    Sample e0;
    e0.name = "empty [0,3] over dim 0 (reduces nothing)";
    e0.args = {IValue(randomTensor(rng, {0, 3}, ScalarType::Float32)), dimsValue({0}), IValue(false)};
    out.push_back(std::move(e0));
  } else {
    Sample e0;
    e0.name = "empty [0,3] over dim 0 has no identity";
    e0.args = {IValue(randomTensor(rng, {0, 3}, ScalarType::Float32)), dimsValue({0}), IValue(false)};
    e0.must_raise = true;
    e0.raise_reason = "reducing zero elements without an identity";
    out.push_back(std::move(e0));
  }
  Sample large;
  large.name = "large [1100, 1000] float32 over dim 1";
  large.args = {IValue(randomTensor(rng, {1100, 1000}, ScalarType::Float32)), dimsValue({1}), IValue(false)};
  out.push_back(std::move(large));
  Sample bad;
  bad.name = "dim 3 of a 3-d tensor";
  bad.args = {IValue(randomTensor(rng, {2, 3, 4}, ScalarType::Float32)), dimsValue({3}), IValue(false)};
  bad.must_raise = true;
  bad.raise_reason = "dimension out of range";
  out.push_back(std::move(bad));
  return out;
}

// Sums of n terms carry rounding that grows with n: relative slack of
// n * eps of the dtype, on top of the default.
Tolerance sumTolerance(ScalarType t, const Sample& s) {
  Tolerance tol = defaultTolerance(t);
  const double n = static_cast<double>(std::max<int64_t>(s.args[0].toTensor().numel(), 1));
  const double eps = t == ScalarType::Float32 ? 1.2e-7 : t == ScalarType::Float64 ? 2.3e-16
                   : t == ScalarType::Float16 ? 9.8e-4 : t == ScalarType::BFloat16 ? 7.8e-3 : 0;
  tol.atol += eps * std::sqrt(n) * 4;
  tol.rtol += eps * std::sqrt(n);
  return tol;
}

void addReduction(std::vector<OpSpec>& specs, const std::string& op, const std::string& out, Kind kind,
                  const std::vector<ScalarType>& dtypes, bool dims_optional, bool allow_empty) {
  OpSpec spec;
  spec.op = op;
  spec.family = "reduction";
  spec.samples = [op, dtypes, dims_optional, allow_empty] {
    return reductionSamples(op, dtypes, dims_optional, allow_empty);
  };
  spec.reference = [kind](const Sample& s) {
    const Tensor& t = s.args[0].toTensor();
    std::vector<int64_t> dims;
    if (!s.args[1].isNone()) dims = s.args[1].toIntList();
    ScalarType dt = t.dtype();
    if (kind == Kind::Sum && !isFloatingType(dt)) dt = ScalarType::Int64;  // integral sums widen
    return std::vector<Expected>{reduce(t, dims, s.args[2].toBool(), kind, dt)};
  };
  spec.out = out;
  if (kind == Kind::Sum || kind == Kind::Mean) spec.tolerance = sumTolerance;
  specs.push_back(std::move(spec));
}

}  // namespace

void addReductionSpecs(std::vector<OpSpec>& specs) {
  const std::vector<ScalarType> floats = {ScalarType::Float32, ScalarType::Float64, ScalarType::BFloat16};
  const std::vector<ScalarType> numeric = {ScalarType::Float32, ScalarType::Float64, ScalarType::Int32,
                                           ScalarType::Int64};
  addReduction(specs, "bp::sum.dim_IntList", "bp::sum.IntList_out", Kind::Sum, numeric, true, true);
  addReduction(specs, "bp::mean.dim", "bp::mean.out", Kind::Mean, floats, true, true);
  addReduction(specs, "bp::amax", "bp::amax.out", Kind::Max, numeric, false, false);
  addReduction(specs, "bp::amin", "bp::amin.out", Kind::Min, numeric, false, false);
}

}  // namespace backplane::conformance
