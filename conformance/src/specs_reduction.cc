// Conformance specs of the reduction family (Note [Conformance specs]): sum
// and mean over dims and of the whole tensor (with dtype=), amax and amin,
// argmax and argmin, var and std in each of their spellings.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"
#include "backplane/core/scalar.h"

namespace backplane::conformance {
namespace {

// argmax and argmin take no bool input in PyTorch.
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// --- References

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

// The result shape of reducing a tensor over `dims` (empty: every dim) and,
// per result element, the elements it reduces in row-major order of the
// reduced dims (so a position in a group is argmax's index). With `as`, the
// elements are converted to that dtype first (dtype=).
struct Groups {
  std::vector<int64_t> sizes;
  std::vector<std::vector<double>> members;
};

Groups groupsOf(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim,
                std::optional<ScalarType> as = std::nullopt) {
  const std::vector<int64_t> sizes = sizesOf(t);
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  const std::vector<int64_t> red = reducedDims(dims, ndim);
  auto isReduced = [&](int64_t d) { return std::find(red.begin(), red.end(), d) != red.end(); };
  Groups g;
  std::vector<int64_t> kept;  // result sizes without keepdim
  for (int64_t d = 0; d < ndim; ++d) {
    if (isReduced(d)) {
      if (keepdim) g.sizes.push_back(1);
    } else {
      kept.push_back(sizes[static_cast<size_t>(d)]);
      g.sizes.push_back(sizes[static_cast<size_t>(d)]);
    }
  }
  g.members.resize(static_cast<size_t>(numelOf(kept)));
  const std::vector<double> v = valuesOf(t);
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
    // The result element of input element i: its coordinates in kept dims.
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
    g.members[static_cast<size_t>(o)].push_back(as ? roundTo(*as, x) : x);
  }
  return g;
}

// The result of folding each group with `f`, rounded to `dtype`.
template <class Fold>
std::vector<Expected> folded(const Groups& g, ScalarType dtype, Fold&& f) {
  Expected e;
  e.sizes = g.sizes;
  e.dtype = dtype;
  for (const std::vector<double>& m : g.members) e.values.push_back(roundTo(dtype, f(m)));
  return {e};
}

// Neumaier's compensated sum: within about one rounding of the exact sum at
// any length, so the reference carries none of the error the tolerance
// allows the op.
double sumOf(const std::vector<double>& v) {
  double s = 0, c = 0;
  for (double x : v) {
    const double t = s + x;
    c += std::fabs(s) >= std::fabs(x) ? (s - t) + x : (x - t) + s;
    s = t;
  }
  return std::isfinite(s) ? s + c : s;  // an inf or NaN sum has no meaningful compensation
}

double meanOf(const std::vector<double>& v) { return sumOf(v) / static_cast<double>(v.size()); }  // empty: NaN

// The position of the first maximum (minimum); a NaN beats every number, so
// the first NaN wins (PyTorch's amax/amin propagate NaN, argmax/argmin
// point at it).
template <bool Max>
size_t extremumAt(const std::vector<double>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size() && !std::isnan(v[best]); ++i) {
    if (std::isnan(v[i]) || (Max ? v[i] > v[best] : v[i] < v[best])) best = i;
  }
  return best;
}

// Two passes (the mean, then squared deviations from it) with PyTorch's
// divisor max(0, N - correction): one element with correction 1 gives 0/0 =
// NaN, as does an empty group.
double varianceOf(const std::vector<double>& v, double correction) {
  const double mean = meanOf(v);
  std::vector<double> squares;
  for (double x : v) squares.push_back((x - mean) * (x - mean));
  return sumOf(squares) / std::max(0.0, static_cast<double>(v.size()) - correction);
}

// Argument i of a sample, or null where the sample leaves it off or passes
// None (the schema's default applies).
const IValue* given(const Sample& s, size_t i) {
  return i < s.args.size() && !s.args[i].isNone() ? &s.args[i] : nullptr;
}

