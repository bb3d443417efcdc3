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
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backplane/core/device.h"

#include "backplane/dispatch/function_schema.h"
#include "backplane/dispatch/ivalue.h"
#include "backplane/ops/tensor.h"

namespace backplane {

enum class Differentiability : uint8_t { Formula, NonDifferentiable, NotImplemented, Composite, OutVariant, Inplace };
// "formula", "non_differentiable", "not_implemented", "composite", "out_variant", "inplace".
const char* differentiabilityName(Differentiability d);

struct OpDerivative;

// What a backward formula reads and writes. Built by the engine for one
// node: the op's schema, its arguments as they were at the call (tensors
// saved without their autograd state), its results, the incoming gradient
// of each result, and which inputs need a gradient.
class DerivativeContext {
 public:
  DerivativeContext(const FunctionSchema& schema, absl::Span<const IValue> arguments,
                    const std::vector<Tensor>& results, const std::vector<Tensor>& grads, uint64_t needs_mask);

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
  // The declaration whose formula runs; set by the engine.
  void setDerivative(const OpDerivative* d) { derivative_ = d; }
  const OpDerivative* derivative() const { return derivative_; }

  // What the formulas set, by argument position (lists: one per element).
  const std::vector<std::vector<Tensor>>& inputGrads() const { return input_grads_; }
  const FunctionSchema& schema() const { return schema_; }

 private:
  size_t indexOf(std::string_view name) const;
  const FunctionSchema& schema_;
  absl::Span<const IValue> arguments_;
  const std::vector<Tensor>& results_;
  const std::vector<Tensor>& grads_;
  uint64_t needs_mask_;
  std::vector<std::vector<Tensor>> input_grads_;
  const SavedCheck* check_ = nullptr;
  const OpDerivative* derivative_ = nullptr;
};

using DerivativeFn = void (*)(DerivativeContext&);

// Calls fn(name) for each name of a comma-separated list ("input, weight"),
// without the spaces: the form of DerivativeFormula::inputs and
// OpDerivative::saves.
template <typename Fn>
void forEachListedName(std::string_view names, Fn&& fn) {
  while (!names.empty()) {
    const size_t comma = names.find(',');
    std::string_view name = names.substr(0, comma);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
    if (!name.empty()) fn(name);
  }
}
struct BackwardCall;  // a parsed declaration's call (Note [Declared derivatives])

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
  // A declared derivative's call of its backward op (Note [Declared
  // derivatives]); its formula reads it through DerivativeContext::derivative().
  std::shared_ptr<const BackwardCall> backward_call = nullptr;
  // What the formulas read (Note [What a node saves]): the tensor
  // arguments named ("self, other"), and the results if "result" is among
  // them; "" for none. nullptr: every tensor argument and every result.
  const char* saves = nullptr;
};

// The declaration for standard op `op` ("mul.Tensor" or "bp::mul.Tensor"),
// the derived kinds included (Note [Derivative declarations]); nullptr if
// the op declares none (a test walks the table so that none is missing).
const OpDerivative* findDerivative(std::string_view op);
// The declarations written in the table (not the derived ones).
const std::vector<OpDerivative>& derivativeTable();

// Note [Declared derivatives]
// An operator outside the standard table (a plugin's, an application's)
// declares how it differentiates as data, and a plugin may replace a
// standard op's declaration on its own device type with its fused backward
// op: bp::Library::derivative (BP_HostApi.derivative, ABI 1.6) or
// declareDerivative below. A declaration is one of
//   "non_differentiable", "not_implemented", or
//   "ns::backward_op(a, grad, result, ...) -> (x, _, w)": backward_op is
//     called with, for each of its arguments in order, a forward argument by
//     name, `grad` (the gradient of result 0; gradN of result N) or `result`
//     (resultN); its results are the gradients of the named forward tensor
//     arguments, in order (`_`: a result that is none).
// It is checked when made: the op and the backward op must be defined, every
// argument of the backward op must be given, every name must be one the
// forward schema has, and the results must match the backward op's. It
// lasts as long as its registration (a plugin's, until it unloads). The
// autograd kernel finds, for a call on device type t, t's own declaration,
// then the one for every device, then the standard table's; without a lock
// (its per-thread cache is renewed when any declaration changes).
class DerivativeRegistration {
 public:
  DerivativeRegistration() = default;
  explicit DerivativeRegistration(uint64_t id) : id_(id) {}
  DerivativeRegistration(DerivativeRegistration&& o) noexcept : id_(std::exchange(o.id_, 0)) {}
  DerivativeRegistration& operator=(DerivativeRegistration&& o) noexcept;
  ~DerivativeRegistration();

 private:
  uint64_t id_ = 0;
};
// Declares `declaration` for `op` ("ns::name.overload") on `device` (every
// device when nullopt, for an op outside the standard table; a device's own
// for any op). `owner` names the declarer in messages. Fails, naming what is wrong, on an unknown op or
// backward op, a name the schema lacks, a count that does not match, or a
// second declaration for the same op and device.
absl::StatusOr<DerivativeRegistration> declareDerivative(std::string_view op, std::optional<DeviceType> device,
                                                         std::string_view declaration, std::string owner);
// The declaration of `op` (qualified) for calls on `device`: the device's
// own, else the one for every device; nullptr if none was declared.
std::shared_ptr<const OpDerivative> declaredDerivative(std::string_view op, DeviceType device);
// Changes with every declaration and removal (the autograd kernel's cache).
uint64_t declaredDerivativesGeneration();
struct DeclaredDerivativeInfo {
  std::string op;                    // qualified
  std::optional<DeviceType> device;  // nullopt: every device
  std::string declaration;           // as declared
  std::string owner;                 // "plugin spconv"
};
// Every declaration, in declaration order (`backplane ops`).
std::vector<DeclaredDerivativeInfo> declaredDerivatives();

// Helpers formulas share.
// `grad` summed over the dimensions it was broadcast along so that its
// sizes are `sizes` (PyTorch's sum_to_size).
Tensor sumToSize(const Tensor& grad, IntArrayRef sizes);

}  // namespace backplane
