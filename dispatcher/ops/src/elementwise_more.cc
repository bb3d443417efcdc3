// More elementwise standard operators (Note [The standard operator table]):
// rounding division (div with rounding_mode, floor_divide, true_divide),
// remainder and fmod, rounding (floor, ceil, trunc, round), sign and erf,
// the activations leaky_relu, hardtanh, elu and softplus, the bitwise and
// logical ops, isnan/isinf/isfinite, nan_to_num, and the Scalar overloads
// of the arithmetic ops (add.Scalar, div.Scalar_mode, remainder.Scalar,
// bitwise_and.Scalar, ...), each with PyTorch's schema and rules.
//
// Note [Scalar overloads]
// PyTorch runs `op.Scalar(self, other)` as `op.Tensor(self, wrapped(other))`
// where the number takes part in type promotion as a Python number
// (result_type(self, other)) and is converted to the common dtype as a cast
// does (an integer wraps into an 8-bit dtype). The Scalar forms here do the
// same: their meta applies the Tensor form's rule with the number, and the
// composite hands the Tensor form's out= kernel a 0-d tensor of the common
// dtype holding the number (Note [CPU scalars] takes it to the device). So
// a plugin implements only the Tensor forms' out= kernels.
#include <cmath>
#include <limits>

#include "families.h"
#include "structured.h"

namespace backplane::ops {

namespace {

// Bool and the integral dtypes: what the bitwise ops accept.
constexpr ScalarTypeSet kIntegralAndBool = ScalarTypeSet::all().minus(ScalarTypeSet::floating());

Shape shapeOf(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end()); }

// The number `s` as a 0-d CPU tensor of `dtype`, converted as a cast does
// (Note [Scalar overloads]): integers wrap into narrower integral dtypes, a
// double beyond a floating dtype's range becomes an infinity.
Tensor wrappedNumber(const Scalar& s, ScalarType dtype) {
  Tensor t = emptyTensor({}, dtype);
  visitScalarType(dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      *t.data_ptr<T>() = s.toBool();
    } else if constexpr (std::is_integral_v<T>) {
      // A floating number never meets an integral common dtype (it promotes).
      *t.data_ptr<T>() = static_cast<T>(s.toInt());  // modular, as C++20 defines it
    } else {
      const double v = s.toDouble();
      constexpr double kMax = static_cast<double>(std::numeric_limits<float>::max());
      if constexpr (std::is_same_v<T, double>)
        *t.data_ptr<T>() = v;
      else
        *t.data_ptr<T>() = T(std::isfinite(v) && std::fabs(v) > kMax ? static_cast<float>(v > 0 ? INFINITY : -INFINITY)
                                                                     : static_cast<float>(v));
    }
  });
  return t;
}

// How a binary op's result dtype follows from the promoted input dtype.
enum class Result {
  Promoted,    // floor_divide, remainder, bitwise_and, ...: the promoted dtype (its "result" rule checked)
  TrueDivide,  // div without rounding_mode, true_divide: integral (and bool) give float32
  Logical,     // logical_and, ...: bool
};

ScalarType applyResult(std::string_view op, const StandardOp& entry, ScalarType promoted, Result r) {
  switch (r) {
    case Result::Promoted: checkResultDtype(op, entry, promoted); return promoted;
    case Result::TrueDivide: return isFloatingType(promoted) ? promoted : ScalarType::Float32;
    case Result::Logical: return ScalarType::Bool;
  }
  return promoted;
}

// div's rounding_mode: None (true division), 'trunc' or 'floor'.
Result roundingResult(std::string_view op, const std::optional<std::string_view>& mode) {
  if (!mode) return Result::TrueDivide;
  BP_CHECK(*mode == "trunc" || *mode == "floor", op,
           ": argument 'rounding_mode' must be None (true division), 'trunc' or 'floor', but got '", *mode, "'");
  return Result::Promoted;
}

// --- binary ops of two tensors (Tensor forms)

template <FixedString Name>
OutputMeta tensorMeta(const Tensor& self, const Tensor& other, Result r, CpuScalars cpu_scalars) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDefined(op, other, "other");
  const Device device = commonDevice(op, {{"self", &self}, {"other", &other}}, cpu_scalars);
  return OutputMeta{broadcastShapes(op, self.sizes(), other.sizes()),
                    applyResult(op, standardOp<Name>(), resultType(self, other), r), device};
}

// A Tensor form's out= kernel with its trailing arguments (rounding_mode).
template <class... Extra>
using TensorOutSig = Tensor(const Tensor&, const Tensor&, Extra..., const Tensor&);

// The logical ops see their operands in the operands' result_type, as
// PyTorch converts both first: an int64 0-d 65536 next to an int16 tensor
// is int16's 0, false; a float64 0-d 1e-300 next to a float32 tensor is 0.
// When an operand has another dtype, its converted copy goes in `a` or `b`
// and the function returns true; the kernels then only test for non-zero.
bool logicalOperands(Result r, const Tensor& self, const Tensor& other, Tensor& a, Tensor& b) {
  if (r != Result::Logical || self.dtype() == other.dtype()) return false;
  const ScalarType common = resultType(self, other);
  const auto convert = [&](const Tensor& t, Tensor& into) {
    if (t.dtype() == common) {
      into = t;
      return;
    }
    into = emptyTensor(t.sizes(), common, t.device());
    copyInto(into, t);
  };
  convert(self, a);
  convert(other, b);
  return true;
}

