// Runs specs on one backend (runner.h, Note [Conformance specs]).
#include "backplane/conformance/runner.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/autograd/autograd.h"
#include "backplane/core/device_interface.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/derivatives.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/random.h"
#include "backplane/runtime/plugin_registry.h"

namespace backplane::conformance {
namespace {

std::string shapeText(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

struct Mismatch {
  bool ok = true;
  std::string message;
  double max_abs = 0, max_rel = 0;
};

// Whether `actual` (on `device`) holds `e` within `tol`.
// With `values` false, only the device, dtype and shape are compared.
Mismatch compare(const Tensor& actual, const Expected& e, Tolerance tol, Device device, bool values) {
  Mismatch m;
  auto fail = [&](std::string why) {
    m.ok = false;
    m.message = std::move(why);
    return m;
  };
  if (!actual.defined()) return fail("the result is an undefined tensor");
  if (actual.device() != device) return fail("the result is on " + actual.device().str() + ", not " + device.str());
  if (actual.dtype() != e.dtype) {
    return fail("the result has dtype " + std::string(scalarTypeName(actual.dtype())) + ", expected " +
                std::string(scalarTypeName(e.dtype)));
  }
  if (sizesOf(actual) != e.sizes) {
    return fail("the result has shape " + shapeText(sizesOf(actual)) + ", expected " + shapeText(e.sizes));
  }
  if (!values) return m;
  const std::vector<double> got = actual.toVector<double>();
  int64_t worst = -1;
  double worst_excess = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = got[i], x = e.values[i];
    if (std::isnan(x) && std::isnan(a)) continue;
    if (std::isinf(x) && a == x) continue;
    const double abs_err = std::fabs(a - x);
    const double rel_err = x == 0 ? (abs_err == 0 ? 0 : INFINITY) : abs_err / std::fabs(x);
    if (!(abs_err <= tol.atol + tol.rtol * std::fabs(x))) {  // NaN on one side only fails too
      const double excess = std::isnan(abs_err) ? INFINITY : abs_err - (tol.atol + tol.rtol * std::fabs(x));
      if (worst < 0 || excess > worst_excess) worst = static_cast<int64_t>(i), worst_excess = excess;
      m.max_abs = std::isnan(abs_err) ? INFINITY : std::max(m.max_abs, abs_err);
      m.max_rel = std::isnan(rel_err) ? INFINITY : std::max(m.max_rel, rel_err);
    }
  }
  if (worst >= 0) {
    std::ostringstream os;
    os << "element " << worst << " is " << got[static_cast<size_t>(worst)] << ", expected "
       << e.values[static_cast<size_t>(worst)] << " (atol " << tol.atol << ", rtol " << tol.rtol << ")";
    return fail(os.str());
  }
  return m;
}

// The sample's arguments on `device`: tensors (also in lists) staged with
// their strides (so a transposed or expanded input stays one), a host
// Device (a factory's device=) replaced by `device`, other values as they
// are.
// Tensors `host_args` marks (Sample::host_args) stay on the host.
std::vector<IValue> onDevice(const std::vector<IValue>& args, Device device, uint64_t host_args = 0) {
  std::vector<IValue> out;
  out.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const IValue& a = args[i];
    if (a.isTensor() && a.toTensor().defined() && i < 64 && (host_args >> i & 1)) {
      out.push_back(a);
    } else if (a.isTensor() && a.toTensor().defined()) {
      out.emplace_back(stageSpan(a.toTensor(), device));
    } else if (a.isDevice() && a.toDevice().isCpu()) {
      out.emplace_back(device);  // a factory's device=: the host's stands for the backend's
    } else if (a.isTensorList()) {
      std::vector<TensorBase> staged;
      for (const TensorBase& t : a.toTensorList()) staged.push_back(t.defined() ? stageSpan(t, device) : t);
      out.emplace_back(std::move(staged));
    } else if (a.isOptionalTensorList()) {
      std::vector<std::optional<TensorBase>> staged;
      for (const auto& t : a.toOptionalTensorList())
        staged.push_back(t && t->defined() ? std::optional<TensorBase>(stageSpan(*t, device)) : t);
      out.emplace_back(std::move(staged));
    } else {
      out.push_back(a);
    }
  }
  return out;
}

OperatorHandle findOp(const std::string& name) { return Dispatcher::singleton().findOpOrThrow(name); }

// The returned values as tensors (undefined where a return is not a tensor).
std::vector<Tensor> tensorsOf(const Stack& stack) {
  std::vector<Tensor> out;
  for (const IValue& v : stack) out.push_back(v.isTensor() ? v.toTensor() : Tensor());
  return out;
}

// Bit t set for each dtype t among the tensors of `values` (also in lists).
// The dtypes of the tensors among `values`, but for argument i where bit i
// of `exempt` is set (an op's dtype-fixed arguments, Note [Declared dtypes]).
uint64_t dtypeBits(const Stack& values, uint64_t exempt = 0) {
  uint64_t bits = 0;
  auto add = [&](const TensorBase& t) {
    if (t.defined()) bits |= uint64_t{1} << static_cast<int>(t.dtype());
  };
  for (size_t i = 0; i < values.size(); ++i) {
    if (i < 64 && ((exempt >> i) & 1) != 0) continue;
    const IValue& v = values[i];
    if (v.isTensor())
      add(v.toTensor());
    else if (v.isTensorList())
      for (const TensorBase& t : v.toTensorList()) add(t);
    else if (v.isOptionalTensorList())
      for (const auto& t : v.toOptionalTensorList())
        if (t) add(*t);
  }
  return bits;
}

struct FormRunner {
  const OpSpec& spec;
  Device device;
  Result result;
  size_t form_index;
  const SpecObserver& observer;

