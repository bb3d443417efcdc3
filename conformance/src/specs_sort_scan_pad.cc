// Conformance specs (Note [Conformance specs]) of prod, all/any, cumsum,
// sort, topk, flip and the pads (pad, constant_pad_nd,
// reflection_pad{1,2,3}d, replication_pad{1,2,3}d), with PyTorch's
// semantics as the host's Note [Products, logical reductions, scans and
// sorts] and Note [Flip and pad] state them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"

namespace backplane::conformance {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Sample sample(std::string name, std::vector<IValue> args, std::string raise_reason = "") {
  return raise_reason.empty() ? makeSample(std::move(name), std::move(args))
                              : raising(std::move(name), std::move(args), std::move(raise_reason));
}

const IValue* given(const Sample& s, size_t i) {
  return i < s.args.size() && !s.args[i].isNone() ? &s.args[i] : nullptr;
}

int64_t wrapDim(int64_t d, int64_t nd) { return d < 0 ? d + std::max<int64_t>(nd, 1) : d; }

// Row-major strides of `sizes`.
std::vector<int64_t> stridesOf(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> st(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) st[d - 1] = st[d] * sizes[d];
  return st;
}

// The lines of a tensor of `sizes` along `dim` (a 0-d tensor: one line of
// one element), as lists of row-major positions.
std::vector<std::vector<int64_t>> linesOf(const std::vector<int64_t>& sizes, int64_t dim) {
  const int64_t n = numelOf(sizes);
  if (sizes.empty()) return {{0}};
  const std::vector<int64_t> st = stridesOf(sizes);
  const int64_t len = sizes[static_cast<size_t>(dim)], step = st[static_cast<size_t>(dim)];
  std::vector<std::vector<int64_t>> lines;
  if (len == 0) return lines;
  for (int64_t i = 0; i < n; ++i) {
    if ((i / step) % len != 0) continue;  // not the first element of its line
    std::vector<int64_t> line;
    for (int64_t j = 0; j < len; ++j) line.push_back(i + j * step);
    lines.push_back(std::move(line));
  }
  return lines;
}

// --- prod, all, any: reductions over one dim or every dim

// Per result element, the input values it combines.
struct Groups {
  std::vector<int64_t> sizes;
  std::vector<std::vector<double>> members;
};

// Reduces `dims` (every dim when `all`; none when empty and not `all`).
Groups groupsOf(const Tensor& t, const std::vector<int64_t>& dims, bool all, bool keepdim) {
  const std::vector<int64_t> sizes = sizesOf(t);
  const int64_t nd = static_cast<int64_t>(sizes.size());
  std::vector<bool> reduced(sizes.size(), all);
  for (int64_t d : dims)
    if (nd > 0) reduced[static_cast<size_t>(wrapDim(d, nd))] = true;
  Groups g;
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[static_cast<size_t>(d)]) {
      kept.push_back(sizes[static_cast<size_t>(d)]);
      g.sizes.push_back(sizes[static_cast<size_t>(d)]);
    } else if (keepdim) {
      g.sizes.push_back(1);
    }
  }
  g.members.resize(static_cast<size_t>(numelOf(kept)));
  const std::vector<double> v = valuesOf(t);
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
    int64_t rem = i, o = 0, mult = 1;
    for (int64_t d = nd - 1; d >= 0; --d) {
      const int64_t c = rem % sizes[static_cast<size_t>(d)];
      rem /= sizes[static_cast<size_t>(d)];
      if (!reduced[static_cast<size_t>(d)]) {
        o += c * mult;
        mult *= sizes[static_cast<size_t>(d)];
      }
    }
    g.members[static_cast<size_t>(o)].push_back(v[static_cast<size_t>(i)]);
  }
  return g;
}

// The product of values converted to `dtype`: exact (wrapping) integers for
// an integral dtype, double otherwise.
double productOf(const std::vector<double>& v, ScalarType dtype) {
  if (isFloatingType(dtype)) {
    double p = 1;
    for (double x : v) p *= roundTo(dtype, x);
    return roundTo(dtype, p);
  }
  uint64_t p = 1;
  for (double x : v) p *= static_cast<uint64_t>(static_cast<int64_t>(roundTo(dtype, x)));
  return roundTo(dtype, static_cast<double>(static_cast<int64_t>(p)));
}

ScalarType prodDtype(const Tensor& self, const IValue* dtype) {
  if (dtype) return dtype->toScalarType();
  return isFloatingType(self.dtype()) ? self.dtype() : ScalarType::Int64;
}

Expected fold(const Groups& g, ScalarType dtype, const std::function<double(const std::vector<double>&)>& f) {
  Expected e;
  e.sizes = g.sizes;
  e.dtype = dtype;
  for (const std::vector<double>& m : g.members) e.values.push_back(f(m));
  return e;
}

// Samples in integers of small magnitude, so that products stay exact.
const Range kSmall{-1.5, 1.5, -3, 3};

