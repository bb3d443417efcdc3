// Conformance specs of the ops of dispatcher/ops/src/elementwise_more.cc
// (Note [Conformance specs]): rounding division, remainder and fmod, the
// bitwise and logical ops, rounding, sign, erf, isnan/isinf/isfinite,
// nan_to_num, the activations, and the Scalar overloads.
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"
#include "backplane/core/scalar.h"

namespace backplane::conformance {
namespace {

using Fn2 = std::function<double(double, double)>;
using Fn1 = std::function<double(double)>;

// --- references in double, as PyTorch computes them

double floorDiv(double x, double y) {
  if (y == 0) return x / y;
  const double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0 && (y < 0) != (mod < 0)) div -= 1;
  if (div == 0) return std::copysign(0.0, x / y);
  double f = std::floor(div);
  if (div - f > 0.5) f += 1;
  return f;
}
double pyRemainder(double x, double y) {
  double mod = std::fmod(x, y);
  if (mod != 0 && (y < 0) != (mod < 0)) mod += y;
  return mod;
}

// A category's default number dtype: PyTorch's result_type of a tensor and
// a Python number.
ScalarType promoteWithNumber(ScalarType self, const Scalar& n) {
  auto category = [](ScalarType t) { return t == ScalarType::Bool ? 0 : isFloatingType(t) ? 2 : 1; };
  return category(n.defaultType()) > category(self) ? n.defaultType() : self;
}

const std::vector<ScalarType> kIntegralAndBool = {ScalarType::Bool, ScalarType::UInt8, ScalarType::Int8,
                                                  ScalarType::Int32, ScalarType::Int64};
const std::vector<ScalarType> kSignedNumeric = {ScalarType::Float32,  ScalarType::Float64, ScalarType::Float16,
                                                ScalarType::BFloat16, ScalarType::Int32,   ScalarType::Int64,
                                                ScalarType::Int8};

// Divisors of either sign, never near zero (nor zero once cast to an
// integral dtype: the dtype sweep casts them).
Tensor divisor(Rng& rng, std::vector<int64_t> sizes, ScalarType dtype) {
  std::vector<double> v(static_cast<size_t>(numelOf(sizes)));
  for (double& x : v) {
    const double sign = (rng.next() & 1) ? 1 : -1;
    x = sign * (isFloatingType(dtype) ? rng.uniform(1, 3) : static_cast<double>(rng.integer(1, 4)));
    if (dtype == ScalarType::UInt8) x = std::fabs(x);
  }
  return hostTensor(v, std::move(sizes), dtype);
}

enum class Kind { Promoted, TrueDivide, Logical };

ScalarType resultOf(Kind k, ScalarType promoted) {
  switch (k) {
    case Kind::Promoted: return promoted;
    case Kind::TrueDivide: return isFloatingType(promoted) ? promoted : ScalarType::Float32;
    case Kind::Logical: return ScalarType::Bool;
  }
  return promoted;
}

// Tensor-Tensor samples: shapes, views, promotion; `other` from `make_other`.
std::vector<Sample> binarySamples(const std::string& op, const std::vector<ScalarType>& dtypes, bool divisor_other,
                                  const std::vector<IValue>& extra) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  auto other = [&](std::vector<int64_t> sizes, ScalarType dt) {
    return divisor_other ? divisor(rng, std::move(sizes), dt) : randomTensor(rng, std::move(sizes), dt, {-4, 4, -6, 6});
  };
  auto push = [&](std::string name, Tensor a, Tensor b) {
    std::vector<IValue> args = {std::move(a), std::move(b)};
    args.insert(args.end(), extra.begin(), extra.end());
    out.push_back(makeSample(std::move(name), std::move(args)));
  };
  const Range wide{-6, 6, -9, 9};
  for (ScalarType dt : dtypes) {
    const std::string s = dtypeSuffix(dt);
    push("[3,4] with [3,4]" + s, randomTensor(rng, {3, 4}, dt, wide), other({3, 4}, dt));
    push("broadcast [3,1] with [4]" + s, randomTensor(rng, {3, 1}, dt, wide), other({4}, dt));
    push("0-d with [2,3]" + s, randomTensor(rng, {}, dt, wide), other({2, 3}, dt));
    push("empty [0,3] with [3]" + s, randomTensor(rng, {0, 3}, dt, wide), other({3}, dt));
    push("transposed self" + s, randomTensor(rng, {4, 3}, dt, wide).transpose(0, 1), other({3, 4}, dt));
    push("expanded other" + s, randomTensor(rng, {3, 4}, dt, wide), other({1, 4}, dt).expand({3, 4}));
  }
  // Promotion: the lower dtype of a pair of one category, and a 0-d
  // operand of a higher category (floating ones where `dtypes` has them).
  const bool floating = isFloatingType(dtypes.front());
  const ScalarType low = floating ? ScalarType::Int32 : ScalarType::Int8;
  const ScalarType high = floating ? ScalarType::Float32 : ScalarType::Int32;
  const ScalarType top = floating ? ScalarType::Float64 : ScalarType::Int64;
  const ScalarType base = floating ? ScalarType::Int64 : ScalarType::Bool;
  push("promotion " + std::string(scalarTypeName(low)) + " with " + std::string(scalarTypeName(high)),
       randomTensor(rng, {2, 3}, low, wide), other({2, 3}, high));
  push("promotion " + std::string(scalarTypeName(base)) + " with 0-d " + std::string(scalarTypeName(top)),
       randomTensor(rng, {4}, base, wide), other({}, top));
  push("large (300k elements) " + std::string(scalarTypeName(high)), randomTensor(rng, {300, 1000}, high, wide),
       other({1000}, high));
  std::vector<IValue> bad = {randomTensor(rng, {2, 3}, high), randomTensor(rng, {4}, high)};
  bad.insert(bad.end(), extra.begin(), extra.end());
  out.push_back(raising("shapes [2,3] and [4] do not broadcast", std::move(bad), "incompatible shapes"));
  return out;
}