  // Counts `s` as run and tells the observer, before anything of the
  // sample runs on the device (staging its inputs included).
  void begin(const Sample& s) {
    ++result.samples;
    if (observer.before_sample) observer.before_sample(form_index, result.samples, s);
  }
  // The dtypes of the samples that reached a kernel that declares its
  // dtypes (Note [Declared dtypes]).
  uint64_t exercised = 0;

  bool record(const Sample& s, Outcome o, std::string message, double abs_err = 0, double rel_err = 0) {
    result.outcome = o;
    result.sample = s.name;
    result.message = std::move(message);
    result.max_abs_error = abs_err;
    result.max_rel_error = rel_err;
    return false;
  }

  Tolerance toleranceFor(ScalarType t, const Sample& s) const {
    return spec.tolerance ? spec.tolerance(t, s) : defaultTolerance(t);
  }

  // The dtypes of `stack` a call of `op` hands the kernel that declares its
  // dtypes, or 0 when the declaration sends the call elsewhere.
  uint64_t declaredBitsOf(const OperatorHandle& op, const Stack& stack) const {
    const uint64_t exempt = op.entry().dtypeFixedArguments();
    return result.dtypes && !detail::firstRefusedDtype(result.dtypes->mask(), stack, stack.size(), exempt)
               ? dtypeBits(stack, exempt)
               : 0;
  }

  // Calls `op` with `args`; checks a must-raise sample; returns false (and
  // records why) when the form fails on this sample.
  bool call(const OperatorHandle& op, const Sample& s, std::vector<IValue> args, Stack& stack, bool& raised) {
    stack = Stack(args.begin(), args.end());
    raised = false;
    // Whether the call reaches a kernel that declares its dtypes (the
    // stack's tensors are gone after the call).
    const uint64_t declared_bits = declaredBitsOf(op, stack);
    try {
      op.callBoxed(stack);
    } catch (const std::exception& e) {
      raised = true;
      if (s.must_raise) return true;
      return record(s, Outcome::Error, e.what());
    }
    exercised |= declared_bits;
    if (s.must_raise) {
      if (raisedAtSynchronization()) {
        raised = true;
        return true;
      }
      return record(s, Outcome::Fail, "the call returned, but it must raise (" + s.raise_reason + ")");
    }
    return true;
  }

  // Whether synchronizing the device raises: a GPU kernel that finds bad
  // input (an index out of range) reports it at the next synchronization
  // instead of at the call (Note [Deferred device errors] in
  // plugins/gpu/device_errors.h), as PyTorch's device-side assertions do.
  bool raisedAtSynchronization() const {
    DeviceInterface* iface = DeviceTypeRegistry::global().interface(device.type);
    if (device.isCpu() || iface == nullptr) return false;
    try {
      iface->synchronize(device);
    } catch (const std::exception&) {
      return true;
    }
    return false;
  }

  // `got`: the returned values; `args`: the arguments the call was given
  // (on the device), for the expectations on written arguments.
  bool check(const Sample& s, const std::vector<Tensor>& got, const std::vector<Expected>& want,
             const std::vector<IValue>& args) {
    size_t returns = 0;
    for (const Expected& e : want) returns += e.argument < 0 ? 1 : 0;
    if (got.size() < returns) {
      return record(s, Outcome::Fail,
                    "returned " + std::to_string(got.size()) + " values, expected " + std::to_string(returns));
    }
    size_t r = 0;
    for (const Expected& e : want) {
      Tensor actual;
      std::string what;
      if (e.argument < 0) {
        if (returns > 1) {
          // "return 1 (grad_weight): " where the schema names its returns.
          const std::vector<Argument>& named = findOp(spec.op).schema().returns();
          what = "return " + std::to_string(r);
          if (r < named.size() && !named[r].name.empty()) what += " (" + named[r].name + ")";
          what += ": ";
        }
        actual = got[r++];
      } else {
        const Argument& param = findOp(spec.op).schema().arguments()[static_cast<size_t>(e.argument)];
        const IValue& a = args[static_cast<size_t>(e.argument)];
        if (a.isTensor()) actual = a.toTensor();
        std::string index;
        if (a.isTensorList() && e.element >= 0 && static_cast<size_t>(e.element) < a.toTensorList().size()) {
          actual = Tensor(a.toTensorList()[static_cast<size_t>(e.element)]);
          index = "[" + std::to_string(e.element) + "]";
        }
        what = "argument '" + param.name + index + "' after the call: ";
      }
      if (e.masked) continue;
      Mismatch m = compare(actual, e, toleranceFor(e.dtype, s), device, /*values=*/!spec.check);
      if (!m.ok) return record(s, Outcome::Fail, what + m.message, m.max_abs, m.max_rel);
    }
    if (spec.check) {
      std::vector<Tensor> host;
      for (const Tensor& t : got) {
        if (!t.defined()) {
          host.emplace_back();
          continue;
        }
        host.push_back(stageSpan(t, Device(DeviceType::CPU)));  // sizes and strides kept
      }
      std::string why = spec.check(s, host);
      if (!why.empty()) return record(s, Outcome::Fail, std::move(why));
    }
    return true;
  }

