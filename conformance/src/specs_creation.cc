// Conformance specs of the creation family (Note [Conformance specs]): the
// fills (fill_, zero_), the factories from a size (empty, empty_strided,
// zeros, ones, full), the *_like factories and arange, whose kernel is
// arange.start_out.
//
// A factory's samples pass `device=` as the host device, which the runner
// replaces with the backend's, so the result must land on the backend under
// test. None means the CPU, right only on the CPU backend, so the factories
// from a size always get device=; the *_like ones default to self's device
// (which the runner put on the backend) and are called both ways.
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

// A dtype= argument's dtype, or `fallback` when it is None.
ScalarType dtypeOr(const IValue& dtype, ScalarType fallback) {
  return dtype.isNone() ? fallback : dtype.toScalarType();
}

// A value written into a tensor of `dtype` (fill_, full_like): converted as
// Scalar::to does, truncating toward zero for integral dtypes.
double filledValue(ScalarType dtype, const Scalar& value) {
  if (dtype == ScalarType::Bool) return value.toBool() ? 1 : 0;
  if (!isFloatingType(dtype)) return roundTo(dtype, static_cast<double>(value.toInt()));
  return roundTo(dtype, value.toDouble());
}

Expected filled(std::vector<int64_t> sizes, ScalarType dtype, double value) {
  Expected e;
  e.dtype = dtype;
  e.values.assign(static_cast<size_t>(numelOf(sizes)), value);
  e.sizes = std::move(sizes);
  return e;
}

// A random host tensor none of whose elements is `avoid` (when given):
// an in-place fill must visibly change every element it writes.
Tensor randomAvoiding(Rng& rng, std::vector<int64_t> sizes, ScalarType dt, std::optional<double> avoid) {
  Tensor t = randomTensor(rng, sizes, dt);
  if (!avoid) return t;
  std::vector<double> v = valuesOf(t);
  for (double& x : v)
    if (x == *avoid) x = *avoid == 0 ? 1 : 0;
  return hostTensor(v, std::move(sizes), dt);
}

// The layouts every tensor argument of a fill or *_like op comes in; with
// `avoid`, no element already holds the value a fill writes.
std::vector<std::pair<std::string, Tensor>> layouts(Rng& rng, ScalarType dt, std::optional<double> avoid = {}) {
  return {
      {"[3,4]", randomAvoiding(rng, {3, 4}, dt, avoid)},
      {"0-d", randomAvoiding(rng, {}, dt, avoid)},
      {"one element", randomAvoiding(rng, {1}, dt, avoid)},
      {"empty [0,5]", randomAvoiding(rng, {0, 5}, dt, avoid)},
      {"transposed [5,3]", randomAvoiding(rng, {3, 5}, dt, avoid).transpose(0, 1)},
      {"sliced [3,4] (step 2)", randomAvoiding(rng, {3, 8}, dt, avoid).slice(1, 1, std::nullopt, 2)},
  };
}

// A value for a fill of `dtype` that is not its zero and, for the
// floating dtypes, is exact in all of them.
Scalar typicalValue(ScalarType dt) {
  switch (dt) {
    case ScalarType::Bool: return Scalar(true);
    case ScalarType::UInt8: return Scalar(int64_t{200});
    case ScalarType::Int8:
    case ScalarType::Int16:
    case ScalarType::Int32: return Scalar(int64_t{-7});
    case ScalarType::Int64: return Scalar(int64_t{1} << 40);
    case ScalarType::UInt16: return Scalar(int64_t{40000});
    case ScalarType::UInt32: return Scalar(int64_t{3000000000});
    case ScalarType::UInt64: return Scalar(int64_t{1} << 40);
    default: return Scalar(-2.5);
  }
}

// Values whose conversion into the dtype is the point of the sample, and
// values that do not fit (which must raise, as in PyTorch).
struct ValueCase {
  ScalarType dtype;
  Scalar value;
  const char* name;
};
const std::vector<ValueCase>& convertingValues() {
  static const std::vector<ValueCase> cases = {
      {ScalarType::Int32, Scalar(2.7), "2.7 into int32 truncates"},
      {ScalarType::Int8, Scalar(-2.7), "-2.7 into int8 truncates"},
      {ScalarType::Float32, Scalar(true), "true into float32"},
      {ScalarType::Bool, Scalar(0.5), "0.5 into bool"},
      {ScalarType::Float32, Scalar(std::numeric_limits<double>::infinity()), "inf into float32"},
      {ScalarType::Float64, Scalar(std::nan("")), "NaN into float64"},
      {ScalarType::Float16, Scalar(65504.0), "65504 into float16 (its largest value)"},
      {ScalarType::UInt8, Scalar(int64_t{-1}), "-1 into uint8 wraps to 255"},
      {ScalarType::BFloat16, Scalar(0.1), "0.1 into bfloat16 rounds"},
      {ScalarType::Float32, Scalar(int64_t{16777217}), "2^24 + 1 into float32 rounds"},
  };
  return cases;
}
const std::vector<ValueCase>& overflowingValues() {
  static const std::vector<ValueCase> cases = {
      {ScalarType::Int8, Scalar(int64_t{300}), "300 into int8"},
      {ScalarType::UInt8, Scalar(int64_t{-256}), "-256 into uint8 (wraps only down to -255)"},
      {ScalarType::Float16, Scalar(65510.0), "65510 into float16 (beyond 65504)"},
      {ScalarType::Float16, Scalar(int64_t{65510}), "the integer 65510 into float16"},
      {ScalarType::Int8, Scalar(127.5), "127.5 into int8 (beyond 127)"},
      {ScalarType::Int32, Scalar(1e10), "1e10 into int32"},
      {ScalarType::Float16, Scalar(1e6), "1e6 into float16"},
      {ScalarType::Int64, Scalar(std::nan("")), "NaN into int64"},
  };
  return cases;
}

