// Conformance specs of the elementwise family: binary arithmetic with
// broadcasting and promotion, comparisons, and unary math (Note
// [Conformance specs]).
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"
#include "backplane/core/scalar.h"

namespace backplane::conformance {
namespace {

using BinaryFn = double (*)(double, double);
using UnaryFn = double (*)(double);

const std::vector<ScalarType> kFloat = {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16,
                                        ScalarType::BFloat16};
const std::vector<ScalarType> kNumeric = {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16,
                                          ScalarType::BFloat16, ScalarType::Int32, ScalarType::Int64,
                                          ScalarType::Int8, ScalarType::UInt8};
const std::vector<ScalarType> kAll = {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16,
                                      ScalarType::BFloat16, ScalarType::Int32, ScalarType::Int64,
                                      ScalarType::Int8, ScalarType::UInt8, ScalarType::Bool};

// How the result dtype follows from the promoted inputs.
enum class Result { Promoted, TrueDivide, Comparison };

ScalarType resultOf(Result r, ScalarType promoted) {
  switch (r) {
    case Result::Promoted: return promoted;
    case Result::TrueDivide: return isFloatingType(promoted) ? promoted : ScalarType::Float32;
    case Result::Comparison: return ScalarType::Bool;
  }
  return promoted;
}

// The tensor shapes every binary spec covers, as (self, other, name); the
// views are applied to the inputs after they are made.
enum class View { None, Transposed, Sliced, Expanded };

struct BinaryCase {
  std::vector<int64_t> a, b;
  const char* name;
  View view = View::None;
};

const std::vector<BinaryCase>& binaryCases() {
  static const std::vector<BinaryCase> cases = {
      {{3, 4}, {3, 4}, "same shape"},
      {{3, 1}, {4}, "broadcast [3,1] with [4]"},
      {{2, 3, 4}, {3, 1}, "broadcast [2,3,4] with [3,1]"},
      {{}, {2, 3}, "0-d with [2,3]"},
      {{}, {}, "0-d with 0-d"},
      {{1}, {1}, "one element"},
      {{0, 3}, {3}, "empty [0,3] with [3]"},
      {{4, 3}, {3, 4}, "transposed self", View::Transposed},
      {{3, 8}, {3, 4}, "sliced self (step 2)", View::Sliced},
      {{3, 4}, {1, 4}, "expanded other", View::Expanded},
  };
  return cases;
}

Tensor applyView(const Tensor& t, View v, const std::vector<int64_t>& target) {
  switch (v) {
    case View::None: return t;
    case View::Transposed: return t.transpose(0, 1);
    case View::Sliced: return t.slice(1, 0, std::nullopt, 2);
    case View::Expanded: return t.expand(target);
  }
  return t;
}

// The samples of a binary op over `dtypes`, plus promotion and error cases.
// `extra` are further arguments (alpha) appended to each call.
std::vector<Sample> binarySamples(const std::string& op, const std::vector<ScalarType>& dtypes, Range range,
                                  const std::vector<IValue>& extra, bool large) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor a, Tensor b) {
    Sample s;
    s.name = std::move(name);
    s.args = {IValue(std::move(a)), IValue(std::move(b))};
    for (const IValue& e : extra) s.args.push_back(e);
    out.push_back(std::move(s));
  };
  for (ScalarType dt : dtypes) {
    for (const BinaryCase& c : binaryCases()) {
      Tensor a = applyView(randomTensor(rng, c.a, dt, range), c.view == View::Expanded ? View::None : c.view, {});
      Tensor b = randomTensor(rng, c.b, dt, range);
      if (c.view == View::Expanded) b = b.expand({3, 4});
      push(std::string(c.name) + " " + std::string(scalarTypeName(dt)), a, b);
    }
  }
  // Promotion: mixed dtypes, and a 0-d tensor of a higher category.
  push("promotion int32 with float32", randomTensor(rng, {2, 3}, ScalarType::Int32, range),
       randomTensor(rng, {2, 3}, ScalarType::Float32, range));
  push("promotion float64 0-d with float32", randomTensor(rng, {}, ScalarType::Float64, range),
       randomTensor(rng, {2, 3}, ScalarType::Float32, range));
  push("promotion int64 with 0-d float32", randomTensor(rng, {4}, ScalarType::Int64, range),
       randomTensor(rng, {}, ScalarType::Float32, range));
  if (large) {
    push("large (1.1M elements) float32", randomTensor(rng, {1100, 1000}, ScalarType::Float32, range),
         randomTensor(rng, {1000}, ScalarType::Float32, range));
  }
  Sample bad;
  bad.name = "shapes [2,3] and [4] do not broadcast";
  bad.args = {IValue(randomTensor(rng, {2, 3}, ScalarType::Float32, range)),
              IValue(randomTensor(rng, {4}, ScalarType::Float32, range))};
  for (const IValue& e : extra) bad.args.push_back(e);
  bad.must_raise = true;
  bad.raise_reason = "incompatible shapes";
  out.push_back(std::move(bad));
  return out;
}