// The dims (argument 1) a sample reduces, empty for every dim.
std::vector<int64_t> dimsOf(const Sample& s) {
  const IValue* d = given(s, 1);
  return d ? d->toIntList() : std::vector<int64_t>{};
}

bool flagOf(const Sample& s, size_t i, bool fallback) {
  const IValue* f = given(s, i);
  return f ? f->toBool() : fallback;
}

// sum and mean: dtype= converts the input first (a floating input summed as
// int64 is truncated element by element); without it an integral sum widens
// to int64.
std::vector<Expected> sumReference(const Sample& s, const std::vector<int64_t>& dims, bool keepdim, const IValue* dtype,
                                   bool mean) {
  const Tensor& self = s.args[0].toTensor();
  if (dtype) {
    const ScalarType t = dtype->toScalarType();
    return folded(groupsOf(self, dims, keepdim, t), t, mean ? meanOf : sumOf);
  }
  const ScalarType t = mean || isFloatingType(self.dtype()) ? self.dtype() : ScalarType::Int64;
  return folded(groupsOf(self, dims, keepdim), t, mean ? meanOf : sumOf);
}

std::vector<Expected> varReference(const Sample& s, const std::vector<int64_t>& dims, bool keepdim, double correction,
                                   bool root) {
  const Tensor& self = s.args[0].toTensor();
  return folded(groupsOf(self, dims, keepdim), self.dtype(), [&](const std::vector<double>& v) {
    const double var = varianceOf(v, correction);
    return root ? std::sqrt(var) : var;
  });
}

// The correction of var(unbiased) and var.dim(..., unbiased, ...), whose
// unbiased flag sits at `at`: 1 (the default) or 0.
double unbiasedCorrection(const Sample& s, size_t at) { return flagOf(s, at, true) ? 1 : 0; }

// Sums of n terms carry rounding that grows with n: relative slack of
// sqrt(n) * eps of the dtype, on top of the default. Also var and std, whose
// sums of squares accumulate alike.
Tolerance sumTolerance(ScalarType t, const Sample& s) {
  Tolerance tol = defaultTolerance(t);
  const double n = static_cast<double>(std::max<int64_t>(s.args[0].toTensor().numel(), 1));
  const double eps = machineEpsilon(t);
  tol.atol += eps * std::sqrt(n) * 4;
  tol.rtol += eps * std::sqrt(n);
  return tol;
}

// The elements each result of a reduction over `dims` (empty: every dim)
// of `self` combines.
double reductionLength(const Tensor& self, const std::vector<int64_t>& dims) {
  double m = 1;
  for (int64_t d : reducedDims(dims, self.dim())) m *= static_cast<double>(self.size(d));
  return std::max(m, 1.0);
}

// A mean is a sum divided by the reduction length m, and so is the sum's
// rounding: the slack sumTolerance adds to atol shrinks by m (else a mean
// of a million elements, itself near zero, could be off by half).
Tolerance meanTolerance(ScalarType t, const Sample& s, double m) {
  const Tolerance base = defaultTolerance(t);
  Tolerance tol = sumTolerance(t, s);
  tol.atol = base.atol + (tol.atol - base.atol) / m;
  return tol;
}

// --- Samples

Sample sample(std::string name, std::vector<IValue> args, std::string raise_reason = "") {
  Sample s;
  s.name = std::move(name);
  s.args = std::move(args);
  s.must_raise = !raise_reason.empty();
  s.raise_reason = std::move(raise_reason);
  return s;
}

// The inputs every reduction gets in each dtype besides a plain [2,3,4]:
// strided views, 0-d and a single element, each with a dim to reduce
// (nullopt: every dim).
struct Input {
  std::string name;
  Tensor self;
  std::optional<int64_t> dim;
};

std::vector<Input> viewInputs(Rng& rng, ScalarType dt) {
  return {{"transposed [4,3]", randomTensor(rng, {3, 4}, dt).transpose(0, 1), 0},
          {"sliced [3,8] step 2", randomTensor(rng, {3, 8}, dt).slice(1, 0, std::nullopt, 2), 1},
          {"expanded [1,4] to [3,4]", randomTensor(rng, {1, 4}, dt).expand({3, 4}), 0},
          {"0-d", randomTensor(rng, {}, dt), std::nullopt},
          {"one element [1]", randomTensor(rng, {1}, dt), 0}};
}