// fill_.Scalar (self, value), certified through its functional form: the
// call returns self, which must hold the value everywhere.
void addFill(std::vector<OpSpec>& specs) {
  OpSpec spec;
  spec.op = "bp::fill_.Scalar";
  spec.family = "creation";
  spec.samples = [op = spec.op] {
    Rng rng(seedFor(op));
    std::vector<Sample> out;
    for (ScalarType dt : kEveryType) {
      const Scalar value = typicalValue(dt);
      for (auto& [name, self] : layouts(rng, dt, filledValue(dt, value))) {
        out.push_back(makeSample(name + dtypeSuffix(dt), {IValue(self), IValue(value)}));
      }
    }
    for (const ValueCase& c : convertingValues()) {
      const Tensor self = randomAvoiding(rng, {2, 3}, c.dtype, filledValue(c.dtype, c.value));
      out.push_back(makeSample(c.name, {IValue(self), IValue(c.value)}));
    }
    out.push_back(makeSample("large [1100,1000] float32",
                             {IValue(emptyTensor({1100, 1000}, ScalarType::Float32)), IValue(Scalar(0.75))}));
    for (const ValueCase& c : overflowingValues()) {
      out.push_back(raising(c.name, {IValue(randomTensor(rng, {2, 3}, c.dtype)), IValue(c.value)},
                            "the value does not fit the dtype"));
    }
    out.push_back(raising("expanded self",
                          {IValue(randomTensor(rng, {1, 4}, ScalarType::Float32).expand({3, 4})), IValue(Scalar(1.0))},
                          "self's elements overlap"));
    return out;
  };
  spec.reference = [](const Sample& s) {
    const Tensor& self = s.args[0].toTensor();
    return std::vector<Expected>{filled(sizesOf(self), self.dtype(), filledValue(self.dtype(), s.args[1].toScalar()))};
  };
  specs.push_back(std::move(spec));
}

// zero_ (self): zeros of self's dtype everywhere.
void addZero(std::vector<OpSpec>& specs) {
  OpSpec spec;
  spec.op = "bp::zero_";
  spec.family = "creation";
  spec.samples = [op = spec.op] {
    Rng rng(seedFor(op));
    std::vector<Sample> out;
    for (ScalarType dt : kEveryType) {
      for (auto& [name, self] : layouts(rng, dt, 0.0))
        out.push_back(makeSample(name + dtypeSuffix(dt), {IValue(self)}));
    }
    out.push_back(
        makeSample("large [1100,1000] float32", {IValue(randomTensor(rng, {1100, 1000}, ScalarType::Float32))}));
    out.push_back(raising("expanded self", {IValue(randomTensor(rng, {1, 4}, ScalarType::Float32).expand({3, 4}))},
                          "self's elements overlap"));
    return out;
  };
  spec.reference = [](const Sample& s) {
    const Tensor& self = s.args[0].toTensor();
    return std::vector<Expected>{filled(sizesOf(self), self.dtype(), 0)};
  };
  specs.push_back(std::move(spec));
}

// --- The factories: fills of a new tensor.

