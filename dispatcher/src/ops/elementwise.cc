// The elementwise standard operators: binary arithmetic with broadcasting
// and type promotion, and unary ops. Each is structured (Note [The standard
// operator table]): plugins implement `op.out`; `op` and `op_` are
// composites over it.
#include "ops/families.h"
#include "ops/structured.h"

namespace backplane::ops {

namespace {

// How a binary op's result dtype follows from the promoted input dtype, and
// which promoted dtypes it refuses.
enum class BinaryResult {
  Promoted,     // add, mul, maximum, ...: the promoted dtype
  NoBool,       // sub, pow: the promoted dtype, which must not be bool
  TrueDivide,   // div: integral (and bool) results become float32
  Comparison,   // eq, lt, ...: bool
};

ScalarType applyBinaryResult(std::string_view op, ScalarType t, BinaryResult kind) {
  switch (kind) {
    case BinaryResult::Promoted: return t;
    case BinaryResult::NoBool:
      BP_CHECK(t != ScalarType::Bool, op, ": not supported for inputs of dtype bool (",
               op.find("sub") != std::string_view::npos ? "use logical_xor() instead, or " : "",
               "convert them to an integer or floating dtype first)");
      return t;
    case BinaryResult::TrueDivide: return isFloatingType(t) ? t : ScalarType::Float32;
    case BinaryResult::Comparison: return ScalarType::Bool;
  }
  return t;
}

void checkAlpha(std::string_view op, ScalarType common, const Scalar& alpha) {
  BP_CHECK(isFloatingType(common) || !alpha.isFloatingPoint(), op, ": for integral inputs (here ", common,
           "), alpha must be an integer, but got ", alpha.toDouble());
  BP_CHECK(common != ScalarType::Bool || alpha.isBool() || alpha.toInt() == 0 || alpha.toInt() == 1, op,
           ": for boolean inputs alpha must be a boolean");
}

void checkDefined(std::string_view op, const Tensor& t, const char* name) {
  BP_CHECK(t.defined(), op, ": argument '", name, "' is undefined; pass a tensor");
}

// The device rule is the caller's: CpuScalars::kJoin for the functional and
// in-place forms, which move a 0-d CPU operand (Note [CPU scalars]), and
// kRefuseInOut for the out= form.
template <FixedString Name, BinaryResult Kind>
OutputMeta binaryMeta(const Tensor& self, const Tensor& other, CpuScalars cpu_scalars) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDefined(op, other, "other");
  Device device = commonDevice(op, {{"self", &self}, {"other", &other}}, cpu_scalars);
  return OutputMeta{broadcastShapes(op, self.sizes(), other.sizes()),
                    applyBinaryResult(op, resultType(self, other), Kind), device};
}

// --- binary ops with alpha (add, sub): out = self (+|-) alpha * other

using AlphaOutSig = Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&);

template <FixedString Name, BinaryResult Kind>
OutputMeta alphaMeta(const Tensor& self, const Tensor& other, const Scalar& alpha, CpuScalars cpu_scalars) {
  OutputMeta m = binaryMeta<Name, Kind>(self, other, cpu_scalars);
  checkAlpha(qualified<Name>(), m.dtype, alpha);
  return m;
}

template <FixedString Name, BinaryResult Kind>
void alphaOutMeta(const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& out) {
  checkOut(qualified<Name>(), out, alphaMeta<Name, Kind>(self, other, alpha, CpuScalars::kRefuseInOut),
           {{"self", &self}, {"other", &other}});
}

template <FixedString Name, FixedString OutName, BinaryResult Kind>
Tensor alphaFunctional(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  const OutputMeta m = alphaMeta<Name, Kind>(self, other, alpha, CpuScalars::kJoin);
  Tensor out = allocate(m), moved_self, moved_other;
  return BP_STANDARD_OP(OutName.c_str(), AlphaOutSig)
      .callSkippingMeta(onDevice(self, m.device, moved_self), onDevice(other, m.device, moved_other), alpha, out);
}

template <FixedString Name, FixedString OutName, BinaryResult Kind>
Tensor alphaInplace(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  const OutputMeta m = alphaMeta<Name, Kind>(self, other, alpha, CpuScalars::kJoin);
  checkOut(qualified<Name>(), self, m, {{"other", &other}}, "self");
  Tensor moved_other;
  return BP_STANDARD_OP(OutName.c_str(), AlphaOutSig)
      .callSkippingMeta(self, onDevice(other, m.device, moved_other), alpha, self);
}

