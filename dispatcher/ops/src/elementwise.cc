// The elementwise standard operators: binary arithmetic with broadcasting
// and type promotion, and unary ops. Each is structured (Note [The standard
// operator table]): plugins implement `op.out`; `op` and `op_` are
// composites over it.
#include "backplane/ops/ops.h"
#include "families.h"
#include "structured.h"

namespace backplane::ops {

namespace {

// What a user with bool operands wants instead of an op that refuses bool.
// Part of the op's rule in the table at the end of this file, so that no
// message depends on how the op is spelled.
enum class BoolAlternative {
  None,
  LogicalXor,       // a - b of bools is a xor b
  LogicalNot,       // neg: -a of a mask is not a
  LogicalXorOrNot,  // sub: a - b of bools is a xor b; 1 - mask is not mask
};

// "use logical_xor() instead, ": the start of the advice in a refusal of
// bool operands (ArgumentDtypes::instead).
const char* insteadOfBool(BoolAlternative alternative) {
  switch (alternative) {
    case BoolAlternative::None: return "";
    case BoolAlternative::LogicalXor: return "use logical_xor() instead, ";
    case BoolAlternative::LogicalNot: return "use logical_not() instead, ";
    case BoolAlternative::LogicalXorOrNot:
      return "for two bool tensors use logical_xor() instead, to invert a mask use logical_not(), ";
  }
  return "";
}

// How a binary op's result dtype follows from the promoted input dtype, and
// which promoted dtypes it refuses.
enum class BinaryResult {
  Promoted,       // add, mul, maximum, ...: the promoted dtype
  NoBool,         // pow: the promoted dtype, which must not be bool
  NoBoolOperand,  // sub: the promoted dtype; no operand may be bool (PyTorch's sub_check)
  TrueDivide,     // div: integral (and bool) results become float32
  Comparison,     // eq, lt, ...: bool
};

// A binary op's rule, as its entry in the table gives it.
struct BinaryRule {
  BinaryResult result;
  BoolAlternative instead_of_bool = BoolAlternative::None;  // with NoBool: what to suggest
};
constexpr BinaryRule kPromoted{BinaryResult::Promoted};
constexpr BinaryRule kNoBool{BinaryResult::NoBool};                                                // pow
constexpr BinaryRule kSubtraction{BinaryResult::NoBoolOperand, BoolAlternative::LogicalXorOrNot};  // sub
constexpr BinaryRule kTrueDivide{BinaryResult::TrueDivide};
constexpr BinaryRule kComparison{BinaryResult::Comparison};

// The rule's dtypes as the table lists them (Note [Dtype rules live in
// metas]): NoBool refuses a bool promoted dtype.
std::vector<ArgumentDtypes> binaryDtypes(BinaryRule rule) {
  if (rule.result == BinaryResult::NoBoolOperand) {
    return {{"self", kEveryDtypeButBool, insteadOfBool(rule.instead_of_bool)},
            {"other", kEveryDtypeButBool, insteadOfBool(rule.instead_of_bool)}};
  }
  if (rule.result != BinaryResult::NoBool) return {};
  return {{"result", kEveryDtypeButBool, insteadOfBool(rule.instead_of_bool)}};
}

ScalarType applyBinaryRule(std::string_view op, const StandardOp& entry, ScalarType t, BinaryRule rule) {
  switch (rule.result) {
    case BinaryResult::Promoted: return t;
    case BinaryResult::NoBool: checkResultDtype(op, entry, t); return t;
    case BinaryResult::NoBoolOperand: return t;  // binaryMeta has checked the operands
    case BinaryResult::TrueDivide: return isFloatingType(t) ? t : ScalarType::Float32;
    case BinaryResult::Comparison: return ScalarType::Bool;
  }
  return t;
}

// The device rule is the caller's: CpuScalars::kJoin for the functional and
// in-place forms, which move a 0-d CPU operand (Note [CPU scalars]), and
// kRefuseInOut for the out= form.
template <FixedString Name, BinaryRule Rule>
OutputMeta binaryMeta(const Tensor& self, const Tensor& other, CpuScalars cpu_scalars) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDefined(op, other, "other");
  if constexpr (Rule.result == BinaryResult::NoBoolOperand)
    checkDtypes(op, standardOp<Name>(), {{"self", &self}, {"other", &other}});
  Device device = commonDevice(op, {{"self", &self}, {"other", &other}}, cpu_scalars);
  return OutputMeta{broadcastShapes(op, self.sizes(), other.sizes()),
                    applyBinaryRule(op, standardOp<Name>(), resultType(self, other), Rule), device};
}

// --- binary ops with alpha (add, sub): out = self (+|-) alpha * other

using AlphaOutSig = Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&);