std::vector<Sample> prodSamples(bool whole) {
  Rng rng(seedFor(whole ? "bp::prod" : "bp::prod.dim_int"));
  std::vector<Sample> out;
  auto args = [&](Tensor t, int64_t dim, bool keepdim) {
    return whole ? std::vector<IValue>{IValue(std::move(t))}
                 : std::vector<IValue>{IValue(std::move(t)), IValue(dim), IValue(keepdim)};
  };
  for (ScalarType dt : kAllTypes) {
    const std::string sx = dtypeSuffix(dt);
    out.push_back(sample("[2,3,4] dim 1" + sx, args(randomTensor(rng, {2, 3, 4}, dt, kSmall), 1, false)));
    out.push_back(sample("transposed [4,3] dim -1 keepdim" + sx,
                         args(randomTensor(rng, {3, 4}, dt, kSmall).transpose(0, 1), -1, true)));
    out.push_back(sample("0-d" + sx, args(randomTensor(rng, {}, dt, kSmall), 0, false)));
  }
  out.push_back(sample("NaN and inf float32 [2,3] dim 1",
                       args(hostTensor({1, kNaN, 2, kInf, 2, -1}, {2, 3}, ScalarType::Float32), 1, false)));
  out.push_back(sample("empty [0,3] dim 0 (the product of nothing is 1)",
                       args(randomTensor(rng, {0, 3}, ScalarType::Float32), 0, false)));
  out.push_back(sample("int64 that wraps [2] dim 0",
                       args(hostTensor({4294967296.0, 4294967297.0}, {2}, ScalarType::Int64), 0, false)));
  std::vector<IValue> with_dtype = args(randomTensor(rng, {3, 4}, ScalarType::Int32, kSmall), 1, false);
  with_dtype.emplace_back(ScalarType::Float64);
  out.push_back(sample("int32 [3,4] dim 1 with dtype=float64", std::move(with_dtype)));
  if (!whole) {
    out.push_back(sample("dim 2 of a 2-d tensor", args(randomTensor(rng, {2, 3}, ScalarType::Float32), 2, false),
                         "dimension out of range"));
  }
  return out;
}

std::vector<Expected> prodReference(const Sample& s, bool whole) {
  const Tensor& self = s.args[0].toTensor();
  const ScalarType t = prodDtype(self, given(s, whole ? 1 : 3));
  const bool keepdim = !whole && given(s, 2) && s.args[2].toBool();
  const Groups g = whole ? groupsOf(self, {}, true, false) : groupsOf(self, {s.args[1].toInt()}, false, keepdim);
  return {fold(g, t, [t](const std::vector<double>& v) { return productOf(v, t); })};
}

Tolerance productTolerance(ScalarType t, const Sample& s) {
  Tolerance tol = defaultTolerance(t);
  const double n = static_cast<double>(std::max<int64_t>(s.args[0].toTensor().numel(), 1));
  tol.rtol += machineEpsilon(t) * n;
  return tol;
}

// all / any, as (self), (self, int dim, keepdim) or (self, int[]? dim, keepdim).
enum class LogicalForm { kWhole, kDim, kDims };

std::vector<Sample> logicalSamples(const std::string& op, LogicalForm form) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  auto args = [&](Tensor t, std::optional<std::vector<int64_t>> dims, bool keepdim) {
    std::vector<IValue> a = {IValue(std::move(t))};
    if (form == LogicalForm::kWhole) return a;
    if (form == LogicalForm::kDim)
      a.emplace_back(dims ? (*dims)[0] : 0);
    else
      a.push_back(dims ? IValue(*dims) : IValue());
    a.emplace_back(keepdim);
    return a;
  };
  // Values 0 and 1 mostly, so that both all and any see both outcomes.
  const Range bits{0, 1, 0, 1};
  for (ScalarType dt : kAllTypes) {
    const std::string sx = dtypeSuffix(dt);
    out.push_back(sample("[3,4,2] dim 1" + sx, args(randomTensor(rng, {3, 4, 2}, dt, bits), {{1}}, false)));
    out.push_back(sample("sliced [3,8] step 2 dim -1 keepdim" + sx,
                         args(randomTensor(rng, {3, 8}, dt, bits).slice(1, 0, std::nullopt, 2), {{-1}}, true)));
    out.push_back(sample("0-d" + sx, args(randomTensor(rng, {}, dt, bits), {{0}}, false)));
  }
  out.push_back(sample("NaN counts as true, float32 [2,2] dim 1",
                       args(hostTensor({kNaN, 1, 0, kNaN}, {2, 2}, ScalarType::Float32), {{1}}, false)));
  out.push_back(
      sample("uint8 values 0, 2, 255 [3] dim 0", args(hostTensor({0, 2, 255}, {3}, ScalarType::UInt8), {{0}}, false)));
  out.push_back(sample("empty [0,3] dim 0", args(randomTensor(rng, {0, 3}, ScalarType::Float32), {{0}}, false)));
  if (form == LogicalForm::kDims) {
    out.push_back(sample("[2,3,4] dims (0, 2)", args(randomTensor(rng, {2, 3, 4}, ScalarType::Int32, bits),
                                                     std::vector<int64_t>{0, 2}, false)));
    out.push_back(sample("[2,3,4] dim=None (every dim)",
                         args(randomTensor(rng, {2, 3, 4}, ScalarType::Float32, bits), std::nullopt, false)));
    out.push_back(sample("[2,3] dim=[] (no dim: each element alone)",
                         args(randomTensor(rng, {2, 3}, ScalarType::Float32, bits), std::vector<int64_t>{}, false)));
  }
  if (form != LogicalForm::kWhole) {
    out.push_back(sample("dim 2 of a 2-d tensor", args(randomTensor(rng, {2, 3}, ScalarType::Float32), {{2}}, false),
                         "dimension out of range"));
  }
  return out;
}