// A factory's device= argument: the host device, which the runner replaces
// with the backend's.
// "[3, 4]", for messages.
std::string listText(IntArrayRef v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// empty's values are unspecified: the shape and dtype (the reference) and
// the layout are its spec. empty and empty_like give contiguous tensors;
// PyTorch's empty_like would keep a dense permuted input's strides, which
// Backplane documents as a difference (dispatcher/ops/src/creation.cc).
std::string checkContiguous(const Sample&, const std::vector<Tensor>& got) {
  if (got[0].is_contiguous()) return "";
  return "the result has strides " + listText(got[0].strides()) + " for its shape " + listText(got[0].sizes()) +
         "; it must be contiguous";
}

// The factories that fill a new tensor, with its size or like self's.
enum class Fill { Empty, Zeros, Ones, Full };

// PyTorch's dtype of full(size, value) without dtype=: the value's kind.
ScalarType valueType(const Scalar& value) {
  return value.isBool() ? ScalarType::Bool : value.isFloatingPoint() ? ScalarType::Float32 : ScalarType::Int64;
}

// The result of a factory whose arguments are (size or self, [fill_value,]
// dtype, ...): `sizes` of the given dtype, else `fallback`, holding the
// fill (empty's zeros are not compared: see checkContiguous).
Expected factoryResult(Fill kind, const Sample& s, std::vector<int64_t> sizes, ScalarType fallback) {
  const bool full = kind == Fill::Full;
  const ScalarType dt = dtypeOr(s.args[full ? 2 : 1], fallback);
  const double value = full ? filledValue(dt, s.args[1].toScalar()) : kind == Fill::Ones ? 1 : 0;
  return filled(std::move(sizes), dt, value);
}

// The *_like factories: (self, [fill_value,] dtype=None, device=None). The
// result has self's shape, the given dtype or self's, and lands on the
// given device or self's (which the runner put on the backend).
void addLike(std::vector<OpSpec>& specs, const std::string& name, Fill kind) {
  OpSpec spec;
  spec.op = "bp::" + name;
  spec.family = "creation";
  const bool full = kind == Fill::Full;
  spec.samples = [op = spec.op, full] {
    Rng rng(seedFor(op));
    std::vector<Sample> out;
    // self, the fill value (full_like only) and dtype; device is left off.
    auto args = [full](const Tensor& self, const Scalar& value, std::optional<ScalarType> dtype) {
      std::vector<IValue> a = {IValue(self)};
      if (full) a.emplace_back(value);
      a.emplace_back(dtype);
      return a;
    };
    auto push = [&](std::string n, const Tensor& self, const Scalar& value, std::optional<ScalarType> dtype) {
      out.push_back(makeSample(std::move(n), args(self, value, dtype)));
    };
    for (ScalarType dt : kEveryType) {
      for (auto& [n, self] : layouts(rng, dt)) push(n + dtypeSuffix(dt), self, typicalValue(dt), std::nullopt);
    }
    push("expanded [3,4] float32", randomTensor(rng, {1, 4}, ScalarType::Float32).expand({3, 4}), Scalar(1.5),
         std::nullopt);
    push("dtype=float64 from int32", randomTensor(rng, {2, 3}, ScalarType::Int32), Scalar(2.5), ScalarType::Float64);
    push("dtype=int8 from float32", randomTensor(rng, {2, 3}, ScalarType::Float32), Scalar(int64_t{-3}),
         ScalarType::Int8);
    push("dtype=bool from int64", randomTensor(rng, {2, 3}, ScalarType::Int64), Scalar(true), ScalarType::Bool);
    std::vector<IValue> on_device = args(randomTensor(rng, {2, 3}, ScalarType::Float32), Scalar(1.5), std::nullopt);
    on_device.push_back(backendDevice());
    out.push_back(makeSample("device= the backend's, float32", std::move(on_device)));
    push("large [1100,1000] float32", emptyTensor({1100, 1000}, ScalarType::Float32), Scalar(0.75), std::nullopt);
    if (full) {
      for (const ValueCase& c : convertingValues()) {
        push(c.name, randomTensor(rng, {2, 3}, c.dtype), c.value, std::nullopt);
      }
      for (const ValueCase& c : overflowingValues()) {
        out.push_back(raising(c.name, args(randomTensor(rng, {2, 3}, c.dtype), c.value, std::nullopt),
                              "the value does not fit the dtype"));
      }
      out.push_back(raising("300 into dtype=uint8 from float32",
                            args(randomTensor(rng, {2}, ScalarType::Float32), Scalar(int64_t{300}), ScalarType::UInt8),
                            "the value does not fit the requested dtype"));
    }
    return out;
  };
  spec.reference = [kind](const Sample& s) {
    const Tensor& self = s.args[0].toTensor();
    return std::vector<Expected>{factoryResult(kind, s, sizesOf(self), self.dtype())};
  };
  if (kind == Fill::Empty) spec.check = checkContiguous;
  specs.push_back(std::move(spec));
}

// The shapes every factory from a size is asked for.
const std::vector<std::pair<std::string, std::vector<int64_t>>>& factoryShapes() {
  static const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"[3,4]", {3, 4}},
      {"0-d", {}},
      {"one element", {1}},
      {"empty [0,5]", {0, 5}},
      {"empty [2,0,3]", {2, 0, 3}},
      {"3-d [2,3,4]", {2, 3, 4}},
  };
  return shapes;
}

