// Conformance specs of the elementwise family: binary arithmetic with
// broadcasting and promotion, comparisons, unary math, and ops of a tensor
// and Python numbers (pow, comparisons with a Scalar, clamp) (Note
// [Conformance specs]).
#include <cmath>
#include <functional>
#include <numbers>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"
#include "backplane/core/scalar.h"

namespace backplane::conformance {
namespace {

using BinaryFn = double (*)(double, double);
using UnaryFn = double (*)(double);

// `args` followed by `rest` (the trailing arguments every sample of a spec shares).
std::vector<IValue> followedBy(std::vector<IValue> args, const std::vector<IValue>& rest) {
  args.insert(args.end(), rest.begin(), rest.end());
  return args;
}

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
    out.push_back(makeSample(std::move(name), followedBy({std::move(a), std::move(b)}, extra)));
  };
  for (ScalarType dt : dtypes) {
    for (const BinaryCase& c : binaryCases()) {
      Tensor a = applyView(randomTensor(rng, c.a, dt, range), c.view == View::Expanded ? View::None : c.view, {});
      Tensor b = randomTensor(rng, c.b, dt, range);
      if (c.view == View::Expanded) b = b.expand({3, 4});
      push(std::string(c.name) + dtypeSuffix(dt), a, b);
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
  out.push_back(raising("shapes [2,3] and [4] do not broadcast",
                        followedBy({randomTensor(rng, {2, 3}, ScalarType::Float32, range),
                                    randomTensor(rng, {4}, ScalarType::Float32, range)},
                                   extra),
                        "incompatible shapes"));
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
               bool has_inplace = true) {
  OpSpec spec;
  spec.op = "bp::" + name + (overload.empty() ? "" : "." + overload);
  spec.family = "elementwise";
  spec.samples = [op = spec.op, dtypes, range] { return binarySamples(op, dtypes, range, {}, /*large=*/true); };
  spec.reference = [kind, f](const Sample& s) { return std::vector<Expected>{binaryReference(s, kind, f)}; };
  if (has_inplace) spec.inplace = "bp::" + name + "_." + (overload.empty() ? "Tensor" : overload);
  spec.out = "bp::" + name + (kind == Result::Comparison ? ".Tensor_out" : ".out");
  specs.push_back(std::move(spec));
}

// add/sub with alpha: out = self +- alpha * other, also with alpha = 2, on
// `dtypes`.
void addAlpha(std::vector<OpSpec>& specs, const std::string& name, double sign, const std::vector<ScalarType>& dtypes) {
  OpSpec spec;
  spec.op = "bp::" + name + ".Tensor";
  spec.family = "elementwise";
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

// --- Ops of one tensor: unary ops, and a tensor with Python numbers.

using MakeTensor = std::function<Tensor(std::vector<int64_t>)>;

MakeTensor randomOf(Rng& rng, ScalarType dtype, Range range = {}) {
  return [&rng, dtype, range](std::vector<int64_t> sizes) { return randomTensor(rng, std::move(sizes), dtype, range); };
}

// Whole numbers in [-2, 2] (uint8: [0, 2], bool: 0 and 1) of any dtype, so
// that a comparison with a whole number meets equal elements too.
MakeTensor wholeOf(Rng& rng, ScalarType dtype) {
  return [&rng, dtype](std::vector<int64_t> sizes) {
    const ScalarType source = isFloatingType(dtype) ? ScalarType::Int64 : dtype;
    return hostTensor(valuesOf(randomTensor(rng, sizes, source, {-2, 2, -2, 2})), sizes, dtype);
  };
}

// The shapes every one-tensor spec covers, made by `make`, each called with
// `rest` after self; `suffix` ends the sample names.
void pushShapes(std::vector<Sample>& out, const std::string& suffix, const MakeTensor& make,
                const std::vector<IValue>& rest) {
  auto push = [&](const char* name, Tensor self) {
    out.push_back(makeSample(name + suffix, followedBy({std::move(self)}, rest)));
  };
  push("[3,4]", make({3, 4}));
  push("0-d", make({}));
  push("empty [0,5]", make({0, 5}));
  push("transposed", make({5, 3}).transpose(0, 1));
  push("sliced (step 3)", make({4, 9}).slice(1, 1, std::nullopt, 3));
  push("expanded", make({1, 4}).expand({3, 4}));
}

// f over self's elements, each first converted to `compute` (the dtype the
// op computes in), the result rounded to `result`.
Expected mapReference(const Tensor& self, ScalarType compute, ScalarType result,
                      const std::function<double(double)>& f) {
  Expected e;
  e.sizes = sizesOf(self);
  e.dtype = result;
  for (double v : valuesOf(self)) e.values.push_back(roundTo(result, f(roundTo(compute, v))));
  return e;
}

// PyTorch's result_type of a tensor and Python numbers: a number takes part
// only when it is of a higher category (bool < integral < floating) than
// the tensor, and then as int64 or the default float32 (an int32 tensor
// compared with 2.5 computes in float32; a float16 one with 2.5 stays
// float16).
ScalarType promoteWithScalars(ScalarType self, const std::vector<Scalar>& numbers) {
  auto category = [](ScalarType t) { return t == ScalarType::Bool ? 0 : isFloatingType(t) ? 2 : 1; };
  ScalarType out = self;
  for (const Scalar& n : numbers) {
    if (category(n.defaultType()) > category(out)) out = n.defaultType();
  }
  return out;
}

// Unary ops: `range` keeps inputs in the function's domain; a self of a
// dtype in `refused` must raise.
void addUnary(std::vector<OpSpec>& specs, const std::string& name, bool floating_result,
              const std::vector<ScalarType>& dtypes, Range range, UnaryFn f,
              const std::vector<ScalarType>& refused = {}) {
  OpSpec spec;
  spec.op = "bp::" + name;
  spec.family = "elementwise";
  spec.samples = [op = spec.op, dtypes, range, refused] {
    Rng rng(seedFor(op));
    std::vector<Sample> out;
    for (ScalarType dt : dtypes) pushShapes(out, dtypeSuffix(dt), randomOf(rng, dt, range), {});
    out.push_back(
        makeSample("large (1.1M elements) float32", {randomTensor(rng, {1100000}, ScalarType::Float32, range)}));
    for (ScalarType dt : refused) {
      out.push_back(raising(std::string(scalarTypeName(dt)) + " self", {randomTensor(rng, {3}, dt, range)},
                            "dtype" + dtypeSuffix(dt) + " is not supported"));
    }
    return out;
  };
  spec.reference = [floating_result, f](const Sample& s) {
    const Tensor& t = s.args[0].toTensor();
    const ScalarType dtype = floating_result && !isFloatingType(t.dtype()) ? ScalarType::Float32 : t.dtype();
    return std::vector<Expected>{mapReference(t, dtype, dtype, f)};
  };
  spec.inplace = "bp::" + name + "_";  // for samples whose result keeps self's dtype
  spec.out = "bp::" + name + ".out";
  specs.push_back(std::move(spec));
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

double silu(double x) { return x * sigmoid(x); }

double geluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

double geluTanh(double x) {
  const double k = std::sqrt(2 / std::numbers::pi);
  return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

// gelu(self, *, approximate): the exact erf form ('none', the default) and
// the tanh approximation, on floating inputs only.
void addGelu(std::vector<OpSpec>& specs) {
  OpSpec spec;
  spec.op = "bp::gelu";
  spec.family = "elementwise";
  spec.samples = [op = spec.op] {
    Rng rng(seedFor(op));
    std::vector<Sample> out;
    const Range tails{-4, 4};  // where the two forms part and 1 + erf(x) cancels
    for (ScalarType dt : kFloatTypes) {
      for (const char* approximate : {"none", "tanh"}) {
        pushShapes(out, dtypeSuffix(dt) + " approximate='" + approximate + "'", randomOf(rng, dt, tails),
                   {IValue(approximate)});
      }
    }
    out.push_back(
        makeSample("approximate omitted (exact form)", {randomTensor(rng, {3, 4}, ScalarType::Float32, tails)}));
    out.push_back(makeSample("large (1.1M elements) float32 approximate='tanh'",
                             {randomTensor(rng, {1100000}, ScalarType::Float32, tails), IValue("tanh")}));
    out.push_back(raising("approximate='fast'", {randomTensor(rng, {3}, ScalarType::Float32), IValue("fast")},
                          "approximate must be 'none' or 'tanh'"));
    out.push_back(raising("int32 self", {randomTensor(rng, {3}, ScalarType::Int32), IValue("none")},
                          "gelu takes floating-point inputs only"));
    return out;
  };
  spec.reference = [](const Sample& s) {
    const Tensor& t = s.args[0].toTensor();
    const bool tanh_form = s.args.size() > 1 && s.args[1].toString() == "tanh";
    return std::vector<Expected>{mapReference(t, t.dtype(), t.dtype(), tanh_form ? geluTanh : geluErf)};
  };
  spec.inplace = "bp::gelu_";
  spec.out = "bp::gelu.out";
  specs.push_back(std::move(spec));
}

// x ** e as PyTorch computes it in a dtype of `integral` kind: an integer
// to a negative power is 1 / x ** -e truncated (0 unless |x| is 1).
double power(double x, double e, bool integral) {
  if (integral && e < 0) {
    if (x == 1) return 1;
    if (x == -1) return std::fmod(e, 2) == 0 ? 1 : -1;
    return 0;
  }
  return std::pow(x, e);
}

// pow.Tensor_Tensor: the binary samples (bases and exponents in [0.5, 2),
// integers in [0, 3], so integer powers stay within int8), plus negative
// bases and exponents.
void addPowTensor(std::vector<OpSpec>& specs) {
  OpSpec spec;
  spec.op = "bp::pow.Tensor_Tensor";
  spec.family = "elementwise";
  spec.samples = [op = spec.op] {
    std::vector<Sample> out = binarySamples(op, kNumericTypes, {0.5, 2, 0, 3}, {}, /*large=*/true);
    out.push_back(makeSample("int64 negative bases and exponents [5,1] with [5]",
                             {hostTensor({-2, -1, 1, 2, 3}, {5, 1}, ScalarType::Int64),
                              hostTensor({-2, -1, 0, 1, 2}, {5}, ScalarType::Int64)}));
    out.push_back(makeSample(
        "float32 negative and zero bases [3,1] with [4] (0 ** -1 is inf)",
        {hostTensor({-2, -0.5, 0}, {3, 1}, ScalarType::Float32), hostTensor({0, 1, 3, -1}, {4}, ScalarType::Float32)}));
    out.push_back(
        makeSample("float32 negative base to a fraction is NaN",
                   {hostTensor({-1.5, 2}, {2}, ScalarType::Float32), hostTensor({0.5}, {1}, ScalarType::Float32)}));
    Rng rng(seedFor(op + " bool"));
    out.push_back(raising("bool with bool",
                          {randomTensor(rng, {3}, ScalarType::Bool), randomTensor(rng, {3}, ScalarType::Bool)},
                          "pow is not defined for bool"));
    return out;
  };
  spec.reference = [](const Sample& s) {
    const bool integral = !isFloatingType(promoteArgs(s.args[0].toTensor(), s.args[1].toTensor()));
    return std::vector<Expected>{
        binaryReference(s, Result::Promoted, [integral](double x, double e) { return power(x, e, integral); })};
  };
  spec.inplace = "bp::pow_.Tensor";
  spec.out = "bp::pow.Tensor_Tensor_out";
  specs.push_back(std::move(spec));
}

// pow.Tensor_Scalar: the exponent promotes as a Python number; integers to
// negative integer powers raise (NumPy's rule, as PyTorch).
void addPowScalar(std::vector<OpSpec>& specs) {
  OpSpec spec;
  spec.op = "bp::pow.Tensor_Scalar";
  spec.family = "elementwise";
  spec.samples = [op = spec.op] {
    Rng rng(seedFor(op));
    std::vector<Sample> out;
    const Range positive{0.25, 4, 1, 5};  // for 0.5 and -1
    for (ScalarType dt : kNumericTypes) {
      const std::string suffix = dtypeSuffix(dt);
      pushShapes(out, suffix + " ** 2", randomOf(rng, dt), {Scalar(int64_t{2})});
      out.push_back(makeSample("[3,4]" + suffix + " ** 3", {randomTensor(rng, {3, 4}, dt), Scalar(int64_t{3})}));
      out.push_back(makeSample("[3,4]" + suffix + " ** 0", {randomTensor(rng, {3, 4}, dt), Scalar(int64_t{0})}));
      if (isFloatingType(dt)) {
        out.push_back(makeSample("[3,4]" + suffix + " ** 0.5", {randomTensor(rng, {3, 4}, dt, positive), Scalar(0.5)}));
        out.push_back(
            makeSample("[3,4]" + suffix + " ** -1", {randomTensor(rng, {3, 4}, dt, positive), Scalar(int64_t{-1})}));
      } else {
        out.push_back(raising("[3,4]" + suffix + " ** -1",
                              {randomTensor(rng, {3, 4}, dt, positive), Scalar(int64_t{-1})},
                              "integers to negative integer powers are not allowed"));
      }
    }
    // A floating exponent makes an integral self compute in float32.
    out.push_back(
        makeSample("int32 ** 0.5 (float32)", {randomTensor(rng, {3, 4}, ScalarType::Int32, positive), Scalar(0.5)}));
    out.push_back(
        makeSample("0-d int64 ** -1.0 (float32)", {randomTensor(rng, {}, ScalarType::Int64, positive), Scalar(-1.0)}));
    out.push_back(makeSample("bool ** 2 (int64)", {randomTensor(rng, {3, 4}, ScalarType::Bool), Scalar(int64_t{2})}));
    out.push_back(
        makeSample("float32 ** 1.5", {randomTensor(rng, {3, 4}, ScalarType::Float32, positive), Scalar(1.5)}));
    out.push_back(makeSample("float32 negative base ** 0.5 is NaN",
                             {hostTensor({-1, -0.25, 4}, {3}, ScalarType::Float32), Scalar(0.5)}));
    out.push_back(makeSample("large (1.1M elements) float32 ** 0.5",
                             {randomTensor(rng, {1100000}, ScalarType::Float32, positive), Scalar(0.5)}));
    out.push_back(raising("bool ** -1", {randomTensor(rng, {3}, ScalarType::Bool), Scalar(int64_t{-1})},
                          "integers to negative integer powers are not allowed"));
    out.push_back(raising("bool ** True", {randomTensor(rng, {3}, ScalarType::Bool), Scalar(true)},
                          "pow is not defined for bool"));
    return out;
  };
  spec.reference = [](const Sample& s) {
    const Tensor& t = s.args[0].toTensor();
    const Scalar exponent = s.args[1].toScalar();
    const ScalarType dtype = promoteWithScalars(t.dtype(), {exponent});
    // No integral dtype meets a negative exponent here: those samples raise.
    const double e = roundTo(dtype, exponent.toDouble());
    return std::vector<Expected>{mapReference(t, dtype, dtype, [e](double x) { return std::pow(x, e); })};
  };
  spec.inplace = "bp::pow_.Scalar";
  spec.out = "bp::pow.Tensor_Scalar_out";
  specs.push_back(std::move(spec));
}

std::vector<Sample> scalarComparisonSamples(const std::string& op) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  for (ScalarType dt : kAllTypes) {
    const bool is_bool = dt == ScalarType::Bool;
    pushShapes(out, dtypeSuffix(dt) + (is_bool ? " with True" : " with 1"), wholeOf(rng, dt),
               {is_bool ? Scalar(true) : Scalar(int64_t{1})});
  }
  // A number of a higher category: integral and bool selves compare in
  // float32 or int64.
  auto push = [&](std::string name, Tensor self, Scalar other) {
    out.push_back(makeSample(std::move(name), {self, other}));
  };
  push("int32 with 0.5 (in float32)", wholeOf(rng, ScalarType::Int32)({3, 4}), Scalar(0.5));
  push("int64 with 1.0 (in float32)", wholeOf(rng, ScalarType::Int64)({3, 4}), Scalar(1.0));
  push("uint8 with -1.5 (in float32)", wholeOf(rng, ScalarType::UInt8)({3, 4}), Scalar(-1.5));
  push("0-d int8 with 1.5 (in float32)", wholeOf(rng, ScalarType::Int8)({}), Scalar(1.5));
  push("bool with 1 (in int64)", wholeOf(rng, ScalarType::Bool)({3, 4}), Scalar(int64_t{1}));
  push("bool with 0.5 (in float32)", wholeOf(rng, ScalarType::Bool)({3, 4}), Scalar(0.5));
  // A floating self keeps its dtype: the number is rounded to it first.
  for (ScalarType dt : {ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32}) {
    const std::string name(scalarTypeName(dt));
    push(name + " with 0.1 (rounded to " + name + ")", hostTensor({0.1, -0.1, 0.2, 0.1}, {4}, dt), Scalar(0.1));
  }
  push("NaN and -inf", hostTensor({NAN, 1, -INFINITY}, {3}, ScalarType::Float32), Scalar(1.0));
  push("large (1.1M elements) float32", wholeOf(rng, ScalarType::Float32)({1100000}), Scalar(int64_t{0}));
  // Numbers beyond the tensor's dtype convert into it as PyTorch converts
  // them: 1e5 is inf in float16; integers wrap (300 is 44 in int8, -1 is
  // 255 in uint8).
  push("float16 with 1e5 (inf in float16)", hostTensor({INFINITY, 65504, -INFINITY}, {3}, ScalarType::Float16),
       Scalar(1e5));
  push("int8 with 300 (44 in int8)", hostTensor({44, 127, -128}, {3}, ScalarType::Int8), Scalar(int64_t{300}));
  push("uint8 with -1 (255 in uint8)", hostTensor({255, 0, 1}, {3}, ScalarType::UInt8), Scalar(int64_t{-1}));
  push("int32 with 16777217.0 (in float32)", hostTensor({16777216, 16777218, 0}, {3}, ScalarType::Int32),
       Scalar(16777217.0));
  return out;
}

// Tensor-form comparisons whose answer depends on the comparison dtype
// (PyTorch's result_type, Note [Comparison dtype] in the CPU plugin): a
// compare in float64 or int64 would answer otherwise.
std::vector<Sample> comparisonDtypeSamples() {
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor a, Tensor b) { out.push_back(makeSample(std::move(name), {a, b})); };
  push("float32 0.1 with float64 0-d 0.1 (in float32)", hostTensor({0.1, 0.2, 0.1}, {3}, ScalarType::Float32),
       hostTensor({0.1}, {}, ScalarType::Float64));
  push("float64 0-d 0.1 with float32 0.1 (in float32)", hostTensor({0.1}, {}, ScalarType::Float64),
       hostTensor({0.1, 0.2, 0.1}, {3}, ScalarType::Float32));
  push("large int64 with float32 0-d (in float32)", hostTensor({16777217, 16777216, 16777218}, {3}, ScalarType::Int64),
       hostTensor({16777216}, {}, ScalarType::Float32));
  push("int8 with int64 0-d 300 (44 in int8)", hostTensor({44, 127, -128}, {3}, ScalarType::Int8),
       hostTensor({300}, {}, ScalarType::Int64));
  push("float16 with float64 0-d 1e5 (inf in float16)",
       hostTensor({INFINITY, 65504, -INFINITY}, {3}, ScalarType::Float16), hostTensor({1e5}, {}, ScalarType::Float64));
  push("uint8 with int8 (in a dtype holding both)", hostTensor({255, 0, 128}, {3}, ScalarType::UInt8),
       hostTensor({-1, 0, -128}, {3}, ScalarType::Int8));
  return out;
}

// eq.Scalar, ...: bool results; in place (bool self only: other selves
// would need the bools converted to their dtype) and out=.
void addScalarComparison(std::vector<OpSpec>& specs, const std::string& name, BinaryFn f) {
  OpSpec spec;
  spec.op = "bp::" + name + ".Scalar";
  spec.family = "elementwise";
  spec.samples = [op = spec.op] { return scalarComparisonSamples(op); };
  spec.reference = [f](const Sample& s) {
    const Tensor& t = s.args[0].toTensor();
    const Scalar other = s.args[1].toScalar();
    const ScalarType compute = promoteWithScalars(t.dtype(), {other});
    const double y = roundTo(compute, other.toDouble());
    return std::vector<Expected>{mapReference(t, compute, ScalarType::Bool, [&](double x) { return f(x, y); })};
  };
  spec.inplace = "bp::" + name + "_.Scalar";
  spec.out = "bp::" + name + ".Scalar_out";
  specs.push_back(std::move(spec));
}

std::optional<Scalar> optionalScalarArg(const Sample& s, size_t i) {
  if (i >= s.args.size() || s.args[i].isNone()) return std::nullopt;
  return s.args[i].toScalar();
}

// clamp(self, min, max): either bound may be omitted (not both); min > max
// gives max everywhere; NaN stays NaN; the bounds promote as Python numbers.
void addClamp(std::vector<OpSpec>& specs) {
  OpSpec spec;
  spec.op = "bp::clamp";
  spec.family = "elementwise";
  spec.samples = [op = spec.op] {
    Rng rng(seedFor(op));
    std::vector<Sample> out;
    for (ScalarType dt : kNumericTypes) {
      const std::string suffix = dtypeSuffix(dt);
      // Bounds every dtype holds (PyTorch raises for a bound that overflows self's dtype).
      const bool floating = isFloatingType(dt);
      const Scalar lo = floating ? Scalar(-0.5) : Scalar(int64_t{1});
      const Scalar hi = floating ? Scalar(1.25) : Scalar(int64_t{3});
      pushShapes(out, suffix + " min and max", randomOf(rng, dt), {lo, hi});
      out.push_back(makeSample("[3,4]" + suffix + " min only (max omitted)", {randomTensor(rng, {3, 4}, dt), lo}));
      out.push_back(makeSample("[3,4]" + suffix + " max only", {randomTensor(rng, {3, 4}, dt), IValue(), hi}));
      out.push_back(makeSample("[3,4]" + suffix + " min > max", {randomTensor(rng, {3, 4}, dt), hi, lo}));
    }
    out.push_back(makeSample("int32 with float bounds (float32)",
                             {randomTensor(rng, {3, 4}, ScalarType::Int32), Scalar(-0.5), Scalar(1.5)}));
    out.push_back(makeSample("0-d int64 with a float max (float32)",
                             {randomTensor(rng, {}, ScalarType::Int64), IValue(), Scalar(2.5)}));
    out.push_back(makeSample("float32 with integer bounds", {randomTensor(rng, {3, 4}, ScalarType::Float32),
                                                             Scalar(int64_t{-1}), Scalar(int64_t{1})}));
    out.push_back(makeSample("float16 with bounds rounded to float16",
                             {randomTensor(rng, {3, 4}, ScalarType::Float16), Scalar(-0.1), Scalar(0.3)}));
    out.push_back(makeSample("NaN stays NaN",
                             {hostTensor({NAN, -3, 0.5, 3}, {4}, ScalarType::Float32), Scalar(-1.0), Scalar(1.0)}));
    out.push_back(makeSample("large (1.1M elements) float32",
                             {randomTensor(rng, {1100000}, ScalarType::Float32), Scalar(-0.5), Scalar(1.25)}));
    out.push_back(raising("min and max both omitted", {randomTensor(rng, {3}, ScalarType::Float32)},
                          "at least one of min and max must be given"));
    out.push_back(raising("bool self", {randomTensor(rng, {3}, ScalarType::Bool), Scalar(false), Scalar(true)},
                          "clamp is not defined for bool"));
    // PyTorch's checked conversion of the bounds to the result dtype.
    out.push_back(makeSample("bool self with integer bounds (int64)",
                             {randomTensor(rng, {3, 4}, ScalarType::Bool), Scalar(int64_t{0}), Scalar(int64_t{1})}));
    out.push_back(makeSample("uint8 with min=-1 (wraps to 255, above max)",
                             {randomTensor(rng, {3, 4}, ScalarType::UInt8), Scalar(int64_t{-1}), Scalar(int64_t{3})}));
    out.push_back(raising("int8 with max=300",
                          {randomTensor(rng, {3}, ScalarType::Int8), IValue(), Scalar(int64_t{300})},
                          "300 does not convert to int8 without overflow"));
    out.push_back(raising("float32 with max=1e300",
                          {randomTensor(rng, {3}, ScalarType::Float32), IValue(), Scalar(1e300)},
                          "1e300 does not convert to float32 without overflow"));
    out.push_back(raising("float16 with min=-1e5", {randomTensor(rng, {3}, ScalarType::Float16), Scalar(-1e5)},
                          "-1e5 does not convert to float16 without overflow"));
    return out;
  };
  spec.reference = [](const Sample& s) {
    const Tensor& t = s.args[0].toTensor();
    const std::optional<Scalar> min = optionalScalarArg(s, 1), max = optionalScalarArg(s, 2);
    std::vector<Scalar> bounds;
    if (min) bounds.push_back(*min);
    if (max) bounds.push_back(*max);
    const ScalarType dtype = promoteWithScalars(t.dtype(), bounds);
    const double lo = min ? roundTo(dtype, min->toDouble()) : -INFINITY;
    const double hi = max ? roundTo(dtype, max->toDouble()) : INFINITY;
    return std::vector<Expected>{mapReference(t, dtype, dtype, [&](double x) {
      x = x < lo ? lo : x;  // comparisons keep NaN
      return x > hi ? hi : x;
    })};
  };
  spec.inplace = "bp::clamp_";
  spec.out = "bp::clamp.out";
  specs.push_back(std::move(spec));
}

struct Comparison {
  const char* name;
  BinaryFn f;
};

const std::vector<Comparison>& comparisons() {
  static const std::vector<Comparison> all = {
      {"eq", [](double x, double y) { return double(x == y); }},
      {"ne", [](double x, double y) { return double(x != y); }},
      {"lt", [](double x, double y) { return double(x < y); }},
      {"le", [](double x, double y) { return double(x <= y); }},
      {"gt", [](double x, double y) { return double(x > y); }},
      {"ge", [](double x, double y) { return double(x >= y); }},
  };
  return all;
}

}  // namespace

void addElementwiseSpecs(std::vector<OpSpec>& specs) {
  addAlpha(specs, "add", 1, kAllTypes);
  specs.back().samples = [samples = specs.back().samples] {
    std::vector<Sample> all = samples();
    Rng rng(seedFor("bp::add.Tensor alpha conversion"));
    // alpha converts to the result dtype as PyTorch's checked conversion:
    // every integer is a bool (-1 and 2 are true), 300 does not fit int8.
    const Tensor b1 = randomTensor(rng, {3}, ScalarType::Bool), b2 = randomTensor(rng, {3}, ScalarType::Bool);
    all.push_back(makeSample("bool with alpha=-1 (true)", {b1, b2, Scalar(int64_t{-1})}));
    all.push_back(makeSample("bool with alpha=2 (true)", {b1, b2, Scalar(int64_t{2})}));
    const Tensor i8 = randomTensor(rng, {3}, ScalarType::Int8);
    all.push_back(raising("int8 with alpha=300", {i8, i8, Scalar(int64_t{300})}, "300 does not convert to int8"));
    all.push_back(
        raising("int32 with alpha=True",
                {randomTensor(rng, {3}, ScalarType::Int32), randomTensor(rng, {3}, ScalarType::Int32), Scalar(true)},
                "a boolean alpha needs a boolean result"));
    return all;
  };
  addAlpha(specs, "sub", -1, kNumericTypes);  // bool is refused (logical_xor is what bools want)
  specs.back().samples = [samples = specs.back().samples] {
    std::vector<Sample> all = samples();
    Rng rng(seedFor("bp::sub.Tensor bool operands"));
    // PyTorch's sub refuses any bool operand, not only a bool result.
    all.push_back(raising(
        "bool with float32",
        {randomTensor(rng, {3}, ScalarType::Bool), randomTensor(rng, {3}, ScalarType::Float32), Scalar(int64_t{1})},
        "sub refuses a bool operand"));
    all.push_back(raising(
        "int64 with a bool 0-d tensor",
        {randomTensor(rng, {3}, ScalarType::Int64), randomTensor(rng, {}, ScalarType::Bool), Scalar(int64_t{1})},
        "sub refuses a bool operand"));
    return all;
  };
  addBinary(specs, "mul", "Tensor", Result::Promoted, kAllTypes, {}, [](double x, double y) { return x * y; });
  // Divisors away from zero: the quotient's size stays in range for float16.
  addBinary(specs, "div", "Tensor", Result::TrueDivide, kNumericTypes, {0.5, 3, 1, 5},
            [](double x, double y) { return x / y; });
  addBinary(
      specs, "maximum", "", Result::Promoted, kAllTypes, {}, [](double x, double y) { return std::max(x, y); },
      /*has_inplace=*/false);
  addBinary(
      specs, "minimum", "", Result::Promoted, kAllTypes, {}, [](double x, double y) { return std::min(x, y); },
      /*has_inplace=*/false);
  // max.other and min.other are maximum and minimum by another name
  // (PyTorch's overloads): the same samples and references, no out= form.
  for (size_t i : {specs.size() - 2, specs.size() - 1}) {
    OpSpec other = specs[i];
    other.op = other.op == "bp::maximum" ? "bp::max.other" : "bp::min.other";
    other.out.clear();
    specs.push_back(std::move(other));
  }
  for (const Comparison& c : comparisons()) {
    // Small integers make equal pairs likely, so eq and ne see both answers.
    addBinary(specs, c.name, "Tensor", Result::Comparison, kAllTypes, {-2, 2, -2, 2}, c.f);
    specs.back().samples = [samples = specs.back().samples] {
      std::vector<Sample> all = samples();
      for (Sample& s : comparisonDtypeSamples()) all.push_back(std::move(s));
      return all;
    };
  }

  const Range positive{0.1, 4, 1, 5};
  const std::vector<ScalarType> kBool = {ScalarType::Bool};
  addUnary(
      specs, "neg", false, kNumericTypes, {}, [](double x) { return -x; }, /*refused=*/kBool);
  addUnary(specs, "abs", false, kNumericTypes, {}, [](double x) { return std::fabs(x); });
  addUnary(
      specs, "relu", false, kNumericTypes, {}, [](double x) { return x > 0 ? x : 0.0; }, /*refused=*/kBool);
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
  // silu and gelu take floating inputs only (an integral self is refused,
  // not converted).
  addUnary(specs, "silu", false, kFloatTypes, {}, silu, /*refused=*/{ScalarType::Int32});
  addGelu(specs);

  addPowTensor(specs);
  addPowScalar(specs);
  for (const Comparison& c : comparisons()) addScalarComparison(specs, c.name, c.f);
  addClamp(specs);
}

}  // namespace backplane::conformance