std::string dimText(std::optional<int64_t> dim) { return dim ? ", dim " + std::to_string(*dim) : ", every dim"; }

// [3,4] float32 rows: two NaNs (the first must win argmax and argmin), both
// infinities (their sum is NaN), and ties (the first must win).
Tensor specialValues() {
  return hostTensor({1, kNaN, 3, kNaN, -kInf, 0.5, 2, kInf, 5, 5, -1, -1}, {3, 4}, ScalarType::Float32);
}

Tensor large(Rng& rng) { return randomTensor(rng, {1100, 1000}, ScalarType::Float32); }

// Samples of a whole-tensor reduction (sum, mean, var, std): self alone, the
// trailing optional argument left to its default.
std::vector<Sample> wholeSamples(const std::string& op, const std::vector<ScalarType>& dtypes) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  for (ScalarType dt : dtypes) {
    out.push_back(sample("[2,3,4]" + dtypeSuffix(dt), {randomTensor(rng, {2, 3, 4}, dt)}));
    for (Input& in : viewInputs(rng, dt)) out.push_back(sample(in.name + dtypeSuffix(dt), {std::move(in.self)}));
  }
  out.push_back(sample("NaN and inf float32 [3,4]", {specialValues()}));
  out.push_back(sample("empty [0,3]", {randomTensor(rng, {0, 3}, ScalarType::Float32)}));
  out.push_back(sample("large [1100,1000] float32", {large(rng)}));
  return out;
}

// An op reducing over a dim list, called as (self, dim, middle..., keepdim):
// sum.dim_IntList and amax (self, dim, keepdim), var.dim (self, dim,
// unbiased, keepdim), var.correction (self, dim, correction, keepdim).
struct DimListOp {
  std::string op;
  std::vector<ScalarType> dtypes;
  bool dims_optional;          // int[1]? dim: None reduces every dim
  bool dims_default;           // dim may be left off (amax: [], var.correction: None)
  std::vector<IValue> middle;  // the arguments between dim and keepdim
  bool reduces_empty;          // reducing zero elements has a value (sum 0, mean and var NaN), else raises

  std::vector<IValue> args(Tensor self, IValue dims, bool keepdim) const {
    std::vector<IValue> a = {IValue(std::move(self)), std::move(dims)};
    a.insert(a.end(), middle.begin(), middle.end());
    a.emplace_back(keepdim);
    return a;
  }
  // Empty `dims`: every dim, spelled None where the schema allows it.
  IValue dimsValue(const std::vector<int64_t>& dims) const {
    return dims_optional && dims.empty() ? IValue() : IValue(std::vector<int64_t>(dims));
  }
};

struct DimCase {
  std::vector<int64_t> dims;
  bool keepdim;
  const char* name;
};