template <FixedString Name, BinaryRule Rule>
OutputMeta alphaMeta(const Tensor& self, const Tensor& other, const Scalar& alpha, CpuScalars cpu_scalars) {
  OutputMeta m = binaryMeta<Name, Rule>(self, other, cpu_scalars);
  checkAlpha(qualified<Name>(), m.dtype, alpha);
  return m;
}

template <FixedString Name, BinaryRule Rule>
bool alphaOutMeta(const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& out) {
  const OutputMeta m = alphaMeta<Name, Rule>(self, other, alpha, CpuScalars::kRefuseInOut);
  checkOut(qualified<Name>(), out, m, {{"self", &self}, {"other", &other}});
  return castIntoOut(out, m, [&](const Tensor& tmp) {
    BP_STANDARD_OP(Name.c_str(), AlphaOutSig).callSkippingMeta(self, other, alpha, tmp);
  });
}

template <FixedString Name, FixedString OutName, BinaryRule Rule>
Tensor alphaFunctional(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  const OutputMeta m = alphaMeta<Name, Rule>(self, other, alpha, CpuScalars::kJoin);
  Tensor out = allocate(m), moved_self, moved_other;
  const auto& op = BP_STANDARD_OP(OutName.c_str(), AlphaOutSig);
  return op.callSkippingMeta(onDevice(self, m.device, moved_self, op), onDevice(other, m.device, moved_other, op),
                             alpha, out);
}

template <FixedString Name, FixedString OutName, BinaryRule Rule>
Tensor alphaInplace(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  const OutputMeta m = alphaMeta<Name, Rule>(self, other, alpha, CpuScalars::kJoin);
  checkOut(qualified<Name>(), self, m, {{"other", &other}}, "self");
  Tensor moved_other;
  const Tensor& o = onDevice(other, m.device, moved_other, BP_STANDARD_OP(OutName.c_str(), AlphaOutSig));
  if (castIntoOut(self, m, [&](const Tensor& tmp) {
        BP_STANDARD_OP(OutName.c_str(), AlphaOutSig).callSkippingMeta(self, o, alpha, tmp);
      }))
    return self;
  return BP_STANDARD_OP(OutName.c_str(), AlphaOutSig).callSkippingMeta(self, o, alpha, self);
}

// --- binary ops without alpha (mul, div, maximum, pow, eq, ...)

using BinaryOutSig = Tensor(const Tensor&, const Tensor&, const Tensor&);

template <FixedString Name, BinaryRule Rule>
bool binaryOutMeta(const Tensor& self, const Tensor& other, const Tensor& out) {
  const OutputMeta m = binaryMeta<Name, Rule>(self, other, CpuScalars::kRefuseInOut);
  checkOut(qualified<Name>(), out, m, {{"self", &self}, {"other", &other}});
  return castIntoOut(out, m, [&](const Tensor& tmp) {
    BP_STANDARD_OP(Name.c_str(), BinaryOutSig).callSkippingMeta(self, other, tmp);
  });
}

template <FixedString Name, FixedString OutName, BinaryRule Rule>
Tensor binaryFunctional(const Tensor& self, const Tensor& other) {
  const OutputMeta m = binaryMeta<Name, Rule>(self, other, CpuScalars::kJoin);
  Tensor out = allocate(m), moved_self, moved_other;
  const auto& op = BP_STANDARD_OP(OutName.c_str(), BinaryOutSig);
  return op.callSkippingMeta(onDevice(self, m.device, moved_self, op), onDevice(other, m.device, moved_other, op), out);
}