// --- binary ops without alpha (mul, div, maximum, pow, eq, ...)

using BinaryOutSig = Tensor(const Tensor&, const Tensor&, const Tensor&);

template <FixedString Name, BinaryResult Kind>
void binaryOutMeta(const Tensor& self, const Tensor& other, const Tensor& out) {
  checkOut(qualified<Name>(), out, binaryMeta<Name, Kind>(self, other, CpuScalars::kRefuseInOut),
           {{"self", &self}, {"other", &other}});
}

template <FixedString Name, FixedString OutName, BinaryResult Kind>
Tensor binaryFunctional(const Tensor& self, const Tensor& other) {
  const OutputMeta m = binaryMeta<Name, Kind>(self, other, CpuScalars::kJoin);
  Tensor out = allocate(m), moved_self, moved_other;
  return BP_STANDARD_OP(OutName.c_str(), BinaryOutSig)
      .callSkippingMeta(onDevice(self, m.device, moved_self), onDevice(other, m.device, moved_other), out);
}

// In place: the result is written into self in self's dtype (for
// comparisons too, as PyTorch's eq_: the bools become 0/1 of self's dtype).
template <FixedString Name, FixedString OutName, BinaryResult Kind>
Tensor binaryInplace(const Tensor& self, const Tensor& other) {
  const OutputMeta m = binaryMeta<Name, Kind>(self, other, CpuScalars::kJoin);
  checkOut(qualified<Name>(), self, m, {{"other", &other}}, "self");
  Tensor moved_other;
  return BP_STANDARD_OP(OutName.c_str(), BinaryOutSig)
      .callSkippingMeta(self, onDevice(other, m.device, moved_other), self);
}

// --- tensor-scalar ops (pow.Tensor_Scalar, eq.Scalar, ...): the scalar
// takes part in promotion as a Python number does.

using ScalarOutSig = Tensor(const Tensor&, const Scalar&, const Tensor&);

template <FixedString Name, BinaryResult Kind>
OutputMeta scalarMeta(const Tensor& self, const Scalar& other) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  const ScalarType common = resultType(self, other);
  if (Kind == BinaryResult::NoBool) {  // pow: PyTorch's rule for integer powers
    BP_CHECK(isFloatingType(common) || other.isBool() || other.toDouble() >= 0, op,
             ": integers to negative integer powers are not allowed (exponent ", other.toDouble(),
             "); convert self to a floating dtype first");
  }
  return OutputMeta{Shape(self.sizes().begin(), self.sizes().end()), applyBinaryResult(op, common, Kind),
                    self.device()};
}

template <FixedString Name, BinaryResult Kind>
void scalarOutMeta(const Tensor& self, const Scalar& other, const Tensor& out) {
  checkOut(qualified<Name>(), out, scalarMeta<Name, Kind>(self, other), {{"self", &self}});
}

template <FixedString Name, FixedString OutName, BinaryResult Kind>
Tensor scalarFunctional(const Tensor& self, const Scalar& other) {
  Tensor out = allocate(scalarMeta<Name, Kind>(self, other));
  return BP_STANDARD_OP(OutName.c_str(), ScalarOutSig).callSkippingMeta(self, other, out);
}

template <FixedString Name, FixedString OutName, BinaryResult Kind>
Tensor scalarInplace(const Tensor& self, const Scalar& other) {
  checkOut(qualified<Name>(), self, scalarMeta<Name, Kind>(self, other), {}, "self");
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
  BP_CHECK(condition.dtype() == ScalarType::Bool, op, ": argument 'condition' must have dtype bool, but got ",
           condition.dtype(), "; compare it first (e.g. ne(condition, 0))");
  Device device = commonDevice(op, {{"condition", &condition}, {"self", &self}, {"other", &other}}, cpu_scalars);
  Shape shape = broadcastShapes(op, condition.sizes(), self.sizes());
  shape = broadcastShapes(op, IntArrayRef(shape.data(), shape.size()), other.sizes());
  return OutputMeta{std::move(shape), resultType(self, other), device};
}

void whereOutMeta(const Tensor& condition, const Tensor& self, const Tensor& other, const Tensor& out) {
  checkOut(qualified<"where.self_out">(), out,
           whereMeta<"where.self_out">(condition, self, other, CpuScalars::kRefuseInOut),
           {{"condition", &condition}, {"self", &self}, {"other", &other}});
}