std::vector<Sample> dimListSamples(const DimListOp& o) {
  Rng rng(seedFor(o.op));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, const std::vector<int64_t>& dims, bool keepdim,
                  std::string raise_reason = "") {
    out.push_back(
        sample(std::move(name), o.args(std::move(self), o.dimsValue(dims), keepdim), std::move(raise_reason)));
  };
  const std::vector<DimCase> cases = {{{1}, false, "dim 1"},    {{0}, true, "dim 0 keepdim"},
                                      {{-1}, false, "dim -1"},  {{0, 2}, false, "dims (0, 2)"},
                                      {{}, false, "every dim"}, {{1, 2}, true, "dims (1, 2) keepdim"}};
  for (ScalarType dt : o.dtypes) {
    for (const DimCase& c : cases) {
      push(std::string("[2,3,4] ") + c.name + dtypeSuffix(dt), randomTensor(rng, {2, 3, 4}, dt), c.dims, c.keepdim);
    }
    for (Input& in : viewInputs(rng, dt)) {
      push(in.name + dimText(in.dim) + dtypeSuffix(dt), std::move(in.self),
           in.dim ? std::vector<int64_t>{*in.dim} : std::vector<int64_t>{}, false);
    }
  }
  if (o.dims_optional) {
    out.push_back(sample("[2,3,4] dim=[] (every dim)", o.args(randomTensor(rng, {2, 3, 4}, ScalarType::Float32),
                                                              IValue(std::vector<int64_t>{}), false)));
  }
  std::vector<IValue> defaults = {IValue(randomTensor(rng, {2, 3, 4}, ScalarType::Float32))};
  if (!o.dims_default) defaults.emplace_back(std::vector<int64_t>{1});
  out.push_back(sample(o.dims_default ? "[2,3,4] every optional argument omitted" : "[2,3,4] dim 1, the rest omitted",
                       std::move(defaults)));
  push("NaN and inf float32 [3,4], dim 1", specialValues(), {1}, false);
  push("empty [0,3], dim 1", randomTensor(rng, {0, 3}, ScalarType::Float32), {1}, false);
  push(o.reduces_empty ? "empty [0,3], dim 0 (reduces nothing)" : "empty [0,3], dim 0 has no identity",
       randomTensor(rng, {0, 3}, ScalarType::Float32), {0}, false,
       o.reduces_empty ? "" : "reducing zero elements without an identity");
  push("large [1100,1000] float32, dim 1", large(rng), {1}, false);
  push("dim 3 of a 3-d tensor", randomTensor(rng, {2, 3, 4}, ScalarType::Float32), {3}, false,
       "dimension out of range");
  push("dims (0, -3) name dim 0 twice", randomTensor(rng, {2, 3, 4}, ScalarType::Float32), {0, -3}, false,
       "a dimension repeated in dim");
  return out;
}

OpSpec reductionSpec(std::string op, std::string out, std::function<std::vector<Sample>()> samples, Reference reference,
                     bool accumulates) {
  OpSpec spec;
  spec.op = std::move(op);
  spec.family = "reduction";
  spec.samples = std::move(samples);
  spec.reference = std::move(reference);
  spec.out = std::move(out);
  if (accumulates) spec.tolerance = sumTolerance;
  return spec;
}

std::vector<Sample> concat(std::vector<Sample> a, std::vector<Sample> b) {
  for (Sample& s : b) a.push_back(std::move(s));
  return a;
}

// A dim-list spec: the shared samples and, after them, the op's own
// (`extra`, if any).
OpSpec dimListSpec(const DimListOp& o, std::string out, std::function<std::vector<Sample>()> extra, Reference reference,
                   bool accumulates) {
  return reductionSpec(
      o.op, std::move(out), [o, extra] { return extra ? concat(dimListSamples(o), extra()) : dimListSamples(o); },
      std::move(reference), accumulates);
}

// --- sum, mean

// dtype= of sum and mean; `spell` makes the call's arguments from self and
// dtype.
std::vector<Sample> dtypeSamples(const std::string& op, bool mean,
                                 const std::function<std::vector<IValue>(Tensor, IValue)>& spell) {
  Rng rng(seedFor(op + " dtype="));
  std::vector<Sample> out;
  auto push = [&](const std::string& name, ScalarType from, std::optional<ScalarType> to,
                  std::string raise_reason = "") {
    out.push_back(sample("[3,4] " + name, spell(randomTensor(rng, {3, 4}, from), IValue(to)), std::move(raise_reason)));
  };
  push("int32 with dtype=float64", ScalarType::Int32, ScalarType::Float64);
  push("float16 with dtype=float32", ScalarType::Float16, ScalarType::Float32);
  push("float64 with dtype=float32", ScalarType::Float64, ScalarType::Float32);
  if (mean) {
    push("int32 without dtype=", ScalarType::Int32, std::nullopt, "the mean of an integral input needs dtype=");
    push("float32 with dtype=int64", ScalarType::Float32, ScalarType::Int64, "an integral dtype= for a mean");
  } else {
    push("float32 with dtype=int64 (truncates each element)", ScalarType::Float32, ScalarType::Int64);
    push("bool with dtype=int32", ScalarType::Bool, ScalarType::Int32);
  }
  return out;
}