std::vector<Expected> logicalReference(const Sample& s, LogicalForm form, bool all) {
  const Tensor& self = s.args[0].toTensor();
  const ScalarType t = self.dtype() == ScalarType::UInt8 ? ScalarType::UInt8 : ScalarType::Bool;
  Groups g;
  if (form == LogicalForm::kWhole || (form == LogicalForm::kDims && !given(s, 1))) {
    g = groupsOf(self, {}, true, false);
  } else {
    const bool keepdim = s.args[2].toBool();
    const std::vector<int64_t> dims =
        form == LogicalForm::kDim ? std::vector<int64_t>{s.args[1].toInt()} : s.args[1].toIntList();
    g = groupsOf(self, dims, false, keepdim);
  }
  return {fold(g, t, [all](const std::vector<double>& v) {
    const bool r = all ? std::all_of(v.begin(), v.end(), [](double x) { return x != 0; })
                       : std::any_of(v.begin(), v.end(), [](double x) { return x != 0; });
    return r ? 1.0 : 0.0;
  })};
}

// --- cumsum (self, dim, dtype=None)

// cumsum's and cumprod's samples (self, dim, dtype=None): the same shapes,
// views and dtype= conversions; a product's long rows stay near 1 so that
// they neither overflow nor vanish.
std::vector<Sample> scanSamples(const std::string& op, bool product) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor t, int64_t dim, std::optional<ScalarType> dtype = std::nullopt,
                  std::string raise = "") {
    std::vector<IValue> a = {IValue(std::move(t)), IValue(dim)};
    if (dtype) a.emplace_back(*dtype);
    out.push_back(sample(std::move(name), std::move(a), std::move(raise)));
  };
  for (ScalarType dt : kAllTypes) {
    const std::string sx = dtypeSuffix(dt);
    push("[3,5] dim 1" + sx, randomTensor(rng, {3, 5}, dt), 1);
    push("[3,5] dim -2" + sx, randomTensor(rng, {3, 5}, dt), -2);
    push("transposed [4,3] dim 0" + sx, randomTensor(rng, {3, 4}, dt).transpose(0, 1), 0);
    push("0-d" + sx, randomTensor(rng, {}, dt), 0);
  }
  if (product) {
    push("zeros, NaN and inf float32 [2,4] dim 1",
         hostTensor({2, 0, kInf, 3, kNaN, 2, -kInf, 0}, {2, 4}, ScalarType::Float32), 1);
  } else {
    push("NaN and inf float32 [2,3] dim 1", hostTensor({1, kNaN, 2, kInf, 1, -kInf}, {2, 3}, ScalarType::Float32), 1);
  }
  push("empty [0,3] dim 0", randomTensor(rng, {0, 3}, ScalarType::Float32), 0);
  push(product ? "long rows near 1 [4,3000] float32 dim 1" : "long rows [4,3000] float32 dim 1",
       randomTensor(rng, {4, 3000}, ScalarType::Float32, product ? Range{0.999, 1.001} : Range{}), 1);
  push("int32 [3,4] with dtype=float64", randomTensor(rng, {3, 4}, ScalarType::Int32), 1, ScalarType::Float64);
  push("float32 [3,4] with dtype=int32 (truncates each element)", randomTensor(rng, {3, 4}, ScalarType::Float32), 1,
       ScalarType::Int32);
  push("dim 2 of a 2-d tensor", randomTensor(rng, {2, 3}, ScalarType::Float32), 2, std::nullopt,
       "dimension out of range");
  return out;
}

// The running sum (or product) of each line along dim, in the dtype sum's
// rule gives (each element converted first).
std::vector<Expected> scanReference(const Sample& s, bool product) {
  const Tensor& self = s.args[0].toTensor();
  const ScalarType t = prodDtype(self, given(s, 2));
  const std::vector<int64_t> sizes = sizesOf(self);
  const std::vector<double> v = valuesOf(self);
  Expected e;
  e.sizes = sizes;
  e.dtype = t;
  e.values.assign(v.size(), 0);
  for (const std::vector<int64_t>& line : linesOf(sizes, wrapDim(s.args[1].toInt(), self.dim()))) {
    double acc = product ? 1 : 0;
    for (int64_t i : line) {
      const double x = roundTo(t, v[static_cast<size_t>(i)]);
      acc = product ? acc * x : acc + x;
      e.values[static_cast<size_t>(i)] = roundTo(t, acc);
    }
  }
  return {e};
}