  void functional(const std::vector<Sample>& samples) {
    const OperatorHandle op = findOp(spec.op);
    for (const Sample& s : samples) {
      begin(s);
      std::vector<Expected> want;
      if (!s.must_raise) want = spec.reference(s);
      auto stage = [&] { return onDevice(s.args, device, s.host_args); };
      auto verify = [&](Stack& stack, const std::vector<IValue>& args) {
        return check(s, tensorsOf(stack), want, args);
      };
      if (!callBothWays(op, s, stage, verify)) return;
    }
  }

  // Calls the sample boxed and then typed (Note [Typed calls in
  // conformance]), each from stage()'s arguments; `verify(stack, args)`
  // checks the returns of a call that did not raise (recording why not).
  // False when the form fails.
  template <typename Stage, typename Verify>
  bool callBothWays(const OperatorHandle& op, const Sample& s, Stage&& stage, Verify&& verify) {
    const std::vector<IValue> args = stage();
    Stack stack;
    bool raised;
    if (!call(op, s, args, stack, raised)) return false;
    if (!raised && !verify(stack, args)) return false;
    return callTyped(op, s, stage, verify);
  }

  // Note [Typed calls in conformance]
  // A C++ application's typed call (op.typed<Sig>().call) reaches a plugin
  // kernel through its typed entry where the plugin gives one, and through
  // the host's unboxed adapter over its boxed entry where not (Note [Typed
  // kernel entries] in plugin_api.h); callBoxed reaches neither. So the
  // functional, in-place and out= forms call each sample a second time,
  // typed (callAsTyped), from freshly staged arguments (and a fresh `out`),
  // and hold it to the same checks: a plugin whose typed entry disagrees
  // with its boxed one fails, with "called typed" in the message, and the
  // form's kernel is the one the typed call reached. Declines of the typed
  // calls are counted apart (typed_declined): --strict and the report's
  // decline note go by the boxed calls, as before. Ops of a signature the
  // host calls no plugin kernel unboxed for are called once.
  // The typed half of callBothWays().
  uint64_t typed_calls = 0, typed_declined = 0;
  bool typed_failed = false;
  template <typename Stage, typename Verify>
  bool callTyped(const OperatorHandle& op, const Sample& s, Stage&& stage, Verify&& verify) {
    if (observer.before_sample) {  // a crash from here on is the typed call's
      Sample typed_sample = s;
      typed_sample.name += " (called typed)";
      observer.before_sample(form_index, result.samples, typed_sample);
    }
    const std::vector<IValue> args = stage();
    Stack stack(args.begin(), args.end());
    const DispatchKey key = backendKey(device.type);
    const uint64_t declined_before = op.declinedCalls(key);
    bool typed = false;
    std::string error;
    try {
      typed = callAsTyped(op, stack);
    } catch (const std::exception& e) {
      typed = true;
      error = e.what();
      if (error.empty()) error = "an exception with no message";
    }
    typed_declined += op.declinedCalls(key) - declined_before;
    if (!typed) return true;
    ++typed_calls;
    if (!error.empty()) {
      if (s.must_raise) return true;
      typed_failed = true;
      return record(s, Outcome::Error, "called typed: " + error);
    }
    if (s.must_raise) {
      if (raisedAtSynchronization()) return true;
      typed_failed = true;
      return record(s, Outcome::Fail, "called typed, the call returned, but it must raise (" + s.raise_reason + ")");
    }
    if (verify(stack, args)) return true;
    typed_failed = true;
    result.message = "called typed: " + result.message;
    return false;
  }

  // Note [Gradient forms]
  // The gradient form of an op that differentiates (a derivative formula or
  // its composite, Note [Derivative declarations]) runs each sample whose
  // arguments include a floating tensor and that must not raise: every
  // float32 or float64 tensor argument (also in lists) becomes a leaf that
  // requires grad, the op's first result is projected onto fixed weights
  // and backpropagated, and each leaf's gradient is checked:
  //   * on the CPU, against central finite differences in float64 (eps
  //     1e-6, atol 1e-5, rtol 1e-3) at up to kProbes elements per leaf, for
  //     samples of finite values and at most kMaxDifferencedElements
  //     elements, skipping a probe where the one-sided quotients disagree
  //     (a kink or a step: no derivative there);
  //   * on any other backend, against the CPU's gradient of the same sample
  //     (atol = rtol = 1e-3; a float32 gradient is a sum of many products),
  //     except at a point the CPU's probes find without a derivative.
  // Samples of 16-bit dtypes are left to the functional form: their
  // gradients round too coarsely to compare this way.
  static constexpr int kProbes = 8;
  static constexpr int64_t kMaxDifferencedElements = 4096;
  static constexpr uint64_t kGradientSeed = 20261202;