// In place: computed in the op's dtype and cast into self (Note [out= of
// another dtype]); for comparisons, as PyTorch's eq_, the bools become 0/1
// of self's dtype.
template <FixedString Name, FixedString OutName, BinaryRule Rule>
Tensor binaryInplace(const Tensor& self, const Tensor& other) {
  const OutputMeta m = binaryMeta<Name, Rule>(self, other, CpuScalars::kJoin);
  checkOut(qualified<Name>(), self, m, {{"other", &other}}, "self");
  Tensor moved_other;
  const Tensor& o = onDevice(other, m.device, moved_other, BP_STANDARD_OP(OutName.c_str(), BinaryOutSig));
  if (castIntoOut(self, m, [&](const Tensor& tmp) {
        BP_STANDARD_OP(OutName.c_str(), BinaryOutSig).callSkippingMeta(self, o, tmp);
      }))
    return self;
  return BP_STANDARD_OP(OutName.c_str(), BinaryOutSig).callSkippingMeta(self, o, self);
}

// --- tensor-scalar ops (pow.Tensor_Scalar, eq.Scalar, ...): the scalar
// takes part in promotion as a Python number does.

using ScalarOutSig = Tensor(const Tensor&, const Scalar&, const Tensor&);

template <FixedString Name, BinaryRule Rule>
OutputMeta scalarMeta(const Tensor& self, const Scalar& other) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  const ScalarType common = resultType(self, other);
  if (Rule.result == BinaryResult::NoBool) {  // pow: PyTorch's rule for integer powers
    BP_CHECK(isFloatingType(common) || other.isBool() || other.toDouble() >= 0, op,
             ": integers to negative integer powers are not allowed (exponent ", other.toDouble(),
             "); convert self to a floating dtype first");
    // The exponent is a value of the result dtype for the integral and the
    // 16-bit floating dtypes (float32 and float64 raise to it in double),
    // converted with the one checked conversion: pow(uint8, 300) and
    // pow(float16, 1e5) raise, as PyTorch.
    if (!isFloatingType(common) || common == ScalarType::Float16 || common == ScalarType::BFloat16)
      checkScalarConverts(op, "exponent", other, common);
  }
  return OutputMeta{Shape(self.sizes().begin(), self.sizes().end()),
                    applyBinaryRule(op, standardOp<Name>(), common, Rule), self.device()};
}

template <FixedString Name, BinaryRule Rule>
bool scalarOutMeta(const Tensor& self, const Scalar& other, const Tensor& out) {
  const OutputMeta m = scalarMeta<Name, Rule>(self, other);
  checkOut(qualified<Name>(), out, m, {{"self", &self}});
  return castIntoOut(out, m, [&](const Tensor& tmp) {
    BP_STANDARD_OP(Name.c_str(), ScalarOutSig).callSkippingMeta(self, other, tmp);
  });
}

template <FixedString Name, FixedString OutName, BinaryRule Rule>
Tensor scalarFunctional(const Tensor& self, const Scalar& other) {
  Tensor out = allocate(scalarMeta<Name, Rule>(self, other));
  return BP_STANDARD_OP(OutName.c_str(), ScalarOutSig).callSkippingMeta(self, other, out);
}

template <FixedString Name, FixedString OutName, BinaryRule Rule>
Tensor scalarInplace(const Tensor& self, const Scalar& other) {
  const OutputMeta m = scalarMeta<Name, Rule>(self, other);
  checkOut(qualified<Name>(), self, m, {}, "self");
  if (castIntoOut(self, m, [&](const Tensor& tmp) {
        BP_STANDARD_OP(OutName.c_str(), ScalarOutSig).callSkippingMeta(self, other, tmp);
      }))
    return self;
  return BP_STANDARD_OP(OutName.c_str(), ScalarOutSig).callSkippingMeta(self, other, self);
}

// --- where(condition, self, other)

using WhereOutSig = Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&);

template <FixedString Name>
OutputMeta whereMeta(const Tensor& condition, const Tensor& self, const Tensor& other, CpuScalars cpu_scalars) {
  const std::string& op = qualified<Name>();
  checkDefined(op, condition, "condition");
  checkDefined(op, self, "self");
  checkDefined(op, other, "other");
  checkDtypes(op, standardOp<Name>(), {{"condition", &condition}});
  Device device = commonDevice(op, {{"condition", &condition}, {"self", &self}, {"other", &other}}, cpu_scalars);
  Shape shape = broadcastShapes(op, condition.sizes(), self.sizes());
  shape = broadcastShapes(op, IntArrayRef(shape.data(), shape.size()), other.sizes());
  return OutputMeta{std::move(shape), resultType(self, other), device};
}

