// The elementwise standard operators: binary arithmetic with broadcasting
// and type promotion, and unary ops. Each is structured (Note [The standard
// operator table]): plugins implement `op.out`; `op` and `op_` are
// composites over it.
#include "ops/families.h"
#include "ops/structured.h"

namespace backplane::ops {

namespace {

// How a binary op's result dtype follows from the promoted input dtype.
enum class BinaryResult {
  Promoted,    // add, sub, mul, ...: the promoted dtype
  TrueDivide,  // div: integral (and bool) results become float32
};

ScalarType binaryResultType(const Tensor& self, const Tensor& other, BinaryResult kind) {
  ScalarType t = resultType(self, other);
  if (kind == BinaryResult::TrueDivide && !isFloatingType(t)) t = ScalarType::Float32;
  return t;
}

void checkAlpha(std::string_view op, ScalarType common, const Scalar& alpha) {
  BP_CHECK(isFloatingType(common) || !alpha.isFloatingPoint(), op, ": for integral inputs (here ", common,
           "), alpha must be an integer, but got ", alpha.toDouble());
  BP_CHECK(common != ScalarType::Bool || alpha.isBool() || alpha.toInt() == 0 || alpha.toInt() == 1, op,
           ": for boolean inputs alpha must be a boolean");
}

template <FixedString Name, BinaryResult Kind>
OutputMeta binaryMeta(const Tensor& self, const Tensor& other) {
  const std::string& op = qualified<Name>();
  Device device = commonDevice(op, {{"self", &self}, {"other", &other}});
  return OutputMeta{broadcastShapes(op, self.sizes(), other.sizes()), binaryResultType(self, other, Kind), device};
}

// --- binary ops with alpha (add, sub): out = self (+|-) alpha * other

using AlphaOutSig = Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&);

template <FixedString Name>
void alphaOutMeta(const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& out) {
  OutputMeta m = binaryMeta<Name, BinaryResult::Promoted>(self, other);
  checkAlpha(qualified<Name>(), m.dtype, alpha);
  checkOut(qualified<Name>(), out, m, {{"self", &self}, {"other", &other}});
}

template <FixedString Name, FixedString OutName>
Tensor alphaFunctional(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  OutputMeta m = binaryMeta<Name, BinaryResult::Promoted>(self, other);
  checkAlpha(qualified<Name>(), m.dtype, alpha);
  Tensor out = allocate(m);
  return BP_STANDARD_OP(OutName.c_str(), AlphaOutSig).callChecked(self, other, alpha, out);
}

template <FixedString Name, FixedString OutName>
Tensor alphaInplace(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  OutputMeta m = binaryMeta<Name, BinaryResult::Promoted>(self, other);
  checkAlpha(qualified<Name>(), m.dtype, alpha);
  checkOut(qualified<Name>(), self, m, {{"other", &other}}, "self");
  return BP_STANDARD_OP(OutName.c_str(), AlphaOutSig).callChecked(self, other, alpha, self);
}

// --- binary ops without alpha (mul, div, maximum, ...)

using BinaryOutSig = Tensor(const Tensor&, const Tensor&, const Tensor&);

template <FixedString Name, BinaryResult Kind>
void binaryOutMeta(const Tensor& self, const Tensor& other, const Tensor& out) {
  checkOut(qualified<Name>(), out, binaryMeta<Name, Kind>(self, other), {{"self", &self}, {"other", &other}});
}

template <FixedString Name, FixedString OutName, BinaryResult Kind>
Tensor binaryFunctional(const Tensor& self, const Tensor& other) {
  Tensor out = allocate(binaryMeta<Name, Kind>(self, other));
  return BP_STANDARD_OP(OutName.c_str(), BinaryOutSig).callChecked(self, other, out);
}

template <FixedString Name, FixedString OutName, BinaryResult Kind>
Tensor binaryInplace(const Tensor& self, const Tensor& other) {
  checkOut(qualified<Name>(), self, binaryMeta<Name, Kind>(self, other), {{"other", &other}}, "self");
  return BP_STANDARD_OP(OutName.c_str(), BinaryOutSig).callChecked(self, other, self);
}

// --- unary ops

using UnaryOutSig = Tensor(const Tensor&, const Tensor&);

enum class UnaryResult {
  Same,      // neg, abs, relu: the input dtype
  Floating,  // exp, log, sin, ...: integral inputs give float32
};

template <FixedString Name, UnaryResult Kind>
OutputMeta unaryMeta(const Tensor& self) {
  BP_CHECK(self.defined(), qualified<Name>(), ": argument 'self' is undefined");
  ScalarType t = self.dtype();
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
  return BP_STANDARD_OP(OutName.c_str(), UnaryOutSig).callChecked(self, out);
}

template <FixedString Name, FixedString OutName, UnaryResult Kind>
Tensor unaryInplace(const Tensor& self) {
  checkOut(qualified<Name>(), self, unaryMeta<Name, Kind>(self), {}, "self");
  return BP_STANDARD_OP(OutName.c_str(), UnaryOutSig).callChecked(self, self);
}

}  // namespace