// The three forms of `Name`, whose out= kernel is `OutName` (taking
// `Extra...` after other; the result rule comes from `rule(extra...)`).
template <FixedString Name, FixedString OutName, auto Rule, class... Extra>
struct TensorForms {
  static bool outMeta(const Tensor& self, const Tensor& other, Extra... extra, const Tensor& out) {
    const Result r = Rule(qualified<Name>(), extra...);
    const OutputMeta m = tensorMeta<Name>(self, other, r, CpuScalars::kRefuseInOut);
    checkOut(qualified<Name>(), out, m, {{"self", &self}, {"other", &other}});
    Tensor a, b;
    const bool converted = logicalOperands(r, self, other, a, b);
    const Tensor& x = converted ? a : self;
    const Tensor& y = converted ? b : other;
    const auto& op = BP_STANDARD_OP(Name.c_str(), TensorOutSig<Extra...>);
    if (castIntoOut(out, m, [&](const Tensor& tmp) { op.callSkippingMeta(x, y, extra..., tmp); })) return true;
    if (!converted) return false;
    op.callSkippingMeta(x, y, extra..., out);
    return true;
  }
  static Tensor functional(const Tensor& self, const Tensor& other, Extra... extra) {
    const Result r = Rule(qualified<Name>(), extra...);
    const OutputMeta m = tensorMeta<Name>(self, other, r, CpuScalars::kJoin);
    Tensor out = allocate(m), moved_self, moved_other, a, b;
    const bool converted = logicalOperands(r, self, other, a, b);
    const auto& op = BP_STANDARD_OP(OutName.c_str(), TensorOutSig<Extra...>);
    return op.callSkippingMeta(onDevice(converted ? a : self, m.device, moved_self, op),
                               onDevice(converted ? b : other, m.device, moved_other, op), extra..., out);
  }
  static Tensor inplace(const Tensor& self, const Tensor& other, Extra... extra) {
    const OutputMeta m = tensorMeta<Name>(self, other, Rule(qualified<Name>(), extra...), CpuScalars::kJoin);
    checkOut(qualified<Name>(), self, m, {{"other", &other}}, "self");
    Tensor moved_other, a, b;
    const bool converted = logicalOperands(Rule(qualified<Name>(), extra...), self, other, a, b);
    const Tensor& x = converted ? a : self;
    const auto& op = BP_STANDARD_OP(OutName.c_str(), TensorOutSig<Extra...>);
    const Tensor& o = onDevice(converted ? b : other, m.device, moved_other, op);
    if (castIntoOut(self, m, [&](const Tensor& tmp) { op.callSkippingMeta(x, o, extra..., tmp); })) return self;
    return op.callSkippingMeta(x, o, extra..., self);
  }
  // An alias's out= (true_divide.out, floor_divide.out): its own meta, then
  // the kernel it is an alias of.
  static Tensor outComposite(const Tensor& self, const Tensor& other, Extra... extra, const Tensor& out) {
    return BP_STANDARD_OP(OutName.c_str(), TensorOutSig<Extra...>).callSkippingMeta(self, other, extra..., out);
  }
};

// --- Tensor-Scalar forms (Note [Scalar overloads])

template <FixedString Name>
OutputMeta scalarMeta(const Tensor& self, const Scalar& other, Result r) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  return OutputMeta{shapeOf(self), applyResult(op, standardOp<Name>(), resultType(self, other), r), self.device()};
}

// The number as the Tensor form's `other`: a 0-d tensor of the dtype the
// op computes in (the promoted dtype; for true division the result's), on
// `device`, kept in `holder`.
const Tensor& numberOperand(const Tensor& self, const Scalar& other, Result r, Device device, Tensor& wrapped,
                            Tensor& moved, const OperatorHandle& consumer) {
  const ScalarType promoted = resultType(self, other);
  const ScalarType dtype = r == Result::TrueDivide && !isFloatingType(promoted) ? ScalarType::Float32 : promoted;
  wrapped = wrappedNumber(other, dtype);
  return onDevice(wrapped, device, moved, consumer);
}

template <FixedString Name, FixedString OutName, auto Rule, class... Extra>
struct ScalarForms {
  static bool outMeta(const Tensor& self, const Scalar& other, Extra... extra, const Tensor& out) {
    const OutputMeta m = scalarMeta<Name>(self, other, Rule(qualified<Name>(), extra...));
    checkOut(qualified<Name>(), out, m, {{"self", &self}});
    return castIntoOut(out, m, [&](const Tensor& tmp) {
      BP_STANDARD_OP(Name.c_str(), Tensor(const Tensor&, const Scalar&, Extra..., const Tensor&))
          .callSkippingMeta(self, other, extra..., tmp);
    });
  }
  static Tensor outComposite(const Tensor& self, const Scalar& other, Extra... extra, const Tensor& out) {
    Tensor wrapped, moved;
    const Result r = Rule(qualified<Name>(), extra...);
    const auto& op = BP_STANDARD_OP(OutName.c_str(), TensorOutSig<Extra...>);
    return op.callSkippingMeta(self, numberOperand(self, other, r, out.device(), wrapped, moved, op), extra..., out);
  }
  static Tensor functional(const Tensor& self, const Scalar& other, Extra... extra) {
    const Result r = Rule(qualified<Name>(), extra...);
    Tensor out = allocate(scalarMeta<Name>(self, other, r)), wrapped, moved;
    const auto& op = BP_STANDARD_OP(OutName.c_str(), TensorOutSig<Extra...>);
    return op.callSkippingMeta(self, numberOperand(self, other, r, self.device(), wrapped, moved, op), extra..., out);
  }
  static Tensor inplace(const Tensor& self, const Scalar& other, Extra... extra) {
    const Result r = Rule(qualified<Name>(), extra...);
    const OutputMeta m = scalarMeta<Name>(self, other, r);
    checkOut(qualified<Name>(), self, m, {}, "self");
    Tensor wrapped, moved;
    const auto& op = BP_STANDARD_OP(OutName.c_str(), TensorOutSig<Extra...>);
    const Tensor& o = numberOperand(self, other, r, self.device(), wrapped, moved, op);
    if (castIntoOut(self, m, [&](const Tensor& tmp) { op.callSkippingMeta(self, o, extra..., tmp); })) return self;
    return op.callSkippingMeta(self, o, extra..., self);
  }
};