// sum / mean of the whole tensor (no out= form: sum.IntList_out belongs to
// sum.dim_IntList) and over dims.
void addSum(std::vector<OpSpec>& specs, bool mean) {
  const std::string name = mean ? "bp::mean" : "bp::sum";
  const std::vector<ScalarType>& dtypes = mean ? kFloatTypes : kAllTypes;
  specs.push_back(reductionSpec(
      name, "",
      [name, dtypes, mean] {
        return concat(wholeSamples(name, dtypes), dtypeSamples(name, mean, [](Tensor t, IValue dtype) {
                        return std::vector<IValue>{IValue(std::move(t)), std::move(dtype)};
                      }));
      },
      [mean](const Sample& s) { return sumReference(s, {}, false, given(s, 1), mean); }, true));
  if (mean) {
    specs.back().tolerance = [](ScalarType t, const Sample& s) {
      return meanTolerance(t, s, reductionLength(s.args[0].toTensor(), {}));
    };
  }

  const DimListOp o{mean ? "bp::mean.dim" : "bp::sum.dim_IntList", dtypes, true, false, {}, true};
  specs.push_back(dimListSpec(
      o, mean ? "bp::mean.out" : "bp::sum.IntList_out",
      [op = o.op, mean] {
        return dtypeSamples(op, mean, [](Tensor t, IValue dtype) {
          return std::vector<IValue>{IValue(std::move(t)), IValue(std::vector<int64_t>{1}), IValue(true),
                                     std::move(dtype)};
        });
      },
      [mean](const Sample& s) { return sumReference(s, dimsOf(s), flagOf(s, 2, false), given(s, 3), mean); }, true));
  if (mean) {
    specs.back().tolerance = [](ScalarType t, const Sample& s) {
      return meanTolerance(t, s, reductionLength(s.args[0].toTensor(), dimsOf(s)));
    };
  }
}

// --- amax, amin, argmax, argmin

template <bool Max>
double extremumOf(const std::vector<double>& v) {
  return v[extremumAt<Max>(v)];
}

template <bool Max>
double extremumIndexOf(const std::vector<double>& v) {
  return static_cast<double>(extremumAt<Max>(v));
}

// argmax / argmin (self, int? dim, keepdim): dim=None indexes the flattened
// tensor. Integral inputs draw from few values, so rows hold ties.
std::vector<Sample> argSamples(const std::string& op) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, std::optional<int64_t> dim, bool keepdim,
                  std::string raise_reason = "") {
    out.push_back(
        sample(std::move(name), {IValue(std::move(self)), IValue(dim), IValue(keepdim)}, std::move(raise_reason)));
  };
  struct Case {
    std::optional<int64_t> dim;
    bool keepdim;
    const char* name;
  };
  const std::vector<Case> cases = {{std::nullopt, false, "flattened"},
                                   {std::nullopt, true, "flattened keepdim"},
                                   {1, false, "dim 1"},
                                   {-1, true, "dim -1 keepdim"},
                                   {0, false, "dim 0"}};
  for (ScalarType dt : kNumericTypes) {
    for (const Case& c : cases) {
      push(std::string("[2,3,4] ") + c.name + dtypeSuffix(dt), randomTensor(rng, {2, 3, 4}, dt), c.dim, c.keepdim);
    }
    for (Input& in : viewInputs(rng, dt)) {
      push(in.name + dimText(in.dim) + dtypeSuffix(dt), std::move(in.self), in.dim, false);
    }
  }
  out.push_back(sample("[2,3,4] dim and keepdim omitted", {randomTensor(rng, {2, 3, 4}, ScalarType::Float32)}));
  push("0-d, dim 0", randomTensor(rng, {}, ScalarType::Float32), 0, true);
  push("NaN, inf and ties float32 [3,4], dim 1", specialValues(), 1, false);
  push("NaN, inf and ties float32 [3,4], dim 0 keepdim", specialValues(), 0, true);
  push("NaN, inf and ties float32 [3,4], flattened", specialValues(), std::nullopt, false);
  push("empty [0,3], dim 1", randomTensor(rng, {0, 3}, ScalarType::Float32), 1, false);
  push("empty [0,3], dim 0", randomTensor(rng, {0, 3}, ScalarType::Float32), 0, false,
       "reducing zero elements has no index");
  push("empty [0,3], flattened", randomTensor(rng, {0, 3}, ScalarType::Float32), std::nullopt, false,
       "an empty tensor has no index");
  push("large [1100,1000] float32, dim 1", large(rng), 1, false);
  // The extremes occur twice, far into the tensor, so that a split of the
  // flattened reduction must keep the first of them.
  std::vector<double> ties = valuesOf(randomTensor(rng, {1100, 1000}, ScalarType::Int32, {0, 0, -5, 4}));
  ties[650000] = ties[1000000] = -6;
  ties[700001] = ties[900000] = 5;
  push("large [1100,1000] int32 with tied extremes, flattened", hostTensor(ties, {1100, 1000}, ScalarType::Int32),
       std::nullopt, false);
  push("dim 2 of a 2-d tensor", randomTensor(rng, {3, 4}, ScalarType::Float32), 2, false, "dimension out of range");
  return out;
}