  // The sample's arguments with each float32/float64 tensor (in `dtype`
  // when given, else its own) made a leaf on `dev`; the leaves in order.
  static std::vector<IValue> leaves(const Sample& s, Device dev, std::optional<ScalarType> dtype,
                                    std::vector<Tensor>& out_leaves) {
    std::vector<IValue> args = onDevice(s.args, dev, s.host_args);
    auto leafOf = [&](const TensorBase& t) -> TensorBase {
      if (!t.defined() || (t.dtype() != ScalarType::Float32 && t.dtype() != ScalarType::Float64)) return t;
      Tensor l = dtype ? Tensor(t).to(*dtype, /*copy=*/true) : Tensor(t).detach();
      l = l.detach();
      l.requires_grad_();
      out_leaves.push_back(l);
      return l;
    };
    for (IValue& a : args) {
      if (a.isTensor()) {
        a = IValue(leafOf(a.toTensor()));
      } else if (a.isTensorList()) {
        std::vector<TensorBase> l = a.toTensorList();
        for (TensorBase& t : l) t = leafOf(t);
        a = IValue(std::move(l));
      }
    }
    return args;
  }

  // Fixed weights w of result's shape: the gradient flowing into the result
  // (so the leaves get the gradient of sum(result * w)), made on the host and
  // moved, so that no kernel of the backend under test computes them.
  static Tensor weightsFor(const Tensor& result) {
    std::vector<double> w(static_cast<size_t>(result.numel()));
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5 + std::sin(0.7 * static_cast<double>(i + 1));
    return Tensor(tensorFromVector<double>(w, result.sizes())).to(result.dtype()).to(result.device());
  }
  // sum(result * w), on the host in float64: what finite differences see.
  static double projected(const Tensor& result) {
    const std::vector<double> r = Tensor(result.cpu()).contiguous().toVector<double>();
    const std::vector<double> w = weightsFor(Tensor(result.cpu())).toVector<double>();
    double sum = 0;
    for (size_t i = 0; i < r.size(); ++i) sum += r[i] * w[i];
    return sum;
  }

  // The op's first result for `args`, or undefined when it has no floating
  // one that requires grad (nothing to differentiate).
  static Tensor firstResult(const OperatorHandle& op, std::vector<IValue> args) {
    manualSeed(kGradientSeed);  // a random op (dropout) draws the same on every side
    Stack stack(args.begin(), args.end());
    op.callBoxed(stack);
    if (stack.empty() || !stack[0].isTensor()) return Tensor();
    Tensor r = stack[0].toTensor();
    return r.defined() && r.requires_grad() ? r : Tensor();
  }

  // Gradients of every leaf (undefined where none flows).
  static std::vector<Tensor> gradientsOf(const Tensor& result, const std::vector<Tensor>& leaves_) {
    return autograd::grad({result}, leaves_, {weightsFor(result)}, std::nullopt, false, /*allow_unused=*/true);
  }

  // Whether every float32/float64 tensor of the sample is finite, and how
  // many elements they hold together.
  static bool finiteInputs(const std::vector<Tensor>& ls, int64_t& elements) {
    elements = 0;
    for (const Tensor& t : ls) {
      elements += t.numel();
      for (double v : Tensor(t).contiguous().toVector<double>())
        if (!std::isfinite(v)) return false;
    }
    return true;
  }

  bool paddedEmbedding(const Sample& s) const {
    if (spec.op != "bp::embedding" || s.args.size() < 3 || !s.args[2].isInt()) return false;
    return s.args[2].toInt() >= 0;
  }

  void gradient(const std::vector<Sample>& samples) {
    const OperatorHandle op = findOp(spec.op);
    const Device cpu(DeviceType::CPU);
    for (const Sample& s : samples) {
      if (s.must_raise) continue;
      std::vector<Tensor> probe;
      leaves(s, cpu, std::nullopt, probe);
      if (probe.empty()) continue;  // no float32/float64 tensor to differentiate
      // Finite differences need finite inputs (a gradient at NaN or inf is
      // a convention) and a small sum (their cancellation error grows with
      // it); other backends compare every sample with the CPU.
      int64_t elements = 0;
      if (device.isCpu() && (!finiteInputs(probe, elements) || elements > kMaxDifferencedElements)) continue;
      begin(s);
      std::vector<Tensor> ls;
      std::vector<IValue> args;
      Tensor result;
      try {
        args = leaves(s, device, device.isCpu() ? std::optional<ScalarType>(ScalarType::Float64) : std::nullopt, ls);
        const uint64_t declared_bits = declaredBitsOf(op, Stack(args.begin(), args.end()));
        result = firstResult(op, args);
        exercised |= declared_bits;
      } catch (const std::exception& e) {
        record(s, Outcome::Error, std::string("the forward raised: ") + e.what());
        return;
      }
      if (!result.defined()) continue;
      // Finite differences need the op to compute in float64: a sample whose
      // result is of another dtype (dtype=, a 16-bit operand) is left to the
      // other backends' comparison. embedding's padding row gets no gradient
      // by definition (PyTorch's), which differences cannot see.
      if (device.isCpu() && (result.dtype() != ScalarType::Float64 || paddedEmbedding(s))) continue;
      std::vector<Tensor> got;
      try {
        got = gradientsOf(result, ls);
      } catch (const std::exception& e) {
        record(s, Outcome::Error, std::string("backward raised: ") + e.what());
        return;
      }
      if (device.isCpu()) {
        if (!finiteDifferences(op, s, args, ls, got)) return;
      } else {
        // A sample at a point without a derivative (found on the CPU, in
        // float64, as finiteDifferences skips such probes) has no gradient
        // two backends must agree on.
        std::vector<Tensor> f64_leaves;
        const std::vector<IValue> f64_args = leaves(s, cpu, ScalarType::Float64, f64_leaves);
        int64_t n = 0;
        bool smooth = true;
        if (finiteInputs(f64_leaves, n) && n <= kMaxDifferencedElements)
          finiteDifferences(op, s, f64_args, f64_leaves, {}, &smooth);
        if (!smooth) continue;
        std::vector<Tensor> cpu_leaves;
        const std::vector<IValue> cpu_args = leaves(s, cpu, std::nullopt, cpu_leaves);
        const std::vector<Tensor> want = gradientsOf(firstResult(op, cpu_args), cpu_leaves);
        for (size_t k = 0; k < got.size(); ++k) {
          if (!compareGradient(s, k, got[k], want[k], cpu_leaves[k], 1e-3, 1e-3, "the CPU's")) {
            // Which ops the backward ran on the device: the formula's.
            if (const OpDerivative* d = findDerivative(spec.op)) {
              std::string formula;
              for (const DerivativeFormula& f : d->formulas)
                formula += (formula.empty() ? "" : "; ") + std::string(f.inputs) + ": " + f.text;
              if (!formula.empty()) this->result.message += "; its backward is " + formula;
            }
            return;
          }
        }
      }
    }
  }