Expected binaryReference(const Sample& s, Kind kind, const Fn2& f) {
  const Tensor& a = s.args[0].toTensor();
  const Tensor& b = s.args[1].toTensor();
  Expected e;
  e.sizes = broadcastShape(sizesOf(a), sizesOf(b));
  const ScalarType promoted = promoteArgs(a, b);
  e.dtype = resultOf(kind, promoted);
  const ScalarType compute = kind == Kind::Logical ? promoted : e.dtype;
  const std::vector<double> av = valuesOf(a), bv = valuesOf(b);
  const std::vector<int64_t> as = sizesOf(a), bs = sizesOf(b);
  for (int64_t i = 0; i < numelOf(e.sizes); ++i) {
    const double x = roundTo(compute, av[static_cast<size_t>(broadcastIndex(as, e.sizes, i))]);
    const double y = roundTo(compute, bv[static_cast<size_t>(broadcastIndex(bs, e.sizes, i))]);
    e.values.push_back(roundTo(e.dtype, f(x, y)));
  }
  return e;
}

OpSpec binarySpec(const std::string& op, const std::string& inplace, const std::string& out, Kind kind,
                  std::vector<ScalarType> dtypes, bool divisor_other, std::vector<IValue> extra, Fn2 f,
                  std::vector<Sample> more = {}) {
  OpSpec spec;
  spec.op = op;
  spec.family = "elementwise";
  spec.samples = [op, dtypes, divisor_other, extra, more] {
    std::vector<Sample> s = binarySamples(op, dtypes, divisor_other, extra);
    s.insert(s.end(), more.begin(), more.end());
    return s;
  };
  spec.reference = [kind, f](const Sample& s) { return std::vector<Expected>{binaryReference(s, kind, f)}; };
  spec.inplace = inplace;
  spec.out = out;
  return spec;
}

// Tensor-number samples: every dtype of `dtypes` with each of `numbers`.
std::vector<Sample> scalarSamples(const std::string& op, const std::vector<ScalarType>& dtypes,
                                  const std::vector<Scalar>& numbers, const std::vector<IValue>& extra) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  for (ScalarType dt : dtypes) {
    for (const Scalar& n : numbers) {
      if (dt == ScalarType::UInt8 && n.toDouble() < 0) continue;
      auto push = [&](const std::string& shape, Tensor self) {
        std::vector<IValue> args = {std::move(self), n};
        args.insert(args.end(), extra.begin(), extra.end());
        out.push_back(makeSample(shape + dtypeSuffix(dt) + " with " + n.str(), std::move(args)));
      };
      push("[3,4]", randomTensor(rng, {3, 4}, dt, {-6, 6, -9, 9}));
      push("transposed", randomTensor(rng, {4, 3}, dt, {-6, 6, -9, 9}).transpose(0, 1));
      push("0-d", randomTensor(rng, {}, dt, {-6, 6, -9, 9}));
    }
  }
  return out;
}