bool whereOutMeta(const Tensor& condition, const Tensor& self, const Tensor& other, const Tensor& out) {
  const OutputMeta m = whereMeta<"where.self_out">(condition, self, other, CpuScalars::kRefuseInOut);
  checkOut(qualified<"where.self_out">(), out, m, {{"condition", &condition}, {"self", &self}, {"other", &other}});
  return castIntoOut(out, m, [&](const Tensor& tmp) {
    BP_STANDARD_OP("where.self_out", WhereOutSig).callSkippingMeta(condition, self, other, tmp);
  });
}

Tensor whereFunctional(const Tensor& condition, const Tensor& self, const Tensor& other) {
  const OutputMeta m = whereMeta<"where.self">(condition, self, other, CpuScalars::kJoin);
  Tensor out = allocate(m), moved[3];
  const auto& op = BP_STANDARD_OP("where.self_out", WhereOutSig);
  return op.callSkippingMeta(onDevice(condition, m.device, moved[0], op), onDevice(self, m.device, moved[1], op),
                             onDevice(other, m.device, moved[2], op), out);
}

// where.ScalarOther(condition, self, other), where.ScalarSelf(condition,
// self, other) and where.Scalar(condition, self, other): PyTorch's overloads
// with a number for either value (`where(mask, x, 0.0)`). The number
// promotes as a Python number does (it never widens a tensor of its own
// kind: where(mask, float16 x, 0.0) is float16; two numbers give int64 or
// the default float32); the composite makes it a 0-d tensor of the result
// dtype on the tensors' device and calls where.self, so every device has
// them without a kernel.
template <FixedString Name>
ScalarType whereScalarsMeta(const Tensor& condition, const Tensor& tensor, std::optional<Scalar> first,
                            std::optional<Scalar> second) {
  const std::string& op = qualified<Name>();
  checkDefined(op, condition, "condition");
  checkDtypes(op, standardOp<Name>(), {{"condition", &condition}});
  ResultTypeState types;
  if (tensor.defined()) {
    commonDevice(op, {{"condition", &condition}, {"self", &tensor}}, CpuScalars::kJoin);
    broadcastShapes(op, condition.sizes(), tensor.sizes());
    types.add(tensor);
  }
  if (first) types.add(*first);
  if (second) types.add(*second);
  return types.result();
}

void whereScalarOtherMeta(const Tensor& condition, const Tensor& self, const Scalar& other) {
  checkDefined(qualified<"where.ScalarOther">(), self, "self");
  (void)whereScalarsMeta<"where.ScalarOther">(condition, self, other, std::nullopt);
}
void whereScalarSelfMeta(const Tensor& condition, const Scalar& self, const Tensor& other) {
  checkDefined(qualified<"where.ScalarSelf">(), other, "other");
  (void)whereScalarsMeta<"where.ScalarSelf">(condition, other, self, std::nullopt);
}
void whereScalarMeta(const Tensor& condition, const Scalar& self, const Scalar& other) {
  (void)whereScalarsMeta<"where.Scalar">(condition, Tensor(), self, other);
}

Tensor whereScalarOther(const Tensor& condition, const Tensor& self, const Scalar& other) {
  const ScalarType dt = whereScalarsMeta<"where.ScalarOther">(condition, self, other, std::nullopt);
  return where(condition, self, full({}, other, {dt, self.device()}));
}
Tensor whereScalarSelf(const Tensor& condition, const Scalar& self, const Tensor& other) {
  const ScalarType dt = whereScalarsMeta<"where.ScalarSelf">(condition, other, self, std::nullopt);
  return where(condition, full({}, self, {dt, other.device()}), other);
}
Tensor whereScalar(const Tensor& condition, const Scalar& self, const Scalar& other) {
  const ScalarType dt = whereScalarsMeta<"where.Scalar">(condition, Tensor(), self, other);
  const TensorOptions options{dt, condition.device()};
  return where(condition, full({}, self, options), full({}, other, options));
}

// --- unary ops

using UnaryOutSig = Tensor(const Tensor&, const Tensor&);

enum class UnaryResult {
  Same,           // abs: the input dtype
  SameNoBool,     // neg, relu: the input dtype, which must not be bool
  Floating,       // exp, log, sin, ...: integral (and bool) inputs give float32
  FloatingInput,  // gelu, silu: the input must be floating (as PyTorch)
};