Expected binaryReference(const Sample& s, Result kind, const std::function<double(double, double)>& f) {
  const Tensor& a = s.args[0].toTensor();
  const Tensor& b = s.args[1].toTensor();
  Expected e;
  e.sizes = broadcastShape(sizesOf(a), sizesOf(b));
  const ScalarType promoted = promoteArgs(a, b);
  e.dtype = resultOf(kind, promoted);
  const std::vector<double> av = valuesOf(a), bv = valuesOf(b);
  const int64_t n = numelOf(e.sizes);
  e.values.resize(static_cast<size_t>(n));
  const std::vector<int64_t> as = sizesOf(a), bs = sizesOf(b);
  for (int64_t i = 0; i < n; ++i) {
    // Inputs take the common dtype first (an int8 operand of a float add is
    // exact; a float64 0-d operand of a float32 add is rounded to float32).
    const ScalarType compute = kind == Result::Comparison ? promoted : e.dtype;
    const double x = roundTo(compute, av[static_cast<size_t>(broadcastIndex(as, e.sizes, i))]);
    const double y = roundTo(compute, bv[static_cast<size_t>(broadcastIndex(bs, e.sizes, i))]);
    e.values[static_cast<size_t>(i)] = roundTo(e.dtype, f(x, y));
  }
  return e;
}

void addBinary(std::vector<OpSpec>& specs, const std::string& name, const std::string& overload, Result kind,
               const std::vector<ScalarType>& dtypes, Range range, std::function<double(double, double)> f,
               bool has_inplace = true, bool large = false) {
  OpSpec spec;
  spec.op = "bp::" + name + (overload.empty() ? "" : "." + overload);
  spec.family = "elementwise";
  spec.samples = [op = spec.op, dtypes, range, large] { return binarySamples(op, dtypes, range, {}, large); };
  spec.reference = [kind, f](const Sample& s) { return std::vector<Expected>{binaryReference(s, kind, f)}; };
  if (has_inplace) spec.inplace = "bp::" + name + "_." + (overload.empty() ? "Tensor" : overload);
  spec.out = "bp::" + name + (kind == Result::Comparison ? ".Tensor_out" : ".out");
  specs.push_back(std::move(spec));
}

// add/sub with alpha: out = self +- alpha * other, also with alpha = 2.
void addAlpha(std::vector<OpSpec>& specs, const std::string& name, double sign) {
  OpSpec spec;
  spec.op = "bp::" + name + ".Tensor";
  spec.family = "elementwise";
  const std::vector<ScalarType> dtypes = name == "sub" ? kNumeric : kAll;
  spec.samples = [op = spec.op, dtypes] {
    std::vector<Sample> s = binarySamples(op, dtypes, {}, {IValue(Scalar(int64_t{1}))}, /*large=*/true);
    std::vector<Sample> alpha2 = binarySamples(op + " alpha=2", {ScalarType::Float32, ScalarType::Int64}, {},
                                               {IValue(Scalar(int64_t{2}))}, false);
    for (Sample& a : alpha2) {
      a.name += " (alpha=2)";
      s.push_back(std::move(a));
    }
    return s;
  };
  spec.reference = [sign](const Sample& s) {
    const double alpha = s.args[2].toScalar().toDouble();
    const bool is_bool = promoteArgs(s.args[0].toTensor(), s.args[1].toTensor()) == ScalarType::Bool;
    return std::vector<Expected>{binaryReference(s, Result::Promoted, [&](double x, double y) {
      if (is_bool) return (x != 0 || (alpha != 0 && y != 0)) ? 1.0 : 0.0;
      return x + sign * alpha * y;
    })};
  };
  spec.inplace = "bp::" + name + "_.Tensor";
  spec.out = "bp::" + name + ".out";
  specs.push_back(std::move(spec));
}