// The result rules as template arguments of the forms above.
Result promotedRule(std::string_view) { return Result::Promoted; }
Result trueDivideRule(std::string_view) { return Result::TrueDivide; }
Result logicalRule(std::string_view) { return Result::Logical; }
Result roundingRule(std::string_view op, std::optional<std::string_view> mode) { return roundingResult(op, mode); }
constexpr auto kPromotedRule = &promotedRule;
constexpr auto kTrueDivideRule = &trueDivideRule;
constexpr auto kLogicalRule = &logicalRule;
constexpr auto kRoundingRule = &roundingRule;

// --- add/sub/mul/div.Scalar: the existing Tensor forms' kernels.

// sub refuses a bool operand, tensor or number, as PyTorch.
template <FixedString Name>
void checkSubOperands(const Tensor& self, const Scalar& other) {
  BP_CHECK(self.dtype() != ScalarType::Bool && !other.isBool(), qualified<Name>(),
           ": subtraction with a bool operand is not supported; to invert a mask use logical_not(), for the "
           "difference of two masks logical_xor(), or convert the bool operand to an integral dtype first");
}

template <FixedString Name, bool kSubtract>
OutputMeta alphaScalarMeta(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  checkDefined(qualified<Name>(), self, "self");
  if constexpr (kSubtract) checkSubOperands<Name>(self, other);
  const ScalarType common = resultType(self, other);
  checkAlpha(qualified<Name>(), common, alpha);
  return OutputMeta{shapeOf(self), common, self.device()};
}

using AlphaOutSig = Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&);

template <FixedString Name, FixedString OutName, bool kSubtract>
struct AlphaScalarForms {
  static bool outMeta(const Tensor& self, const Scalar& other, const Scalar& alpha, const Tensor& out) {
    const OutputMeta m = alphaScalarMeta<Name, kSubtract>(self, other, alpha);
    checkOut(qualified<Name>(), out, m, {{"self", &self}});
    return castIntoOut(out, m, [&](const Tensor& tmp) {
      BP_STANDARD_OP(Name.c_str(), Tensor(const Tensor&, const Scalar&, const Scalar&, const Tensor&))
          .callSkippingMeta(self, other, alpha, tmp);
    });
  }
  static Tensor outComposite(const Tensor& self, const Scalar& other, const Scalar& alpha, const Tensor& out) {
    Tensor wrapped, moved;
    const auto& op = BP_STANDARD_OP(OutName.c_str(), AlphaOutSig);
    return op.callSkippingMeta(self, numberOperand(self, other, Result::Promoted, out.device(), wrapped, moved, op),
                               alpha, out);
  }
  static Tensor functional(const Tensor& self, const Scalar& other, const Scalar& alpha) {
    Tensor out = allocate(alphaScalarMeta<Name, kSubtract>(self, other, alpha)), wrapped, moved;
    const auto& op = BP_STANDARD_OP(OutName.c_str(), AlphaOutSig);
    return op.callSkippingMeta(self, numberOperand(self, other, Result::Promoted, self.device(), wrapped, moved, op),
                               alpha, out);
  }
  static Tensor inplace(const Tensor& self, const Scalar& other, const Scalar& alpha) {
    const OutputMeta m = alphaScalarMeta<Name, kSubtract>(self, other, alpha);
    checkOut(qualified<Name>(), self, m, {}, "self");
    Tensor wrapped, moved;
    const auto& op = BP_STANDARD_OP(OutName.c_str(), AlphaOutSig);
    const Tensor& o = numberOperand(self, other, Result::Promoted, self.device(), wrapped, moved, op);
    if (castIntoOut(self, m, [&](const Tensor& tmp) { op.callSkippingMeta(self, o, alpha, tmp); })) return self;
    return op.callSkippingMeta(self, o, alpha, self);
  }
};

// rsub.Scalar, `number - tensor` as Python writes it: other - alpha * self,
// with sub's rule (no bool operand) and the number promoting as a Python
// number. A composite over sub.Tensor, the number a 0-d tensor of the
// common dtype (Note [CPU scalars] puts it on self's device).
Tensor rsubScalar(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  checkDefined(qualified<"rsub.Scalar">(), self, "self");
  checkSubOperands<"rsub.Scalar">(self, other);
  const ScalarType common = resultType(self, other);
  checkAlpha(qualified<"rsub.Scalar">(), common, alpha);
  return BP_STANDARD_OP("sub.Tensor", Tensor(const Tensor&, const Tensor&, const Scalar&))
      .call(wrappedNumber(other, common), self, alpha);
}

// --- unary ops

using UnaryOutSig = Tensor(const Tensor&, const Tensor&);

