#include "backplane/dispatch/builtin_kernels.h"

#include <cstdio>
#include <mutex>

#include "absl/container/inlined_vector.h"
#include "backplane/core/str_cat.h"
#include "backplane/core/tensor_base.h"

namespace backplane {

void logLine(const std::string& line) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

namespace {

// "testdev:0 Tensor[2] float32, cpu Tensor[] int64" for the arguments on the stack.
std::string describeArguments(const OperatorHandle& op, const Stack& stack) {
  size_t n = op.hasSchema() ? op.schema().arguments().size() : stack.size();
  std::string out;
  for (size_t i = stack.size() - std::min(n, stack.size()); i < stack.size(); ++i) {
    const IValue& v = stack[i];
    auto add = [&](const TensorBase& t) {
      if (!t.defined()) return;
      out += (out.empty() ? "" : ", ") + t.str();
    };
    if (v.isTensor())
      add(v.toTensor());
    else if (v.isTensorList())
      for (const TensorBase& t : v.toTensorList()) add(t);
    else if (v.isOptionalTensorList())
      for (const auto& t : v.toOptionalTensorList()) {
        if (t) add(*t);
      }
    else if (v.isDevice())
      out += (out.empty() ? "device=" : ", device=") + v.toDevice().str();
  }
  return out.empty() ? "no tensor arguments" : out;
}

std::string keysWithKernels(const OperatorHandle& op) {
  std::string out;
  for (int k = 1; k < kNumDispatchKeys; ++k) {
    auto key = static_cast<DispatchKey>(k);
    if (!isBackendKey(key) && !isFunctionalityKey(key)) continue;
    KernelKind kind = op.kernelKind(key);
    if (kind == KernelKind::Missing || kind == KernelKind::Fallthrough) continue;
    if (isFunctionalityKey(key) && kind == KernelKind::BackendFallback) continue;  // wrappers
    out += strCat(out.empty() ? "" : ", ", dispatchKeyName(key), " (", kernelKindName(kind), ")");
  }
  return out.empty() ? "none" : out;
}

// An error of the CPU kernel the fallback ran (or of the CPU's own dispatch:
// a dtype it has no kernel for), rethrown with its code and message and,
// after it, the op and device the caller used: the message alone speaks of
// the CPU, where the caller's tensors never were. No tensor on the device
// has been written (Note [Faults in the CPU fallback's copies]).
[[noreturn, gnu::cold, gnu::noinline]] void rethrowFallbackKernelError(const FunctionSchema& schema,
                                                                       const std::optional<Device>& target,
                                                                       const std::string& device_name) {
  const absl::Status s = statusFromCurrentException();
  throw Error(s.code(), strCat(s.message(), " (raised while running ", schema.name().qualifiedName(), " for ",
                               target ? target->str() : device_name,
                               " through the CPU fallback: its inputs were copied to the host and the CPU kernel "
                               "ran)"));
}

// Why the CPU fallback cannot serve `op` at `key`, for the missing-kernel
// errors of a declined call: ": the CPU fallback needs a CPU kernel", or "".
const char* cpuFallbackNeedsCpuKernel(const OperatorHandle& op, DispatchKey key) {
  return key != DispatchKey::CPU && op.kernelKind(DispatchKey::CPU) != KernelKind::Native
             ? ": the CPU fallback needs a CPU kernel"
             : "";
}

// The reason the kernel of `op` gave when it declined the call now running
// (Note [Declined calls]), or nullptr.
const std::string* declineReasonFor(const OperatorHandle& op) {
  const detail::DeclineNote& note = detail::threadDeclineNote();
  return note.reason != nullptr && note.op == &op.entry() ? note.reason : nullptr;
}

// Note [Faults in the CPU fallback's copies]
// A copy or allocation the CPU fallback makes can fail (a device out of
// memory, a failed transfer). Its error is rethrown with the op, the device
// and the step that failed in front of the device's message, keeping its
// code. What the caller's tensors hold then:
// - staging the arguments on the host, or the CPU kernel itself, fails:
//   no tensor on the device has been written;
// - writing an out= or (a!) argument back fails: the written arguments are
//   copied back in schema order, one copy each, so those before the failed
//   one hold the results, the failed one's span may be partly written (the
//   device's copy failed part way; the test device's injected faults write
//   nothing), and those after it are unchanged;
// - copying a fresh (non-aliased) return to the device fails: every out=
//   and (a!) argument already holds its result; the return is lost.
// Inputs that are not written are never touched. The catch costs nothing
// when nothing throws; the message is built on the error path only.
[[noreturn, gnu::cold, gnu::noinline]] void rethrowFallbackFault(const FunctionSchema& schema,
                                                                 const std::optional<Device>& target,
                                                                 const std::string& device_name, const char* step) {
  const absl::Status s = statusFromCurrentException();
  throw Error(s.code(), strCat(schema.name().qualifiedName(), ": the CPU fallback on ",
                               target ? target->str() : device_name, " failed ", step, ": ", s.message()));
}

}  // namespace

void missingKernel(OperatorKernel*, const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  const std::string name = op.operatorName().qualifiedName();
  if (!op.hasSchema()) {
    BP_THROW(kFailedPrecondition, "operator ", name,
             " is not defined (its definition was removed or never registered); load the library or plugin that "
             "defines it");
  }
  DispatchKey key = ks.highestPriorityKey();
  // Note [Declined calls]: the kernel declined this call at run time.
  if (const std::string* reason = declineReasonFor(op)) {
    BP_THROW(kUnimplemented, name, ": its ", dispatchKeyName(key), " kernel declined the call (", *reason,
             "; arguments: ", describeArguments(op, *stack),
             ") and nothing else serves the op there (no older kernel, composite, backend fallback or CPU fallback",
             cpuFallbackNeedsCpuKernel(op, key), ")");
  }
  // Note [Declared dtypes]: a native kernel that declined this call's dtype,
  // with nothing below it to serve the call.
  if (std::optional<DtypeSet> declared = op.declaredDtypes(key)) {
    const size_t n = op.schema().arguments().size();
    if (std::optional<ScalarType> refused =
            detail::firstRefusedDtype(declared->mask(), *stack, n, op.entry().dtypeFixedArguments())) {
      const KernelRecord& native = op.entry().slot(key);
      BP_THROW(kUnimplemented, name, " has no kernel for dispatch key ", dispatchKeyName(key), " and dtype ",
               scalarTypeName(*refused), " (arguments: ", describeArguments(op, *stack), "): the ",
               dispatchKeyName(key), " kernel", native.debug.empty() ? "" : strCat(" (", native.debug, ")"),
               " declares the dtypes ", declared->str(), " and refuses ", scalarTypeName(*refused),
               ", and nothing else serves the op there (no composite, backend fallback or CPU fallback",
               cpuFallbackNeedsCpuKernel(op, key), "). Declare ", scalarTypeName(*refused),
               " in the kernel's registration and handle it, or call with one of ", declared->str());
    }
  }
  bool cpu_missing = op.kernelKind(DispatchKey::CPU) == KernelKind::Missing;
  // A kernel for the key that does not fit the schema (Note [Kernels for
  // operators defined later]) explains the miss better than anything else.
  std::string inactive;
  for (const Dispatcher::InactiveKernel& k : Dispatcher::singleton().inactiveKernels())
    if (k.op == name && k.key == key) inactive += strCat(". An inactive kernel: ", k.reason);
  BP_THROW(kUnimplemented, name, " has no kernel for dispatch key ", dispatchKeyName(key),
           " (arguments: ", describeArguments(op, *stack), "). Kernels exist for: ", keysWithKernels(op),
           key != DispatchKey::CPU && cpu_missing ? ". There is no CPU kernel either, so CPU fallback cannot run" : "",
           inactive, ". ", *op.entry().missingKernelHint() ? op.entry().missingKernelHint() : "",
           *op.entry().missingKernelHint() ? " Or register" : "Register", " one with Library::impl(\"",
           op.operatorName().name, op.operatorName().overload.empty() ? "" : ".", op.operatorName().overload, "\", ",
           dispatchKeyName(key), ", kernel) or load a plugin that implements it");
}

void cpuFallbackKernel(OperatorKernel*, const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  const DispatchKey key = ks.highestBackendKey();
  const FunctionSchema& schema = op.schema();
  Dispatcher& dispatcher = Dispatcher::singleton();
  const std::string device_name = dispatchKeyName(key);
  // Note [Declared dtypes]: a native kernel that declines this call's dtype;
  // Note [Declined calls]: one that declined this call at run time.
  std::string declined;
  const std::string* reason = declineReasonFor(op);
  if (reason != nullptr)
    declined = strCat(" that takes this call (its kernel declined it: ", *reason, ")");
  else if (std::optional<DtypeSet> declared = op.declaredDtypes(key))
    declined = strCat(" for this call's dtypes (its kernel declares ", declared->str(), ")");
  if (dispatcher.fallbackMode() == FallbackMode::Error) {
    BP_THROW(kUnimplemented, schema.name().qualifiedName(), " has no kernel for ", device_name, declined,
             " and CPU fallback is disabled (BACKPLANE_FALLBACK=error); implement the op in the ", device_name,
             " plugin, or unset BACKPLANE_FALLBACK to let it run on the CPU");
  }
  if (dispatcher.fallbackMode() == FallbackMode::Warn && op.entry().claimFallbackWarning(key)) {
    logLine(strCat("backplane: warning: ", schema.name().qualifiedName(), " has no kernel for ", device_name, declined,
                   "; running it on the CPU (inputs are copied to the host and results "
                   "back). Printed once per operator and device type; BACKPLANE_FALLBACK=silent hides it"));
  }

  const Device cpu(DeviceType::CPU);
  const auto& args = schema.arguments();
  const size_t n = args.size();
  if (stack->size() < n) [[unlikely]]
    detail::throwBadArgumentCount(op, n, stack->size());
  const size_t base = stack->size() - n;
  uint64_t bytes = 0;
  std::optional<Device> target;
  for (size_t i = 0; i < n; ++i) {
    IValue& v = (*stack)[base + i];
    if (v.isDevice() && !v.toDevice().isCpu()) {
      if (!target) target = v.toDevice().resolved();
      v = IValue(cpu);
    }
  }

  // Like the kernels it stands in for, the fallback runs on one device:
  // every tensor must be on the target device, except 0-d CPU tensors
  // (scalars). Moving data between devices is copy_'s job, a composite that
  // never reaches this fallback (it calls the same-device _copy_on_device_).
  std::optional<Device> on_device;  // the device of the call's tensors
  {
    std::optional<Device> first;
    auto check = [&](const TensorBase& t, const Argument& arg) {
      if (!t.defined()) return;
      if (t.device().isCpu()) {
        BP_CHECK(t.dim() == 0, schema.name().qualifiedName(), ": expected all tensors on one device, but argument '",
                 arg.name, "' is a ", t.str(), " while the call runs on ", device_name,
                 " (only 0-d cpu tensors may be mixed in, as scalars); move it with .to(device)");
        return;
      }
      if (!first) first = t.device();
      BP_CHECK(t.device() == *first, schema.name().qualifiedName(), ": expected all tensors on one device, but found ",
               first->str(), " and ", t.device().str(), " (argument '", arg.name, "'); move them to one device first");
    };
    for (size_t i = 0; i < n; ++i) {
      const IValue& v = (*stack)[base + i];
      if (v.isTensor())
        check(v.toTensor(), args[i]);
      else if (v.isTensorList())
        for (const TensorBase& t : v.toTensorList()) check(t, args[i]);
      else if (v.isOptionalTensorList())
        for (const auto& t : v.toOptionalTensorList()) {
          if (t) check(*t, args[i]);
        }
    }
    on_device = first ? first : target;
  }

  // The CPU kernel declares its dtypes too and nothing at the CPU key takes
  // this call's (not an older impl, a composite or a fallback it would go
  // to): say so from the caller's side (its device and tensors), not as a
  // CPU call the caller never made, before copying anything.
  if (const KernelRecord& cpu_slot = op.entry().slot(DispatchKey::CPU); cpu_slot.dtypes != 0) [[unlikely]] {
    const uint64_t exempt = op.entry().dtypeFixedArguments();
    if (op.entry().servingRecord(cpu_slot, *stack).kind == KernelKind::Missing) {
      const DtypeSet cpu_declared = valueOrThrow(DtypeSet::fromMask(cpu_slot.dtypes));
      const std::string dtype(scalarTypeName(*detail::firstRefusedDtype(cpu_slot.dtypes, *stack, n, exempt)));
      const std::optional<DtypeSet> device_declared = op.declaredDtypes(key);
      std::string device_side = strCat("it has no ", device_name, " kernel");
      std::string instead = cpu_declared.str();  // the dtypes a call could use
      if (reason != nullptr) {
        device_side = strCat("its ", device_name, " kernel declined it (", *reason, ")");
      } else if (device_declared) {
        const std::optional<ScalarType> device_refused =
            detail::firstRefusedDtype(device_declared->mask(), *stack, n, exempt);
        device_side = strCat("its ", device_name, " kernel declares ", device_declared->str(),
                             device_refused ? strCat(" and refuses ", scalarTypeName(*device_refused)) : "");
        const absl::StatusOr<DtypeSet> both = DtypeSet::fromMask(device_declared->mask() & cpu_slot.dtypes);
        instead = both.ok() && !both->isAll() && both->mask() != 0 ? both->str() : "";
      }
      BP_THROW(kUnimplemented, schema.name().qualifiedName(), " has no kernel for ",
               on_device ? on_device->str() : device_name, " that takes ", dtype,
               " (arguments: ", describeArguments(op, *stack), "): ", device_side,
               ", so the call went to the CPU fallback, whose CPU kernel",
               cpu_slot.debug.empty() ? "" : strCat(" (", cpu_slot.debug, ")"), " declares ", cpu_declared.str(),
               " and refuses ", dtype, ". Declare ", dtype, " in the CPU kernel's registration and handle it",
               instead.empty() ? "" : strCat(", or call with one of ", instead));
    }
  }

  struct Written {
    TensorBase original;
    TensorBase staged;
    const std::string* alias_set;
  };
  absl::InlinedVector<Written, 2> written;
  auto toHost = [&](TensorBase& t, const Argument& arg) {
    if (!t.defined() || t.device().isCpu()) return;
    if (!target) target = t.device();
    // An out= argument is only written: when its span holds nothing but its
    // elements (contiguous), the kernel overwrites all of it, so there is
    // nothing to copy in. A strided one is copied so the gaps survive.
    const bool write_only = arg.isOut() && t.is_contiguous();
    TensorBase staged = write_only ? emptyStridedTensor(t.sizes(), t.strides(), t.dtype(), cpu) : stageSpan(t, cpu);
    if (!write_only) bytes += spanBytes(t);
    if (arg.alias && arg.alias->is_write) written.push_back({t, staged, &arg.alias->set});
    t = std::move(staged);
  };
  try {
    for (size_t i = 0; i < n; ++i) {
      IValue& v = (*stack)[base + i];
      if (v.isTensor())
        toHost(v.toTensor(), args[i]);
      else if (v.isTensorList())
        for (TensorBase& t : v.toTensorList()) toHost(t, args[i]);
      else if (v.isOptionalTensorList())
        for (auto& t : v.toOptionalTensorList()) {
          if (t) toHost(*t, args[i]);
        }
    }
  } catch (...) {
    rethrowFallbackFault(schema, target, device_name, "staging its arguments on the host");
  }

  try {
    op.redispatchBoxed(DispatchKeySet(DispatchKey::CPU), *stack);
  } catch (...) {
    rethrowFallbackKernelError(schema, target, device_name);
  }

  try {
    for (const Written& w : written) {
      writeSpanBack(w.original, w.staged);
      bytes += spanBytes(w.original);
    }
  } catch (...) {
    rethrowFallbackFault(schema, target, device_name, "writing an out= or (a!) argument back to the device");
  }
  const auto& rets = schema.returns();
  if (stack->size() < base + rets.size()) [[unlikely]]
    detail::throwBadReturnCount(op, rets.size(), stack->size() - base);
  auto toTarget = [&](TensorBase& t, const Argument& ret) {
    if (!t.defined()) return;
    if (ret.alias) {
      for (const Written& w : written) {
        if (*w.alias_set == ret.alias->set) {
          t = w.original;
          return;
        }
      }
    }
    if (target && t.device().isCpu()) {
      bytes += spanBytes(t);
      t = stageSpan(t, *target);
    }
  };
  try {
    for (size_t j = 0; j < rets.size(); ++j) {
      IValue& v = (*stack)[stack->size() - rets.size() + j];
      if (v.isTensor())
        toTarget(v.toTensor(), rets[j]);
      else if (v.isTensorList())
        for (TensorBase& t : v.toTensorList()) toTarget(t, rets[j]);
    }
  } catch (...) {
    rethrowFallbackFault(schema, target, device_name, "copying its results to the device");
  }
  op.entry().recordFallback(key, bytes);
  detail::tls_fallback_bytes += bytes;
}

void tracingKernel(OperatorKernel*, const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  DispatchKeySet below = ks & DispatchKeySet::below(DispatchKey::Tracing);
  DispatchKey next = op.entry().resolveKey(below);
  logLine(strCat("backplane trace: ", op.operatorName().qualifiedName(), " keys=", ks.str(), " -> ",
                 dispatchKeyName(next), " (", kernelKindName(op.servingKind(next, *stack)), ")"));
  op.redispatchBoxedSameArguments(below, *stack);
}

}  // namespace backplane