// Unary ops: `range` keeps inputs in the function's domain.
void addUnary(std::vector<OpSpec>& specs, const std::string& name, bool floating_result,
              const std::vector<ScalarType>& dtypes, Range range, UnaryFn f) {
  OpSpec spec;
  spec.op = "bp::" + name;
  spec.family = "elementwise";
  spec.samples = [op = spec.op, dtypes, range] {
    Rng rng(seedFor(op));
    std::vector<Sample> out;
    auto push = [&](std::string n, Tensor t) {
      Sample s;
      s.name = std::move(n);
      s.args = {IValue(std::move(t))};
      out.push_back(std::move(s));
    };
    for (ScalarType dt : dtypes) {
      const std::string suffix = " " + std::string(scalarTypeName(dt));
      push("[3,4]" + suffix, randomTensor(rng, {3, 4}, dt, range));
      push("0-d" + suffix, randomTensor(rng, {}, dt, range));
      push("empty [0,5]" + suffix, randomTensor(rng, {0, 5}, dt, range));
      push("transposed" + suffix, randomTensor(rng, {5, 3}, dt, range).transpose(0, 1));
      push("sliced (step 3)" + suffix, randomTensor(rng, {4, 9}, dt, range).slice(1, 1, std::nullopt, 3));
      push("expanded" + suffix, randomTensor(rng, {1, 4}, dt, range).expand({3, 4}));
    }
    push("large (1.1M elements) float32", randomTensor(rng, {1100000}, ScalarType::Float32, range));
    return out;
  };
  spec.reference = [floating_result, f](const Sample& s) {
    const Tensor& t = s.args[0].toTensor();
    Expected e;
    e.sizes = sizesOf(t);
    e.dtype = floating_result && !isFloatingType(t.dtype()) ? ScalarType::Float32 : t.dtype();
    for (double v : valuesOf(t)) e.values.push_back(roundTo(e.dtype, f(v)));
    return std::vector<Expected>{e};
  };
  spec.inplace = "bp::" + name + "_";  // for samples whose result keeps self's dtype
  spec.out = "bp::" + name + ".out";
  specs.push_back(std::move(spec));
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

}  // namespace

void addElementwiseSpecs(std::vector<OpSpec>& specs) {
  addAlpha(specs, "add", 1);
  addAlpha(specs, "sub", -1);
  addBinary(specs, "mul", "Tensor", Result::Promoted, kAll, {}, [](double x, double y) { return x * y; });
  // Divisors away from zero: the quotient's size stays in range for float16.
  addBinary(specs, "div", "Tensor", Result::TrueDivide, kNumeric, {0.5, 3, 1, 5},
            [](double x, double y) { return x / y; });
  addBinary(specs, "maximum", "", Result::Promoted, kAll, {}, [](double x, double y) { return std::max(x, y); },
            /*has_inplace=*/false);
  addBinary(specs, "minimum", "", Result::Promoted, kAll, {}, [](double x, double y) { return std::min(x, y); },
            /*has_inplace=*/false);
  for (const char* cmp : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    const std::string c = cmp;
    std::function<double(double, double)> f;
    if (c == "eq") f = [](double x, double y) { return double(x == y); };
    if (c == "ne") f = [](double x, double y) { return double(x != y); };
    if (c == "lt") f = [](double x, double y) { return double(x < y); };
    if (c == "le") f = [](double x, double y) { return double(x <= y); };
    if (c == "gt") f = [](double x, double y) { return double(x > y); };
    if (c == "ge") f = [](double x, double y) { return double(x >= y); };
    // Small integers make equal pairs likely, so eq and ne see both answers.
    addBinary(specs, c, "Tensor", Result::Comparison, kAll, {-2, 2, -2, 2}, f, /*has_inplace=*/false);
  }

  const Range positive{0.1, 4, 1, 5};
  addUnary(specs, "neg", false, kNumeric, {}, [](double x) { return -x; });
  addUnary(specs, "abs", false, kNumeric, {}, [](double x) { return std::fabs(x); });
  addUnary(specs, "relu", false, kNumeric, {}, [](double x) { return x > 0 ? x : 0.0; });
  const std::vector<ScalarType> floatAndInt = {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16,
                                               ScalarType::BFloat16, ScalarType::Int32};
  addUnary(specs, "exp", true, floatAndInt, {}, [](double x) { return std::exp(x); });
  addUnary(specs, "log", true, floatAndInt, positive, [](double x) { return std::log(x); });
  addUnary(specs, "sqrt", true, floatAndInt, positive, [](double x) { return std::sqrt(x); });
  addUnary(specs, "rsqrt", true, floatAndInt, positive, [](double x) { return 1 / std::sqrt(x); });
  addUnary(specs, "sin", true, floatAndInt, {}, [](double x) { return std::sin(x); });
  addUnary(specs, "cos", true, floatAndInt, {}, [](double x) { return std::cos(x); });
  addUnary(specs, "tanh", true, floatAndInt, {}, [](double x) { return std::tanh(x); });
  addUnary(specs, "sigmoid", true, floatAndInt, {}, sigmoid);
}

}  // namespace backplane::conformance