Tolerance cumsumTolerance(ScalarType t, const Sample& s) {
  Tolerance tol = defaultTolerance(t);
  const Tensor& self = s.args[0].toTensor();
  const int64_t d = wrapDim(s.args[1].toInt(), self.dim());
  const double n = self.dim() == 0 ? 1 : static_cast<double>(std::max<int64_t>(self.size(d), 1));
  tol.atol += machineEpsilon(t) * n * 4;
  tol.rtol += machineEpsilon(t) * std::sqrt(n);
  return tol;
}

// --- sort, topk

// Whether a sorts before b (NaN the largest); ties keep index order.
bool sortsBefore(double a, double b, bool descending) {
  const bool an = std::isnan(a), bn = std::isnan(b);
  if (an || bn) return descending ? an && !bn : bn && !an;
  return descending ? a > b : a < b;
}

// Values and indices of the first k of each line sorted along dim (k < 0: all).
std::vector<Expected> sortedReference(const Tensor& self, int64_t dim, bool descending, int64_t k) {
  const std::vector<int64_t> sizes = sizesOf(self);
  const int64_t d = wrapDim(dim, self.dim());
  const std::vector<double> v = valuesOf(self);
  std::vector<int64_t> out_sizes = sizes;
  const int64_t len = sizes.empty() ? 1 : sizes[static_cast<size_t>(d)];
  if (k < 0) k = len;
  if (!sizes.empty()) out_sizes[static_cast<size_t>(d)] = k;
  Expected values{out_sizes, self.dtype(), std::vector<double>(static_cast<size_t>(numelOf(out_sizes)))};
  Expected indices{out_sizes, ScalarType::Int64, std::vector<double>(values.values.size())};
  const std::vector<std::vector<int64_t>> in_lines = linesOf(sizes, d);
  const std::vector<std::vector<int64_t>> out_lines = linesOf(out_sizes, d);
  for (size_t l = 0; l < out_lines.size() && l < in_lines.size(); ++l) {
    std::vector<int64_t> order(static_cast<size_t>(len));
    std::iota(order.begin(), order.end(), int64_t{0});
    const std::vector<int64_t>& line = in_lines[l];
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return sortsBefore(v[static_cast<size_t>(line[static_cast<size_t>(a)])],
                         v[static_cast<size_t>(line[static_cast<size_t>(b)])], descending);
    });
    for (int64_t j = 0; j < k; ++j) {
      const size_t at = static_cast<size_t>(out_lines[l][static_cast<size_t>(j)]);
      values.values[at] = v[static_cast<size_t>(line[static_cast<size_t>(order[static_cast<size_t>(j)])])];
      indices.values[at] = static_cast<double>(order[static_cast<size_t>(j)]);
    }
  }
  return {values, indices};
}

// sort (self, dim, descending) or sort.stable (self, stable, dim, descending).
std::vector<Sample> sortSamples(bool stable) {
  Rng rng(seedFor(stable ? "bp::sort.stable" : "bp::sort"));
  std::vector<Sample> out;
  auto args = [&](Tensor t, int64_t dim, bool descending) {
    return stable ? std::vector<IValue>{IValue(std::move(t)), IValue(true), IValue(dim), IValue(descending)}
                  : std::vector<IValue>{IValue(std::move(t)), IValue(dim), IValue(descending)};
  };
  for (ScalarType dt : kAllTypes) {
    const std::string sx = dtypeSuffix(dt);
    out.push_back(sample("[3,6] dim -1 (ties in integers)" + sx, args(randomTensor(rng, {3, 6}, dt), -1, false)));
    out.push_back(sample("[3,6] dim 0 descending" + sx, args(randomTensor(rng, {3, 6}, dt), 0, true)));
    out.push_back(sample("transposed [5,3] dim 0" + sx, args(randomTensor(rng, {3, 5}, dt).transpose(0, 1), 0, false)));
    out.push_back(sample("0-d" + sx, args(randomTensor(rng, {}, dt), 0, false)));
  }
  const Tensor special = hostTensor({2, kNaN, -kInf, 1, kNaN, kInf, 1, -0.5}, {8}, ScalarType::Float32);
  out.push_back(sample("NaN, inf and ties float32 ascending", args(special, 0, false)));
  out.push_back(sample("NaN, inf and ties float32 descending", args(special, 0, true)));
  out.push_back(sample("empty [0,3] dim 0", args(randomTensor(rng, {0, 3}, ScalarType::Float32), 0, false)));
  out.push_back(sample("long rows [2,1000] float32", args(randomTensor(rng, {2, 1000}, ScalarType::Float32), 1, true)));
  out.push_back(sample("dim 2 of a 2-d tensor", args(randomTensor(rng, {2, 3}, ScalarType::Float32), 2, false),
                       "dimension out of range"));
  return out;
}

std::vector<Expected> sortReference(const Sample& s, bool stable) {
  const size_t at = stable ? 2 : 1;
  const int64_t dim = given(s, at) ? s.args[at].toInt() : -1;
  const bool descending = given(s, at + 1) && s.args[at + 1].toBool();
  return sortedReference(s.args[0].toTensor(), dim, descending, -1);
}

