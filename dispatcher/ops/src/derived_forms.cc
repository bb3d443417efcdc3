// Out= and in-place forms derived from a functional operator (Note [Derived
// forms] in backplane/ops/derived_forms.h).
#include "backplane/ops/derived_forms.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/ops/tensor.h"

namespace backplane {
namespace {

// What a composite of a derived form needs: the functional op.
struct DerivedKernel final : OperatorKernel {
  explicit DerivedKernel(OperatorHandle f) : functional(std::move(f)) {}
  OperatorHandle functional;
};

// Calls the functional op on the top `n` values of `stack` (consumed) and
// returns its one result.
Tensor callFunctional(const OperatorHandle& functional, Stack& stack, size_t n) {
  Stack call(stack.end() - static_cast<std::ptrdiff_t>(n), stack.end());
  stack.resize(stack.size() - n);
  functional.callBoxed(call);
  BP_INTERNAL_ASSERT(call.size() == 1 && call.front().isTensor(), functional.operatorName().qualifiedName(),
                     " returned ", call.size(), " values; a derived form needs one tensor");
  return Tensor(call.front().toTensor());
}

// `result` into `dst` (argument `what` of `form`): same device, a castable
// dtype, and the result's shape; an empty `out` is resized first.
void copyInto(const std::string& form, const char* what, const Tensor& dst, const Tensor& result, bool resize) {
  BP_CHECK(dst.defined(), form, ": argument '", what, "' is undefined; pass a tensor to write the result into");
  BP_CHECK(dst.device() == result.device(), form, ": argument '", what, "' is on ", dst.device(),
           " but the result is computed on ", result.device(), "; pass a tensor on that device");
  BP_CHECK(canCast(result.dtype(), dst.dtype()), form, ": the result has dtype ", result.dtype(),
           ", which cannot be cast to argument '", what, "' of dtype ", dst.dtype(), "; pass a tensor of dtype ",
           result.dtype());
  if (dst.sizes() != result.sizes()) {
    BP_CHECK(resize && dst.numel() == 0, form, ": argument '", what, "' has shape ", dst.sizes(),
             " but the result has shape ", result.sizes(),
             resize ? "; pass a tensor of that shape or an empty one (which is resized)" : "");
    dst.unsafeGetImpl()->resizeEmpty(result.sizes());
  }
  dst.copy_(result);
}

// A derived form refuses arguments that require grad: it records no
// gradient (Note [Derived forms]).
void refuseGrad(const std::string& form, const std::string& functional, const Stack& stack, size_t n) {
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    BP_CHECK(!(stack[i].isTensor() && stack[i].toTensor().requires_grad()), form,
             ": an argument requires grad, and this form, derived from ", functional, ", records no gradient; call ",
             functional, " instead");
  }
}

void outKernel(OperatorKernel* functor, const OperatorHandle& op, DispatchKeySet, Stack* stack) {
  const OperatorHandle& f = static_cast<DerivedKernel*>(functor)->functional;
  const size_t n = op.schema().arguments().size();
  const std::string form = op.operatorName().qualifiedName();
  refuseGrad(form, f.operatorName().qualifiedName(), *stack, n);
  Tensor out(stack->back().toTensor());
  stack->pop_back();
  Tensor result = callFunctional(f, *stack, n - 1);
  copyInto(form, "out", out, result, /*resize=*/true);
  stack->emplace_back(std::move(out));
}

void inplaceKernel(OperatorKernel* functor, const OperatorHandle& op, DispatchKeySet, Stack* stack) {
  const OperatorHandle& f = static_cast<DerivedKernel*>(functor)->functional;
  const size_t n = op.schema().arguments().size();
  const std::string form = op.operatorName().qualifiedName();
  refuseGrad(form, f.operatorName().qualifiedName(), *stack, n);
  Tensor self(stack->at(stack->size() - n).toTensor());
  Tensor result = callFunctional(f, *stack, n);
  copyInto(form, "self", self, result, /*resize=*/false);
  stack->emplace_back(std::move(self));
}

Argument written(std::string name, const std::string& set, bool kwarg_only) {
  Argument a;
  a.name = std::move(name);
  a.type = SchemaType{};
  a.kwarg_only = kwarg_only;
  a.alias = AliasInfo{set, true};
  return a;
}

}  // namespace

std::string derivedOutName(const OperatorName& f) {
  return OperatorName{f.ns, f.name, f.overload.empty() ? "out" : f.overload + "_out"}.qualifiedName();
}

std::string derivedInplaceName(const OperatorName& f) {
  return OperatorName{f.ns, f.name + "_", f.overload}.qualifiedName();
}

absl::StatusOr<DerivedForms> deriveForms(const OperatorHandle& functional, bool out, bool inplace,
                                         const std::string& owner) {
  const FunctionSchema& s = functional.schema();
  const std::string name = s.name().qualifiedName();
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        strCat("cannot derive the out= and in-place forms of ", name, " (", s.toString(), "): ", why));
  };
  if (!out && !inplace) return refuse("no form asked for");
  if (s.returns().size() != 1 || s.returns()[0].type != SchemaType{} || s.returns()[0].alias)
    return refuse("it must return one Tensor that aliases no argument");
  for (const Argument& a : s.arguments()) {
    if (a.alias) return refuse(strCat("argument '", a.name, "' aliases (", a.alias->set, "); the forms copy a result"));
    if (a.name == "out") return refuse("it has an argument named 'out' already");
  }
  DerivedForms forms;
  Dispatcher& d = Dispatcher::singleton();
  auto define = [&](const FunctionSchema& schema, BoxedKernelFn kernel) -> absl::Status {
    absl::StatusOr<RegistrationHandle> def =
        d.registerDef(schema.toString(), strCat(owner, " (derived from ", name, ")"));
    if (!def.ok()) return def.status();
    forms.handles.push_back(*std::move(def));
    absl::StatusOr<RegistrationHandle> k =
        d.registerComposite(schema.name().qualifiedName(),
                            KernelFunction::makeFromBoxedFunction(kernel, std::make_shared<DerivedKernel>(functional)),
                            strCat(owner, " (derived from ", name, ")"));
    if (!k.ok()) return k.status();
    forms.handles.push_back(*std::move(k));
    return absl::OkStatus();
  };
  if (out) {
    std::vector<Argument> args = s.arguments();
    args.push_back(written("out", "a", /*kwarg_only=*/true));
    Argument ret;
    ret.alias = AliasInfo{"a", true};
    const FunctionSchema schema(*OperatorName::parse(derivedOutName(s.name())), std::move(args), {ret});
    if (absl::Status st = define(schema, &outKernel); !st.ok()) return st;
    forms.out = schema.name().qualifiedName();
  }
  if (inplace) {
    std::vector<Argument> args = s.arguments();
    if (args.empty() || args[0].type != SchemaType{} || args[0].kwarg_only)
      return refuse("its first argument must be a Tensor (self) for an in-place form");
    args[0].alias = AliasInfo{"a", true};
    Argument ret;
    ret.alias = AliasInfo{"a", true};
    const FunctionSchema schema(*OperatorName::parse(derivedInplaceName(s.name())), std::move(args), {ret});
    if (absl::Status st = define(schema, &inplaceKernel); !st.ok()) return st;
    forms.inplace = schema.name().qualifiedName();
  }
  return forms;
}

}  // namespace backplane
