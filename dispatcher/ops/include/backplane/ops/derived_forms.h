#pragma once
// The out= and in-place forms of a functional operator, derived from it
// (BP_HostApi.derive_forms, ABI 1.9; Note [A plugin's own operators] in
// plugin_api.h).
//
// Note [Derived forms]
// For `ns::name.overload(ARGS) -> Tensor` (one tensor return, no argument
// written or aliased):
//   out=:     ns::name.overload_out(ARGS, *, Tensor(a!) out) -> Tensor(a!)
//             (ns::name.out without an overload)
//   in place: ns::name_.overload(Tensor(a!) self, REST) -> Tensor(a!)
//             (the first argument must be a tensor)
// Each is defined with a composite kernel that calls the functional op
// (its rule and kernel, on whatever device serves it) and copies the result:
// into `out` (on the result's device; resized when empty, else of the
// result's shape; a dtype the result casts to), or into `self` (of the
// result's shape; a dtype it casts to). So a plugin writes one functional
// kernel and gets both forms on every device, at the cost of one
// temporary and one copy per call; a device kernel registered for a
// derived form serves it on that device instead (it then gets `out` as the
// caller passed it). Without autograd support: an argument that requires
// grad is refused by the form, as for the standard out= forms.
//
// The standard table derives out= forms the same way (Note [Derived out=
// forms] in standard_ops.h), with their own names and any number of
// results: `max.dim_max(Tensor self, int dim, bool keepdim=False, *,
// Tensor(a!) max, Tensor(b!) max_values)` calls max.dim and copies each
// result into its out= argument, in order. An argument of the functional op
// that the out= form lacks takes its default, except a factory's (an op
// without tensor arguments) `dtype` and `device`, which are the first out=
// argument's: `zeros.out(size, *, out)` calls zeros(size, dtype=out's,
// device=out's). Any other op computes as its functional form does and the
// result is cast into `out` (`full_like(int64 self, 2.5, out=float32)`
// holds 2.0, as in PyTorch). Each out= argument is checked before the call
// (no overlapping elements) and after it (device, dtype, shape), all before
// any is written; an index result (max.dim_max's `max_values`) needs an
// `out` of its dtype, int64. A result the call leaves undefined (one an
// output_mask drops) leaves its out= argument untouched.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backplane/dispatch/dispatcher.h"

namespace backplane {

struct DerivedForms {
  std::string out;                          // the out= form's name, or empty
  std::string inplace;                      // the in-place form's name, or empty
  std::vector<RegistrationHandle> handles;  // its defs and kernels
};

// The names the forms of `functional` get (Note [Derived forms]).
std::string derivedOutName(const OperatorName& functional);
std::string derivedInplaceName(const OperatorName& functional);

// The composite kernel of `out_form`, an out= form of `functional` (Note
// [Derived forms]): its arguments before the out= ones must each be an
// argument of `functional` of the same type, and every other argument of
// `functional` must have a default or be a factory's dtype or device; one
// out= Tensor per return, each a Tensor that aliases nothing.
// InvalidArgumentError naming the mismatch otherwise.
// Bit i of `fixed_dtype_arguments` set: argument i of `out_form` (an out=
// one) must have its result's dtype exactly (an index result; Note
// [Dtype-fixed arguments] in standard_ops.cc).
absl::StatusOr<KernelFunction> derivedOutKernel(const OperatorHandle& functional, const FunctionSchema& out_form,
                                                uint64_t fixed_dtype_arguments = 0);

// The composite kernel of `functional`, the functional form of in-place
// op `inplace` (Note [Derived out= forms] in standard_ops.h): the same
// arguments but for self's write annotation, one Tensor returned.
absl::StatusOr<KernelFunction> derivedFunctionalKernel(const OperatorHandle& inplace, const FunctionSchema& functional);

// Defines the out= form (`out`) and/or the in-place form (`inplace`) of
// `functional` with their composite kernels; `owner` is the registrations'
// debug text. InvalidArgumentError, naming what is wrong, for a functional
// op the forms cannot be derived from; AlreadyExistsError if a form's name
// is defined already.
absl::StatusOr<DerivedForms> deriveForms(const OperatorHandle& functional, bool out, bool inplace,
                                         const std::string& owner);

}  // namespace backplane