enum class Unary {
  Same,      // floor, sign, bitwise_not, ...: self's dtype (self's "self" rule checked)
  Floating,  // erf: integral (and bool) inputs give float32
  Logical,   // logical_not, isnan, isinf: bool
};

template <FixedString Name>
OutputMeta unaryMeta(const Tensor& self, Unary u) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDtypes(op, standardOp<Name>(), {{"self", &self}});
  ScalarType t = self.dtype();
  if (u == Unary::Floating && !isFloatingType(t)) t = ScalarType::Float32;
  if (u == Unary::Logical) t = ScalarType::Bool;
  return OutputMeta{shapeOf(self), t, self.device()};
}

// NAME, NAME_ and NAME.out of a unary op with arguments `Extra...` after self.
template <FixedString Name, FixedString OutName, Unary U, class... Extra>
struct UnaryForms {
  using OutSig = Tensor(const Tensor&, Extra..., const Tensor&);
  // Unary::Same ops write only self's dtype; the others compute in theirs
  // and cast into out (Note [out= of another dtype]).
  static bool outMeta(const Tensor& self, Extra... extra, const Tensor& out) {
    const OutputMeta m = unaryMeta<Name>(self, U);
    if constexpr (U == Unary::Same) checkOutDtype(qualified<Name>(), out, m);
    checkOut(qualified<Name>(), out, m, {{"self", &self}});
    return castIntoOut(
        out, m, [&](const Tensor& tmp) { BP_STANDARD_OP(Name.c_str(), OutSig).callSkippingMeta(self, extra..., tmp); });
  }
  static Tensor functional(const Tensor& self, Extra... extra) {
    Tensor out = allocate(unaryMeta<Name>(self, U));
    return BP_STANDARD_OP(OutName.c_str(), OutSig).callSkippingMeta(self, extra..., out);
  }
  static Tensor inplace(const Tensor& self, Extra... extra) {
    const OutputMeta m = unaryMeta<Name>(self, U);
    checkOut(qualified<Name>(), self, m, {}, "self");
    if (castIntoOut(self, m, [&](const Tensor& tmp) {
          BP_STANDARD_OP(OutName.c_str(), OutSig).callSkippingMeta(self, extra..., tmp);
        }))
      return self;
    return BP_STANDARD_OP(OutName.c_str(), OutSig).callSkippingMeta(self, extra..., self);
  }
};

// round.decimals: the decimals are any integer (negative: tens, hundreds, ...).
using RoundDecimals = UnaryForms<"round.decimals", "round.decimals_out", Unary::Same, int64_t>;

// nan_to_num: out must have self's dtype (PyTorch's rule: the replacements
// are values of that dtype).
using OptDouble = std::optional<double>;
template <FixedString Name>
void checkNanToNumOut(const Tensor& self, const Tensor& out) {
  BP_CHECK(out.dtype() == self.dtype(), qualified<Name>(), ": argument 'out' has dtype ", out.dtype(),
           " but self has dtype ", self.dtype(), "; nan_to_num writes values of self's dtype: pass an out of dtype ",
           self.dtype());
}
bool nanToNumOutMeta(const Tensor& self, OptDouble nan, OptDouble posinf, OptDouble neginf, const Tensor& out) {
  checkDefined(qualified<"nan_to_num.out">(), self, "self");
  checkNanToNumOut<"nan_to_num.out">(self, out);
  return UnaryForms<"nan_to_num.out", "nan_to_num.out", Unary::Same, OptDouble, OptDouble, OptDouble>::outMeta(
      self, nan, posinf, neginf, out);
}

// isfinite (no out= form in PyTorch): not NaN and not infinite; every
// element of an integral or bool tensor is finite.
Tensor isfiniteComposite(const Tensor& self) {
  checkDefined(qualified<"isfinite">(), self, "self");
  Tensor r = BP_STANDARD_OP("isinf", Tensor(const Tensor&)).call(self);
  if (isFloatingType(self.dtype())) {
    Tensor nan = BP_STANDARD_OP("isnan", Tensor(const Tensor&)).call(self);
    BP_STANDARD_OP("logical_or.out", TensorOutSig<>).callSkippingMeta(r, nan, r);
  }
  return BP_STANDARD_OP("logical_not.out", UnaryOutSig).callSkippingMeta(r, r);
}

// --- activations with Scalar parameters

// A bound as a value of self's dtype, as PyTorch converts clamp's bounds:
// an integral dtype takes the integer part, which must fit; a floating one
// the number, which must not overflow it.
// The largest finite value of a floating dtype.
double largestFinite(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float16: return 65504.0;
    case ScalarType::BFloat16: return 3.3895313892515355e38;
    case ScalarType::Float32: return static_cast<double>(std::numeric_limits<float>::max());
    default: return std::numeric_limits<double>::max();
  }
}

template <FixedString Name>
void checkBoundFits(ScalarType dtype, const Scalar& bound, const char* name) {
  const double v = bound.toDouble();
  bool fits = true;
  if (isIntegralType(dtype, false)) {
    // A floating bound's integer part; one beyond int64 (or not finite) has none.
    fits = !bound.isFloatingPoint() || (std::isfinite(v) && std::fabs(v) < 9.2e18);
    if (fits) {
      const int64_t i = bound.toInt();
      fits = visitScalarType(dtype, [&]<typename T>() {
        if constexpr (std::is_integral_v<T>)
          return i >= static_cast<int64_t>(std::numeric_limits<T>::lowest()) &&
                 i <= static_cast<int64_t>(std::numeric_limits<T>::max());
        else
          return true;
      });
    }
  } else if (isFloatingType(dtype)) {
    fits = !std::isfinite(v) || std::fabs(v) <= largestFinite(dtype);
  }
  BP_CHECK(fits, qualified<Name>(), ": argument '", name, "' (", bound, ") is out of the range of self's dtype ", dtype,
           "; pass a bound the dtype holds");
}