// empty, zeros, ones and full: (size, [fill_value,] dtype=None,
// device=None). The result has the size and the given dtype, else float32
// (full: the value's dtype, bool, int64 or float32, as in PyTorch).
void addSizeFactory(std::vector<OpSpec>& specs, const std::string& name, Fill kind) {
  OpSpec spec;
  spec.op = "bp::" + name;
  spec.family = "creation";
  const bool full = kind == Fill::Full;
  spec.samples = [full] {
    std::vector<Sample> out;
    auto args = [full](std::vector<int64_t> size, const Scalar& value, std::optional<ScalarType> dtype) {
      std::vector<IValue> a = {IValue(std::move(size))};
      if (full) a.emplace_back(value);
      a.emplace_back(dtype);
      a.push_back(backendDevice());
      return a;
    };
    auto push = [&](std::string n, std::vector<int64_t> size, const Scalar& value, std::optional<ScalarType> dtype) {
      out.push_back(makeSample(std::move(n), args(std::move(size), value, dtype)));
    };
    for (ScalarType dt : kEveryType) {
      for (const auto& [n, size] : factoryShapes()) push(n + dtypeSuffix(dt), size, typicalValue(dt), dt);
    }
    if (full) {
      push("[3,4] dtype=None, a bool value is bool", {3, 4}, Scalar(true), std::nullopt);
      push("[3,4] dtype=None, an int value is int64", {3, 4}, Scalar(int64_t{1} << 40), std::nullopt);
      push("[3,4] dtype=None, a float value is float32", {3, 4}, Scalar(-2.5), std::nullopt);
      push("0-d dtype=None, inf is float32", {}, Scalar(std::numeric_limits<double>::infinity()), std::nullopt);
      for (const ValueCase& c : convertingValues()) push(c.name, {2, 3}, c.value, c.dtype);
      for (const ValueCase& c : overflowingValues()) {
        out.push_back(raising(c.name, args({2, 3}, c.value, c.dtype), "the value does not fit the dtype"));
      }
    } else {
      push("[3,4] dtype=None is float32", {3, 4}, Scalar(), std::nullopt);
      push("0-d dtype=None is float32", {}, Scalar(), std::nullopt);
    }
    push("large [1100,1000] float32", {1100, 1000}, Scalar(0.75), ScalarType::Float32);
    out.push_back(raising("negative size [2,-1]", args({2, -1}, Scalar(1.0), std::nullopt), "sizes must be >= 0"));
    return out;
  };
  spec.reference = [kind, full](const Sample& s) {
    const ScalarType fallback = full ? valueType(s.args[1].toScalar()) : ScalarType::Float32;
    return std::vector<Expected>{factoryResult(kind, s, s.args[0].toIntList(), fallback)};
  };
  if (kind == Fill::Empty) spec.check = checkContiguous;
  specs.push_back(std::move(spec));
}

// empty_strided (size, stride, dtype=None, device=None): the result has
// exactly the given strides (PyTorch allows gaps and overlapping elements).
void addEmptyStrided(std::vector<OpSpec>& specs) {
  OpSpec spec;
  spec.op = "bp::empty_strided";
  spec.family = "creation";
  spec.samples = [] {
    std::vector<Sample> out;
    auto args = [](std::vector<int64_t> size, std::vector<int64_t> stride, std::optional<ScalarType> dtype) {
      return std::vector<IValue>{IValue(std::move(size)), IValue(std::move(stride)), IValue(dtype), backendDevice()};
    };
    auto push = [&](std::string n, std::vector<int64_t> size, std::vector<int64_t> stride,
                    std::optional<ScalarType> dtype) {
      out.push_back(makeSample(std::move(n), args(std::move(size), std::move(stride), dtype)));
    };
    for (ScalarType dt : kEveryType) push("column-major [3,4]" + dtypeSuffix(dt), {3, 4}, {1, 3}, dt);
    push("row-major [3,4]", {3, 4}, {4, 1}, std::nullopt);
    push("with gaps [3,4] strides [10,2]", {3, 4}, {10, 2}, std::nullopt);
    push("overlapping [3,4] strides [0,1]", {3, 4}, {0, 1}, std::nullopt);
    push("permuted [2,3,4] strides [1,8,2]", {2, 3, 4}, {1, 8, 2}, ScalarType::Float64);
    push("0-d", {}, {}, std::nullopt);
    push("one element, stride 5", {1}, {5}, ScalarType::Int8);
    push("empty [0,5] strides [5,1]", {0, 5}, {5, 1}, std::nullopt);
    push("empty [2,0] strides [7,3]", {2, 0}, {7, 3}, ScalarType::Int64);
    push("large column-major [1100,1000] float32", {1100, 1000}, {1, 1100}, ScalarType::Float32);
    out.push_back(raising("negative stride", args({2, 3}, {3, -1}, std::nullopt), "strides must be >= 0"));
    out.push_back(raising("negative size", args({2, -3}, {3, 1}, std::nullopt), "sizes must be >= 0"));
    out.push_back(raising("two sizes, one stride", args({2, 3}, {1}, std::nullopt), "one stride per dimension"));
    return out;
  };
  spec.reference = [](const Sample& s) {
    return std::vector<Expected>{Expected{s.args[0].toIntList(), dtypeOr(s.args[2], ScalarType::Float32), {}}};
  };
  spec.check = [](const Sample& s, const std::vector<Tensor>& got) {
    const std::vector<int64_t>& stride = s.args[1].toIntList();
    const std::vector<int64_t> actual(got[0].strides().begin(), got[0].strides().end());
    if (actual == stride) return std::string();
    return "the result has strides " + listText(got[0].strides()) + ", expected " + listText(stride);
  };
  specs.push_back(std::move(spec));
}