template <bool Max>
void addExtremum(std::vector<OpSpec>& specs) {
  const std::string name = Max ? "max" : "min";
  const DimListOp o{"bp::a" + name, kAllTypes, false, true, {}, false};
  specs.push_back(dimListSpec(
      o, o.op + ".out", nullptr,
      [](const Sample& s) {
        const Tensor& self = s.args[0].toTensor();
        return folded(groupsOf(self, dimsOf(s), flagOf(s, 2, false)), self.dtype(), extremumOf<Max>);
      },
      false));

  const std::string arg = "bp::arg" + name;
  specs.push_back(reductionSpec(
      arg, arg + ".out", [arg] { return argSamples(arg); },
      [](const Sample& s) {
        const IValue* dim = given(s, 1);
        const std::vector<int64_t> dims = dim ? std::vector<int64_t>{dim->toInt()} : std::vector<int64_t>{};
        return folded(groupsOf(s.args[0].toTensor(), dims, flagOf(s, 2, false)), ScalarType::Int64,
                      extremumIndexOf<Max>);
      },
      false));

  // max(self): amax's value over every dim; an empty input raises (no
  // identity).
  const std::string whole = "bp::" + name;
  specs.push_back(reductionSpec(
      whole, "",
      [whole] {
        std::vector<Sample> out = wholeSamples(whole, kAllTypes);
        for (Sample& x : out) {
          if (x.args[0].toTensor().numel() != 0) continue;
          x.must_raise = true;
          x.raise_reason = "an empty tensor has no maximum";
        }
        return out;
      },
      [](const Sample& s) {
        const Tensor& self = s.args[0].toTensor();
        return folded(groupsOf(self, {}, false), self.dtype(), extremumOf<Max>);
      },
      false));

  // max.dim(self, dim, keepdim): argmax's samples that name a dim, and a
  // bool one (which PyTorch's max.dim takes, unlike argmax); the values
  // and the index of the first extremum (NaN first).
  specs.push_back(reductionSpec(
      whole + ".dim", "",
      [arg] {
        std::vector<Sample> out;
        for (Sample& x : argSamples(arg)) {
          if (x.args.size() < 2 || x.args[1].isNone()) continue;
          out.push_back(std::move(x));
        }
        Rng rng(seedFor(arg + " bool"));
        out.push_back(sample("bool [3,5], dim 1", {randomTensor(rng, {3, 5}, ScalarType::Bool), int64_t{1}, false}));
        return out;
      },
      [](const Sample& s) {
        const Tensor& self = s.args[0].toTensor();
        const Groups g = groupsOf(self, {s.args[1].toInt()}, flagOf(s, 2, false));
        std::vector<Expected> out = folded(g, self.dtype(), extremumOf<Max>);
        out.push_back(folded(g, ScalarType::Int64, extremumIndexOf<Max>)[0]);
        return out;
      },
      false));
}

