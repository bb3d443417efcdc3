// The specs plugins declare for their own operators (BP_HostApi.spec, Note
// [A plugin's own operators] in plugin_api.h), made into OpSpecs: samples
// from the sample notation (Note [Sample notation] in
// backplane/runtime/plugin_specs.h), the reference the plugin names.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"
#include "backplane/core/error.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/runtime/plugin_specs.h"

namespace backplane::conformance {
namespace {

IValue argumentOf(const SampleArg& a, const Argument& param, Rng& rng) {
  switch (a.kind) {
    case SampleArg::Kind::Tensor: {
      if (!a.transposed) return randomTensor(rng, a.sizes, a.dtype);
      std::vector<int64_t> stored = a.sizes;
      std::swap(stored[stored.size() - 2], stored[stored.size() - 1]);
      return randomTensor(rng, stored, a.dtype).transpose(-2, -1);
    }
    case SampleArg::Kind::Int:
      if (param.type.base == BaseType::Float) return static_cast<double>(a.i);
      if (param.type.base == BaseType::Scalar) return Scalar(a.i);
      return a.i;
    case SampleArg::Kind::Double: return param.type.base == BaseType::Scalar ? IValue(Scalar(a.d)) : IValue(a.d);
    case SampleArg::Kind::Bool: return param.type.base == BaseType::Scalar ? IValue(Scalar(a.b)) : IValue(a.b);
    case SampleArg::Kind::None: return IValue();
    case SampleArg::Kind::IntList:
      if (param.type.base == BaseType::Float) return std::vector<double>(a.ints.begin(), a.ints.end());
      return a.ints;
    case SampleArg::Kind::Dtype: return a.dtype;
    case SampleArg::Kind::String: return a.str;
    case SampleArg::Kind::Device: return backendDevice();
  }
  return IValue();
}

OpSpec specOf(std::shared_ptr<const DeclaredSpec> decl) {
  OpSpec spec;
  spec.op = decl->op;
  spec.family = "plugin " + decl->plugin;
  // Forms the host derived from it (Note [Derived forms]) are certified by
  // the same samples.
  const DerivedFormNames forms = derivedFormsOf(decl->op);
  spec.out = forms.out;
  spec.inplace = forms.inplace;
  spec.reference_note = decl->reference.isValid() ? strCat("reference: plugin ", decl->plugin, "'s reference function")
                                                  : strCat("reference: the cpu kernel of ", decl->op);
  spec.samples = [decl] {
    const FunctionSchema& schema = Dispatcher::singleton().findOpOrThrow(decl->op).schema();
    std::vector<Sample> out;
    for (const SampleDecl& d : decl->samples) {
      Rng rng(seedFor(decl->op + "/" + d.name));
      Sample s;
      s.name = d.name;
      s.must_raise = d.must_raise;
      if (d.must_raise) s.raise_reason = d.name;
      for (size_t i = 0; i < d.args.size(); ++i) {
        s.args.push_back(argumentOf(d.args[i], schema.arguments()[i], rng));
        if (d.args[i].on_host && i < 64) s.host_args |= uint64_t{1} << i;
      }
      out.push_back(std::move(s));
    }
    return out;
  };
  spec.reference = [decl](const Sample& s) {
    const OperatorHandle op = Dispatcher::singleton().findOpOrThrow(decl->op);
    Stack stack(s.args.begin(), s.args.end());
    if (decl->reference.isValid()) {
      decl->reference.callBoxed(op, DispatchKeySet(backendKey(DeviceType::CPU)), &stack);
    } else {
      BP_CHECK(op.kernelKind(backendKey(DeviceType::CPU)) != KernelKind::Missing, decl->op,
               " has no reference: plugin ", decl->plugin,
               " gave its spec no reference function and the operator has no cpu kernel; give either");
      op.callBoxed(stack);
    }
    std::vector<Expected> want;
    for (const IValue& v : stack) {
      BP_CHECK(v.isTensor(), decl->op, ": the reference returned a ", v.tagName(),
               "; a plugin's spec compares tensor results only");
      const Tensor t(v.toTensor());
      BP_CHECK(t.defined() && t.device().isCpu(), decl->op, ": the reference returned ",
               t.defined() ? "a tensor off the host" : "an undefined tensor");
      want.push_back(Expected{sizesOf(t), t.dtype(), valuesOf(t)});
    }
    return want;
  };
  if (decl->atol > 0 || decl->rtol > 0) {
    spec.tolerance = [atol = decl->atol, rtol = decl->rtol](ScalarType t, const Sample&) {
      Tolerance d = defaultTolerance(t);
      if (!isFloatingType(t)) return d;
      return Tolerance{std::max(d.atol, atol), std::max(d.rtol, rtol)};
    };
  }
  return spec;
}

}  // namespace

std::vector<const OpSpec*> pluginSpecs() {
  // One OpSpec per declaration seen, kept for the life of the process (an
  // Item points at it); a plugin loaded again declares anew.
  static std::mutex mu;
  static auto* made = new std::map<const DeclaredSpec*, std::pair<std::shared_ptr<const DeclaredSpec>, OpSpec>>();
  std::vector<const OpSpec*> out;
  std::lock_guard<std::mutex> lock(mu);
  for (std::shared_ptr<const DeclaredSpec>& d : declaredSpecs()) {
    auto it = made->find(d.get());
    if (it == made->end()) it = made->emplace(d.get(), std::make_pair(d, specOf(d))).first;
    out.push_back(&it->second.second);
  }
  return out;
}

}  // namespace backplane::conformance