// --- arange.

// arange's result for (start, end, step) into `dtype`, by PyTorch's rules:
// int64 counts in integers (start, end and step truncated); every other
// dtype sizes the range in double, and integral dtypes compute the values
// from the truncated start and step. Element i is start + i * step.
Expected arangeResult(const Scalar& start, const Scalar& end, const Scalar& step, ScalarType dtype) {
  Expected e;
  e.dtype = dtype;
  const bool integral = !isFloatingType(dtype);
  int64_t n;
  if (dtype == ScalarType::Int64) {
    const int64_t st = step.toInt(), sign = st > 0 ? 1 : -1;
    n = (end.toInt() - start.toInt() + st - sign) / st;
  } else {
    n = static_cast<int64_t>(std::ceil((end.toDouble() - start.toDouble()) / step.toDouble()));
  }
  e.sizes = {n};
  const double first = integral ? static_cast<double>(start.toInt()) : start.toDouble();
  const double delta = integral ? static_cast<double>(step.toInt()) : step.toDouble();
  for (int64_t i = 0; i < n; ++i) e.values.push_back(roundTo(dtype, first + static_cast<double>(i) * delta));
  return e;
}

// arange.start_out (start, end, step, out): the result has out's dtype.
void addArangeOut(std::vector<OpSpec>& specs) {
  OpSpec spec;
  spec.op = "bp::arange.start_out";
  spec.family = "creation";
  spec.samples = [] {
    std::vector<Sample> out;
    // `out` starts empty unless the sample is about its layout: the op
    // must resize it.
    auto args = [](const Scalar& start, const Scalar& end, const Scalar& step, Tensor o) {
      return std::vector<IValue>{IValue(start), IValue(end), IValue(step), IValue(std::move(o))};
    };
    auto push = [&](std::string name, const Scalar& start, const Scalar& end, const Scalar& step, ScalarType dt) {
      out.push_back(makeSample(std::move(name) + dtypeSuffix(dt), args(start, end, step, emptyTensor({0}, dt))));
    };
    using I = int64_t;
    for (ScalarType dt : {ScalarType::Int64, ScalarType::Int32, ScalarType::Int8, ScalarType::UInt8,
                          ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16}) {
      push("0 to 10", Scalar(I{0}), Scalar(I{10}), Scalar(I{1}), dt);
      push("10 down to 0 in steps of -3", Scalar(I{10}), Scalar(I{0}), Scalar(I{-3}), dt);
      push("one element, 5 to 6 in steps of 4", Scalar(I{5}), Scalar(I{6}), Scalar(I{4}), dt);
      push("empty, 3 to 3", Scalar(I{3}), Scalar(I{3}), Scalar(I{1}), dt);
    }
    for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16}) {
      push("-1 to 1 in steps of 0.25", Scalar(-1.0), Scalar(1.0), Scalar(0.25), dt);
      push("1 down to -1.05 in steps of -0.1", Scalar(1.0), Scalar(-1.05), Scalar(-0.1), dt);
    }
    push("fractional bounds truncate (0.5, 5.7, 1.5)", Scalar(0.5), Scalar(5.7), Scalar(1.5), ScalarType::Int64);
    push("fractional bounds size in double (0.5, 5.7, 1.5)", Scalar(0.5), Scalar(5.7), Scalar(1.5), ScalarType::Int32);
    push("large, 1.1M elements", Scalar(I{-550000}), Scalar(I{550000}), Scalar(I{1}), ScalarType::Float32);
    out.push_back(makeSample("out of the right size, sliced (step 2) float32",
                             args(Scalar(I{0}), Scalar(I{6}), Scalar(I{1}),
                                  emptyTensor({12}, ScalarType::Float32).slice(0, 0, std::nullopt, 2))));
    auto bad = [&](std::string name, const Scalar& start, const Scalar& end, const Scalar& step, ScalarType dt,
                   std::string reason) {
      out.push_back(raising(std::move(name), args(start, end, step, emptyTensor({0}, dt)), std::move(reason)));
    };
    bad("step 0", Scalar(I{0}), Scalar(I{5}), Scalar(I{0}), ScalarType::Float32, "step must be nonzero");
    bad("step 0.5 is 0 as int64", Scalar(I{0}), Scalar(I{5}), Scalar(0.5), ScalarType::Int64, "step must be nonzero");
    bad("0 to 5 in steps of -1", Scalar(I{0}), Scalar(I{5}), Scalar(I{-1}), ScalarType::Int64,
        "the range is empty in the direction of step");
    bad("5 to 0 in steps of 1", Scalar(I{5}), Scalar(I{0}), Scalar(I{1}), ScalarType::Float32,
        "the range is empty in the direction of step");
    bad("infinite end", Scalar(I{0}), Scalar(std::numeric_limits<double>::infinity()), Scalar(I{1}),
        ScalarType::Float64, "end must be finite");
    bad("NaN step", Scalar(I{0}), Scalar(I{5}), Scalar(std::nan("")), ScalarType::Float32, "step must be finite");
    out.push_back(raising("out of the wrong size [7], not empty",
                          args(Scalar(I{0}), Scalar(I{4}), Scalar(I{1}), emptyTensor({7}, ScalarType::Int32)),
                          "a non-empty out of another shape is not resized"));
    bad("bool out", Scalar(I{0}), Scalar(I{2}), Scalar(I{1}), ScalarType::Bool, "arange has no bool dtype");
    return out;
  };
  spec.reference = [](const Sample& s) {
    return std::vector<Expected>{
        arangeResult(s.args[0].toScalar(), s.args[1].toScalar(), s.args[2].toScalar(), s.args[3].toTensor().dtype())};
  };
  specs.push_back(std::move(spec));
}

