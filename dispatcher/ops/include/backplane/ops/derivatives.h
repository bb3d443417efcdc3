#pragma once
// How each standard operator differentiates, as data next to its schema:
// the analogue of PyTorch's derivatives.yaml. The autograd layer
// (dispatcher/autograd) reads it; `backplane ops --schemas` prints it.
//
// Note [Derivative declarations]
// Every standard op declares exactly one of:
//   formula             a backward formula per differentiable input, written
//                       with Backplane ops (so every device that has those ops,
//                       natively or by fallback, trains); one formula may
//                       compute several inputs at once and reads the
//                       grad_input_mask (DerivativeContext::needs) to skip the
//                       ones nobody needs;
//   non_differentiable  its results carry no gradient (comparisons, argmax,
//                       indices, random numbers, creation);
//   not_implemented     differentiable in principle, no formula yet: the call
//                       records a node, and backward() through it raises an
//                       error naming the op, the input and the device;
//   composite           differentiated through the standard ops its composite
//                       kernel calls, each recording its own node (PyTorch's
//                       CompositeImplicitAutograd): linear, matmul, ...
// Two kinds follow from the schema and are never written: an out= form
// (`op.out`) refuses, at the call, arguments that require grad, as PyTorch
// does; an in-place form (`op_`) uses its functional op's declaration, with
// `self`'s value from before the write.
// A formula's gradient may have the broadcast shape or a wider dtype: the
// engine sums it to the input's shape and casts it to the input's dtype, so
// formulas for broadcasting ops need not.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/dispatch/function_schema.h"
#include "backplane/dispatch/ivalue.h"
#include "backplane/ops/tensor.h"

namespace backplane {

enum class Differentiability : uint8_t { Formula, NonDifferentiable, NotImplemented, Composite, OutVariant, Inplace };
// "formula", "non_differentiable", "not_implemented", "composite", "out_variant", "inplace".
const char* differentiabilityName(Differentiability d);

// What a backward formula reads and writes. Built by the engine for one
// node: the op's schema, its arguments as they were at the call (tensors
// saved without their autograd state), its results, the incoming gradient
// of each result, and which inputs need a gradient.
class DerivativeContext {
 public:
  DerivativeContext(const FunctionSchema& schema, const Stack& arguments, const std::vector<Tensor>& results,
                    const std::vector<Tensor>& grads, uint64_t needs_mask);

  // The gradient flowing into result i (zeros of its shape when none did).
  const Tensor& grad(size_t result = 0) const;
  const Tensor& result(size_t i = 0) const;
  // Arguments by schema name.
  const Tensor& tensor(std::string_view name) const;
  std::optional<Tensor> optionalTensor(std::string_view name) const;
  std::vector<Tensor> tensorList(std::string_view name) const;
  Scalar scalar(std::string_view name) const;
  std::optional<Scalar> optionalScalar(std::string_view name) const;
  int64_t integer(std::string_view name) const;
  std::optional<int64_t> optionalInteger(std::string_view name) const;
  double real(std::string_view name) const;
  std::optional<double> optionalReal(std::string_view name) const;
  bool boolean(std::string_view name) const;
  std::vector<int64_t> ints(std::string_view name) const;  // an absent int[]? is empty
  std::string string(std::string_view name) const;
  const IValue& argument(std::string_view name) const;

  // The grad_input_mask: whether input `name` needs a gradient.
  bool needs(std::string_view name) const;
  // Sets the gradient of tensor input `name` (an undefined tensor: none).
  void set(std::string_view name, Tensor grad);
  // Sets the gradients of the tensors of list input `name`.
  void setList(std::string_view name, std::vector<Tensor> grads);

  // Checks, when a formula reads a saved tensor, that nothing wrote it
  // since it was saved (Note [Version counters]); set by the engine.
  class SavedCheck {
   public:
    virtual ~SavedCheck() = default;
    virtual void checkArgument(size_t index) const = 0;
    virtual void checkResult(size_t index) const = 0;
  };
  void setSavedCheck(const SavedCheck* check) { check_ = check; }

  // What the formulas set, by argument position (lists: one per element).
  const std::vector<std::vector<Tensor>>& inputGrads() const { return input_grads_; }
  const FunctionSchema& schema() const { return schema_; }

 private:
  size_t indexOf(std::string_view name) const;
  const FunctionSchema& schema_;
  const Stack& arguments_;
  const std::vector<Tensor>& results_;
  const std::vector<Tensor>& grads_;
  uint64_t needs_mask_;
  std::vector<std::vector<Tensor>> input_grads_;
  const SavedCheck* check_ = nullptr;
};

using DerivativeFn = void (*)(DerivativeContext&);

struct DerivativeFormula {
  const char* inputs;  // "self", or "input, weight, bias" for one formula computing several
  const char* text;    // the formula in words, for `backplane ops --schemas`
  DerivativeFn fn;
};

struct OpDerivative {
  std::string op;  // "mul.Tensor", without the namespace
  Differentiability kind = Differentiability::NotImplemented;
  std::vector<DerivativeFormula> formulas = {};
  // Why: for non_differentiable and not_implemented (what to do instead),
  // and for formulas, anything the reader should know.
  const char* note = "";
  // Bit i set: result i carries no gradient (the indices of sort and topk).
  uint64_t nondifferentiable_results = 0;
  // The backward ops the formulas call ("bp::_softmax_backward_data", Note
  // [Backward ops]), which `backplane ops --schemas` shows with the kernel
  // serving each on every backend.
  std::vector<std::string> backward_ops = {};
};

// The declaration for standard op `op` ("mul.Tensor" or "bp::mul.Tensor"),
// the derived kinds included (Note [Derivative declarations]); nullptr if
// the op declares none (a test walks the table so that none is missing).
const OpDerivative* findDerivative(std::string_view op);
// The declarations written in the table (not the derived ones).
const std::vector<OpDerivative>& derivativeTable();

// Helpers formulas share.
// `grad` summed over the dimensions it was broadcast along so that its
// sizes are `sizes` (PyTorch's sum_to_size).
Tensor sumToSize(const Tensor& grad, IntArrayRef sizes);

}  // namespace backplane