// topk (self, k, dim, largest, sorted).
std::vector<Sample> topkSamples() {
  Rng rng(seedFor("bp::topk"));
  std::vector<Sample> out;
  auto args = [&](Tensor t, int64_t k, int64_t dim, bool largest) {
    return std::vector<IValue>{IValue(std::move(t)), IValue(k), IValue(dim), IValue(largest), IValue(true)};
  };
  for (ScalarType dt : kNumericTypes) {
    const std::string sx = dtypeSuffix(dt);
    out.push_back(sample("[3,6] k 2 dim -1 largest" + sx, args(randomTensor(rng, {3, 6}, dt), 2, -1, true)));
    out.push_back(sample("[4,3] k 3 dim 0 smallest" + sx, args(randomTensor(rng, {4, 3}, dt), 3, 0, false)));
    out.push_back(sample("transposed [5,3] k 5 (k = size) dim 0" + sx,
                         args(randomTensor(rng, {3, 5}, dt).transpose(0, 1), 5, 0, true)));
    out.push_back(sample("[2,4] k 0" + sx, args(randomTensor(rng, {2, 4}, dt), 0, 1, true)));
  }
  out.push_back(sample("0-d k 1", args(randomTensor(rng, {}, ScalarType::Float32), 1, 0, true)));
  const Tensor special = hostTensor({2, kNaN, -kInf, 1, kNaN, kInf, 1, -0.5}, {8}, ScalarType::Float32);
  out.push_back(sample("NaN is the largest, k 3", args(special, 3, 0, true)));
  out.push_back(sample("NaN is the largest, smallest k 3", args(special, 3, 0, false)));
  out.push_back(sample("long rows [2,2000] k 5", args(randomTensor(rng, {2, 2000}, ScalarType::Float32), 5, 1, true)));
  out.push_back(sample("k 5 of a dim of size 4", args(randomTensor(rng, {2, 4}, ScalarType::Float32), 5, 1, true),
                       "k larger than the dim"));
  out.push_back(sample("k -1", args(randomTensor(rng, {2, 4}, ScalarType::Float32), -1, 1, true), "negative k"));
  out.push_back(
      sample("bool input", args(randomTensor(rng, {2, 4}, ScalarType::Bool), 1, 1, true), "topk takes no bool input"));
  return out;
}

std::vector<Expected> topkReference(const Sample& s) {
  return sortedReference(s.args[0].toTensor(), s.args[2].toInt(), s.args[3].toBool(), s.args[1].toInt());
}

// --- flip and pads: each output element reads one input element (or the value)

// out[p] = self[src(p)] where src maps an output coordinate vector to the
// input's, or to nothing (the padding value).
Expected mappedReference(const Tensor& self, const std::vector<int64_t>& out_sizes, double fill,
                         const std::function<bool(std::vector<int64_t>&)>& src) {
  const std::vector<int64_t> in_sizes = sizesOf(self);
  const std::vector<int64_t> in_strides = stridesOf(in_sizes);
  const std::vector<double> v = valuesOf(self);
  Expected e{out_sizes, self.dtype(), {}};
  const int64_t n = numelOf(out_sizes);
  std::vector<int64_t> c(out_sizes.size());
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i;
    for (size_t d = out_sizes.size(); d-- > 0;) {
      c[d] = rem % out_sizes[d];
      rem /= out_sizes[d];
    }
    if (!src(c)) {
      e.values.push_back(roundTo(self.dtype(), fill));
      continue;
    }
    int64_t at = 0;
    for (size_t d = 0; d < c.size(); ++d) at += c[d] * in_strides[d];
    e.values.push_back(v[static_cast<size_t>(at)]);
  }
  return e;
}

std::vector<Expected> flipReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const std::vector<int64_t> sizes = sizesOf(self);
  std::vector<bool> flipped(sizes.size(), false);
  for (int64_t d : s.args[1].toIntList())
    if (!sizes.empty()) flipped[static_cast<size_t>(wrapDim(d, self.dim()))] = true;
  return {mappedReference(self, sizes, 0, [&](std::vector<int64_t>& c) {
    for (size_t d = 0; d < c.size(); ++d)
      if (flipped[d]) c[d] = sizes[d] - 1 - c[d];
    return true;
  })};
}