  // Leaf k's gradient `got` against `want` (undefined: zeros).
  bool compareGradient(const Sample& s, size_t k, const Tensor& got, const Tensor& want, const Tensor& leaf,
                       double atol, double rtol, const char* reference) {
    const std::vector<double> g = got.defined() ? Tensor(got.cpu()).contiguous().toVector<double>()
                                                : std::vector<double>(static_cast<size_t>(leaf.numel()), 0.0);
    const std::vector<double> w = want.defined() ? Tensor(want.cpu()).contiguous().toVector<double>()
                                                 : std::vector<double>(static_cast<size_t>(leaf.numel()), 0.0);
    if (g.size() != w.size()) {
      return record(s, Outcome::Fail,
                    "gradient of leaf " + std::to_string(k) + " has " + std::to_string(g.size()) +
                        " elements, expected " + std::to_string(w.size()));
    }
    for (size_t i = 0; i < g.size(); ++i) {
      if ((std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i]) continue;
      const double err = std::fabs(g[i] - w[i]);
      if (!(err <= atol + rtol * std::fabs(w[i]))) {
        std::ostringstream os;
        os << "gradient of leaf " << k << " element " << i << " is " << g[i] << ", expected " << w[i] << " ("
           << reference << "; atol " << atol << ", rtol " << rtol << ")";
        return record(s, Outcome::Fail, os.str(), err, w[i] == 0 ? INFINITY : err / std::fabs(w[i]));
      }
    }
    return true;
  }

  // Central differences of sum(result * w) at up to kProbes elements of
  // each leaf (float64, eps 1e-6, atol 1e-5, rtol 1e-3).
  // With `smooth` given, only finds whether some probe sits on a kink, a
  // step or a pole (sets *smooth to false) and compares nothing.
  bool finiteDifferences(const OperatorHandle& op, const Sample& s, const std::vector<IValue>& args,
                         const std::vector<Tensor>& ls, const std::vector<Tensor>& got, bool* smooth = nullptr) {
    constexpr double kEps = 1e-6;
    autograd::NoGradGuard no_grad;
    for (size_t k = 0; k < ls.size(); ++k) {
      const int64_t n = ls[k].numel();
      if (n == 0) continue;
      const std::vector<double> g = !smooth && got[k].defined() ? Tensor(got[k]).contiguous().toVector<double>()
                                                                : std::vector<double>(static_cast<size_t>(n), 0.0);
      const int64_t step = std::max<int64_t>(1, n / kProbes);
      std::optional<double> at_zero;  // the projection at the unmoved point
      for (int64_t i = 0; i < n; i += step) {
        auto evaluate = [&](double delta) {
          // The same arguments with element i of leaf k moved by delta.
          std::vector<IValue> moved = args;
          std::vector<double> v = Tensor(ls[k]).contiguous().toVector<double>();
          v[static_cast<size_t>(i)] += delta;
          const Tensor replaced = Tensor(tensorFromVector<double>(v, ls[k].sizes()));
          for (IValue& a : moved) {
            if (a.isTensor() && a.toTensor().unsafeGetImpl() == ls[k].unsafeGetImpl()) {
              a = IValue(static_cast<const TensorBase&>(replaced));
            } else if (a.isTensorList()) {
              std::vector<TensorBase> l = a.toTensorList();
              for (TensorBase& t : l)
                if (t.unsafeGetImpl() == ls[k].unsafeGetImpl()) t = replaced;
              a = IValue(std::move(l));
            }
          }
          manualSeed(kGradientSeed);
          Stack stack(moved.begin(), moved.end());
          op.callBoxed(stack);
          return projected(Tensor(stack[0].toTensor()));
        };
        if (!at_zero) at_zero = evaluate(0);
        const double plus = evaluate(kEps), minus = evaluate(-kEps);
        // A pole, or a kink or step within eps (relu at 0, floor at an
        // integer, a tie of amax, a zero deviation of std), has no
        // derivative to check: the one-sided quotients disagree there.
        const double right = (plus - *at_zero) / kEps, left = (*at_zero - minus) / kEps;
        const bool regular = std::isfinite(*at_zero) && std::isfinite(plus) && std::isfinite(minus) &&
                             std::fabs(right - left) <= 1e-3 + 1e-2 * std::max(std::fabs(right), std::fabs(left));
        if (!regular && smooth) {
          *smooth = false;
          return true;
        }
        if (!regular || smooth) continue;
        const double numeric = (plus - minus) / (2 * kEps);
        const double analytic = g[static_cast<size_t>(i)];
        if ((std::isnan(numeric) && std::isnan(analytic)) || numeric == analytic) continue;
        const double err = std::fabs(analytic - numeric);
        if (!(err <= 1e-5 + 1e-3 * std::fabs(numeric))) {
          std::ostringstream os;
          os << "gradient of leaf " << k << " element " << i << " is " << analytic << ", expected " << numeric
             << " (central finite differences in float64, eps 1e-6; atol 1e-5, rtol 1e-3)";
          return record(s, Outcome::Fail, os.str(), err, numeric == 0 ? INFINITY : err / std::fabs(numeric));
        }
      }
    }
    return true;
  }