// A call of an arange factory: its scalars, its dtype= and, for a call that
// must raise, why.
struct ArangeCall {
  std::string name;
  Scalar start, end, step;
  std::optional<ScalarType> dtype;
  std::string raise_reason;
};

// The calls of every arange factory; each takes those it can express.
std::vector<ArangeCall> arangeCalls() {
  using I = int64_t;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<ArangeCall> calls = {
      {"0 to 10", I{0}, I{10}, I{1}, std::nullopt, ""},
      {"empty, 0 to 0", I{0}, I{0}, I{1}, std::nullopt, ""},
      {"one element, 0 to 1", I{0}, I{1}, I{1}, std::nullopt, ""},
      {"0 to 5.5 is float32", I{0}, 5.5, I{1}, std::nullopt, ""},
      {"-3 to 4", I{-3}, I{4}, I{1}, std::nullopt, ""},
      {"2.5 to 6 is float32", 2.5, I{6}, I{1}, std::nullopt, ""},
      {"10 down to 0 in steps of -3", I{10}, I{0}, I{-3}, std::nullopt, ""},
      {"0 to 3 in steps of 0.5 is float32", I{0}, I{3}, 0.5, std::nullopt, ""},
      {"1 down to -1.05 in steps of -0.1", 1.0, -1.05, -0.1, std::nullopt, ""},
      {"fractional bounds truncate as int64 (0.5, 5.7, 1.5)", 0.5, 5.7, 1.5, ScalarType::Int64, ""},
      {"fractional bounds size in double as int32 (0.5, 5.7, 1.5)", 0.5, 5.7, 1.5, ScalarType::Int32, ""},
      {"fractional bounds as float64 (0.5, 5.7, 1.5)", 0.5, 5.7, 1.5, ScalarType::Float64, ""},
      {"large, 0 to 1.1M", I{0}, I{1100000}, I{1}, std::nullopt, ""},
      {"0 to -3", I{0}, I{-3}, I{1}, std::nullopt, "the range is empty in the direction of step"},
      {"5 to 0", I{5}, I{0}, I{1}, std::nullopt, "the range is empty in the direction of step"},
      {"0 to 5 in steps of -1", I{0}, I{5}, I{-1}, std::nullopt, "the range is empty in the direction of step"},
      {"step 0", I{0}, I{5}, I{0}, std::nullopt, "step must be nonzero"},
      {"step 0.0", I{0}, I{5}, 0.0, std::nullopt, "step must be nonzero"},
      {"NaN step", I{0}, I{5}, std::nan(""), std::nullopt, "step must be finite"},
      {"infinite end", I{0}, inf, I{1}, std::nullopt, "end must be finite"},
      {"NaN end", I{0}, std::nan(""), I{1}, ScalarType::Float64, "end must be finite"},
      {"dtype=bool", I{0}, I{2}, I{1}, ScalarType::Bool, "arange has no bool dtype"},
  };
  for (ScalarType dt : {ScalarType::Int64, ScalarType::Int32, ScalarType::Int8, ScalarType::UInt8, ScalarType::Float32,
                        ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16}) {
    calls.push_back({"0 to 10" + dtypeSuffix(dt), I{0}, I{10}, I{1}, dt, ""});
    calls.push_back({"-3 to 4" + dtypeSuffix(dt), I{-3}, I{4}, I{1}, dt, ""});
  }
  return calls;
}