Tensor whereFunctional(const Tensor& condition, const Tensor& self, const Tensor& other) {
  const OutputMeta m = whereMeta<"where.self">(condition, self, other, CpuScalars::kJoin);
  Tensor out = allocate(m), moved[3];
  return BP_STANDARD_OP("where.self_out", WhereOutSig)
      .callSkippingMeta(onDevice(condition, m.device, moved[0]), onDevice(self, m.device, moved[1]),
                   onDevice(other, m.device, moved[2]), out);
}

// --- unary ops

using UnaryOutSig = Tensor(const Tensor&, const Tensor&);

enum class UnaryResult {
  Same,           // abs: the input dtype
  SameNoBool,     // neg, relu: the input dtype, which must not be bool
  Floating,       // exp, log, sin, ...: integral (and bool) inputs give float32
  FloatingInput,  // gelu, silu: the input must be floating (as PyTorch)
};

template <FixedString Name, UnaryResult Kind>
OutputMeta unaryMeta(const Tensor& self) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  ScalarType t = self.dtype();
  if (Kind == UnaryResult::SameNoBool) {
    BP_CHECK(t != ScalarType::Bool, op, ": not supported for dtype bool",
             op.find("neg") != std::string::npos ? " (to invert a mask use logical_not())" : "",
             "; convert self to an integer or floating dtype first");
  }
  if (Kind == UnaryResult::FloatingInput) {
    BP_CHECK(isFloatingType(t), op, ": expected a floating-point tensor, but 'self' has dtype ", t,
             "; convert it first (e.g. to float32)");
  }
  if (Kind == UnaryResult::Floating && !isFloatingType(t)) t = ScalarType::Float32;
  return OutputMeta{Shape(self.sizes().begin(), self.sizes().end()), t, self.device()};
}

template <FixedString Name, UnaryResult Kind>
void unaryOutMeta(const Tensor& self, const Tensor& out) {
  checkOut(qualified<Name>(), out, unaryMeta<Name, Kind>(self), {{"self", &self}});
}

template <FixedString Name, FixedString OutName, UnaryResult Kind>
Tensor unaryFunctional(const Tensor& self) {
  Tensor out = allocate(unaryMeta<Name, Kind>(self));
  return BP_STANDARD_OP(OutName.c_str(), UnaryOutSig).callSkippingMeta(self, out);
}

template <FixedString Name, FixedString OutName, UnaryResult Kind>
Tensor unaryInplace(const Tensor& self) {
  checkOut(qualified<Name>(), self, unaryMeta<Name, Kind>(self), {}, "self");
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
  return unaryMeta<Name, UnaryResult::FloatingInput>(self);
}

void geluOutMeta(const Tensor& self, std::string_view approximate, const Tensor& out) {
  checkOut(qualified<"gelu.out">(), out, geluMeta<"gelu.out">(self, approximate), {{"self", &self}});
}

Tensor geluFunctional(const Tensor& self, std::string_view approximate) {
  Tensor out = allocate(geluMeta<"gelu">(self, approximate));
  return BP_STANDARD_OP("gelu.out", GeluOutSig).callSkippingMeta(self, approximate, out);
}

Tensor geluInplace(const Tensor& self, std::string_view approximate) {
  checkOut(qualified<"gelu_">(), self, geluMeta<"gelu_">(self, approximate), {}, "self");
  return BP_STANDARD_OP("gelu.out", GeluOutSig).callSkippingMeta(self, approximate, self);
}

// --- clamp(self, min, max): the bounds take part in promotion as scalars.

using ClampOutSig = Tensor(const Tensor&, const std::optional<Scalar>&, const std::optional<Scalar>&, const Tensor&);

template <FixedString Name>
OutputMeta clampMeta(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  BP_CHECK(min.has_value() || max.has_value(), op, ": at least one of 'min' and 'max' must be given (not None)");
  BP_CHECK(self.dtype() != ScalarType::Bool, op, ": not supported for dtype bool; convert self to an integer or floating dtype first");
  ResultTypeState rt;
  rt.add(self);
  if (min) rt.add(*min);
  if (max) rt.add(*max);
  return OutputMeta{Shape(self.sizes().begin(), self.sizes().end()), rt.result(), self.device()};
}