  // self_ form: self is a fresh copy of the sample's first argument; the
  // returned tensor must be self and hold the reference.
  void inplace(const std::vector<Sample>& samples) {
    const OperatorHandle op = findOp(spec.inplace);
    for (const Sample& s : samples) {
      const Tensor& self = s.args[0].toTensor();
      std::vector<Expected> want;
      if (!s.must_raise) {
        want = spec.reference(s);
        if (want[0].dtype != self.dtype() || want[0].sizes != sizesOf(self)) continue;  // needs another self
      }
      bool overlapping = false;
      for (int64_t d = 0; d < self.dim(); ++d) overlapping |= self.size(d) > 1 && self.stride(d) == 0;
      if (overlapping) continue;  // an expanded self must raise; the functional form covers the values
      begin(s);
      auto stage = [&] { return onDevice(s.args, device, s.host_args); };
      // Self returned, and written as the reference says.
      auto verify = [&](Stack& stack, const std::vector<IValue>& args) {
        const Tensor self_dev = args[0].toTensor();
        std::vector<Tensor> got = tensorsOf(stack);
        if (got.empty() || !got[0].defined() || got[0].unsafeGetImpl() != self_dev.unsafeGetImpl())
          return record(s, Outcome::Fail, "the in-place form did not return self");
        return check(s, {self_dev}, want, args);
      };
      if (!callBothWays(op, s, stage, verify)) return;
    }
  }