Expected scalarReference(const Sample& s, Kind kind, const Fn2& f) {
  const Tensor& t = s.args[0].toTensor();
  const Scalar n = s.args[1].toScalar();
  const ScalarType promoted = promoteWithNumber(t.dtype(), n);
  Expected e;
  e.sizes = sizesOf(t);
  e.dtype = resultOf(kind, promoted);
  const double y = roundTo(e.dtype, n.toDouble());
  for (double v : valuesOf(t)) e.values.push_back(roundTo(e.dtype, f(roundTo(e.dtype, v), y)));
  return e;
}

OpSpec scalarSpec(const std::string& op, const std::string& inplace, const std::string& out, Kind kind,
                  std::vector<ScalarType> dtypes, std::vector<Scalar> numbers, std::vector<IValue> extra, Fn2 f,
                  std::vector<Sample> more = {}) {
  OpSpec spec;
  spec.op = op;
  spec.family = "elementwise";
  spec.samples = [op, dtypes, numbers, extra, more] {
    std::vector<Sample> s = scalarSamples(op, dtypes, numbers, extra);
    s.insert(s.end(), more.begin(), more.end());
    return s;
  };
  spec.reference = [kind, f](const Sample& s) { return std::vector<Expected>{scalarReference(s, kind, f)}; };
  spec.inplace = inplace;
  spec.out = out;
  return spec;
}

// --- unary

enum class UKind { Same, Floating, Logical };

// Samples of one tensor: shapes and views of each dtype, with `extra`
// arguments after self; `special` values (NaN, infinities, halves) as one
// more sample per floating dtype.
OpSpec unarySpec(const std::string& name, const std::string& op, const std::string& inplace, const std::string& out,
                 UKind kind, std::vector<ScalarType> dtypes, std::vector<IValue> extra, Fn1 f,
                 std::vector<double> special, std::vector<ScalarType> refused = {}) {
  OpSpec spec;
  spec.op = op;
  spec.family = "elementwise";
  spec.samples = [op, dtypes, extra, special, refused] {
    Rng rng(seedFor(op));
    std::vector<Sample> out;
    auto push = [&](const std::string& n, Tensor self) {
      std::vector<IValue> args = {std::move(self)};
      args.insert(args.end(), extra.begin(), extra.end());
      out.push_back(makeSample(n, std::move(args)));
    };
    const Range r{-3, 3, -5, 5};
    for (ScalarType dt : dtypes) {
      const std::string s = dtypeSuffix(dt);
      push("[3,4]" + s, randomTensor(rng, {3, 4}, dt, r));
      push("0-d" + s, randomTensor(rng, {}, dt, r));
      push("empty [0,5]" + s, randomTensor(rng, {0, 5}, dt, r));
      push("transposed" + s, randomTensor(rng, {5, 3}, dt, r).transpose(0, 1));
      push("sliced (step 3)" + s, randomTensor(rng, {4, 9}, dt, r).slice(1, 1, std::nullopt, 3));
      push("expanded" + s, randomTensor(rng, {1, 4}, dt, r).expand({3, 4}));
      if (isFloatingType(dt) && !special.empty())
        push("special values" + s, hostTensor(special, {static_cast<int64_t>(special.size())}, dt));
    }
    push("large (300k elements)" + dtypeSuffix(dtypes.front()), randomTensor(rng, {300000}, dtypes.front(), r));
    for (ScalarType dt : refused) {
      std::vector<IValue> args = {randomTensor(rng, {3}, dt, r)};
      args.insert(args.end(), extra.begin(), extra.end());
      out.push_back(raising(std::string(scalarTypeName(dt)) + " self", std::move(args),
                            "dtype" + dtypeSuffix(dt) + " is not supported"));
    }
    return out;
  };
  spec.reference = [kind, f](const Sample& s) {
    const Tensor& t = s.args[0].toTensor();
    Expected e;
    e.sizes = sizesOf(t);
    e.dtype = kind == UKind::Logical                                  ? ScalarType::Bool
              : kind == UKind::Floating && !isFloatingType(t.dtype()) ? ScalarType::Float32
                                                                      : t.dtype();
    const ScalarType compute = kind == UKind::Logical ? t.dtype() : e.dtype;
    for (double v : valuesOf(t)) e.values.push_back(roundTo(e.dtype, f(roundTo(compute, v))));
    return std::vector<Expected>{e};
  };
  spec.inplace = inplace;
  spec.out = out;
  (void)name;
  return spec;
}

