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

// Defines the out= form (`out`) and/or the in-place form (`inplace`) of
// `functional` with their composite kernels; `owner` is the registrations'
// debug text. InvalidArgumentError, naming what is wrong, for a functional
// op the forms cannot be derived from; AlreadyExistsError if a form's name
// is defined already.
absl::StatusOr<DerivedForms> deriveForms(const OperatorHandle& functional, bool out, bool inplace,
                                         const std::string& owner);

}  // namespace backplane