// A unary op's rule, as its entry in the table gives it.
struct UnaryRule {
  UnaryResult result;
  BoolAlternative instead_of_bool = BoolAlternative::None;  // with SameNoBool: what to suggest
};
constexpr UnaryRule kSame{UnaryResult::Same};
constexpr UnaryRule kSameNoBool{UnaryResult::SameNoBool};                             // relu
constexpr UnaryRule kNegation{UnaryResult::SameNoBool, BoolAlternative::LogicalNot};  // neg
constexpr UnaryRule kFloating{UnaryResult::Floating};
constexpr UnaryRule kFloatingInput{UnaryResult::FloatingInput};

// The rule's dtypes as the table lists them: SameNoBool refuses bool,
// FloatingInput takes floating dtypes only (as PyTorch).
std::vector<ArgumentDtypes> unaryDtypes(UnaryRule rule) {
  switch (rule.result) {
    case UnaryResult::SameNoBool: return {{"self", kEveryDtypeButBool, insteadOfBool(rule.instead_of_bool)}};
    case UnaryResult::FloatingInput: return {{"self", ScalarTypeSet::floating()}};
    case UnaryResult::Same:
    case UnaryResult::Floating: return {};
  }
  return {};
}

template <FixedString Name, UnaryRule Rule>
OutputMeta unaryMeta(const Tensor& self) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDtypes(op, standardOp<Name>(), {{"self", &self}});
  ScalarType t = self.dtype();
  if (Rule.result == UnaryResult::Floating && !isFloatingType(t)) t = ScalarType::Float32;
  return OutputMeta{Shape(self.sizes().begin(), self.sizes().end()), t, self.device()};
}

// A floating op (exp of int8 into float64) computes in its dtype and casts
// into out; the others write only their own dtype (Note [out= of another
// dtype]).
template <FixedString Name, UnaryRule Rule>
bool unaryOutMeta(const Tensor& self, const Tensor& out) {
  const OutputMeta m = unaryMeta<Name, Rule>(self);
  if constexpr (Rule.result != UnaryResult::Floating) checkOutDtype(qualified<Name>(), out, m);
  checkOut(qualified<Name>(), out, m, {{"self", &self}});
  return castIntoOut(out, m,
                     [&](const Tensor& tmp) { BP_STANDARD_OP(Name.c_str(), UnaryOutSig).callSkippingMeta(self, tmp); });
}

template <FixedString Name, FixedString OutName, UnaryRule Rule>
Tensor unaryFunctional(const Tensor& self) {
  Tensor out = allocate(unaryMeta<Name, Rule>(self));
  return BP_STANDARD_OP(OutName.c_str(), UnaryOutSig).callSkippingMeta(self, out);
}

template <FixedString Name, FixedString OutName, UnaryRule Rule>
Tensor unaryInplace(const Tensor& self) {
  const OutputMeta m = unaryMeta<Name, Rule>(self);
  checkOut(qualified<Name>(), self, m, {}, "self");
  if (castIntoOut(self, m,
                  [&](const Tensor& tmp) { BP_STANDARD_OP(OutName.c_str(), UnaryOutSig).callSkippingMeta(self, tmp); }))
    return self;
  return BP_STANDARD_OP(OutName.c_str(), UnaryOutSig).callSkippingMeta(self, self);
}

// silu.out for backends without their own kernel: self * sigmoid(self).
// The CPU plugin's native silu.out kernel takes precedence over it (Note
// [Kernel precedence]).
Tensor siluOutComposite(const Tensor& self, const Tensor& out) {
  Tensor sig = BP_STANDARD_OP("sigmoid", Tensor(const Tensor&)).call(self);
  return BP_STANDARD_OP("mul.out", BinaryOutSig).callSkippingMeta(self, sig, out);
}

// --- gelu(self, *, approximate)

using GeluOutSig = Tensor(const Tensor&, std::string_view, const Tensor&);

template <FixedString Name>
OutputMeta geluMeta(const Tensor& self, std::string_view approximate) {
  BP_CHECK(approximate == "none" || approximate == "tanh", qualified<Name>(),
           ": argument 'approximate' must be 'none' (the exact erf form) or 'tanh', but got '", approximate, "'");
  return unaryMeta<Name, kFloatingInput>(self);
}