double truth(double v) { return v != 0 ? 1.0 : 0.0; }  // NaN is true

}  // namespace

void addElementwiseMoreSpecs(std::vector<OpSpec>& specs) {
  const Fn2 trunc_div = [](double x, double y) { return std::trunc(x / y); };
  const std::vector<ScalarType> numeric = kNumericTypes;
  // Division with a rounding mode, floor_divide, remainder, fmod; divisors
  // of both signs.
  Rng rng(seedFor("elementwise_more raising"));
  std::vector<Sample> bool_refused = {
      raising("bool with bool", {randomTensor(rng, {3}, ScalarType::Bool), randomTensor(rng, {3}, ScalarType::Bool)},
              "not defined for bool")};
  auto with = [](std::vector<Sample> s, IValue extra) {
    for (Sample& x : s) x.args.push_back(extra);
    return s;
  };
  specs.push_back(binarySpec("bp::div.Tensor_mode", "bp::div_.Tensor_mode", "bp::div.out_mode", Kind::Promoted, numeric,
                             true, {IValue("floor")}, floorDiv, with(bool_refused, IValue("floor"))));
  OpSpec trunc_spec = binarySpec("bp::div.Tensor_mode", "bp::div_.Tensor_mode", "bp::div.out_mode", Kind::Promoted,
                                 numeric, true, {IValue("trunc")}, trunc_div);
  trunc_spec.samples = [inner = trunc_spec.samples] {
    std::vector<Sample> s = inner();
    Rng r(seedFor("div trunc extra"));
    s.push_back(
        raising("rounding_mode='round'",
                {randomTensor(r, {3}, ScalarType::Float32), divisor(r, {3}, ScalarType::Float32), IValue("round")},
                "rounding_mode must be None, 'trunc' or 'floor'"));
    return s;
  };
  // The runner keys specs by op; the trunc samples go with the floor ones.
  {
    OpSpec& floor_spec = specs.back();
    floor_spec.samples = [a = floor_spec.samples, b = trunc_spec.samples] {
      std::vector<Sample> s = a();
      for (Sample& x : b()) {
        x.name += " (trunc)";
        s.push_back(std::move(x));
      }
      return s;
    };
    floor_spec.reference = [trunc_div](const Sample& s) {
      const bool trunc = s.args.size() > 2 && s.args[2].isString() && s.args[2].toString() == "trunc";
      return std::vector<Expected>{binaryReference(s, Kind::Promoted, trunc ? trunc_div : Fn2(floorDiv))};
    };
  }
  specs.push_back(binarySpec("bp::floor_divide", "bp::floor_divide_.Tensor", "bp::floor_divide.out", Kind::Promoted,
                             numeric, true, {}, floorDiv, bool_refused));
  specs.push_back(binarySpec("bp::remainder.Tensor", "bp::remainder_.Tensor", "bp::remainder.Tensor_out",
                             Kind::Promoted, numeric, true, {}, pyRemainder, bool_refused));
  specs.push_back(binarySpec(
      "bp::fmod.Tensor", "bp::fmod_.Tensor", "bp::fmod.Tensor_out", Kind::Promoted, numeric, true, {},
      [](double x, double y) { return std::fmod(x, y); }, bool_refused));
  specs.push_back(binarySpec("bp::true_divide.Tensor", "bp::true_divide_.Tensor", "bp::true_divide.out",
                             Kind::TrueDivide, numeric, true, {}, [](double x, double y) { return x / y; }));

  // Bitwise ops on integral and bool dtypes; floating ones are refused.
  auto bits = [](int op) {
    return [op](double x, double y) {
      const int64_t a = static_cast<int64_t>(x), b = static_cast<int64_t>(y);
      return static_cast<double>(op == 0 ? (a & b) : op == 1 ? (a | b) : (a ^ b));
    };
  };
  std::vector<Sample> float_refused = {
      raising("float32 with float32",
              {randomTensor(rng, {3}, ScalarType::Float32), randomTensor(rng, {3}, ScalarType::Float32)},
              "bitwise ops take integral and bool operands")};
  const char* bitwise_names[] = {"bitwise_and", "bitwise_or", "bitwise_xor"};
  for (int i = 0; i < 3; ++i) {
    const std::string n = bitwise_names[i];
    specs.push_back(binarySpec("bp::" + n + ".Tensor", "bp::" + n + "_.Tensor", "bp::" + n + ".Tensor_out",
                               Kind::Promoted, kIntegralAndBool, false, {}, bits(i), float_refused));
    specs.push_back(scalarSpec("bp::" + n + ".Scalar", "bp::" + n + "_.Scalar", "bp::" + n + ".Scalar_out",
                               Kind::Promoted, kIntegralAndBool,
                               {Scalar(int64_t{6}), Scalar(int64_t{-3}), Scalar(true)}, {}, bits(i)));
  }
  // Logical ops on every dtype: non-zero (NaN included) is true.
  std::vector<Sample> nan_truth = {makeSample("NaN is true", {hostTensor({NAN, 0, 1, 0}, {4}, ScalarType::Float32),
                                                              hostTensor({0, 0, 2, 3}, {4}, ScalarType::Int32)})};
  specs.push_back(binarySpec(
      "bp::logical_and", "bp::logical_and_", "bp::logical_and.out", Kind::Logical, kAllTypes, false, {},
      [](double x, double y) { return truth(x) * truth(y); }, nan_truth));
  specs.push_back(binarySpec(
      "bp::logical_or", "bp::logical_or_", "bp::logical_or.out", Kind::Logical, kAllTypes, false, {},
      [](double x, double y) { return truth(truth(x) + truth(y)); }, nan_truth));
  specs.push_back(binarySpec(
      "bp::logical_xor", "bp::logical_xor_", "bp::logical_xor.out", Kind::Logical, kAllTypes, false, {},
      [](double x, double y) { return double(truth(x) != truth(y)); }, nan_truth));

  // Scalar overloads: the number promotes as a Python number and is
  // converted to the common dtype as a cast.
  const std::vector<Scalar> divisors = {Scalar(int64_t{3}), Scalar(int64_t{-2}), Scalar(2.5)};
  specs.push_back(scalarSpec("bp::floor_divide.Scalar", "bp::floor_divide_.Scalar", "bp::floor_divide.Scalar_out",
                             Kind::Promoted, numeric, divisors, {}, floorDiv));
  specs.push_back(scalarSpec("bp::remainder.Scalar", "bp::remainder_.Scalar", "bp::remainder.Scalar_out",
                             Kind::Promoted, numeric, divisors, {}, pyRemainder));
  specs.push_back(scalarSpec("bp::fmod.Scalar", "bp::fmod_.Scalar", "bp::fmod.Scalar_out", Kind::Promoted, numeric,
                             divisors, {}, [](double x, double y) { return std::fmod(x, y); }));
  specs.push_back(scalarSpec("bp::div.Scalar_mode", "bp::div_.Scalar_mode", "bp::div.Scalar_mode_out", Kind::Promoted,
                             numeric, divisors, {IValue("trunc")}, trunc_div));
  specs.push_back(scalarSpec("bp::div.Scalar", "bp::div_.Scalar", "bp::div.Scalar_out", Kind::TrueDivide, kAllTypes,
                             divisors, {}, [](double x, double y) { return x / y; }));
  specs.push_back(scalarSpec("bp::true_divide.Scalar", "bp::true_divide_.Scalar", "", Kind::TrueDivide, numeric,
                             divisors, {}, [](double x, double y) { return x / y; }));
  const std::vector<Scalar> numbers = {Scalar(int64_t{3}), Scalar(int64_t{-2}), Scalar(0.5), Scalar(int64_t{300})};
  specs.push_back(scalarSpec("bp::add.Scalar", "bp::add_.Scalar", "bp::add.Scalar_out", Kind::Promoted, numeric,
                             numbers, {IValue(Scalar(int64_t{2}))}, [](double x, double y) { return x + 2 * y; }));
  specs.push_back(scalarSpec(
      "bp::sub.Scalar", "bp::sub_.Scalar", "bp::sub.Scalar_out", Kind::Promoted, numeric, numbers,
      {IValue(Scalar(int64_t{1}))}, [](double x, double y) { return x - y; },
      {raising("bool self", {randomTensor(rng, {3}, ScalarType::Bool), Scalar(int64_t{1}), Scalar(int64_t{1})},
               "subtraction with a bool operand is not supported")}));
  specs.push_back(scalarSpec("bp::mul.Scalar", "bp::mul_.Scalar", "bp::mul.Scalar_out", Kind::Promoted, kAllTypes,
                             numbers, {}, [](double x, double y) { return x * y; }));
  // rsub(self, other, alpha) = other - alpha * self: the reversed sub has
  // no in-place or out= form (PyTorch's neither).
  specs.push_back(scalarSpec(
      "bp::rsub.Scalar", "", "", Kind::Promoted, numeric, numbers, {IValue(Scalar(int64_t{2}))},
      [](double x, double y) { return y - 2 * x; },
      {raising("bool self", {randomTensor(rng, {3}, ScalarType::Bool), Scalar(int64_t{1}), Scalar(int64_t{1})},
               "subtraction with a bool operand is not supported")}));

  // Unary ops.
  const std::vector<double> halves = {0.5, 1.5, 2.5, -0.5, -2.5, -1.25, NAN, INFINITY, -INFINITY, -0.0};
  const std::vector<ScalarType> kBool = {ScalarType::Bool};
  auto unary = [&](const std::string& n, UKind kind, std::vector<ScalarType> dtypes, Fn1 f,
                   std::vector<ScalarType> refused = {}) {
    specs.push_back(unarySpec(n, "bp::" + n, "bp::" + n + "_", "bp::" + n + ".out", kind, std::move(dtypes), {},
                              std::move(f), halves, std::move(refused)));
  };
  unary(
      "floor", UKind::Same, numeric, [](double x) { return std::floor(x); }, kBool);
  unary(
      "ceil", UKind::Same, numeric, [](double x) { return std::ceil(x); }, kBool);
  unary(
      "trunc", UKind::Same, numeric, [](double x) { return std::trunc(x); }, kBool);
  unary(
      "round", UKind::Same, numeric, [](double x) { return std::nearbyint(x); }, kBool);
  unary("sign", UKind::Same, kAllTypes, [](double x) { return double((0 < x) - (x < 0)); });
  unary("erf", UKind::Floating, numeric, [](double x) { return std::erf(x); });
  unary("bitwise_not", UKind::Same, kIntegralAndBool, [](double x) { return double(~static_cast<int64_t>(x)); },
        {ScalarType::Float32});
  specs.back().reference = [](const Sample& s) {  // on bool: logical not
    const Tensor& t = s.args[0].toTensor();
    Expected e;
    e.sizes = sizesOf(t);
    e.dtype = t.dtype();
    for (double v : valuesOf(t))
      e.values.push_back(t.dtype() == ScalarType::Bool ? 1 - v : roundTo(e.dtype, double(~static_cast<int64_t>(v))));
    return std::vector<Expected>{e};
  };
  unary("logical_not", UKind::Logical, kAllTypes, [](double x) { return 1 - truth(x); });
  // round.decimals: 2 decimals, and -1 (to tens), on floating selves.
  {
    // In the dtype's compute type, as PyTorch (float for all but float64):
    // x * 100 rounds differently in float near a half.
    auto round_to = [](double x, int64_t d, ScalarType dtype = ScalarType::Float64) {
      const double scale = std::pow(10.0, static_cast<double>(d < 0 ? -d : d));
      if (dtype != ScalarType::Float64) {
        const float xf = static_cast<float>(x), sf = static_cast<float>(scale);
        return static_cast<double>(d < 0 ? std::nearbyint(xf / sf) * sf : std::nearbyint(xf * sf) / sf);
      }
      return d < 0 ? std::nearbyint(x / scale) * scale : std::nearbyint(x * scale) / scale;
    };
    OpSpec r = unarySpec("round.decimals", "bp::round.decimals", "bp::round_.decimals", "bp::round.decimals_out",
                         UKind::Same, kFloatTypes, {IValue(int64_t{2})},
                         [round_to](double x) { return round_to(x, 2); }, halves, {ScalarType::Int32});
    r.samples = [inner = r.samples] {
      std::vector<Sample> s = inner();
      const size_t n = s.size();
      for (size_t i = 0; i < n; ++i) {
        if (s[i].must_raise) continue;
        Sample tens = s[i];
        tens.name += " decimals=-1";
        tens.args[1] = IValue(int64_t{-1});
        s.push_back(std::move(tens));
      }
      return s;
    };
    r.reference = [round_to](const Sample& s) {
      const Tensor& t = s.args[0].toTensor();
      const int64_t d = s.args[1].toInt();
      Expected e;
      e.sizes = sizesOf(t);
      e.dtype = t.dtype();
      for (double v : valuesOf(t)) e.values.push_back(roundTo(e.dtype, round_to(roundTo(e.dtype, v), d, e.dtype)));
      return std::vector<Expected>{e};
    };
    specs.push_back(std::move(r));
  }
  specs.push_back(unarySpec(
      "isnan", "bp::isnan", "", "bp::isnan.out", UKind::Logical, kAllTypes, {},
      [](double x) { return double(std::isnan(x)); }, halves));
  specs.push_back(unarySpec(
      "isinf", "bp::isinf", "", "bp::isinf.out", UKind::Logical, kAllTypes, {},
      [](double x) { return double(std::isinf(x)); }, halves));
  specs.push_back(unarySpec(
      "isfinite", "bp::isfinite", "", "", UKind::Logical, kAllTypes, {},
      [](double x) { return double(std::isfinite(x)); }, halves));
  // nan_to_num with the defaults (the dtype's extremes) and with values.
  specs.push_back(unarySpec(
      "nan_to_num", "bp::nan_to_num", "bp::nan_to_num_", "bp::nan_to_num.out", UKind::Same,
      {ScalarType::Float32, ScalarType::Float64}, {IValue(1.5), IValue(100.0), IValue(-100.0)},
      [](double x) { return std::isnan(x)    ? 1.5
                            : x == INFINITY  ? 100
                            : x == -INFINITY ? -100
                                             : x; }, halves));
  // Activations: floating selves.
  const std::vector<ScalarType> kInt = {ScalarType::Int32};
  specs.push_back(unarySpec(
      "leaky_relu", "bp::leaky_relu", "bp::leaky_relu_", "bp::leaky_relu.out", UKind::Same, kFloatTypes,
      {IValue(Scalar(0.125))}, [](double x) { return x > 0 ? x : x * 0.125; }, halves, kInt));
  specs.push_back(unarySpec(
      "hardtanh", "bp::hardtanh", "bp::hardtanh_", "bp::hardtanh.out", UKind::Same, kSignedNumeric,
      {IValue(Scalar(int64_t{-2})), IValue(Scalar(int64_t{1}))},
      [](double x) { return x < -2  ? -2.0
                            : x > 1 ? 1.0
                                    : x; }, halves, kBool));
  specs.push_back(unarySpec(
      "elu", "bp::elu", "bp::elu_", "bp::elu.out", UKind::Same, kFloatTypes,
      {IValue(Scalar(1.5)), IValue(Scalar(int64_t{1})), IValue(Scalar(0.5))},
      [](double x) { return x <= 0 ? 1.5 * std::expm1(0.5 * x) : x; }, halves, kInt));
  specs.push_back(unarySpec(
      "softplus", "bp::softplus", "", "bp::softplus.out", UKind::Same, kFloatTypes,
      {IValue(Scalar(int64_t{2})), IValue(Scalar(int64_t{4}))},
      [](double x) { return 2 * x > 4 ? x : std::log1p(std::exp(2 * x)) / 2; }, halves, kInt));
}

}  // namespace backplane::conformance