template <FixedString Name>
OutputMeta hardtanhMeta(const Tensor& self, const Scalar& min_val, const Scalar& max_val) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDtypes(op, standardOp<Name>(), {{"self", &self}});
  // PyTorch's hardtanh keeps self's dtype (its bounds do not promote).
  checkBoundFits<Name>(self.dtype(), min_val, "min_val");
  checkBoundFits<Name>(self.dtype(), max_val, "max_val");
  return OutputMeta{shapeOf(self), self.dtype(), self.device()};
}

using ClampOutSig = Tensor(const Tensor&, const std::optional<Scalar>&, const std::optional<Scalar>&, const Tensor&);

// hardtanh is clamp with bounds converted to self's kind (integers for an
// integral self), as PyTorch runs it.
Tensor hardtanhInto(const Tensor& self, const Scalar& min_val, const Scalar& max_val, const Tensor& out) {
  const bool integral = isIntegralType(self.dtype(), false);
  const Scalar lo = integral ? Scalar(min_val.toInt()) : min_val, hi = integral ? Scalar(max_val.toInt()) : max_val;
  return BP_STANDARD_OP("clamp.out", ClampOutSig).callSkippingMeta(self, lo, hi, out);
}
void hardtanhOutMeta(const Tensor& self, const Scalar& min_val, const Scalar& max_val, const Tensor& out) {
  const OutputMeta m = hardtanhMeta<"hardtanh.out">(self, min_val, max_val);
  checkOutDtype(qualified<"hardtanh.out">(), out, m);
  checkOut(qualified<"hardtanh.out">(), out, m, {{"self", &self}});
}
Tensor hardtanhFunctional(const Tensor& self, const Scalar& min_val, const Scalar& max_val) {
  return hardtanhInto(self, min_val, max_val, allocate(hardtanhMeta<"hardtanh">(self, min_val, max_val)));
}
Tensor hardtanhInplace(const Tensor& self, const Scalar& min_val, const Scalar& max_val) {
  checkOut(qualified<"hardtanh_">(), self, hardtanhMeta<"hardtanh_">(self, min_val, max_val), {}, "self");
  return hardtanhInto(self, min_val, max_val, self);
}

}  // namespace