// --- var, std

// Integral and bool inputs must raise (PyTorch's var and std take floating
// inputs only); `spell` makes the call's arguments from self.
std::vector<Sample> integralSamples(const std::string& op, const std::function<std::vector<IValue>(Tensor)>& spell) {
  Rng rng(seedFor(op + " integral"));
  std::vector<Sample> out;
  for (ScalarType dt : {ScalarType::Int32, ScalarType::Int64, ScalarType::Bool}) {
    out.push_back(sample("[3,4]" + dtypeSuffix(dt), spell(randomTensor(rng, {3, 4}, dt)),
                         "var and std take floating inputs only"));
  }
  return out;
}

// var, var.dim and var.correction (with var.correction_out), or the std
// ones.
void addVar(std::vector<OpSpec>& specs, bool root) {
  const std::string name = root ? "bp::std" : "bp::var";

  specs.push_back(reductionSpec(
      name, "",
      [name] {
        Rng rng(seedFor(name + " unbiased"));
        std::vector<Sample> s = wholeSamples(name, kFloatTypes);
        s.push_back(sample("[2,3,4] unbiased=false", {randomTensor(rng, {2, 3, 4}, ScalarType::Float32), false}));
        s.push_back(sample("[2,3,4] unbiased=true", {randomTensor(rng, {2, 3, 4}, ScalarType::Float64), true}));
        s.push_back(sample("0-d unbiased=false", {randomTensor(rng, {}, ScalarType::Float32), false}));
        return concat(std::move(s), integralSamples(name, [](Tensor t) { return std::vector<IValue>{t}; }));
      },
      [root](const Sample& s) { return varReference(s, {}, false, unbiasedCorrection(s, 1), root); }, true));

  const DimListOp dim{name + ".dim", kFloatTypes, true, false, {IValue(true)}, true};
  specs.push_back(dimListSpec(
      dim, "",
      [dim] {
        Rng rng(seedFor(dim.op + " unbiased"));
        auto call = [&](const char* what, std::vector<int64_t> dims, bool keepdim) {
          return sample(std::string("[2,3,4] ") + what + ", unbiased=false",
                        {randomTensor(rng, {2, 3, 4}, ScalarType::Float32), dims, false, keepdim});
        };
        std::vector<Sample> s = {call("dim 1", {1}, false), call("dims (0, 2) keepdim", {0, 2}, true),
                                 call("dims (0, 1, 2)", {0, 1, 2}, false)};
        s.push_back(sample("one element [1], dim 0, unbiased=false",
                           {randomTensor(rng, {1}, ScalarType::Float32), std::vector<int64_t>{0}, false, false}));
        return concat(std::move(s), integralSamples(dim.op, [](Tensor t) {
                        return std::vector<IValue>{t, std::vector<int64_t>{1}, true, false};
                      }));
      },
      [root](const Sample& s) {
        return varReference(s, dimsOf(s), flagOf(s, 3, false), unbiasedCorrection(s, 2), root);
      },
      true));

  // correction=None (1) in the shared samples; 0, 2 and a fraction here.
  const DimListOp corr{name + ".correction", kFloatTypes, true, true, {IValue()}, true};
  specs.push_back(dimListSpec(
      corr, name + ".correction_out",
      [corr] {
        Rng rng(seedFor(corr.op + " correction"));
        auto call = [&](std::string what, std::vector<int64_t> sizes, std::vector<int64_t> dims, Scalar c,
                        bool keepdim) {
          return sample(what, {randomTensor(rng, sizes, ScalarType::Float32), dims, c, keepdim});
        };
        std::vector<Sample> s = {
            call("[2,3,4] dim 1, correction 0", {2, 3, 4}, {1}, Scalar(int64_t{0}), false),
            call("[2,3,4] dims (0, 2) keepdim, correction 2", {2, 3, 4}, {0, 2}, Scalar(int64_t{2}), true),
            call("[2,3,4] dim -1, correction 0.5", {2, 3, 4}, {-1}, Scalar(0.5), false),
            // N - correction = 0: a positive sum of squares over 0 is inf.
            call("[2,3,4] dim 0 of size 2, correction 2", {2, 3, 4}, {0}, Scalar(int64_t{2}), false),
            call("one element [1], dim 0, correction 0", {1}, {0}, Scalar(int64_t{0}), false)};
        return concat(std::move(s), integralSamples(corr.op, [](Tensor t) {
                        return std::vector<IValue>{t, IValue(), IValue(), false};
                      }));
      },
      [root](const Sample& s) {
        const IValue* c = given(s, 2);
        return varReference(s, dimsOf(s), flagOf(s, 3, false), c ? c->toScalar().toDouble() : 1.0, root);
      },
      true));
}

}  // namespace