void clampOutMeta(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max,
                  const Tensor& out) {
  checkOut(qualified<"clamp.out">(), out, clampMeta<"clamp.out">(self, min, max), {{"self", &self}});
}

Tensor clampFunctional(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  Tensor out = allocate(clampMeta<"clamp">(self, min, max));
  return BP_STANDARD_OP("clamp.out", ClampOutSig).callSkippingMeta(self, min, max, out);
}

Tensor clampInplace(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  checkOut(qualified<"clamp_">(), self, clampMeta<"clamp_">(self, min, max), {}, "self");
  return BP_STANDARD_OP("clamp.out", ClampOutSig).callSkippingMeta(self, min, max, self);
}

}  // namespace

void addElementwiseOps(std::vector<StandardOp>& ops) {
  auto add = [&](std::string schema, KernelFunction meta = {}, KernelFunction composite = {}) {
    ops.push_back(StandardOp{std::move(schema), std::move(meta), std::move(composite), "elementwise"});
  };
  using K = KernelFunction;
  // add, sub: out = self (+|-) alpha * other.
  add("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", {},
      K::makeFromFunction(BP_FN((alphaFunctional<"add.Tensor", "add.out", BinaryResult::Promoted>))));
  add("add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN((alphaInplace<"add_.Tensor", "add.out", BinaryResult::Promoted>))));
  add("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((alphaOutMeta<"add.out", BinaryResult::Promoted>))));
  add("sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", {},
      K::makeFromFunction(BP_FN((alphaFunctional<"sub.Tensor", "sub.out", BinaryResult::NoBool>))));
  add("sub_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN((alphaInplace<"sub_.Tensor", "sub.out", BinaryResult::NoBool>))));
  add("sub.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((alphaOutMeta<"sub.out", BinaryResult::NoBool>))));

  // Binary ops without alpha: NAME.Tensor, NAME_.Tensor and NAME.out.
#define BP_BINARY(NAME, KIND)                                                                               \
  add(NAME ".Tensor(Tensor self, Tensor other) -> Tensor", {},                                              \
      K::makeFromFunction(BP_FN((binaryFunctional<NAME ".Tensor", NAME ".out", BinaryResult::KIND>))));     \
  add(NAME "_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", {},                                      \
      K::makeFromFunction(BP_FN((binaryInplace<NAME "_.Tensor", NAME ".out", BinaryResult::KIND>))));        \
  add(NAME ".out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",                              \
      K::makeFromFunction(BP_FN((binaryOutMeta<NAME ".out", BinaryResult::KIND>))))
  BP_BINARY("mul", Promoted);
  BP_BINARY("div", TrueDivide);
#undef BP_BINARY
  // maximum/minimum have no in-place form and no overload name in PyTorch.
  add("maximum(Tensor self, Tensor other) -> Tensor", {},
      K::makeFromFunction(BP_FN((binaryFunctional<"maximum", "maximum.out", BinaryResult::Promoted>))));
  add("maximum.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((binaryOutMeta<"maximum.out", BinaryResult::Promoted>))));
  add("minimum(Tensor self, Tensor other) -> Tensor", {},
      K::makeFromFunction(BP_FN((binaryFunctional<"minimum", "minimum.out", BinaryResult::Promoted>))));
  add("minimum.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((binaryOutMeta<"minimum.out", BinaryResult::Promoted>))));

  // pow: tensor and scalar exponents.
  add("pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor", {},
      K::makeFromFunction(BP_FN((binaryFunctional<"pow.Tensor_Tensor", "pow.Tensor_Tensor_out", BinaryResult::NoBool>))));
  add("pow_.Tensor(Tensor(a!) self, Tensor exponent) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN((binaryInplace<"pow_.Tensor", "pow.Tensor_Tensor_out", BinaryResult::NoBool>))));
  add("pow.Tensor_Tensor_out(Tensor self, Tensor exponent, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((binaryOutMeta<"pow.Tensor_Tensor_out", BinaryResult::NoBool>))));
  add("pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", {},
      K::makeFromFunction(BP_FN((scalarFunctional<"pow.Tensor_Scalar", "pow.Tensor_Scalar_out", BinaryResult::NoBool>))));
  add("pow_.Scalar(Tensor(a!) self, Scalar exponent) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN((scalarInplace<"pow_.Scalar", "pow.Tensor_Scalar_out", BinaryResult::NoBool>))));
  add("pow.Tensor_Scalar_out(Tensor self, Scalar exponent, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((scalarOutMeta<"pow.Tensor_Scalar_out", BinaryResult::NoBool>))));

  // Comparisons: bool results (in place: self's dtype).
#define BP_COMPARISON(NAME)                                                                                    \
  add(NAME ".Tensor(Tensor self, Tensor other) -> Tensor", {},                                                 \
      K::makeFromFunction(BP_FN((binaryFunctional<NAME ".Tensor", NAME ".Tensor_out", BinaryResult::Comparison>)))); \
  add(NAME "_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", {},                                         \
      K::makeFromFunction(BP_FN((binaryInplace<NAME "_.Tensor", NAME ".Tensor_out", BinaryResult::Comparison>))));  \
  add(NAME ".Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",                          \
      K::makeFromFunction(BP_FN((binaryOutMeta<NAME ".Tensor_out", BinaryResult::Comparison>))));              \
  add(NAME ".Scalar(Tensor self, Scalar other) -> Tensor", {},                                                 \
      K::makeFromFunction(BP_FN((scalarFunctional<NAME ".Scalar", NAME ".Scalar_out", BinaryResult::Comparison>)))); \
  add(NAME "_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", {},                                         \
      K::makeFromFunction(BP_FN((scalarInplace<NAME "_.Scalar", NAME ".Scalar_out", BinaryResult::Comparison>))));  \
  add(NAME ".Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",                          \
      K::makeFromFunction(BP_FN((scalarOutMeta<NAME ".Scalar_out", BinaryResult::Comparison>))))
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

  // Unary: NAME, NAME_ and NAME.out.
#define BP_UNARY(NAME, KIND)                                                                       \
  add(NAME "(Tensor self) -> Tensor", {},                                                          \
      K::makeFromFunction(BP_FN((unaryFunctional<NAME, NAME ".out", UnaryResult::KIND>))));        \
  add(NAME "_(Tensor(a!) self) -> Tensor(a!)", {},                                                 \
      K::makeFromFunction(BP_FN((unaryInplace<NAME "_", NAME ".out", UnaryResult::KIND>))));       \
  add(NAME ".out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",                                   \
      K::makeFromFunction(BP_FN((unaryOutMeta<NAME ".out", UnaryResult::KIND>))))
  BP_UNARY("neg", SameNoBool);
  BP_UNARY("abs", Same);
  BP_UNARY("relu", SameNoBool);
  BP_UNARY("exp", Floating);
  BP_UNARY("log", Floating);
  BP_UNARY("sqrt", Floating);
  BP_UNARY("rsqrt", Floating);
  BP_UNARY("sin", Floating);
  BP_UNARY("cos", Floating);
  BP_UNARY("tanh", Floating);
  BP_UNARY("sigmoid", Floating);
#undef BP_UNARY
  // silu: structured, and silu.out also has a composite (self * sigmoid(self))
  // for backends that lack a kernel.
  add("silu(Tensor self) -> Tensor", {},
      K::makeFromFunction(BP_FN((unaryFunctional<"silu", "silu.out", UnaryResult::FloatingInput>))));
  add("silu_(Tensor(a!) self) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN((unaryInplace<"silu_", "silu.out", UnaryResult::FloatingInput>))));
  add("silu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((unaryOutMeta<"silu.out", UnaryResult::FloatingInput>))),
      K::makeFromFunction(BP_FN(siluOutComposite)));
  add("gelu(Tensor self, *, str approximate='none') -> Tensor", {}, K::makeFromFunction(BP_FN(geluFunctional)));
  add("gelu_(Tensor(a!) self, *, str approximate='none') -> Tensor(a!)", {}, K::makeFromFunction(BP_FN(geluInplace)));
  add("gelu.out(Tensor self, *, str approximate='none', Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN(geluOutMeta)));
  add("clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", {},
      K::makeFromFunction(BP_FN(clampFunctional)));
  add("clamp_(Tensor(a!) self, Scalar? min=None, Scalar? max=None) -> Tensor(a!)", {},
      K::makeFromFunction(BP_FN(clampInplace)));
  add("clamp.out(Tensor self, Scalar? min=None, Scalar? max=None, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN(clampOutMeta)));
}

}  // namespace backplane::ops