void addElementwiseOps(std::vector<StandardOp>& ops) {
  auto add = [&](std::string schema, KernelFunction meta = {}, KernelFunction composite = {}) {
    ops.push_back(StandardOp{std::move(schema), std::move(meta), std::move(composite), "elementwise"});
  };
  // add, sub: out = self (+|-) alpha * other.
  add("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN((alphaFunctional<"add.Tensor", "add.out">))));
  add("add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", {},
      KernelFunction::makeFromFunction(BP_FN((alphaInplace<"add_.Tensor", "add.out">))));
  add("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(alphaOutMeta<"add.out">)));
  add("sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN((alphaFunctional<"sub.Tensor", "sub.out">))));
  add("sub_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", {},
      KernelFunction::makeFromFunction(BP_FN((alphaInplace<"sub_.Tensor", "sub.out">))));
  add("sub.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(alphaOutMeta<"sub.out">)));

  // mul, div.
  add("mul.Tensor(Tensor self, Tensor other) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN((binaryFunctional<"mul.Tensor", "mul.out", BinaryResult::Promoted>))));
  add("mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", {},
      KernelFunction::makeFromFunction(BP_FN((binaryInplace<"mul_.Tensor", "mul.out", BinaryResult::Promoted>))));
  add("mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN((binaryOutMeta<"mul.out", BinaryResult::Promoted>))));
  add("div.Tensor(Tensor self, Tensor other) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN((binaryFunctional<"div.Tensor", "div.out", BinaryResult::TrueDivide>))));
  add("div_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", {},
      KernelFunction::makeFromFunction(BP_FN((binaryInplace<"div_.Tensor", "div.out", BinaryResult::TrueDivide>))));
  add("div.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN((binaryOutMeta<"div.out", BinaryResult::TrueDivide>))));

  // Unary.
  add("neg(Tensor self) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN((unaryFunctional<"neg", "neg.out", UnaryResult::Same>))));
  add("neg_(Tensor(a!) self) -> Tensor(a!)", {},
      KernelFunction::makeFromFunction(BP_FN((unaryInplace<"neg_", "neg.out", UnaryResult::Same>))));
  add("neg.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN((unaryOutMeta<"neg.out", UnaryResult::Same>))));
  add("relu(Tensor self) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN((unaryFunctional<"relu", "relu.out", UnaryResult::Same>))));
  add("relu_(Tensor(a!) self) -> Tensor(a!)", {},
      KernelFunction::makeFromFunction(BP_FN((unaryInplace<"relu_", "relu.out", UnaryResult::Same>))));
  add("relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN((unaryOutMeta<"relu.out", UnaryResult::Same>))));
}

}  // namespace backplane::ops