void geluOutMeta(const Tensor& self, std::string_view approximate, const Tensor& out) {
  const OutputMeta m = geluMeta<"gelu.out">(self, approximate);
  checkOutDtype(qualified<"gelu.out">(), out, m);
  checkOut(qualified<"gelu.out">(), out, m, {{"self", &self}});
}

Tensor geluFunctional(const Tensor& self, std::string_view approximate) {
  Tensor out = allocate(geluMeta<"gelu">(self, approximate));
  return BP_STANDARD_OP("gelu.out", GeluOutSig).callSkippingMeta(self, approximate, out);
}

Tensor geluInplace(const Tensor& self, std::string_view approximate) {
  checkOut(qualified<"gelu_">(), self, geluMeta<"gelu_">(self, approximate), {}, "self");
  return BP_STANDARD_OP("gelu.out", GeluOutSig).callSkippingMeta(self, approximate, self);
}

// --- clamp(self, min, max): the bounds take part in promotion as scalars
// (a bool tensor with integer bounds gives int64), and are converted to the
// result dtype with PyTorch's checked conversion (Note [Writing a Scalar
// into a tensor]): clamp(int8, max=300) is refused, a negative bound wraps
// into uint8. A bool result is refused, as PyTorch has no bool clamp.

using ClampOutSig = Tensor(const Tensor&, const std::optional<Scalar>&, const std::optional<Scalar>&, const Tensor&);

template <FixedString Name>
OutputMeta clampMeta(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  BP_CHECK(min.has_value() || max.has_value(), op, ": at least one of 'min' and 'max' must be given (not None)");
  ResultTypeState rt;
  rt.add(self);
  if (min) rt.add(*min);
  if (max) rt.add(*max);
  const ScalarType result = rt.result();
  checkResultDtype(op, standardOp<Name>(), result);
  if (min) checkScalarConverts(op, "min", *min, result);
  if (max) checkScalarConverts(op, "max", *max, result);
  return OutputMeta{Shape(self.sizes().begin(), self.sizes().end()), result, self.device()};
}

void clampOutMeta(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max,
                  const Tensor& out) {
  const OutputMeta m = clampMeta<"clamp.out">(self, min, max);
  checkOutDtype(qualified<"clamp.out">(), out, m);
  checkOut(qualified<"clamp.out">(), out, m, {{"self", &self}});
}

Tensor clampFunctional(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  Tensor out = allocate(clampMeta<"clamp">(self, min, max));
  return BP_STANDARD_OP("clamp.out", ClampOutSig).callSkippingMeta(self, min, max, out);
}

Tensor clampInplace(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  const OutputMeta m = clampMeta<"clamp_">(self, min, max);
  // As PyTorch, in place the bounds may not promote self's dtype.
  BP_CHECK(m.dtype == self.dtype(), qualified<"clamp_">(), ": the bounds promote self (", self.dtype(), ") to ",
           m.dtype, ", which cannot be cast into self in place; use clamp() (out of place) or bounds of self's kind");
  checkOut(qualified<"clamp_">(), self, m, {}, "self");
  return BP_STANDARD_OP("clamp.out", ClampOutSig).callSkippingMeta(self, min, max, self);
}

}  // namespace