// --- norm(self, p=2, dim=None, keepdim=False): a composite over abs, pow,
// sqrt, sum, amax and amin.

double pNorm(const std::vector<double>& v, double p) {
  if (std::isinf(p)) {
    double r = p > 0 ? 0 : kInf;
    for (double x : v) r = std::isnan(x) ? x : (p > 0 ? std::max(r, std::fabs(x)) : std::min(r, std::fabs(x)));
    return r;
  }
  std::vector<double> terms;
  for (double x : v) terms.push_back(p == 0 ? (x != 0 ? 1.0 : 0.0) : std::pow(std::fabs(x), p));
  const double s = sumOf(terms);
  return p == 0 || p == 1 ? s : std::pow(s, 1.0 / p);
}

std::vector<Expected> normReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const double p = s.args.size() > 1 ? s.args[1].toDouble() : 2.0;
  const bool keepdim = flagOf(s, 3, false);
  const IValue* dim = given(s, 2);
  const std::vector<int64_t> dims = dim ? dim->toIntList() : std::vector<int64_t>{};
  return folded(groupsOf(self, dims, keepdim && self.dim() != 0), self.dtype(),
                [&](const std::vector<double>& m) { return pNorm(m, p); });
}

std::vector<Sample> normSamples() {
  Rng rng(seedFor("bp::norm"));
  std::vector<Sample> out;
  for (ScalarType dt : kFloatTypes) {
    for (double p : {2.0, 1.0, kInf, -kInf, 0.0, 3.0}) {
      const std::string name = "p=" + std::to_string(p) + dtypeSuffix(dt);
      out.push_back(sample("[3,4] every dim, " + name, {IValue(randomTensor(rng, {3, 4}, dt)), IValue(p)}));
      out.push_back(sample("[2,3,4] dim 1 keepdim, " + name, {IValue(randomTensor(rng, {2, 3, 4}, dt)), IValue(p),
                                                              IValue(std::vector<int64_t>{1}), IValue(true)}));
    }
  }
  const ScalarType f = ScalarType::Float32;
  out.push_back(sample("dims [0,2]",
                       {IValue(randomTensor(rng, {2, 3, 4}, f)), IValue(2.0), IValue(std::vector<int64_t>{0, -1})}));
  out.push_back(sample("0-d", {IValue(randomTensor(rng, {}, f)), IValue(2.0)}));
  out.push_back(
      sample("transposed", {IValue(randomTensor(rng, {3, 4}, f).t()), IValue(1.0), IValue(std::vector<int64_t>{0})}));
  out.push_back(sample("large [1100,1000]", {IValue(large(rng)), IValue(2.0)}));
  out.push_back(sample("int64 input", {IValue(hostTensor({1, 2}, {2}, ScalarType::Int64)), IValue(2.0)},
                       "norm needs a floating dtype"));
  return out;
}

void addReductionSpecs(std::vector<OpSpec>& specs) {
  addSum(specs, false);
  addSum(specs, true);
  addExtremum<true>(specs);
  addExtremum<false>(specs);
  addVar(specs, false);
  addVar(specs, true);
  specs.push_back(reductionSpec("bp::norm", "", normSamples, normReference, true));
}

}  // namespace backplane::conformance