std::vector<Sample> flipSamples() {
  Rng rng(seedFor("bp::flip"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor t, std::vector<int64_t> dims, std::string raise = "") {
    out.push_back(sample(std::move(name), {IValue(std::move(t)), IValue(std::move(dims))}, std::move(raise)));
  };
  for (ScalarType dt : kAllTypes) {
    const std::string sx = dtypeSuffix(dt);
    push("[2,3,4] dims (0, 2)" + sx, randomTensor(rng, {2, 3, 4}, dt), {0, 2});
    push("[3,4] dim -1" + sx, randomTensor(rng, {3, 4}, dt), {-1});
  }
  push("transposed [4,3] dim 0", randomTensor(rng, {3, 4}, ScalarType::Float32).transpose(0, 1), {0});
  push("sliced [3,8] step 2 dims (0, 1)", randomTensor(rng, {3, 8}, ScalarType::Float32).slice(1, 0, std::nullopt, 2),
       {0, 1});
  push("expanded [1,4] to [3,4] dims (0, 1)", randomTensor(rng, {1, 4}, ScalarType::Int32).expand({3, 4}), {0, 1});
  push("no dims", randomTensor(rng, {2, 3}, ScalarType::Float32), {});
  push("0-d dim 0", randomTensor(rng, {}, ScalarType::Float32), {0});
  push("empty [0,3] dim 0", randomTensor(rng, {0, 3}, ScalarType::Float32), {0});
  push("dims (0, -2) name dim 0 twice", randomTensor(rng, {2, 3}, ScalarType::Float32), {0, -2},
       "a dimension repeated in dims");
  push("dim 2 of a 2-d tensor", randomTensor(rng, {2, 3}, ScalarType::Float32), {2}, "dimension out of range");
  return out;
}

enum class PadMode { kConstant, kReflect, kReplicate };

// The input coordinate of output coordinate c of a dim padded by `before`;
// false: the padding value.
bool padCoordinate(PadMode mode, int64_t& c, int64_t before, int64_t size) {
  int64_t u = c - before;
  switch (mode) {
    case PadMode::kConstant:
      if (u < 0 || u >= size) return false;
      break;
    case PadMode::kReflect:
      if (u < 0) u = -u;
      if (u >= size) u = 2 * (size - 1) - u;
      break;
    case PadMode::kReplicate: u = std::clamp<int64_t>(u, 0, size - 1); break;
  }
  c = u;
  return true;
}

Expected padReference(const Tensor& self, const std::vector<int64_t>& pad, PadMode mode, double value) {
  std::vector<int64_t> sizes = sizesOf(self);
  const std::vector<int64_t> in_sizes = sizes;
  const size_t nd = sizes.size();
  std::vector<int64_t> before(nd, 0);
  std::vector<bool> padded(nd, false);
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const size_t d = nd - 1 - i;
    before[d] = pad[2 * i];
    padded[d] = true;
    sizes[d] += pad[2 * i] + pad[2 * i + 1];
  }
  return mappedReference(self, sizes, value, [&](std::vector<int64_t>& c) {
    bool inside = true;
    for (size_t d = 0; d < nd; ++d)
      if (padded[d]) inside = padCoordinate(mode, c[d], before[d], in_sizes[d]) && inside;
    return inside;
  });
}

// pad (self, pad, mode, value).
std::vector<Sample> padSamples() {
  Rng rng(seedFor("bp::pad"));
  std::vector<Sample> out;
  const ScalarType f = ScalarType::Float32;
  auto push = [&](std::string name, Tensor t, std::vector<int64_t> pad, const char* mode, std::optional<double> value,
                  std::string raise = "") {
    out.push_back(sample(
        std::move(name),
        {IValue(std::move(t)), IValue(std::move(pad)), IValue(std::string(mode)), value ? IValue(*value) : IValue()},
        std::move(raise)));
  };
  for (ScalarType dt : kNumericTypes) {
    const std::string sx = dtypeSuffix(dt);
    push("constant [2,3] (1, 2) value 1" + sx, randomTensor(rng, {2, 3}, dt), {1, 2}, "constant", 1.0);
    push("reflect [1,2,5] (2, 3)" + sx, randomTensor(rng, {1, 2, 5}, dt), {2, 3}, "reflect", std::nullopt);
    push("replicate [2,3,4] (1, 2, 2, 0)" + sx, randomTensor(rng, {2, 3, 4}, dt), {1, 2, 2, 0}, "replicate",
         std::nullopt);
  }
  push("constant bool [2,3] (1, 1)", randomTensor(rng, {2, 3}, ScalarType::Bool), {1, 1}, "constant", std::nullopt);
  push("constant negative pads crop [3,5] (-1, 2, 0, -2)", randomTensor(rng, {3, 5}, f), {-1, 2, 0, -2}, "constant",
       std::nullopt);
  push("constant every dim of [2,3] (1, 0, 0, 1)", randomTensor(rng, {2, 3}, f), {1, 0, 0, 1}, "constant", -2.5);
  push("constant 0-d, no pads", randomTensor(rng, {}, f), {}, "constant", std::nullopt);
  push("constant empty [0,3] (1, 1)", randomTensor(rng, {0, 3}, f), {1, 1}, "constant", 3.0);
  push("reflect 2 dims [1,3,4] (3, 3, 2, 1) transposed", randomTensor(rng, {1, 4, 3}, f).transpose(1, 2), {3, 3, 2, 1},
       "reflect", std::nullopt);
  push("reflect 3 dims [1,2,3,3] (1, 2, 2, 1, 1, 0)", randomTensor(rng, {1, 2, 3, 3}, f), {1, 2, 2, 1, 1, 0}, "reflect",
       std::nullopt);
  push("replicate 3 dims [2,2,2,2,2] (1, 1, 0, 2, 3, 0)", randomTensor(rng, {2, 2, 2, 2, 2}, f), {1, 1, 0, 2, 3, 0},
       "replicate", std::nullopt);
  push("replicate sliced [2,6] step 2 (4, 4)", randomTensor(rng, {2, 6}, f).slice(1, 0, std::nullopt, 2), {4, 4},
       "replicate", std::nullopt);
  push("reflect value 0 is accepted", randomTensor(rng, {1, 4}, f), {1, 1}, "reflect", 0.0);
  push("reflect pad 3 of a dim of size 3", randomTensor(rng, {1, 3}, f), {3, 0}, "reflect", std::nullopt,
       "a reflection pad as large as its dim");
  push("reflect 1 pad pair of a 1-d input", randomTensor(rng, {4}, f), {1, 1}, "reflect", std::nullopt,
       "reflect pads a 2-3d input by one pair");
  push("replicate with value 1", randomTensor(rng, {1, 4}, f), {1, 1}, "replicate", 1.0,
       "a value for a non-constant mode");
  push("circular mode", randomTensor(rng, {1, 4}, f), {1, 1}, "circular", std::nullopt, "an unsupported mode");
  push("odd pad length", randomTensor(rng, {2, 4}, f), {1, 1, 1}, "constant", std::nullopt, "an odd pad list");
  push("pad list too long", randomTensor(rng, {4}, f), {1, 1, 1, 1}, "constant", std::nullopt,
       "more pad pairs than dims");
  push("crop below zero", randomTensor(rng, {2, 3}, f), {-2, -2}, "constant", std::nullopt, "a negative output size");
  push("value 300 in int8", randomTensor(rng, {2, 3}, ScalarType::Int8), {1, 1}, "constant", 300.0,
       "a value that does not fit the dtype");
  push("reflect bool", randomTensor(rng, {1, 4}, ScalarType::Bool), {1, 1}, "reflect", std::nullopt,
       "reflect takes no bool input");
  return out;
}