  // op.out form: `out` starts empty (of the reference's dtype) and must be
  // resized, filled and returned. Its arguments are the functional form's
  // by name (Note [Derived out= forms]: a factory's out= form has no dtype
  // or device; out's are used), with defaults for the ones the sample
  // leaves off.
  void out(const std::vector<Sample>& samples) {
    const OperatorHandle op = findOp(spec.out);
    const std::vector<Argument>& params = op.schema().arguments();
    const std::vector<Argument>& functional = findOp(spec.op).schema().arguments();
    const bool factory = std::none_of(functional.begin(), functional.end(),
                                      [](const Argument& a) { return a.type.base == BaseType::Tensor; });
    for (const Sample& s : samples) {
      std::vector<Expected> want;
      if (!s.must_raise) want = spec.reference(s);
      // A factory's out= form has no dtype or device: the sample's dtype is
      // out's. Any other argument the sample gives that the form lacks
      // changes what it computes: the sample does not apply.
      std::optional<ScalarType> picked;
      bool dropped = false;
      for (size_t i = 0; i < s.args.size() && i < functional.size(); ++i) {
        const bool kept =
            std::any_of(params.begin(), params.end(), [&](const Argument& p) { return p.name == functional[i].name; });
        if (kept || s.args[i].isNone()) continue;
        if (factory && functional[i].name == "dtype" && s.args[i].isScalarType())
          picked = s.args[i].toScalarType();
        else if (!factory || functional[i].name != "device")
          dropped = true;
      }
      if (dropped) continue;
      begin(s);
      std::vector<Tensor> outs;  // the last staged call's
      auto stage = [&] {
        // Staged afresh for each call: an out= form may write an input too.
        const std::vector<IValue> given = onDevice(s.args, device, s.host_args);
        auto givenArgument = [&](const std::string& name) -> const IValue* {
          for (size_t i = 0; i < given.size() && i < functional.size(); ++i)
            if (functional[i].name == name) return &given[i];
          return nullptr;
        };
        std::vector<IValue> args;
        outs.clear();
        for (const Argument& p : params) {
          if (p.isOut()) {
            // The reference's dtype; for a sample that must raise, the dtype
            // it picks or self's, so that the call fails for the sample's
            // reason, not for `out`.
            const ScalarType dt = outs.size() < want.size() ? want[outs.size()].dtype
                                  : picked                  ? *picked
                                  : !s.args.empty() && s.args[0].isTensor() && s.args[0].toTensor().defined()
                                      ? s.args[0].toTensor().dtype()
                                      : ScalarType::Float32;
            outs.push_back(emptyTensor({0}, dt, device));
            args.emplace_back(outs.back());
          } else if (const IValue* v = givenArgument(p.name)) {
            args.push_back(*v);
          } else {
            args.push_back(defaultArgumentValue(p));
          }
        }
        return args;
      };
      // Each out returned, and filled as the reference says.
      auto verify = [&](Stack& stack, const std::vector<IValue>& args) {
        std::vector<Tensor> got = tensorsOf(stack);
        for (size_t i = 0; i < outs.size() && i < got.size(); ++i) {
          if (!got[i].defined() || got[i].unsafeGetImpl() != outs[i].unsafeGetImpl())
            return record(s, Outcome::Fail, "the out= form did not return its out argument");
        }
        return check(s, outs, want, args);
      };
      if (!callBothWays(op, s, stage, verify)) return;
    }
  }
};

// Note [Mixed-dtype samples]
// A kernel that declares several dtypes (Note [Declared dtypes]) is sent
// every call whose tensors all have one of them, mixed ones included: an
// add.out declaring {float16, float32} gets add(float16, float32). The
// specs' own promotion samples mix dtypes across categories (int32 with
// float32), which such a kernel's declaration sends elsewhere, so a kernel
// written per dtype would pass and then fail in an application. For a spec
// whose op accepts its first two tensors in different dtypes (it has a
// sample where they differ that must not raise: add's self and other,
// layer_norm's input and weight; not batch_norm_backward's grad and input),
// a form whose kernel declares two or more dtypes also gets,
// for each ordered pair (a, b) of them, copies of the first
// kMixedSamplesPerPair samples whose tensor arguments are all of dtype a,
// with the second tensor converted to b.
constexpr size_t kMixedSamplesPerPair = 2;

std::vector<const TensorBase*> plainTensors(const Sample& s) {
  std::vector<const TensorBase*> out;
  for (const IValue& v : s.args)
    if (v.isTensor() && v.toTensor().defined()) out.push_back(&v.toTensor());
  return out;
}

std::vector<Sample> mixedDtypeSamples(const std::vector<Sample>& samples, DtypeSet declared) {
  if (declared.isAll()) return {};
  std::vector<ScalarType> dtypes;
  for (int i = 0; i < kNumScalarTypes; ++i)
    if (declared.contains(static_cast<ScalarType>(i))) dtypes.push_back(static_cast<ScalarType>(i));
  if (dtypes.size() < 2) return {};
  const bool mixes = std::any_of(samples.begin(), samples.end(), [](const Sample& s) {
    const std::vector<const TensorBase*> t = plainTensors(s);
    return !s.must_raise && t.size() >= 2 && t[1]->dtype() != t[0]->dtype();
  });
  if (!mixes) return {};
  std::vector<Sample> out;
  for (ScalarType a : dtypes) {
    for (ScalarType b : dtypes) {
      if (a == b) continue;
      size_t made = 0;
      for (const Sample& s : samples) {
        if (made == kMixedSamplesPerPair) break;
        const std::vector<const TensorBase*> t = plainTensors(s);
        if (s.must_raise || t.size() < 2 ||
            !std::all_of(t.begin(), t.end(), [&](const TensorBase* x) { return x->dtype() == a; }))
          continue;
        Sample m = s;
        for (size_t i = 0, seen = 0; i < m.args.size(); ++i) {
          if (!m.args[i].isTensor() || !m.args[i].toTensor().defined() || seen++ != 1) continue;
          m.args[i] = IValue(Tensor(m.args[i].toTensor()).to(b));
        }
        m.name = strCat(s.name, ", its second tensor as ", scalarTypeName(b), " (mixed dtypes: the kernel declares ",
                        declared.str(), ")");
        out.push_back(std::move(m));
        ++made;
      }
    }
  }
  return out;
}

// The declared dtypes of the kernel that serves `spec` on `type`: its out=
// form's (the kernel the functional and in-place forms call), else its
// functional or in-place form's.
std::optional<DtypeSet> declaredForSpec(const OpSpec& spec, DeviceType type) {
  for (const std::string* name : {&spec.out, &spec.op, &spec.inplace}) {
    if (name->empty()) continue;
    std::optional<OperatorHandle> h = Dispatcher::singleton().findOp(*name);
    if (!h || !h->hasSchema()) continue;
    if (std::optional<DtypeSet> d = h->declaredDtypes(backendKey(type))) return d;
  }
  return std::nullopt;
}

}  // namespace

KernelKind kernelKindOn(const std::string& op, DeviceType type) {
  std::optional<OperatorHandle> h = Dispatcher::singleton().findOp(op);
  if (!h || !h->hasSchema()) return KernelKind::Missing;
  return h->kernelKind(backendKey(type));
}

std::string kernelTextOf(const Result& r) {
  if (!r.dtypes) return kernelNameOf(r);
  return std::string(kernelNameOf(r)) + " (" + r.dtypes->str() + "), " +
         (r.declined ? kernelKindName(*r.declined) : kNoKernelName) + " (others)";
}