void addElementwiseOps(std::vector<StandardOp>& ops) {
  auto add = [&](std::string schema, KernelFunction meta = {}, KernelFunction composite = {}) {
    ops.push_back(StandardOp{std::move(schema), std::move(meta), std::move(composite), "elementwise"});
  };
  // Gives the entries added since `first` (the forms of one op) its dtype
  // rule (Note [Dtype rules live in metas]).
  auto declare = [&](size_t first, const std::vector<ArgumentDtypes>& dtypes) {
    for (size_t i = first; i < ops.size(); ++i) ops[i].dtypes = dtypes;
  };
  using K = KernelFunction;
  // add, sub: out = self (+|-) alpha * other.
  add("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", {},
      K::makeFromFunction(BP_FN((alphaFunctional<"add.Tensor", "add.out", kPromoted>))));
  add("add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN((alphaInplace<"add_.Tensor", "add.out", kPromoted>))));
  add("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((alphaOutMeta<"add.out", kPromoted>))));
  size_t first = ops.size();
  add("sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", {},
      K::makeFromFunction(BP_FN((alphaFunctional<"sub.Tensor", "sub.out", kSubtraction>))));
  add("sub_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN((alphaInplace<"sub_.Tensor", "sub.out", kSubtraction>))));
  add("sub.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((alphaOutMeta<"sub.out", kSubtraction>))));
  declare(first, binaryDtypes(kSubtraction));

  // Binary ops without alpha: NAME.Tensor, NAME_.Tensor and NAME.out.
#define BP_BINARY(NAME, RULE)                                                             \
  add(NAME ".Tensor(Tensor self, Tensor other) -> Tensor", {},                            \
      K::makeFromFunction(BP_FN((binaryFunctional<NAME ".Tensor", NAME ".out", RULE>)))); \
  add(NAME "_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", {},                   \
      K::makeFromFunction(BP_FN((binaryInplace<NAME "_.Tensor", NAME ".out", RULE>))));   \
  add(NAME ".out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",            \
      K::makeFromFunction(BP_FN((binaryOutMeta<NAME ".out", RULE>))))
  BP_BINARY("mul", kPromoted);
  BP_BINARY("div", kTrueDivide);
#undef BP_BINARY
  // maximum/minimum have no in-place form and no overload name in PyTorch.
  add("maximum(Tensor self, Tensor other) -> Tensor", {},
      K::makeFromFunction(BP_FN((binaryFunctional<"maximum", "maximum.out", kPromoted>))));
  add("maximum.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((binaryOutMeta<"maximum.out", kPromoted>))));
  add("minimum(Tensor self, Tensor other) -> Tensor", {},
      K::makeFromFunction(BP_FN((binaryFunctional<"minimum", "minimum.out", kPromoted>))));
  add("minimum.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((binaryOutMeta<"minimum.out", kPromoted>))));

  // pow: tensor and scalar exponents.
  first = ops.size();
  add("pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor", {},
      K::makeFromFunction(BP_FN((binaryFunctional<"pow.Tensor_Tensor", "pow.Tensor_Tensor_out", kNoBool>))));
  add("pow_.Tensor(Tensor(a!) self, Tensor exponent) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN((binaryInplace<"pow_.Tensor", "pow.Tensor_Tensor_out", kNoBool>))));
  add("pow.Tensor_Tensor_out(Tensor self, Tensor exponent, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((binaryOutMeta<"pow.Tensor_Tensor_out", kNoBool>))));
  add("pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", {},
      K::makeFromFunction(BP_FN((scalarFunctional<"pow.Tensor_Scalar", "pow.Tensor_Scalar_out", kNoBool>))));
  add("pow_.Scalar(Tensor(a!) self, Scalar exponent) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN((scalarInplace<"pow_.Scalar", "pow.Tensor_Scalar_out", kNoBool>))));
  add("pow.Tensor_Scalar_out(Tensor self, Scalar exponent, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((scalarOutMeta<"pow.Tensor_Scalar_out", kNoBool>))));
  declare(first, binaryDtypes(kNoBool));

  // Comparisons: bool results (in place: self's dtype).
#define BP_COMPARISON(NAME)                                                                             \
  add(NAME ".Tensor(Tensor self, Tensor other) -> Tensor", {},                                          \
      K::makeFromFunction(BP_FN((binaryFunctional<NAME ".Tensor", NAME ".Tensor_out", kComparison>)))); \
  add(NAME "_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", {},                                 \
      K::makeFromFunction(BP_FN((binaryInplace<NAME "_.Tensor", NAME ".Tensor_out", kComparison>))));   \
  add(NAME ".Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",                   \
      K::makeFromFunction(BP_FN((binaryOutMeta<NAME ".Tensor_out", kComparison>))));                    \
  add(NAME ".Scalar(Tensor self, Scalar other) -> Tensor", {},                                          \
      K::makeFromFunction(BP_FN((scalarFunctional<NAME ".Scalar", NAME ".Scalar_out", kComparison>)))); \
  add(NAME "_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", {},                                 \
      K::makeFromFunction(BP_FN((scalarInplace<NAME "_.Scalar", NAME ".Scalar_out", kComparison>))));   \
  add(NAME ".Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",                   \
      K::makeFromFunction(BP_FN((scalarOutMeta<NAME ".Scalar_out", kComparison>))))
  BP_COMPARISON("eq");
  BP_COMPARISON("ne");
  BP_COMPARISON("lt");
  BP_COMPARISON("le");
  BP_COMPARISON("gt");
  BP_COMPARISON("ge");
#undef BP_COMPARISON

  add("where.self(Tensor condition, Tensor self, Tensor other) -> Tensor", {},
      K::makeFromFunction(BP_FN(whereFunctional)));
  add("where.self_out(Tensor condition, Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN(whereOutMeta)));
  declare(ops.size() - 2, {{"condition", {ScalarType::Bool}, "compare it first (e.g. ne(condition, 0)), "}});
  add("where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor",
      K::makeFromFunction(BP_FN(whereScalarOtherMeta)), K::makeFromFunction(BP_FN(whereScalarOther)));
  add("where.ScalarSelf(Tensor condition, Scalar self, Tensor other) -> Tensor",
      K::makeFromFunction(BP_FN(whereScalarSelfMeta)), K::makeFromFunction(BP_FN(whereScalarSelf)));
  add("where.Scalar(Tensor condition, Scalar self, Scalar other) -> Tensor",
      K::makeFromFunction(BP_FN(whereScalarMeta)), K::makeFromFunction(BP_FN(whereScalar)));
  declare(ops.size() - 3, {{"condition", {ScalarType::Bool}, "compare it first (e.g. ne(condition, 0)), "}});

  // Unary: NAME, NAME_ and NAME.out.
#define BP_UNARY(NAME, RULE)                                                                                       \
  add(NAME "(Tensor self) -> Tensor", {}, K::makeFromFunction(BP_FN((unaryFunctional<NAME, NAME ".out", RULE>)))); \
  add(NAME "_(Tensor(a!) self) -> Tensor(a!)", {},                                                                 \
      K::makeFromFunction(BP_FN((unaryInplace<NAME "_", NAME ".out", RULE>))));                                    \
  add(NAME ".out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",                                                   \
      K::makeFromFunction(BP_FN((unaryOutMeta<NAME ".out", RULE>))));                                              \
  declare(ops.size() - 3, unaryDtypes(RULE))
  BP_UNARY("neg", kNegation);
  BP_UNARY("abs", kSame);
  BP_UNARY("relu", kSameNoBool);
  BP_UNARY("exp", kFloating);
  BP_UNARY("log", kFloating);
  BP_UNARY("sqrt", kFloating);
  BP_UNARY("rsqrt", kFloating);
  BP_UNARY("sin", kFloating);
  BP_UNARY("cos", kFloating);
  BP_UNARY("tanh", kFloating);
  BP_UNARY("sigmoid", kFloating);
#undef BP_UNARY
  // silu: structured, and silu.out also has a composite (self * sigmoid(self))
  // for backends that lack a kernel.
  add("silu(Tensor self) -> Tensor", {},
      K::makeFromFunction(BP_FN((unaryFunctional<"silu", "silu.out", kFloatingInput>))));
  add("silu_(Tensor(a!) self) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN((unaryInplace<"silu_", "silu.out", kFloatingInput>))));
  add("silu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((unaryOutMeta<"silu.out", kFloatingInput>))),
      K::makeFromFunction(BP_FN(siluOutComposite)));
  declare(ops.size() - 3, unaryDtypes(kFloatingInput));
  add("gelu(Tensor self, *, str approximate='none') -> Tensor", {}, K::makeFromFunction(BP_FN(geluFunctional)));
  add("gelu_(Tensor(a!) self, *, str approximate='none') -> Tensor(a!)", {}, K::makeFromFunction(BP_FN(geluInplace)));
  add("gelu.out(Tensor self, *, str approximate='none', Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN(geluOutMeta)));
  declare(ops.size() - 3, unaryDtypes(kFloatingInput));
  add("clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", {},
      K::makeFromFunction(BP_FN(clampFunctional)));
  add("clamp_(Tensor(a!) self, Scalar? min=None, Scalar? max=None) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN(clampInplace)));
  add("clamp.out(Tensor self, Scalar? min=None, Scalar? max=None, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN(clampOutMeta)));
  declare(ops.size() - 3, {{"result", kEveryDtypeButBool}});
}

}  // namespace backplane::ops