std::vector<Expected> padFunctionalReference(const Sample& s) {
  const std::string mode = s.args[2].toString();
  const PadMode m = mode == "reflect"     ? PadMode::kReflect
                    : mode == "replicate" ? PadMode::kReplicate
                                          : PadMode::kConstant;
  const IValue* value = given(s, 3);
  return {padReference(s.args[0].toTensor(), s.args[1].toIntList(), m, value ? value->toDouble() : 0)};
}

// constant_pad_nd (self, pad, value).
std::vector<Sample> constantPadSamples() {
  Rng rng(seedFor("bp::constant_pad_nd"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor t, std::vector<int64_t> pad, Scalar value, std::string raise = "") {
    out.push_back(
        sample(std::move(name), {IValue(std::move(t)), IValue(std::move(pad)), IValue(value)}, std::move(raise)));
  };
  for (ScalarType dt : kAllTypes) {
    push("[2,3] (1, 2, 0, 1) value 1" + dtypeSuffix(dt), randomTensor(rng, {2, 3}, dt), {1, 2, 0, 1}, Scalar(1));
  }
  push("int32 [3] (2, 2) value 7", randomTensor(rng, {3}, ScalarType::Int32), {2, 2}, Scalar(7));
  push("float16 [2,2] (1, 1) value -inf", randomTensor(rng, {2, 2}, ScalarType::Float16), {1, 1}, Scalar(-kInf));
  push("negative pads crop [4,4] (-1, -1, -2, 1)", randomTensor(rng, {4, 4}, ScalarType::Float32), {-1, -1, -2, 1},
       Scalar(0));
  push("uint8 value 256", randomTensor(rng, {2}, ScalarType::UInt8), {1, 1}, Scalar(256),
       "a value that does not fit the dtype");
  return out;
}

std::vector<Expected> constantPadReference(const Sample& s) {
  const IValue* value = given(s, 2);
  return {padReference(s.args[0].toTensor(), s.args[1].toIntList(), PadMode::kConstant,
                       value ? value->toScalar().toDouble() : 0)};
}

// reflection_pad{N}d / replication_pad{N}d (self, padding).
std::vector<Sample> edgePadSamples(const std::string& op, int n, bool reflect) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor t, std::vector<int64_t> pad, std::string raise = "") {
    out.push_back(sample(std::move(name), {IValue(std::move(t)), IValue(std::move(pad))}, std::move(raise)));
  };
  std::vector<int64_t> sample_sizes = {2};  // channels, then n dims of size 3
  for (int i = 0; i < n; ++i) sample_sizes.push_back(3);
  std::vector<int64_t> batch_sizes = sample_sizes;
  batch_sizes.insert(batch_sizes.begin(), 2);
  std::vector<int64_t> pad, big;
  for (int i = 0; i < n; ++i) {
    pad.push_back(2);
    pad.push_back(1);
    big.push_back(3);
    big.push_back(0);
  }
  for (ScalarType dt : kNumericTypes) {
    push("one sample, pads (2, 1) per dim" + dtypeSuffix(dt), randomTensor(rng, sample_sizes, dt), pad);
    push("a batch" + dtypeSuffix(dt), randomTensor(rng, batch_sizes, dt), pad);
  }
  push("empty batch",
       randomTensor(
           rng,
           [&] {
             std::vector<int64_t> s = batch_sizes;
             s[0] = 0;
             return s;
           }(),
           ScalarType::Float32),
       pad);
  push("transposed sample",
       randomTensor(rng, std::vector<int64_t>(static_cast<size_t>(n) + 1, 3), ScalarType::Float32).transpose(0, n),
       pad);
  push(reflect ? "pads of 3 on dims of size 3" : "pads of 3 on dims of size 3 (repeat the edge)",
       randomTensor(rng, sample_sizes, ScalarType::Float32), big,
       reflect ? "a reflection pad as large as its dim" : "");
  push("wrong number of pads", randomTensor(rng, sample_sizes, ScalarType::Float32), {1, 1, 1},
       "padding of the wrong length");
  push("input of too few dims", randomTensor(rng, std::vector<int64_t>(static_cast<size_t>(n), 3), ScalarType::Float32),
       pad, "an input without a channel dim");
  push("bool input", randomTensor(rng, sample_sizes, ScalarType::Bool), pad, "no bool input");
  return out;
}