void setDeclaredDtypes(Result& r, DeviceType type) {
  std::optional<OperatorHandle> h = Dispatcher::singleton().findOp(r.op);
  if (!h || !h->hasSchema()) return;
  r.dtypes = h->declaredDtypes(backendKey(type));
  r.declined = r.dtypes ? h->declinedKind(backendKey(type)) : std::nullopt;
}

std::vector<Form> formsOf(const OpSpec& spec) {
  std::vector<Form> forms{{spec.op, "functional"}};
  if (!spec.inplace.empty()) forms.push_back({spec.inplace, "inplace"});
  if (!spec.out.empty()) forms.push_back({spec.out, "out"});
  // Note [Gradient forms]: functional ops that differentiate get one (an op
  // that writes an argument, fill_ or zero_, has nothing to check).
  const OpDerivative* d = findDerivative(spec.op);
  // A plugin's own operator differentiates by its declaration for every
  // device (BP_HostApi.derivative), which the CPU's lookup finds.
  const std::shared_ptr<const OpDerivative> declared = d ? nullptr : declaredDerivative(spec.op, DeviceType::CPU);
  if (!d) d = declared.get();
  if (d && (d->kind == Differentiability::Formula || d->kind == Differentiability::Composite)) {
    bool writes = false;
    for (const Argument& a : findOp(spec.op).schema().arguments()) writes |= a.alias && a.alias->is_write;
    if (!writes) forms.push_back({spec.op, "gradient"});
  }
  return forms;
}

std::vector<Result> runSpec(const OpSpec& spec, Device device, size_t first_form, const SpecObserver& observer) {
  const std::vector<Form> forms = formsOf(spec);
  if (first_form >= forms.size()) return {};
  std::vector<Sample> samples = spec.samples();
  // A sample that keeps a tensor on the host to mix devices (Sample::
  // host_args) mixes nothing on the cpu: it does not apply there.
  if (device.isCpu()) std::erase_if(samples, [](const Sample& s) { return s.host_args != 0; });
  if (std::optional<DtypeSet> declared = declaredForSpec(spec, device.type)) {
    std::vector<Sample> mixed = mixedDtypeSamples(samples, *declared);  // Note [Mixed-dtype samples]
    for (Sample& m : mixed) samples.push_back(std::move(m));
  }
  std::vector<Result> results;
  for (size_t f = first_form; f < forms.size(); ++f) {
    FormRunner r{spec, device, Result{}, f, observer};
    r.result.op = forms[f].op;
    r.result.form = forms[f].name;
    r.result.backend = std::string(deviceTypeName(device.type));
    r.result.kernel = kernelKindOn(forms[f].op, device.type);
    setDeclaredDtypes(r.result, device.type);
    // Note [Declined calls]: calls its native kernel declines at run time.
    const std::optional<OperatorHandle> handle = Dispatcher::singleton().findOp(forms[f].op);
    const DispatchKey key = backendKey(device.type);
    const uint64_t declined_before = handle ? handle->declinedCalls(key) : 0;
    const std::string_view name = forms[f].name;
    try {
      if (name == "functional")
        r.functional(samples);
      else if (name == "inplace")
        r.inplace(samples);
      else if (name == "gradient")
        r.gradient(samples);
      else
        r.out(samples);
    } catch (const std::exception& e) {  // e.g. staging an input failed
      r.result.outcome = Outcome::Error;
      r.result.message = e.what();
    }
    if (r.result.dtypes && r.result.outcome == Outcome::Pass) {
      // Certifying what is declared: a declared dtype no sample reached is
      // not certified. Worth saying, not a failure (the spec has no sample).
      absl::StatusOr<DtypeSet> unexercised = DtypeSet::fromMask(r.result.dtypes->mask() & ~r.exercised);
      if (unexercised.ok() && !unexercised->isAll()) {
        r.result.note = "the kernel declares " + unexercised->str() +
                        ", which no sample of this form exercises: not certified for " +
                        (unexercised->mask() & (unexercised->mask() - 1) ? "them" : "it");
      }
    }
    // The boxed calls' declines (Note [Typed calls in conformance]: the
    // typed calls' are r.typed_declined).
    if (const uint64_t declined = handle ? handle->declinedCalls(key) - declined_before - r.typed_declined : 0) {
      // Counted where the calls went (the CPU fallback, usually): under
      // --strict a fallback fails the form, as if the kernel were absent.
      // A form that failed called typed keeps the kernel that call reached.
      const detail::DeclineNote& note = detail::threadDeclineNote();
      const KernelKind to = note.op == &handle->entry() ? note.served_by : KernelKind::Missing;
      const std::string typed = r.typed_calls == 0 || r.typed_declined == declined
                                    ? ""
                                    : strCat(" (called typed, it declined ", r.typed_declined, ")");
      r.result.note = strCat("its native kernel declined ", declined, declined == 1 ? " call" : " calls",
                             " at run time, which ran on ", kernelKindName(to), typed,
                             r.result.note.empty() ? "" : "; ", r.result.note);
      if (!r.typed_failed) r.result.kernel = to;
    }
    if (!spec.reference_note.empty())
      r.result.note = strCat(spec.reference_note, r.result.note.empty() ? "" : "; ", r.result.note);
    if (observer.form_done) observer.form_done(f, r.result);
    results.push_back(std::move(r.result));
  }
  return results;
}

}  // namespace backplane::conformance
