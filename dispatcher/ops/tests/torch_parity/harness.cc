// The two sides of a differential case (Note [Differential tests against
// PyTorch] in harness.h): the one file that includes libtorch's headers.
#include "harness.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"

namespace backplane::torch_parity {
namespace {

// ------------------------------------------------------------------ dtypes

struct DtypeName {
  const char* name;  // Backplane's (scalarTypeName)
  at::ScalarType at;
};
// Every dtype libtorch 1.13 has that Backplane has or may gain, by Backplane's name.
constexpr DtypeName kDtypeNames[] = {
    {"bool", at::kBool},     {"uint8", at::kByte},     {"int8", at::kChar},    {"int16", at::kShort},
    {"int32", at::kInt},     {"int64", at::kLong},     {"float16", at::kHalf}, {"bfloat16", at::kBFloat16},
    {"float32", at::kFloat}, {"float64", at::kDouble},
};

std::optional<at::ScalarType> toAt(ScalarType t) {
  const std::string_view name = scalarTypeName(t);
  for (const DtypeName& d : kDtypeNames)
    if (name == d.name) return d.at;
  return std::nullopt;
}

std::string atDtypeName(at::ScalarType t) {
  for (const DtypeName& d : kDtypeNames)
    if (d.at == t) return d.name;
  return std::string("torch.") + c10::toString(t);
}

bool isAtFloat16(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

// The epsilon of a floating result dtype (0 for the others).
double epsilonOf(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return std::ldexp(1.0, -10);
    case at::kBFloat16: return std::ldexp(1.0, -7);
    case at::kFloat: return std::ldexp(1.0, -23);
    case at::kDouble: return std::ldexp(1.0, -52);
    default: return 0;
  }
}

// ------------------------------------------------------------------ values

struct FloatLimits {
  double max, min_normal, denorm_min;
};
FloatLimits floatLimits(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return {65504.0, std::ldexp(1.0, -14), std::ldexp(1.0, -24)};
    case at::kBFloat16: return {std::ldexp(255.0, 120), std::ldexp(1.0, -126), std::ldexp(1.0, -133)};
    case at::kFloat:
      return {std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
              std::numeric_limits<float>::denorm_min()};
    default:
      return {std::numeric_limits<double>::max(), std::numeric_limits<double>::min(),
              std::numeric_limits<double>::denorm_min()};
  }
}

struct IntLimits {
  int64_t min, max;
};
IntLimits intLimits(at::ScalarType t) {
  switch (t) {
    case at::kBool: return {0, 1};
    case at::kByte: return {0, 255};
    case at::kChar: return {-128, 127};
    case at::kShort: return {-32768, 32767};
    case at::kInt: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    default: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

// 16 edge values of a floating dtype, in its range.
std::vector<double> specialFloats(at::ScalarType t) {
  const FloatLimits l = floatLimits(t);
  const double inf = std::numeric_limits<double>::infinity();
  return {std::nan(""),  inf,          -inf, -0.0, 0.0, l.max, -l.max, l.min_normal,
          -l.denorm_min, l.denorm_min, 1.0,  -1.0, 0.5, -2.5,  3.0,    -7.0};
}

// 16 edge values of an integer dtype, in its range.
std::vector<int64_t> specialInts(at::ScalarType t) {
  const IntLimits l = intLimits(t);
  if (t == at::kBool) return {0, 1, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 1};
  if (l.min == 0) return {0, 1, l.max, l.max - 1, 2, 3, 100, 128, 127, 7, 0, 1, 5, 64, 200, 9};
  return {0, 1, -1, l.min, l.max, 2, -3, l.min + 1, l.max - 1, 5, -7, 100, -100, 7, -2, 3};
}

// The base (contiguous) shape a view of `shape` is taken from.
std::vector<int64_t> baseShape(const TensorArg& a) {
  std::vector<int64_t> s = a.shape;
  switch (a.view) {
    case View::Contiguous: break;
    case View::Transposed:
      if (s.size() >= 2) std::swap(s[s.size() - 1], s[s.size() - 2]);
      break;
    case View::Strided: s.push_back(2); break;
    case View::Expanded:
      if (!s.empty()) s[0] = 1;
      break;
  }
  return s;
}

// The contiguous libtorch tensor a TensorArg's view is taken from.
at::Tensor makeBase(const TensorArg& a, at::ScalarType dt) {
  const std::vector<int64_t> shape = baseShape(a);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  const bool floating = at::isFloatingType(dt);
  std::mt19937 gen(a.seed * 7919u + static_cast<uint32_t>(n));
  std::vector<double> d(static_cast<size_t>(n));
  std::vector<int64_t> iv(static_cast<size_t>(n));
  const bool is_unsigned = dt == at::kByte || dt == at::kBool;
  for (int64_t i = 0; i < n; ++i) {
    double x = 0;
    int64_t k = 0;
    switch (a.fill) {
      case Fill::Special: {
        // A permutation of the 16 values per seed, so two operands pair different values.
        const size_t j = static_cast<size_t>((i * (2 * a.seed + 1) + a.seed * 7) % 16);
        if (floating)
          x = specialFloats(dt)[j];
        else
          k = specialInts(dt)[j];
        break;
      }
      case Fill::Random: {
        const double u = std::uniform_real_distribution<double>(-3, 3)(gen);
        x = u;
        k = dt == at::kBool ? (u > 0) : is_unsigned ? static_cast<int64_t>(std::lround(u + 3)) : std::lround(u);
        break;
      }
      case Fill::Small: {
        const double u = std::uniform_real_distribution<double>(-2, 2)(gen);
        x = u;
        k = dt == at::kBool ? (u > 0)
            : is_unsigned   ? static_cast<int64_t>(std::lround((u + 2) * 0.75))
                            : std::lround(u);
        break;
      }
      case Fill::Positive: {
        const double u = std::uniform_real_distribution<double>(0.1, 4)(gen);
        x = u;
        k = dt == at::kBool ? 1 : static_cast<int64_t>(std::ceil(u));
        break;
      }
      case Fill::Offset: {
        x = 1e4 + std::uniform_real_distribution<double>(-0.05, 0.05)(gen);
        k = 100 + std::lround(std::uniform_real_distribution<double>(-2, 2)(gen));
        break;
      }
      case Fill::Zeros: break;
      case Fill::Values: {
        const double v = a.values.at(static_cast<size_t>(i) % a.values.size());
        x = v;
        k = static_cast<int64_t>(v);
        break;
      }
    }
    d[static_cast<size_t>(i)] = x;
    iv[static_cast<size_t>(i)] = k;
  }
  at::Tensor base = floating ? at::tensor(d, at::kDouble).to(dt) : at::tensor(iv, at::kLong).to(dt);
  return base.reshape(shape).contiguous();
}

template <class T>
T applyView(const T& base, const TensorArg& a) {
  switch (a.view) {
    case View::Contiguous: return base;
    case View::Transposed: return a.shape.size() >= 2 ? T(base.transpose(-1, -2)) : base;
    case View::Strided: return T(base.select(-1, 0));
    case View::Expanded: return a.shape.empty() ? base : T(base.expand(a.shape));
  }
  return base;
}

// The same tensor for both libraries: equal bytes, then the same view.
struct BothTensors {
  at::Tensor at;
  Tensor bp;
};
BothTensors makeTensor(const TensorArg& a) {
  const std::optional<at::ScalarType> dt = toAt(a.dtype);
  BP_CHECK(dt.has_value(), "torch_parity: libtorch has no dtype ", scalarTypeName(a.dtype));
  const at::Tensor base = makeBase(a, *dt);
  Tensor bp_base = emptyTensor(base.sizes().vec(), a.dtype);
  if (base.numel() > 0) std::memcpy(bp_base.data_ptr(), base.data_ptr(), base.nbytes());
  return {applyView(base, a), applyView(bp_base, a)};
}

// ------------------------------------------------------------------ arguments

std::string shapeStr(c10::IntArrayRef s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

std::string describeTensor(const TensorArg& t) {
  static const char* const kFill[] = {"special", "random", "small", "positive", "offset", "zeros", "values"};
  static const char* const kView[] = {"", " transposed", " strided", " expanded"};
  std::string s = std::string(scalarTypeName(t.dtype)) + shapeStr(t.shape) + " " + kFill[static_cast<int>(t.fill)] +
                  kView[static_cast<int>(t.view)];
  if (t.fill == Fill::Values) {
    s += " {";
    for (size_t i = 0; i < t.values.size() && i < 6; ++i) s += (i ? ", " : "") + std::to_string(t.values[i]);
    s += t.values.size() > 6 ? ", ...}" : "}";
  }
  if (t.seed != 0) s += " seed " + std::to_string(t.seed);
  return s;
}

std::string describeArg(const Arg& a) {
  switch (a.kind) {
    case Arg::Kind::None: return "None";
    case Arg::Kind::Tensor: return describeTensor(a.tensor);
    case Arg::Kind::TensorList: {
      std::string s = "[";
      for (size_t i = 0; i < a.tensors.size(); ++i) s += (i ? ", " : "") + describeTensor(a.tensors[i]);
      return s + "]";
    }
    case Arg::Kind::Scalar: return a.scalar.str();
    case Arg::Kind::Int: return std::to_string(a.i);
    case Arg::Kind::Double: {
      std::ostringstream o;
      o << a.d;
      return o.str();
    }
    case Arg::Kind::Bool: return a.b ? "True" : "False";
    case Arg::Kind::String: return "'" + a.s + "'";
    case Arg::Kind::Dtype: return std::string(scalarTypeName(a.dtype));
    case Arg::Kind::IntList: return shapeStr(a.ints);
  }
  return "?";
}

at::Scalar toAtScalar(const Scalar& s) {
  if (s.isBool()) return at::Scalar(s.toBool());
  if (s.isIntegral()) return at::Scalar(s.toInt());
  return at::Scalar(s.toDouble());
}

// How the PyTorch side's floating tensors and dtype arguments are widened:
// not at all, float16/bfloat16 to float32 (no 16-bit CPU kernel), or every
// floating dtype to float64 (the reference of Check::Mode::Accuracy).
enum class Widen { None, Float16ToFloat32, ToFloat64 };
at::ScalarType widened(at::ScalarType t, Widen w) {
  if (w == Widen::Float16ToFloat32 && isAtFloat16(t)) return at::kFloat;
  if (w == Widen::ToFloat64 && at::isFloatingType(t)) return at::kDouble;
  return t;
}

// Both sides' values of one argument; `widen` applies to the PyTorch side.
struct BothValues {
  IValue bp;
  c10::IValue at;
};
BothValues makeValue(const Arg& a, Widen widen) {
  const auto atTensor = [&](const at::Tensor& t) {
    const at::ScalarType w = widened(t.scalar_type(), widen);
    return w == t.scalar_type() ? t : t.to(w);
  };
  switch (a.kind) {
    case Arg::Kind::None: return {IValue(), c10::IValue()};
    case Arg::Kind::Tensor: {
      BothTensors t = makeTensor(a.tensor);
      return {IValue(t.bp), c10::IValue(atTensor(t.at))};
    }
    case Arg::Kind::TensorList: {
      std::vector<TensorBase> bp;
      c10::List<at::Tensor> at;
      for (const TensorArg& ta : a.tensors) {
        BothTensors t = makeTensor(ta);
        bp.push_back(t.bp);
        at.push_back(atTensor(t.at));
      }
      return {IValue(std::move(bp)), c10::IValue(std::move(at))};
    }
    case Arg::Kind::Scalar: return {IValue(a.scalar), c10::IValue(toAtScalar(a.scalar))};
    case Arg::Kind::Int: return {IValue(a.i), c10::IValue(a.i)};
    case Arg::Kind::Double: return {IValue(a.d), c10::IValue(a.d)};
    case Arg::Kind::Bool: return {IValue(a.b), c10::IValue(a.b)};
    case Arg::Kind::String: return {IValue(a.s), c10::IValue(a.s)};
    case Arg::Kind::Dtype: {
      const at::ScalarType t = widened(toAt(a.dtype).value_or(at::kFloat), widen);
      return {IValue(a.dtype), c10::IValue(t)};
    }
    case Arg::Kind::IntList: return {IValue(a.ints), c10::IValue(a.ints)};
  }
  return {};
}

const Arg* findArg(const Case& c, const std::string& name) {
  for (const auto& [n, a] : c.args)
    if (n == name) return &a;
  return nullptr;
}

// ------------------------------------------------------------------ results

// A side's result: the error it raised, or its returned values.
struct Result {
  bool raised = false;
  std::string error;
  std::vector<at::Tensor> tensors;  // Backplane's results copied into libtorch tensors
  std::vector<std::string> others;  // non-tensor returns, written out
};

std::string firstLine(const std::string& s) {
  std::string l = s.substr(0, s.find('\n'));
  return l.size() > 300 ? l.substr(0, 300) + "..." : l;
}

// Backplane's tensor as a libtorch tensor of the same dtype (by name), shape and elements.
at::Tensor toAtTensor(const Tensor& t, std::string* dtype_error) {
  const std::optional<at::ScalarType> dt = toAt(t.dtype());
  if (!dt) {
    *dtype_error = std::string(scalarTypeName(t.dtype()));
    return {};
  }
  const Tensor c = t.contiguous();
  at::Tensor out = at::empty(c.sizes().vec(), *dt);
  if (c.numel() > 0) std::memcpy(out.data_ptr(), c.data_ptr(), c.nbytes());
  return out;
}

std::string elementStr(const at::Tensor& flat, int64_t i) {
  std::ostringstream o;
  if (at::isFloatingType(flat.scalar_type())) {
    const double v = flat.to(at::kDouble)[i].item<double>();
    o.precision(std::numeric_limits<double>::max_digits10);
    if (v == 0 && std::signbit(v))
      o << "-0";
    else
      o << v;
  } else {
    o << flat.to(at::kLong)[i].item<int64_t>();
  }
  return o.str();
}

std::string indexStr(c10::IntArrayRef sizes, int64_t flat) {
  std::vector<int64_t> idx(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    idx[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  return shapeStr(idx);
}

// "" if `got` matches `want` under `check`, else what differs.
// `compute_eps`: the epsilon of the dtype the op computed in, when coarser
// than the result's (exp of int16 into a float64 out computes in float32).
std::string compareTensors(const at::Tensor& want, const at::Tensor& got, Check check, bool via_float32,
                           double compute_eps) {
  if (want.scalar_type() != got.scalar_type())
    return "dtype: PyTorch " + atDtypeName(want.scalar_type()) + ", Backplane " + atDtypeName(got.scalar_type());
  if (want.sizes() != got.sizes())
    return "shape: PyTorch " + shapeStr(want.sizes()) + ", Backplane " + shapeStr(got.sizes());
  if (check.mode == Check::Mode::ShapeOnly) return "";
  const at::Tensor w = want.contiguous().reshape({-1});
  const at::Tensor g = got.contiguous().reshape({-1});
  const int64_t n = w.numel();
  const auto mismatch = [&](int64_t i) {
    return "element " + indexStr(want.sizes(), i) + ": PyTorch " + elementStr(w, i) + ", Backplane " +
           elementStr(g, i) + (n > 1 ? " (of " + std::to_string(n) + ")" : "");
  };
  if (!at::isFloatingType(want.scalar_type())) {
    const at::Tensor wl = w.to(at::kLong), gl = g.to(at::kLong);
    const int64_t* wp = wl.data_ptr<int64_t>();
    const int64_t* gp = gl.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i)
      if (wp[i] != gp[i]) return mismatch(i);
    return "";
  }
  const at::Tensor wd = w.to(at::kDouble), gd = g.to(at::kDouble);
  const double* wp = wd.data_ptr<double>();
  const double* gp = gd.data_ptr<double>();
  double ulps = check.mode == Check::Mode::Close ? check.ulps : 0;
  double atol = check.mode == Check::Mode::Close ? check.atol_ulps : 0;
  if (via_float32) ulps = std::max(ulps, 1.0), atol = std::max(atol, 1.0);
  const double eps = std::max(epsilonOf(want.scalar_type()), compute_eps);
  for (int64_t i = 0; i < n; ++i) {
    const double x = wp[i], y = gp[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) return mismatch(i);
      continue;
    }
    if (x == y) {
      if (x == 0 && std::signbit(x) != std::signbit(y)) return mismatch(i) + " (sign of zero)";
      continue;
    }
    if (ulps == 0 && atol == 0) return mismatch(i);
    if (std::isinf(x) || std::isinf(y)) return mismatch(i);
    // The smallest normal of the dtype bounds the absolute tolerance from below.
    if (std::fabs(x - y) > eps * (ulps * std::fabs(x) + atol)) return mismatch(i);
  }
  return "";
}

// Accuracy: dtype and shape as PyTorch's; NaN and infinity where PyTorch has
// them; and Backplane's largest error against the float64 reference at most
// check.ulps times PyTorch's (or than eps(dtype) * max |reference|).
std::string compareAccuracy(const at::Tensor& want, const at::Tensor& got, const at::Tensor& ref, Check check) {
  const std::string shape = compareTensors(want, got, shapeOnly(), false, 0);
  if (!shape.empty()) return shape;
  const at::Tensor w = want.contiguous().reshape({-1}).to(at::kDouble);
  const at::Tensor g = got.contiguous().reshape({-1}).to(at::kDouble);
  const at::Tensor r = ref.contiguous().reshape({-1}).to(at::kDouble);
  const double* wp = w.data_ptr<double>();
  const double* gp = g.data_ptr<double>();
  const double* rp = r.data_ptr<double>();
  double err_w = 0, err_g = 0, scale = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    if (!std::isfinite(wp[i]) || !std::isfinite(gp[i])) {
      if (!(wp[i] == gp[i] || (std::isnan(wp[i]) && std::isnan(gp[i]))))
        return "element " + indexStr(want.sizes(), i) + ": PyTorch " + elementStr(w, i) + ", Backplane " +
               elementStr(g, i);
      continue;
    }
    err_w = std::max(err_w, std::fabs(wp[i] - rp[i]));
    err_g = std::max(err_g, std::fabs(gp[i] - rp[i]));
    scale = std::max(scale, std::fabs(rp[i]));
  }
  const double allowed = check.ulps * std::max(err_w, epsilonOf(want.scalar_type()) * scale);
  if (err_g <= allowed) return "";
  std::ostringstream o;
  o << "largest error against a float64 reference: PyTorch " << err_w << ", Backplane " << err_g << " (allowed "
    << allowed << ")";
  return o.str();
}

std::string resultStr(const Result& r) {
  if (r.raised) return "raises: " + r.error;
  std::string s;
  for (const at::Tensor& t : r.tensors)
    s += (s.empty() ? "" : ", ") + atDtypeName(t.scalar_type()) + shapeStr(t.sizes());
  for (const std::string& o : r.others) s += (s.empty() ? "" : ", ") + o;
  return "returns " + (s.empty() ? std::string("nothing") : s);
}

// libtorch 1.13's CPU kernels for integer division (div with a rounding
// mode, floor_divide, remainder, fmod) divide int32 and int64 with the
// machine's instruction, which traps (SIGFPE, killing the test process) on
// the type's smallest value divided by -1. Where the arguments on `stack`
// could make that division, the harness does not call libtorch; it returns
// this message as PyTorch's error, and known_differences.txt lists the
// cases (Backplane wraps: the quotient is the smallest value, the remainder
// 0). Conservative: it asks whether the dividend holds the smallest value
// and the divisor -1 anywhere, not whether they meet after broadcasting.
std::string integerDivisionTrap(const Case& c, const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const std::string name = c.op.substr(0, c.op.find('.'));
  const bool rounding = (name == "div" || name == "div_") && c.op.find("mode") != std::string::npos;
  if (!rounding && name != "floor_divide" && name != "floor_divide_" && name != "remainder" && name != "remainder_" &&
      name != "fmod" && name != "fmod_")
    return "";
  const std::vector<c10::Argument>& args = op.schema().arguments();
  const c10::IValue* self = nullptr;
  const c10::IValue* other = nullptr;
  for (size_t i = 0; i < args.size() && i < stack.size(); ++i) {
    if (args[i].name() == "self") self = &stack[i];
    if (args[i].name() == "other") other = &stack[i];
  }
  if (self == nullptr || other == nullptr || !self->isTensor()) return "";
  const at::Tensor& a = self->toTensor();
  const at::ScalarType t =
      other->isTensor() ? at::result_type(a, other->toTensor()) : at::result_type(a, other->toScalar());
  if (t != at::kInt && t != at::kLong) return "";  // then the number is integral, and int64 holds it
  const at::Tensor b = other->isTensor() ? other->toTensor() : at::scalar_tensor(other->toScalar(), at::kLong);
  const int64_t lowest = t == at::kInt ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
  if (!a.to(t).eq(lowest).any().item<bool>() || !b.to(t).eq(-1).any().item<bool>()) return "";
  return "not called: libtorch 1.13 traps (SIGFPE) on " + std::string(t == at::kInt ? "int32" : "int64") +
         " division of the smallest value by -1";
}

// For a case with an `out`: the epsilon of the dtype the op computes in
// before casting into out, the promotion of its input tensors' dtypes (an
// integral or bool one computes in float32, PyTorch's default floating
// dtype): exp of int16 into a float64 out computes in float32. 0 for a case
// without `out`, whose result dtype is the computing one.
double computeEpsilon(const Case& c) {
  if (findArg(c, "out") == nullptr) return 0;
  std::optional<at::ScalarType> t;
  const auto note = [&](ScalarType d) {
    if (const std::optional<at::ScalarType> a = toAt(d)) t = t ? at::promoteTypes(*t, *a) : *a;
  };
  for (const auto& [name, a] : c.args) {
    if (name == "out") continue;
    if (a.kind == Arg::Kind::Tensor) note(a.tensor.dtype);
    if (a.kind == Arg::Kind::TensorList)
      for (const TensorArg& x : a.tensors) note(x.dtype);
  }
  if (!t) return 0;
  return epsilonOf(at::isFloatingType(*t) ? *t : at::kFloat);
}

// Calls libtorch's aten::<op> with the case's arguments.
Result runTorch(const Case& c, const c10::OperatorHandle& op, Widen widen) {
  Result r;
  torch::jit::Stack stack;
  for (const c10::Argument& a : op.schema().arguments()) {
    if (const Arg* given = findArg(c, a.name())) {
      stack.push_back(makeValue(*given, widen).at);
    } else if (a.default_value()) {
      stack.push_back(*a.default_value());
    } else {
      BP_THROW(kInvalidArgument, "torch_parity: case ", describe(c), " gives no '", a.name(), "', which aten::", c.op,
               " needs");
    }
  }
  for (const auto& [name, a] : c.args) {
    bool known = false;
    for (const c10::Argument& s : op.schema().arguments()) known |= s.name() == name;
    BP_CHECK(known, "torch_parity: aten::", c.op, " has no argument '", name, "' (case ", describe(c), ")");
  }
  if (const std::string trap = integerDivisionTrap(c, op, stack); !trap.empty()) {
    r.raised = true;
    r.error = trap;
    return r;
  }
  try {
    op.callBoxed(&stack);
  } catch (const std::exception& e) {
    const c10::Error* ce = dynamic_cast<const c10::Error*>(&e);
    r.raised = true;
    r.error = firstLine(ce ? ce->what_without_backtrace() : e.what());
    return r;
  }
  for (const c10::IValue& v : stack) {
    if (v.isTensor())
      r.tensors.push_back(v.toTensor());
    else
      r.others.push_back(v.tagKind());
  }
  return r;
}

}  // namespace

// ------------------------------------------------------------------ builders

Arg T(ScalarType dtype, std::vector<int64_t> shape, Fill fill, View view, uint32_t seed) {
  Arg a;
  a.kind = Arg::Kind::Tensor;
  a.tensor = {dtype, std::move(shape), fill, view, seed, {}};
  return a;
}
Arg TV(ScalarType dtype, std::vector<int64_t> shape, std::vector<double> values) {
  Arg a = T(dtype, std::move(shape), Fill::Values);
  a.tensor.values = std::move(values);
  return a;
}
TensorArg TA(ScalarType dtype, std::vector<int64_t> shape, Fill fill, uint32_t seed) {
  return {dtype, std::move(shape), fill, View::Contiguous, seed, {}};
}
Arg TL(std::vector<TensorArg> tensors) {
  Arg a;
  a.kind = Arg::Kind::TensorList;
  a.tensors = std::move(tensors);
  return a;
}
Arg S(Scalar s) {
  Arg a;
  a.kind = Arg::Kind::Scalar;
  a.scalar = s;
  return a;
}
Arg I(int64_t i) {
  Arg a;
  a.kind = Arg::Kind::Int;
  a.i = i;
  return a;
}
Arg F(double d) {
  Arg a;
  a.kind = Arg::Kind::Double;
  a.d = d;
  return a;
}
Arg B(bool b) {
  Arg a;
  a.kind = Arg::Kind::Bool;
  a.b = b;
  return a;
}
Arg Str(std::string s) {
  Arg a;
  a.kind = Arg::Kind::String;
  a.s = std::move(s);
  return a;
}
Arg Dt(ScalarType t) {
  Arg a;
  a.kind = Arg::Kind::Dtype;
  a.dtype = t;
  return a;
}
Arg Ints(std::vector<int64_t> v) {
  Arg a;
  a.kind = Arg::Kind::IntList;
  a.ints = std::move(v);
  return a;
}
Arg None() { return Arg(); }

std::string describe(const Case& c) {
  std::string s = c.op + "(";
  for (size_t i = 0; i < c.args.size(); ++i)
    s += (i ? ", " : "") + c.args[i].first + "=" + describeArg(c.args[i].second);
  return s + ")";
}

const std::vector<ScalarType>& dtypes() {
  static const std::vector<ScalarType> v = [] {
    std::vector<ScalarType> r;
    for (int i = 0; i < kNumScalarTypes; ++i)
      if (toAt(static_cast<ScalarType>(i))) r.push_back(static_cast<ScalarType>(i));
    return r;
  }();
  return v;
}

std::vector<std::string> dtypesWithoutTorch() {
  std::vector<std::string> r;
  for (int i = 0; i < kNumScalarTypes; ++i)
    if (!toAt(static_cast<ScalarType>(i))) r.emplace_back(scalarTypeName(static_cast<ScalarType>(i)));
  return r;
}

const std::vector<ScalarType>& floatingDtypes() {
  static const std::vector<ScalarType> v = [] {
    std::vector<ScalarType> r;
    for (ScalarType t : dtypes())
      if (isFloatingType(t)) r.push_back(t);
    return r;
  }();
  return v;
}

bool isUnsigned(ScalarType t) {
  const std::string_view n = scalarTypeName(t);
  return n == "bool" || n.starts_with("uint");
}

void setUp() {
  at::set_num_threads(1);
  absl::StatusOr<PluginStatus> s = plugins().load(BACKPLANE_CPU_PLUGIN_PATH);
  BP_CHECK(s.ok(), "torch_parity: loading the CPU plugin: ", s.status().ToString());
  BP_CHECK(s->loaded, "torch_parity: loading the CPU plugin: ", s->error);
}

namespace {

// The weights of the projection sum(result * w) both sides differentiate.
std::vector<double> projectionWeights(int64_t n) {
  std::vector<double> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) w[static_cast<size_t>(i)] = 0.5 + std::sin(0.7 * static_cast<double>(i + 1));
  return w;
}

Outcome runGradientCase(const Case& c) {
  Outcome out;
  const size_t dot = c.op.find('.');
  const c10::optional<c10::OperatorHandle> at_op = c10::Dispatcher::singleton().findSchema(
      {"aten::" + c.op.substr(0, dot), dot == std::string::npos ? "" : c.op.substr(dot + 1)});
  const std::optional<OperatorHandle> bp_op = Dispatcher::singleton().findOp("bp::" + c.op);
  if (!at_op || !bp_op || !bp_op->hasSchema()) {
    out.kind = Outcome::Kind::Missing;
    out.message = "bp::" + c.op + " or aten::" + c.op + " is missing";
    return out;
  }
  // Both sides' arguments; floating tensors become leaves.
  std::vector<at::Tensor> at_leaves;
  std::vector<Tensor> bp_leaves;
  const auto leafPair = [&](BothValues& v) {
    if (v.at.isTensor() && at::isFloatingType(v.at.toTensor().scalar_type())) {
      at::Tensor a = v.at.toTensor().detach().requires_grad_(true);
      Tensor b = Tensor(v.bp.toTensor()).detach();
      b.requires_grad_();
      at_leaves.push_back(a);
      bp_leaves.push_back(b);
      v.at = c10::IValue(a);
      v.bp = IValue(static_cast<const TensorBase&>(b));
    } else if (v.at.isTensorList()) {
      c10::List<at::Tensor> al = v.at.toTensorList();
      std::vector<TensorBase> bl = v.bp.toTensorList();
      for (size_t i = 0; i < bl.size(); ++i) {
        at::Tensor a = al.get(i);
        if (!at::isFloatingType(a.scalar_type())) continue;
        a = a.detach().requires_grad_(true);
        Tensor b = Tensor(bl[i]).detach();
        b.requires_grad_();
        al.set(i, a);
        bl[i] = b;
        at_leaves.push_back(a);
        bp_leaves.push_back(b);
      }
      v.at = c10::IValue(al);
      v.bp = IValue(std::move(bl));
    }
  };
  torch::jit::Stack at_stack;
  for (const c10::Argument& a : at_op->schema().arguments()) {
    if (const Arg* given = findArg(c, a.name())) {
      BothValues v = makeValue(*given, Widen::None);
      leafPair(v);
      at_stack.push_back(v.at);
    } else if (a.default_value()) {
      at_stack.push_back(*a.default_value());
    } else {
      return out;  // the forward's families report it
    }
  }
  // The same leaves, in the same order, for Backplane: rebuild its stack
  // from the leaves made above.
  Stack bp_stack;
  {
    size_t next = 0;
    for (const Argument& a : bp_op->schema().arguments()) {
      const Arg* given = findArg(c, a.name);
      if (!given) {
        bp_stack.push_back(a.default_value ? defaultArgumentValue(a) : IValue());
        continue;
      }
      BothValues v = makeValue(*given, Widen::None);
      if (v.bp.isTensor() && at::isFloatingType(v.at.toTensor().scalar_type())) {
        v.bp = IValue(static_cast<const TensorBase&>(bp_leaves[next++]));
      } else if (v.bp.isTensorList()) {
        std::vector<TensorBase> bl = v.bp.toTensorList();
        c10::List<at::Tensor> al = v.at.toTensorList();
        for (size_t i = 0; i < bl.size(); ++i)
          if (at::isFloatingType(al.get(i).scalar_type())) bl[i] = bp_leaves[next++];
        v.bp = IValue(std::move(bl));
      }
      bp_stack.push_back(v.bp);
    }
    if (next != bp_leaves.size()) return out;  // the schemas order their tensors differently: not comparable
  }
  if (at_leaves.empty()) return out;
  try {
    at_op->callBoxed(&at_stack);
    bp_op->callBoxed(bp_stack);
  } catch (const std::exception&) {
    return out;  // a forward that raises is the forward families' business
  }
  if (at_stack.empty() || !at_stack[0].isTensor() || bp_stack.empty() || !bp_stack[0].isTensor()) return out;
  const at::Tensor at_result = at_stack[0].toTensor();
  const Tensor bp_result = Tensor(bp_stack[0].toTensor());
  if (!at_result.requires_grad() || !at::isFloatingType(at_result.scalar_type())) return out;
  const auto disagree = [&](const std::string& what) {
    out.kind = Outcome::Kind::Disagree;
    out.difference = Difference::Values;
    out.message = describe(c) + ": gradients: " + what;
    return out;
  };
  if (!bp_result.requires_grad()) return disagree("PyTorch's result requires grad, Backplane's does not");
  const std::vector<double> w = projectionWeights(at_result.numel());
  const at::Tensor at_w =
      at::tensor(c10::ArrayRef<double>(w), at::kDouble).reshape(at_result.sizes()).to(at_result.scalar_type());
  const Tensor bp_w = Tensor(tensorFromVector<double>(w, bp_result.sizes())).to(bp_result.dtype());
  try {
    (at_result * at_w).sum().backward();
  } catch (const std::exception& e) {
    return out;  // PyTorch has no backward for this form
  }
  try {
    bp_result.mul(bp_w).sum().backward();
  } catch (const std::exception& e) {
    return disagree(std::string("PyTorch's backward runs, Backplane's raises: ") + firstLine(e.what()));
  }
  for (size_t i = 0; i < at_leaves.size(); ++i) {
    const at::Tensor want = at_leaves[i].grad();
    const Tensor got_bp = bp_leaves[i].grad();
    const std::string which = "leaf " + std::to_string(i) + " ";
    if (!want.defined() && !got_bp.defined()) continue;
    std::string bad_dtype;
    const at::Tensor got = got_bp.defined() ? toAtTensor(got_bp, &bad_dtype) : at::zeros_like(want);
    const at::Tensor ref = want.defined() ? want : at::zeros_like(got);
    if (!bad_dtype.empty()) return disagree(which + "has a gradient of dtype " + bad_dtype);
    if (!ref.sizes().equals(got.sizes()))
      return disagree(which + "shape: PyTorch " + shapeStr(ref.sizes()) + ", Backplane " + shapeStr(got.sizes()));
    const at::Tensor a = ref.to(at::kDouble).contiguous().reshape({-1}),
                     b = got.to(at::kDouble).contiguous().reshape({-1});
    for (int64_t k = 0; k < a.numel(); ++k) {
      const double x = a[k].item<double>(), y = b[k].item<double>();
      if ((std::isnan(x) && std::isnan(y)) || x == y) continue;  // equal infinities included
      if (!(std::abs(x - y) <= 1e-6 * std::abs(x) + 1e-8))
        return disagree(which + "element " + indexStr(ref.sizes(), k) + ": PyTorch " + elementStr(a, k) +
                        ", Backplane " + elementStr(b, k));
    }
  }
  return out;
}

}  // namespace

Outcome runCase(const Case& c) {
  if (c.gradient) return runGradientCase(c);
  Outcome out;
  // Where libtorch names the same op differently.
  const std::string at_name = c.op == "empty" ? "empty.memory_format" : c.op;
  const size_t dot = at_name.find('.');
  const std::string name = at_name.substr(0, dot);
  const std::string overload = dot == std::string::npos ? "" : at_name.substr(dot + 1);
  const c10::optional<c10::OperatorHandle> at_op = c10::Dispatcher::singleton().findSchema({"aten::" + name, overload});
  BP_CHECK(at_op.has_value(), "torch_parity: libtorch 1.13 has no aten::", c.op, " (case ", describe(c), ")");

  const std::optional<OperatorHandle> bp_op = Dispatcher::singleton().findOp("bp::" + c.op);
  if (!c.bp_api && (!bp_op || !bp_op->hasSchema())) {
    out.kind = Outcome::Kind::Missing;
    out.message = "bp::" + c.op + " is not in Backplane's standard operator table";
    return out;
  }

  // PyTorch.
  Result torch = runTorch(c, *at_op, Widen::None);
  // The floating dtypes of the case's tensors and dtype arguments: the
  // float32 rerun stands in for PyTorch only where they are one 16-bit dtype
  // (mixed with another floating dtype, the copy would hide a dtype error).
  std::vector<at::ScalarType> floating;
  const auto note = [&](ScalarType t) {
    const std::optional<at::ScalarType> a = toAt(t);
    if (a && at::isFloatingType(*a) && std::find(floating.begin(), floating.end(), *a) == floating.end())
      floating.push_back(*a);
  };
  for (const auto& [n, a] : c.args) {
    if (a.kind == Arg::Kind::Tensor) note(a.tensor.dtype);
    if (a.kind == Arg::Kind::TensorList)
      for (const TensorArg& t : a.tensors) note(t.dtype);
    if (a.kind == Arg::Kind::Dtype) note(a.dtype);
  }
  if (torch.raised && floating.size() == 1 && isAtFloat16(floating[0]) &&
      (torch.error.find("not implemented for 'Half'") != std::string::npos ||
       torch.error.find("not implemented for 'BFloat16'") != std::string::npos)) {
    // No 16-bit CPU kernel in libtorch 1.13: float32 copies, rounded back.
    const at::ScalarType half = floating[0];
    torch = runTorch(c, *at_op, Widen::Float16ToFloat32);
    for (at::Tensor& t : torch.tensors)
      if (t.scalar_type() == at::kFloat) t = t.to(half);
    out.via_float32 = true;
  }

  // Backplane.
  Result bp;
  const auto collect = [&](const std::vector<IValue>& returns) {
    for (const IValue& v : returns) {
      if (v.isTensor()) {
        std::string bad_dtype;
        at::Tensor t = toAtTensor(Tensor(v.toTensor()), &bad_dtype);
        if (!bad_dtype.empty())
          bp.others.push_back("a tensor of dtype " + bad_dtype + ", which libtorch 1.13 lacks");
        else
          bp.tensors.push_back(t);
      } else {
        bp.others.push_back(v.tagName());
      }
    }
  };
  if (c.bp_api) {
    try {
      std::vector<IValue> args;
      for (const auto& [n, a] : c.args) args.push_back(makeValue(a, Widen::None).bp);
      collect(c.bp_api(args));
    } catch (const std::exception& e) {
      bp.raised = true;
      bp.error = firstLine(e.what());
    }
  } else {
    const FunctionSchema& schema = bp_op->schema();
    Stack stack;
    for (const Argument& a : schema.arguments()) {
      if (const Arg* given = findArg(c, a.name))
        stack.push_back(makeValue(*given, Widen::None).bp);
      else if (a.default_value)
        stack.push_back(defaultArgumentValue(a));
      else
        stack.push_back(IValue());  // let Backplane's own check name the missing argument
    }
    std::string unknown;
    for (const auto& [n, a] : c.args)
      if (!schema.argumentIndex(n)) unknown += (unknown.empty() ? "" : ", ") + n;
    if (!unknown.empty()) {
      bp.raised = true;
      bp.error = "bp::" + c.op + " has no argument(s) " + unknown + " (schema " + schema.toString() + ")";
    } else {
      try {
        bp_op->callBoxed(stack);
        collect(stack);
      } catch (const std::exception& e) {
        bp.raised = true;
        bp.error = firstLine(e.what());
      }
    }
  }

  // Compare.
  const auto disagree = [&](const std::string& what, Difference how) {
    out.kind = Outcome::Kind::Disagree;
    out.difference = how;
    out.message = describe(c) + ": " + what + (out.via_float32 ? " [PyTorch via float32]" : "");
    return out;
  };
  if (torch.raised != bp.raised || torch.tensors.size() != bp.tensors.size() || torch.others != bp.others)
    return disagree("PyTorch " + resultStr(torch) + "; Backplane " + resultStr(bp),
                    torch.raised != bp.raised ? (torch.raised ? Difference::PytorchRaises : Difference::BackplaneRaises)
                                              : Difference::Returns);
  if (torch.raised) return out;
  Result reference;
  if (c.check.mode == Check::Mode::Accuracy) {
    reference = runTorch(c, *at_op, Widen::ToFloat64);
    BP_CHECK(!reference.raised && reference.tensors.size() == torch.tensors.size(),
             "torch_parity: the float64 reference of ", describe(c), " ", resultStr(reference));
  }
  for (size_t i = 0; i < torch.tensors.size(); ++i) {
    const std::string d =
        c.check.mode == Check::Mode::Accuracy
            ? compareAccuracy(torch.tensors[i], bp.tensors[i], reference.tensors[i], c.check)
            : compareTensors(torch.tensors[i], bp.tensors[i], c.check, out.via_float32, computeEpsilon(c));
    if (d.empty()) continue;
    const Difference how = d.starts_with("dtype:")   ? Difference::Dtype
                           : d.starts_with("shape:") ? Difference::Shape
                                                     : Difference::Values;
    return disagree((torch.tensors.size() > 1 ? "result " + std::to_string(i) + " " : "") + d, how);
  }
  return out;
}

}  // namespace backplane::torch_parity