void addElementwiseMoreOps(std::vector<StandardOp>& ops) {
  auto add = [&](std::string schema, KernelFunction meta = {}, KernelFunction composite = {}) {
    ops.push_back(StandardOp{std::move(schema), std::move(meta), std::move(composite), "elementwise"});
  };
  auto declare = [&](size_t first, const std::vector<ArgumentDtypes>& dtypes) {
    for (size_t i = first; i < ops.size(); ++i) ops[i].dtypes = dtypes;
  };
  using K = KernelFunction;
  using OptStr = std::optional<std::string_view>;
  const std::vector<ArgumentDtypes> noBoolResult = {{"result", kEveryDtypeButBool}};
  const std::vector<ArgumentDtypes> bitwiseResult = {
      {"result", kIntegralAndBool, "use logical_and()/logical_or()/logical_xor() for truth values, "}};

  // --- division with rounding_mode, and its aliases
  size_t first = ops.size();
  {
    using T = TensorForms<"div.Tensor_mode", "div.out_mode", kRoundingRule, OptStr>;
    using I = TensorForms<"div_.Tensor_mode", "div.out_mode", kRoundingRule, OptStr>;
    using O = TensorForms<"div.out_mode", "div.out_mode", kRoundingRule, OptStr>;
    add("div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor", {},
        K::makeFromFunction(BP_FN(T::functional)));
    add("div_.Tensor_mode(Tensor(a!) self, Tensor other, *, str? rounding_mode) -> Tensor(a!)", {},
        K::makeFromFunction(BP_FN(I::inplace)));
    add("div.out_mode(Tensor self, Tensor other, *, str? rounding_mode, Tensor(a!) out) -> Tensor(a!)",
        K::makeFromFunction(BP_FN(O::outMeta)));
    using S = ScalarForms<"div.Scalar_mode", "div.out_mode", kRoundingRule, OptStr>;
    using SI = ScalarForms<"div_.Scalar_mode", "div.out_mode", kRoundingRule, OptStr>;
    using SO = ScalarForms<"div.Scalar_mode_out", "div.out_mode", kRoundingRule, OptStr>;
    add("div.Scalar_mode(Tensor self, Scalar other, *, str? rounding_mode) -> Tensor", {},
        K::makeFromFunction(BP_FN(S::functional)));
    add("div_.Scalar_mode(Tensor(a!) self, Scalar other, *, str? rounding_mode) -> Tensor(a!)", {},
        K::makeFromFunction(BP_FN(SI::inplace)));
    add("div.Scalar_mode_out(Tensor self, Scalar other, *, str? rounding_mode, Tensor(a!) out) -> Tensor(a!)",
        K::makeFromFunction(BP_FN(SO::outMeta)), K::makeFromFunction(BP_FN(SO::outComposite)));
  }
  // With a rounding mode the promoted dtype must not be bool (true division
  // of bools gives float32, which passes).
  declare(first, noBoolResult);
  {
    using S = ScalarForms<"div.Scalar", "div.out", kTrueDivideRule>;
    using SI = ScalarForms<"div_.Scalar", "div.out", kTrueDivideRule>;
    using SO = ScalarForms<"div.Scalar_out", "div.out", kTrueDivideRule>;
    add("div.Scalar(Tensor self, Scalar other) -> Tensor", {}, K::makeFromFunction(BP_FN(S::functional)));
    add("div_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", {}, K::makeFromFunction(BP_FN(SI::inplace)));
    add("div.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
        K::makeFromFunction(BP_FN(SO::outMeta)), K::makeFromFunction(BP_FN(SO::outComposite)));
  }
  {
    using T = TensorForms<"true_divide.Tensor", "div.out", kTrueDivideRule>;
    using I = TensorForms<"true_divide_.Tensor", "div.out", kTrueDivideRule>;
    using O = TensorForms<"true_divide.out", "div.out", kTrueDivideRule>;
    add("true_divide.Tensor(Tensor self, Tensor other) -> Tensor", {}, K::makeFromFunction(BP_FN(T::functional)));
    add("true_divide_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", {}, K::makeFromFunction(BP_FN(I::inplace)));
    add("true_divide.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
        K::makeFromFunction(BP_FN(O::outMeta)), K::makeFromFunction(BP_FN(O::outComposite)));
    using S = ScalarForms<"true_divide.Scalar", "div.out", kTrueDivideRule>;
    using SI = ScalarForms<"true_divide_.Scalar", "div.out", kTrueDivideRule>;
    add("true_divide.Scalar(Tensor self, Scalar other) -> Tensor", {}, K::makeFromFunction(BP_FN(S::functional)));
    add("true_divide_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", {},
        K::makeFromFunction(BP_FN(SI::inplace)));
  }
  // floor_divide: division rounded toward negative infinity (PyTorch >= 1.13),
  // the kernel of div(rounding_mode='floor').
  first = ops.size();
  {
    constexpr auto kFloor = kPromotedRule;
    using T = TensorForms<"floor_divide", "floor_divide.out", kFloor>;
    using I = TensorForms<"floor_divide_.Tensor", "floor_divide.out", kFloor>;
    using O = TensorForms<"floor_divide.out", "floor_divide.out", kFloor>;
    add("floor_divide(Tensor self, Tensor other) -> Tensor", {}, K::makeFromFunction(BP_FN(T::functional)));
    add("floor_divide_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", {},
        K::makeFromFunction(BP_FN(I::inplace)));
    add("floor_divide.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
        K::makeFromFunction(BP_FN(O::outMeta)));
    using S = ScalarForms<"floor_divide.Scalar", "floor_divide.out", kFloor>;
    using SI = ScalarForms<"floor_divide_.Scalar", "floor_divide.out", kFloor>;
    using SO = ScalarForms<"floor_divide.Scalar_out", "floor_divide.out", kFloor>;
    add("floor_divide.Scalar(Tensor self, Scalar other) -> Tensor", {}, K::makeFromFunction(BP_FN(S::functional)));
    add("floor_divide_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", {},
        K::makeFromFunction(BP_FN(SI::inplace)));
    add("floor_divide.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
        K::makeFromFunction(BP_FN(SO::outMeta)), K::makeFromFunction(BP_FN(SO::outComposite)));
  }
  declare(first, noBoolResult);

  // Binary ops with Tensor, Scalar and out= forms named as PyTorch names
  // remainder's: NAME.Tensor, NAME_.Tensor, NAME.Tensor_out, NAME.Scalar,
  // NAME_.Scalar, NAME.Scalar_out.
#define BP_TENSOR_SCALAR_OP(NAME, RULE, DTYPES)                                                               \
  first = ops.size();                                                                                         \
  add(NAME ".Tensor(Tensor self, Tensor other) -> Tensor", {},                                                \
      K::makeFromFunction(BP_FN((TensorForms<NAME ".Tensor", NAME ".Tensor_out", RULE>::functional))));       \
  add(NAME "_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", {},                                       \
      K::makeFromFunction(BP_FN((TensorForms<NAME "_.Tensor", NAME ".Tensor_out", RULE>::inplace))));         \
  add(NAME ".Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",                         \
      K::makeFromFunction(BP_FN((TensorForms<NAME ".Tensor_out", NAME ".Tensor_out", RULE>::outMeta))));      \
  add(NAME ".Scalar(Tensor self, Scalar other) -> Tensor", {},                                                \
      K::makeFromFunction(BP_FN((ScalarForms<NAME ".Scalar", NAME ".Tensor_out", RULE>::functional))));       \
  add(NAME "_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", {},                                       \
      K::makeFromFunction(BP_FN((ScalarForms<NAME "_.Scalar", NAME ".Tensor_out", RULE>::inplace))));         \
  add(NAME ".Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",                         \
      K::makeFromFunction(BP_FN((ScalarForms<NAME ".Scalar_out", NAME ".Tensor_out", RULE>::outMeta))),       \
      K::makeFromFunction(BP_FN((ScalarForms<NAME ".Scalar_out", NAME ".Tensor_out", RULE>::outComposite)))); \
  declare(first, DTYPES)
  // remainder: the sign of the divisor (Python's %); fmod: the sign of the dividend (C's fmod).
  BP_TENSOR_SCALAR_OP("remainder", kPromotedRule, noBoolResult);
  BP_TENSOR_SCALAR_OP("fmod", kPromotedRule, noBoolResult);
  // Bitwise ops: integral and bool operands (on bool they are the logical ops).
  BP_TENSOR_SCALAR_OP("bitwise_and", kPromotedRule, bitwiseResult);
  BP_TENSOR_SCALAR_OP("bitwise_or", kPromotedRule, bitwiseResult);
  BP_TENSOR_SCALAR_OP("bitwise_xor", kPromotedRule, bitwiseResult);
#undef BP_TENSOR_SCALAR_OP

  // Logical ops: operands of any dtype are true where non-zero; bool
  // results (in place: 0/1 of self's dtype).
#define BP_LOGICAL(NAME)                                                                        \
  add(NAME "(Tensor self, Tensor other) -> Tensor", {},                                         \
      K::makeFromFunction(BP_FN((TensorForms<NAME, NAME ".out", kLogicalRule>::functional))));  \
  add(NAME "_(Tensor(a!) self, Tensor other) -> Tensor(a!)", {},                                \
      K::makeFromFunction(BP_FN((TensorForms<NAME "_", NAME ".out", kLogicalRule>::inplace)))); \
  add(NAME ".out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",                  \
      K::makeFromFunction(BP_FN((TensorForms<NAME ".out", NAME ".out", kLogicalRule>::outMeta))))
  BP_LOGICAL("logical_and");
  BP_LOGICAL("logical_or");
  BP_LOGICAL("logical_xor");
#undef BP_LOGICAL

  // --- Scalar overloads of the arithmetic ops (Note [Scalar overloads])
  {
    using A = AlphaScalarForms<"add.Scalar", "add.out", false>;
    using AI = AlphaScalarForms<"add_.Scalar", "add.out", false>;
    using AO = AlphaScalarForms<"add.Scalar_out", "add.out", false>;
    add("add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", {},
        K::makeFromFunction(BP_FN(A::functional)));
    add("add_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)", {},
        K::makeFromFunction(BP_FN(AI::inplace)));
    add("add.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out) -> Tensor(a!)",
        K::makeFromFunction(BP_FN(AO::outMeta)), K::makeFromFunction(BP_FN(AO::outComposite)));
    first = ops.size();
    using B = AlphaScalarForms<"sub.Scalar", "sub.out", true>;
    using BI = AlphaScalarForms<"sub_.Scalar", "sub.out", true>;
    using BO = AlphaScalarForms<"sub.Scalar_out", "sub.out", true>;
    add("sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", {},
        K::makeFromFunction(BP_FN(B::functional)));
    add("sub_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)", {},
        K::makeFromFunction(BP_FN(BI::inplace)));
    add("sub.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out) -> Tensor(a!)",
        K::makeFromFunction(BP_FN(BO::outMeta)), K::makeFromFunction(BP_FN(BO::outComposite)));
    declare(first, {{"self", kEveryDtypeButBool, "use logical_not() or logical_xor() instead, "}});
    using M = ScalarForms<"mul.Scalar", "mul.out", kPromotedRule>;
    using MI = ScalarForms<"mul_.Scalar", "mul.out", kPromotedRule>;
    using MO = ScalarForms<"mul.Scalar_out", "mul.out", kPromotedRule>;
    add("mul.Scalar(Tensor self, Scalar other) -> Tensor", {}, K::makeFromFunction(BP_FN(M::functional)));
    add("mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", {}, K::makeFromFunction(BP_FN(MI::inplace)));
    add("mul.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
        K::makeFromFunction(BP_FN(MO::outMeta)), K::makeFromFunction(BP_FN(MO::outComposite)));
    const size_t rsub = ops.size();
    add("rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", {}, K::makeFromFunction(BP_FN(rsubScalar)));
    declare(rsub, {{"self", kEveryDtypeButBool, "to invert a mask use logical_not() instead, "}});
  }

  // --- unary ops
#define BP_UNARY_MORE(NAME, U, DTYPES)                                                                                 \
  add(NAME "(Tensor self) -> Tensor", {}, K::makeFromFunction(BP_FN((UnaryForms<NAME, NAME ".out", U>::functional)))); \
  add(NAME "_(Tensor(a!) self) -> Tensor(a!)", {},                                                                     \
      K::makeFromFunction(BP_FN((UnaryForms<NAME "_", NAME ".out", U>::inplace))));                                    \
  add(NAME ".out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",                                                       \
      K::makeFromFunction(BP_FN((UnaryForms<NAME ".out", NAME ".out", U>::outMeta))));                                 \
  declare(ops.size() - 3, DTYPES)
  const std::vector<ArgumentDtypes> noBoolSelf = {{"self", kEveryDtypeButBool}};
  // floor, ceil, trunc, round: integral selves are returned as they are.
  BP_UNARY_MORE("floor", Unary::Same, noBoolSelf);
  BP_UNARY_MORE("ceil", Unary::Same, noBoolSelf);
  BP_UNARY_MORE("trunc", Unary::Same, noBoolSelf);
  BP_UNARY_MORE("round", Unary::Same, noBoolSelf);  // halves to even
  BP_UNARY_MORE("sign", Unary::Same, {});
  BP_UNARY_MORE("erf", Unary::Floating, {});
  BP_UNARY_MORE("bitwise_not", Unary::Same,
                (std::vector<ArgumentDtypes>{{"self", kIntegralAndBool, "use logical_not() for truth values, "}}));
  BP_UNARY_MORE("logical_not", Unary::Logical, {});
#undef BP_UNARY_MORE
  add("round.decimals(Tensor self, *, int decimals) -> Tensor", {},
      K::makeFromFunction(BP_FN(RoundDecimals::functional)));
  add("round_.decimals(Tensor(a!) self, *, int decimals) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN((UnaryForms<"round_.decimals", "round.decimals_out", Unary::Same, int64_t>::inplace))));
  add("round.decimals_out(Tensor self, *, int decimals, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(
          BP_FN((UnaryForms<"round.decimals_out", "round.decimals_out", Unary::Same, int64_t>::outMeta))));
  declare(ops.size() - 3, {{"self", ScalarTypeSet::floating()}});  // PyTorch: floating selves only

  // isnan, isinf (and their out= forms, no in-place), isfinite (functional only).
  add("isnan(Tensor self) -> Tensor", {},
      K::makeFromFunction(BP_FN((UnaryForms<"isnan", "isnan.out", Unary::Logical>::functional))));
  add("isnan.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((UnaryForms<"isnan.out", "isnan.out", Unary::Logical>::outMeta))));
  add("isinf(Tensor self) -> Tensor", {},
      K::makeFromFunction(BP_FN((UnaryForms<"isinf", "isinf.out", Unary::Logical>::functional))));
  add("isinf.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((UnaryForms<"isinf.out", "isinf.out", Unary::Logical>::outMeta))));
  add("isfinite(Tensor self) -> Tensor", {}, K::makeFromFunction(BP_FN(isfiniteComposite)));

  {
    using N = UnaryForms<"nan_to_num", "nan_to_num.out", Unary::Same, OptDouble, OptDouble, OptDouble>;
    using NI = UnaryForms<"nan_to_num_", "nan_to_num.out", Unary::Same, OptDouble, OptDouble, OptDouble>;
    add("nan_to_num(Tensor self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor", {},
        K::makeFromFunction(BP_FN(N::functional)));
    add("nan_to_num_(Tensor(a!) self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor(a!)", {},
        K::makeFromFunction(BP_FN(NI::inplace)));
    add("nan_to_num.out(Tensor self, float? nan=None, float? posinf=None, float? neginf=None, *, Tensor(a!) out) -> "
        "Tensor(a!)",
        K::makeFromFunction(BP_FN(nanToNumOutMeta)));
  }

  // --- activations: floating selves only (as PyTorch's kernels), except
  // hardtanh, which is clamp with bounds of self's dtype.
  const std::vector<ArgumentDtypes> floatingSelf = {{"self", ScalarTypeSet::floating()}};
  {
    using L = UnaryForms<"leaky_relu", "leaky_relu.out", Unary::Same, const Scalar&>;
    using LI = UnaryForms<"leaky_relu_", "leaky_relu.out", Unary::Same, const Scalar&>;
    using LO = UnaryForms<"leaky_relu.out", "leaky_relu.out", Unary::Same, const Scalar&>;
    add("leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor", {}, K::makeFromFunction(BP_FN(L::functional)));
    add("leaky_relu_(Tensor(a!) self, Scalar negative_slope=0.01) -> Tensor(a!)", {},
        K::makeFromFunction(BP_FN(LI::inplace)));
    add("leaky_relu.out(Tensor self, Scalar negative_slope=0.01, *, Tensor(a!) out) -> Tensor(a!)",
        K::makeFromFunction(BP_FN(LO::outMeta)));
    declare(ops.size() - 3, floatingSelf);
  }
  add("hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor", {},
      K::makeFromFunction(BP_FN(hardtanhFunctional)));
  add("hardtanh_(Tensor(a!) self, Scalar min_val=-1, Scalar max_val=1) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN(hardtanhInplace)));
  add("hardtanh.out(Tensor self, Scalar min_val=-1, Scalar max_val=1, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN(hardtanhOutMeta)), K::makeFromFunction(BP_FN(hardtanhInto)));
  declare(ops.size() - 3, {{"self", kEveryDtypeButBool}});
  {
    using S3 = const Scalar&;
    using E = UnaryForms<"elu", "elu.out", Unary::Same, S3, S3, S3>;
    using EI = UnaryForms<"elu_", "elu.out", Unary::Same, S3, S3, S3>;
    using EO = UnaryForms<"elu.out", "elu.out", Unary::Same, S3, S3, S3>;
    add("elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor", {},
        K::makeFromFunction(BP_FN(E::functional)));
    add("elu_(Tensor(a!) self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor(a!)", {},
        K::makeFromFunction(BP_FN(EI::inplace)));
    add("elu.out(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1, *, Tensor(a!) out) -> Tensor(a!)",
        K::makeFromFunction(BP_FN(EO::outMeta)));
    declare(ops.size() - 3, floatingSelf);
    // softplus has no in-place form in PyTorch.
    using P = UnaryForms<"softplus", "softplus.out", Unary::Same, S3, S3>;
    using PO = UnaryForms<"softplus.out", "softplus.out", Unary::Same, S3, S3>;
    add("softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor", {},
        K::makeFromFunction(BP_FN(P::functional)));
    add("softplus.out(Tensor self, Scalar beta=1, Scalar threshold=20, *, Tensor(a!) out) -> Tensor(a!)",
        K::makeFromFunction(BP_FN(PO::outMeta)));
    declare(ops.size() - 2, floatingSelf);
  }
  // Out= forms derived from the functional ones (Note [Derived out= forms]).
  ops.push_back(derivedOut(
      "rsub.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out) -> Tensor(a!)", "rsub.Scalar"));
}

}  // namespace backplane::ops