// The arange factories: arange (end), arange.start (start, end) and
// arange.start_step (start, end, step), then dtype=None and device=None.
// The scalars left off are start 0 and step 1. Without dtype=, the result
// is int64 when every scalar is integral, else float32, as in PyTorch.
void addArange(std::vector<OpSpec>& specs, const std::string& name, size_t scalars) {
  OpSpec spec;
  spec.op = "bp::" + name;
  spec.family = "creation";
  spec.samples = [scalars] {
    const Scalar zero(int64_t{0}), one(int64_t{1});
    std::vector<Sample> out;
    for (const ArangeCall& c : arangeCalls()) {
      if ((scalars < 3 && !(c.step == one)) || (scalars < 2 && !(c.start == zero))) continue;
      std::vector<IValue> args;
      if (scalars >= 2) args.emplace_back(c.start);
      args.emplace_back(c.end);
      if (scalars == 3) args.emplace_back(c.step);
      args.emplace_back(c.dtype);
      args.push_back(backendDevice());
      out.push_back(c.raise_reason.empty() ? makeSample(c.name, std::move(args))
                                           : raising(c.name, std::move(args), c.raise_reason));
    }
    return out;
  };
  spec.reference = [scalars](const Sample& s) {
    const Scalar start = scalars >= 2 ? s.args[0].toScalar() : Scalar(int64_t{0});
    const Scalar end = s.args[scalars >= 2 ? 1 : 0].toScalar();
    const Scalar step = scalars == 3 ? s.args[2].toScalar() : Scalar(int64_t{1});
    const bool floating = start.isFloatingPoint() || end.isFloatingPoint() || step.isFloatingPoint();
    const ScalarType dt = dtypeOr(s.args[scalars], floating ? ScalarType::Float32 : ScalarType::Int64);
    return std::vector<Expected>{arangeResult(start, end, step, dt)};
  };
  specs.push_back(std::move(spec));
}

// --- eye, linspace.

// eye(n, dtype, device) and eye.m(n, m, dtype, device): ones on the main
// diagonal, float32 unless dtype= says otherwise.
void addEye(std::vector<OpSpec>& specs, bool with_m) {
  OpSpec spec;
  spec.op = with_m ? "bp::eye.m" : "bp::eye";
  spec.family = "creation";
  spec.samples = [with_m] {
    std::vector<Sample> out;
    auto args = [&](int64_t n, int64_t m, IValue dtype) {
      std::vector<IValue> a{IValue(n)};
      if (with_m) a.emplace_back(m);
      a.push_back(std::move(dtype));
      a.push_back(backendDevice());
      return a;
    };
    const std::vector<std::pair<int64_t, int64_t>> shapes =
        with_m ? std::vector<std::pair<int64_t, int64_t>>{{3, 5}, {5, 3}, {0, 4}, {4, 0}, {1, 1}}
               : std::vector<std::pair<int64_t, int64_t>>{{4, 4}, {1, 1}, {0, 0}};
    for (const auto& [n, m] : shapes) {
      const std::string name = "[" + std::to_string(n) + "," + std::to_string(m) + "]";
      out.push_back(makeSample(name + " default dtype", args(n, m, IValue())));
      for (ScalarType dt : kAllTypes) out.push_back(makeSample(name + dtypeSuffix(dt), args(n, m, IValue(dt))));
    }
    out.push_back(
        makeSample("large [1100,1000] float32", args(1100, with_m ? 1000 : 1100, IValue(ScalarType::Float32))));
    out.push_back(raising("n -1", args(-1, 2, IValue()), "n must be >= 0"));
    if (with_m) out.push_back(raising("m -2", args(2, -2, IValue()), "m must be >= 0"));
    return out;
  };
  spec.reference = [with_m](const Sample& s) {
    const int64_t n = s.args[0].toInt(), m = with_m ? s.args[1].toInt() : n;
    Expected e;
    e.sizes = {n, m};
    e.dtype = dtypeOr(s.args[with_m ? 2 : 1], ScalarType::Float32);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) e.values.push_back(i == j ? 1 : 0);
    return std::vector<Expected>{e};
  };
  specs.push_back(std::move(spec));
}