std::vector<Expected> edgePadReference(const Sample& s, bool reflect) {
  return {
      padReference(s.args[0].toTensor(), s.args[1].toIntList(), reflect ? PadMode::kReflect : PadMode::kReplicate, 0)};
}

OpSpec spec(std::string op, std::string family, std::function<std::vector<Sample>()> samples, Reference reference,
            std::string out = "", std::string inplace = "") {
  OpSpec s;
  s.op = std::move(op);
  s.family = std::move(family);
  s.samples = std::move(samples);
  s.reference = std::move(reference);
  s.out = std::move(out);
  s.inplace = std::move(inplace);
  return s;
}

}  // namespace

void addSortScanPadSpecs(std::vector<OpSpec>& specs) {
  specs.push_back(spec(
      "bp::prod", "reduction", [] { return prodSamples(true); }, [](const Sample& s) { return prodReference(s, true); },
      "bp::prod.out"));
  specs.back().tolerance = productTolerance;
  specs.push_back(spec(
      "bp::prod.dim_int", "reduction", [] { return prodSamples(false); },
      [](const Sample& s) { return prodReference(s, false); }, "bp::prod.int_out"));
  specs.back().tolerance = productTolerance;
  for (bool all : {true, false}) {
    const std::string name = all ? "bp::all" : "bp::any";
    specs.push_back(spec(
        name, "reduction", [name] { return logicalSamples(name, LogicalForm::kWhole); },
        [all](const Sample& s) { return logicalReference(s, LogicalForm::kWhole, all); }, name + ".all_out"));
    specs.push_back(spec(
        name + ".dim", "reduction", [name] { return logicalSamples(name + ".dim", LogicalForm::kDim); },
        [all](const Sample& s) { return logicalReference(s, LogicalForm::kDim, all); }, name + ".out"));
    specs.push_back(spec(
        name + ".dims", "reduction", [name] { return logicalSamples(name + ".dims", LogicalForm::kDims); },
        [all](const Sample& s) { return logicalReference(s, LogicalForm::kDims, all); }, name + ".dims_out"));
  }
  specs.push_back(spec(
      "bp::cumsum", "reduction", [] { return scanSamples("bp::cumsum", false); },
      [](const Sample& s) { return scanReference(s, false); }, "bp::cumsum.out", "bp::cumsum_"));
  specs.back().tolerance = cumsumTolerance;
  specs.push_back(spec(
      "bp::cumprod", "reduction", [] { return scanSamples("bp::cumprod", true); },
      [](const Sample& s) { return scanReference(s, true); }, "bp::cumprod.out", "bp::cumprod_"));
  specs.back().tolerance = cumsumTolerance;
  specs.push_back(spec(
      "bp::sort", "reduction", [] { return sortSamples(false); },
      [](const Sample& s) { return sortReference(s, false); }, "bp::sort.values"));
  specs.push_back(spec(
      "bp::sort.stable", "reduction", [] { return sortSamples(true); },
      [](const Sample& s) { return sortReference(s, true); }, "bp::sort.values_stable"));
  // argsort: sort's samples, the indices of sort's reference (every sort is stable).
  for (bool stable : {false, true}) {
    specs.push_back(spec(
        stable ? "bp::argsort.stable" : "bp::argsort", "reduction", [stable] { return sortSamples(stable); },
        [stable](const Sample& s) { return std::vector<Expected>{sortReference(s, stable)[1]}; }, ""));
  }
  specs.push_back(spec("bp::topk", "reduction", topkSamples, topkReference, "bp::topk.values"));

  specs.push_back(spec("bp::flip", "data_movement", flipSamples, flipReference, "bp::flip.out"));
  specs.push_back(spec("bp::pad", "data_movement", padSamples, padFunctionalReference));
  specs.push_back(spec("bp::constant_pad_nd", "data_movement", constantPadSamples, constantPadReference,
                       "bp::constant_pad_nd.out"));
  for (bool reflect : {true, false}) {
    for (int n = 1; n <= 3; ++n) {
      const std::string name =
          std::string(reflect ? "bp::reflection_pad" : "bp::replication_pad") + std::to_string(n) + "d";
      specs.push_back(spec(
          name, "data_movement", [name, n, reflect] { return edgePadSamples(name, n, reflect); },
          [reflect](const Sample& s) { return edgePadReference(s, reflect); }, name + ".out"));
    }
  }
}

}  // namespace backplane::conformance
