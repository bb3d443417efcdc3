// Out= and in-place forms derived from a functional operator (Note [Derived
// forms] in backplane/ops/derived_forms.h).
#include "backplane/ops/derived_forms.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/ops/tensor.h"
#include "meta.h"

namespace backplane {
namespace {

// What the in-place form's composite needs: the functional op.
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

// Whether `result` can go into `dst` (argument `what` of `form`): same
// device, a castable dtype (the result's exactly with `exact`: an index
// result), and the result's shape, or (with `resize`) empty.
void checkInto(const std::string& form, const std::string& what, const Tensor& dst, const Tensor& result, bool resize,
               bool exact = false) {
  BP_CHECK(dst.defined(), form, ": argument '", what, "' is undefined; pass a tensor to write the result into");
  BP_CHECK(dst.device() == result.device(), form, ": argument '", what, "' is on ", dst.device(),
           " but the result is computed on ", result.device(), "; pass a tensor on that device");
  BP_CHECK(!exact || dst.dtype() == result.dtype(), form, ": argument '", what, "' has dtype ", dst.dtype(),
           " but the result it holds is always ", result.dtype(), "; pass a tensor of dtype ", result.dtype());
  BP_CHECK(canCast(result.dtype(), dst.dtype()), form, ": the result has dtype ", result.dtype(),
           ", which cannot be cast to argument '", what, "' of dtype ", dst.dtype(), "; pass a tensor of dtype ",
           result.dtype());
  BP_CHECK(dst.sizes() == result.sizes() || (resize && dst.numel() == 0), form, ": argument '", what, "' has shape ",
           dst.sizes(), " but the result has shape ", result.sizes(),
           resize ? "; pass a tensor of that shape or an empty one (which is resized)" : "");
}

// `result` into `dst`, checked (checkInto); an empty `dst` is resized first.
void copyInto(const Tensor& dst, const Tensor& result) {
  if (dst.sizes() != result.sizes()) dst.unsafeGetImpl()->resizeEmpty(result.sizes());
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

// The out= form's composite: where each of the functional op's arguments
// comes from, worked out once from the two schemas.
struct DerivedOutKernel final : OperatorKernel {
  enum class From : uint8_t { Argument, OutDtype, OutDevice, Default };
  struct Source {
    From from = From::Argument;
    size_t index = 0;  // From::Argument: the out= form's argument
    IValue value;      // From::Default
  };
  DerivedOutKernel(OperatorHandle f, std::string form_name)
      : functional(std::move(f)),
        form(std::move(form_name)),
        functional_name(functional.operatorName().qualifiedName()) {}
  OperatorHandle functional;
  std::string form, functional_name;   // for errors, made once
  std::vector<Source> sources;         // one per argument of the functional op
  size_t inputs = 0;                   // the out= form's arguments before its outs
  std::vector<std::string> out_names;  // its out= arguments, in order
  uint64_t exact_dtype = 0;            // bit i: out i must have its result's dtype
  bool factory = false;                // the functional op's dtype and device are out's
};

void outKernel(OperatorKernel* functor, const OperatorHandle&, DispatchKeySet, Stack* stack) {
  const auto& k = *static_cast<DerivedOutKernel*>(functor);
  const size_t n = k.inputs + k.out_names.size();
  const std::string& form = k.form;
  refuseGrad(form, k.functional_name, *stack, n);
  const size_t base = stack->size() - n;
  std::vector<Tensor> outs;
  outs.reserve(k.out_names.size());
  for (size_t i = 0; i < k.out_names.size(); ++i) {
    const IValue& v = (*stack)[base + k.inputs + i];
    BP_CHECK(v.isTensor() && v.toTensor().defined(), form, ": argument '", k.out_names[i],
             "' is undefined; pass a tensor to write the result into");
    outs.emplace_back(v.toTensor());
    // Before any work: the result cannot be written into one.
    ops::checkNoInternalOverlap(form, outs.back(), k.out_names[i].c_str());
  }
  Stack call;
  call.reserve(k.sources.size());
  for (const DerivedOutKernel::Source& s : k.sources) {
    switch (s.from) {
      case DerivedOutKernel::From::Argument: call.push_back((*stack)[base + s.index]); break;
      case DerivedOutKernel::From::OutDtype: call.emplace_back(outs.front().dtype()); break;
      case DerivedOutKernel::From::OutDevice: call.emplace_back(outs.front().device()); break;
      case DerivedOutKernel::From::Default: call.push_back(s.value); break;
    }
  }
  stack->resize(base);
  if (!k.factory) {
    k.functional.callBoxed(call);
  } else {
    // The dtype and device are out's, which the caller did not name as such.
    try {
      k.functional.callBoxed(call);
    } catch (const Error& e) {
      throw Error(e.code(), strCat(form, ": with out's dtype ", outs.front().dtype(), " and device ",
                                   outs.front().device(), ", ", e.what()));
    }
  }
  BP_INTERNAL_ASSERT(call.size() == outs.size(), k.functional_name, " returned ", call.size(), " values for ",
                     outs.size(), " out= arguments of ", form);
  // Every out is checked before any is written. A result the call leaves
  // undefined (one its output_mask drops) leaves its out= argument as the
  // caller passed it.
  auto defined = [&](size_t i) { return call[i].isTensor() && call[i].toTensor().defined(); };
  for (size_t i = 0; i < outs.size(); ++i)
    if (defined(i))
      checkInto(form, k.out_names[i], outs[i], Tensor(call[i].toTensor()), /*resize=*/true, (k.exact_dtype >> i) & 1);
  for (size_t i = 0; i < outs.size(); ++i)
    if (defined(i)) copyInto(outs[i], Tensor(call[i].toTensor()));
  for (Tensor& o : outs) stack->emplace_back(std::move(o));
}

// The functional form of an in-place-only op: a new tensor like self,
// written by the in-place op (Note [Derived out= forms]).
void functionalKernel(OperatorKernel* functor, const OperatorHandle& op, DispatchKeySet, Stack* stack) {
  const OperatorHandle& inplace = static_cast<DerivedKernel*>(functor)->functional;
  const size_t n = op.schema().arguments().size();
  IValue& first = (*stack)[stack->size() - n];
  BP_CHECK(first.isTensor() && first.toTensor().defined(), op.operatorName().qualifiedName(),
           ": argument 'self' is undefined; pass the tensor whose shape, dtype and device the result takes");
  const TensorBase& self = first.toTensor();
  Tensor result(emptyTensor(self.sizes(), self.dtype(), self.device()));
  first = IValue(static_cast<const TensorBase&>(result));
  Stack call(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
  stack->resize(stack->size() - n);
  try {
    inplace.callBoxed(call);
  } catch (const Error& e) {
    throw Error(e.code(), strCat(op.operatorName().qualifiedName(), " (", inplace.operatorName().qualifiedName(),
                                 " on a new tensor like self): ", e.what()));
  }
  stack->emplace_back(std::move(result));
}

void inplaceKernel(OperatorKernel* functor, const OperatorHandle& op, DispatchKeySet, Stack* stack) {
  const OperatorHandle& f = static_cast<DerivedKernel*>(functor)->functional;
  const size_t n = op.schema().arguments().size();
  const std::string form = op.operatorName().qualifiedName();
  refuseGrad(form, f.operatorName().qualifiedName(), *stack, n);
  Tensor self(stack->at(stack->size() - n).toTensor());
  Tensor result = callFunctional(f, *stack, n);
  checkInto(form, "self", self, result, /*resize=*/false);
  copyInto(self, result);
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

absl::StatusOr<KernelFunction> derivedOutKernel(const OperatorHandle& functional, const FunctionSchema& out_form,
                                                uint64_t fixed_dtype_arguments) {
  const FunctionSchema& f = functional.schema();
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(strCat(out_form.toString(), " cannot be derived from ", f.toString(), ": ", why));
  };
  auto k = std::make_shared<DerivedOutKernel>(functional, out_form.name().qualifiedName());
  const std::vector<Argument>& args = out_form.arguments();
  size_t first_out = args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].isOut() && first_out == args.size()) first_out = i;
    if (i > first_out && !args[i].isOut()) return refuse(strCat("argument '", args[i].name, "' follows an out= one"));
    if (args[i].isOut() && args[i].type != SchemaType{})
      return refuse(strCat("out= argument '", args[i].name, "' is not a Tensor"));
  }
  k->inputs = first_out;
  for (size_t i = first_out; i < args.size(); ++i) {
    if (i < 64 && ((fixed_dtype_arguments >> i) & 1)) k->exact_dtype |= uint64_t{1} << (i - first_out);
    k->out_names.push_back(args[i].name);
  }
  // A factory (no tensor arguments) makes its result in out's dtype and on
  // out's device; any other op computes as it would, and the result is cast.
  k->factory = std::none_of(f.arguments().begin(), f.arguments().end(),
                            [](const Argument& a) { return a.type.base == BaseType::Tensor; });
  if (k->out_names.empty()) return refuse("it has no out= argument");
  if (f.returns().size() != k->out_names.size())
    return refuse(strCat("it has ", k->out_names.size(), " out= arguments for ", f.returns().size(), " returns"));
  for (const Argument& r : f.returns())
    if (r.type != SchemaType{} || r.alias) return refuse("each return must be a Tensor that aliases no argument");
  for (const Argument& a : f.arguments()) {
    if (a.alias)
      return refuse(strCat("argument '", a.name, "' aliases (", a.alias->set, "); the form copies a result"));
    DerivedOutKernel::Source src;
    size_t j = 0;
    while (j < first_out && args[j].name != a.name) ++j;
    if (j < first_out) {
      if (args[j].type != a.type)
        return refuse(strCat("argument '", a.name, "' is ", args[j].type.str(), " here but ", a.type.str(),
                             " in the functional op"));
      src.index = j;
    } else if (k->factory && a.name == "dtype" && a.type.base == BaseType::ScalarType) {
      src.from = DerivedOutKernel::From::OutDtype;
    } else if (k->factory && a.name == "device" && a.type.base == BaseType::Device) {
      src.from = DerivedOutKernel::From::OutDevice;
    } else if (a.default_value) {
      src.from = DerivedOutKernel::From::Default;
      src.value = defaultArgumentValue(a);
    } else {
      return refuse(strCat("the functional op's argument '", a.name, "' has no default and no argument here"));
    }
    k->sources.push_back(std::move(src));
  }
  for (size_t j = 0; j < first_out; ++j) {
    bool used = false;
    for (const DerivedOutKernel::Source& s : k->sources)
      used |= s.from == DerivedOutKernel::From::Argument && s.index == j;
    if (!used) return refuse(strCat("argument '", args[j].name, "' is not an argument of the functional op"));
  }
  return KernelFunction::makeFromBoxedFunction(&outKernel, std::move(k));
}

absl::StatusOr<KernelFunction> derivedFunctionalKernel(const OperatorHandle& inplace,
                                                       const FunctionSchema& functional) {
  const FunctionSchema& s = inplace.schema();
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        strCat(functional.toString(), " cannot be derived from ", s.toString(), ": ", why));
  };
  const std::vector<Argument>& a = s.arguments();
  const std::vector<Argument>& f = functional.arguments();
  if (a.empty() || a[0].type != SchemaType{} || !a[0].alias || !a[0].alias->is_write)
    return refuse("the in-place op's first argument must be the Tensor(a!) it writes");
  if (s.returns().size() != 1 || functional.returns().size() != 1 || functional.returns()[0].type != SchemaType{} ||
      functional.returns()[0].alias)
    return refuse("each must return one Tensor, the functional one aliasing nothing");
  if (f.size() != a.size()) return refuse("they must take the same arguments");
  for (size_t i = 0; i < a.size(); ++i) {
    if (f[i].name != a[i].name || f[i].type != a[i].type || f[i].alias || (i > 0 && a[i].alias))
      return refuse(strCat("argument ", i, " differs ('", f[i].str(), "' against '", a[i].str(),
                           "'); only self's write annotation may"));
  }
  return KernelFunction::makeFromBoxedFunction(&functionalKernel, std::make_shared<DerivedKernel>(inplace));
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
  auto define = [&](const FunctionSchema& schema, KernelFunction kernel) -> absl::Status {
    absl::StatusOr<RegistrationHandle> def =
        d.registerDef(schema.toString(), strCat(owner, " (derived from ", name, ")"));
    if (!def.ok()) return def.status();
    forms.handles.push_back(*std::move(def));
    absl::StatusOr<RegistrationHandle> k = d.registerComposite(schema.name().qualifiedName(), std::move(kernel),
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
    absl::StatusOr<KernelFunction> kernel = derivedOutKernel(functional, schema);
    if (!kernel.ok()) return kernel.status();
    if (absl::Status st = define(schema, *std::move(kernel)); !st.ok()) return st;
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
    if (absl::Status st = define(
            schema, KernelFunction::makeFromBoxedFunction(&inplaceKernel, std::make_shared<DerivedKernel>(functional)));
        !st.ok())
      return st;
    forms.inplace = schema.name().qualifiedName();
  }
  return forms;
}

}  // namespace backplane