// linspace(start, end, steps, dtype, device): steps values from start to
// end, float32 unless dtype= says otherwise. A floating dtype holds
// start + (end - start) * i / (steps - 1) rounded (within its tolerance);
// an integral one truncates start and end first, then each value of
// PyTorch's formula in double (start + step * i for the first half, end -
// step * (steps - 1 - i) for the second), as PyTorch's kernel does.
Expected linspaceResult(const Scalar& start, const Scalar& end, int64_t steps, ScalarType dtype) {
  Expected e;
  e.sizes = {steps};
  e.dtype = dtype;
  const bool integral = !isFloatingType(dtype);
  const double s = integral ? std::trunc(start.toDouble()) : start.toDouble();
  const double t = integral ? std::trunc(end.toDouble()) : end.toDouble();
  if (steps == 1) e.values.push_back(roundTo(dtype, start.toDouble()));
  if (steps <= 1) return e;
  const double step = (t - s) / static_cast<double>(steps - 1);
  for (int64_t i = 0; i < steps; ++i) {
    const double d = static_cast<double>(i);
    double v;
    if (integral)
      v = i < steps / 2 ? s + step * d : t - step * static_cast<double>(steps - 1 - i);
    else
      v = s + (t - s) * d / static_cast<double>(steps - 1);
    e.values.push_back(roundTo(dtype, integral ? std::trunc(v) : v));
  }
  return e;
}

void addLinspace(std::vector<OpSpec>& specs) {
  OpSpec spec;
  spec.op = "bp::linspace";
  spec.family = "creation";
  spec.samples = [] {
    std::vector<Sample> out;
    auto args = [](const Scalar& start, const Scalar& end, int64_t steps, IValue dtype) {
      return std::vector<IValue>{IValue(start), IValue(end), IValue(steps), std::move(dtype), backendDevice()};
    };
    using I = int64_t;
    for (ScalarType dt : kNumericTypes) {
      out.push_back(makeSample("0 to 10 in 6" + dtypeSuffix(dt), args(Scalar(I{0}), Scalar(I{10}), 6, IValue(dt))));
      out.push_back(
          makeSample("10 down to 0 in 7" + dtypeSuffix(dt), args(Scalar(I{10}), Scalar(I{0}), 7, IValue(dt))));
      if (dt != ScalarType::UInt8)
        out.push_back(
            makeSample("-3.5 to 7.25 in 11" + dtypeSuffix(dt), args(Scalar(-3.5), Scalar(7.25), 11, IValue(dt))));
    }
    out.push_back(makeSample("0 to 1 in 5, default dtype", args(Scalar(I{0}), Scalar(I{1}), 5, IValue())));
    out.push_back(makeSample("start = end", args(Scalar(2.5), Scalar(2.5), 4, IValue())));
    out.push_back(makeSample("one step", args(Scalar(-1.5), Scalar(3.0), 1, IValue(ScalarType::Float64))));
    out.push_back(makeSample("no steps", args(Scalar(I{0}), Scalar(I{1}), 0, IValue())));
    out.push_back(makeSample("large, 1.1M steps float32", args(Scalar(-1.0), Scalar(1.0), 1100000, IValue())));
    out.push_back(raising("steps -1", args(Scalar(I{0}), Scalar(I{1}), -1, IValue()), "steps must be >= 0"));
    out.push_back(raising("bool dtype", args(Scalar(I{0}), Scalar(I{1}), 3, IValue(ScalarType::Bool)),
                          "linspace has no bool dtype"));
    out.push_back(raising("start -3.5 into uint8", args(Scalar(-3.5), Scalar(I{7}), 3, IValue(ScalarType::UInt8)),
                          "start does not fit uint8"));
    out.push_back(raising("infinite end",
                          args(Scalar(I{0}), Scalar(std::numeric_limits<double>::infinity()), 3, IValue()),
                          "end must be finite"));
    return out;
  };
  spec.reference = [](const Sample& s) {
    return std::vector<Expected>{linspaceResult(s.args[0].toScalar(), s.args[1].toScalar(), s.args[2].toInt(),
                                                dtypeOr(s.args[3], ScalarType::Float32))};
  };
  specs.push_back(std::move(spec));
}

}  // namespace

void addCreationSpecs(std::vector<OpSpec>& specs) {
  addFill(specs);
  addZero(specs);
  addSizeFactory(specs, "empty", Fill::Empty);
  addEmptyStrided(specs);
  addSizeFactory(specs, "zeros", Fill::Zeros);
  addSizeFactory(specs, "ones", Fill::Ones);
  addSizeFactory(specs, "full", Fill::Full);
  addLike(specs, "empty_like", Fill::Empty);
  addLike(specs, "zeros_like", Fill::Zeros);
  addLike(specs, "ones_like", Fill::Ones);
  addLike(specs, "full_like", Fill::Full);
  addArange(specs, "arange", 1);
  addArange(specs, "arange.start", 2);
  addArange(specs, "arange.start_step", 3);
  addArangeOut(specs);
  addEye(specs, false);
  addEye(specs, true);
  addLinspace(specs);
}

}  // namespace backplane::conformance
