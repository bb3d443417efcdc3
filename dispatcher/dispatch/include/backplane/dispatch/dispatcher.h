#pragma once
// The Dispatcher (the operator x dispatch-key table), OperatorHandle and its
// typed form, and RegistrationHandle.

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backplane/dispatch/boxing.h"
#include "backplane/dispatch/dispatch_key.h"
#include "backplane/dispatch/function_schema.h"
#include "backplane/dispatch/kernel_function.h"
#include "backplane/dispatch/operator_entry.h"

namespace backplane {

// The value a call gets for `arg` when it leaves it off (what callBoxed()
// fills in); throws Error if the argument has no default.
IValue defaultArgumentValue(const Argument& arg);

class Dispatcher;
template <typename Sig>
class TypedOperatorHandle;

namespace detail {
// Keys every call includes, process-wide (Tracing when BACKPLANE_TRACE=1,
// Profiling while a backplane::Profiler is active).
inline std::atomic<uint64_t> g_global_included_keys{0};

// Note [Computing a call's key set]
// OR of the arguments' backend keys, plus this thread's and the process's
// included keys, minus this thread's excluded keys. A call with no tensor
// or device argument at all (a factory op without device=) goes to CPU.
inline DispatchKeySet finishKeySet(uint64_t arg_bits) {
  const LocalDispatchKeySet& tls = tls_local_dispatch_key_set;
  if (!(arg_bits & DispatchKeySet::allBackends().raw())) arg_bits |= DispatchKeySet(DispatchKey::CPU).raw();
  uint64_t bits =
      (arg_bits | tls.included.raw() | g_global_included_keys.load(std::memory_order_relaxed)) & ~tls.excluded.raw();
  return DispatchKeySet::fromRaw(bits);
}
template <typename... Args>
DispatchKeySet computeDispatchKeySet(const Args&... args) {
  uint64_t bits = 0;
  (ArgTraits<std::decay_t<Args>>::addKeys(bits, args), ...);
  return finishKeySet(bits);
}
// The same for the arguments on top of a boxed stack.
DispatchKeySet computeDispatchKeySet(const Stack& stack, size_t num_args);

// Note [Version counters]
// Every call of an op that writes a tensor argument (`Tensor(a!)`: out=,
// in-place, fill_, copy_) bumps that tensor's storage version before its
// kernels run, whatever its key set: a tensor saved for backward may be
// one that does not require grad (mul(x, w) saves w), so the Autograd
// kernel alone could not see every write. Backward compares each saved
// tensor's version with the one it was saved at and names the op when they
// differ (dispatcher/autograd). A call that then fails has still bumped:
// the check errs on the side of refusing. A redispatch is part of the same
// call and does not bump again. Cost on other ops: one load and branch.
inline void bumpVersion(const TensorBase& t) {
  if (const TensorImpl* impl = t.unsafeGetImpl()) impl->storage().unsafeGetImpl()->bumpVersion();
}
template <typename T>
struct IsTensorListArg : std::false_type {};
template <KernelTensor T>
struct IsTensorListArg<ArrayRef<T>> : std::true_type {};
template <typename T>
void bumpIfWritten(uint64_t written, size_t index, const T& arg) {
  if constexpr (KernelTensor<std::decay_t<T>>) {
    if ((written >> index) & 1) bumpVersion(arg);
  } else if constexpr (IsTensorListArg<std::decay_t<T>>::value) {
    if ((written >> index) & 1)
      for (const auto& t : arg) bumpVersion(t);
  }
}
template <typename... Args>
[[gnu::noinline]] void bumpWrittenVersions([[maybe_unused]] uint64_t written, const Args&... args) {
  [[maybe_unused]] size_t i = 0;
  (bumpIfWritten(written, i++, args), ...);
}
void bumpWrittenVersions(uint64_t written, const Stack& stack, size_t num_args);

std::string typedSignatureMismatch(const OperatorEntry& entry, const std::string& sig);

// Whether a typed call can return its last argument: the op returns one
// tensor and its last parameter is a tensor of that type (Note [Meta kernels]: a meta
// that completes the call).
template <typename Ret, typename... Args>
inline constexpr bool kReturnsLastArgument = [] {
  if constexpr (sizeof...(Args) == 0 || !KernelTensor<Ret>) {
    return false;
  } else {
    using Last = std::tuple_element_t<sizeof...(Args) - 1, std::tuple<Args...>>;
    return std::is_same_v<std::decay_t<Last>, Ret>;
  }
}();
// registerMeta lets a meta return bool only for ops that return their last
// argument, so this is never reached; it names the op if it is.
[[noreturn]] void throwMetaCompletedWithoutOut(const OperatorEntry& entry);
// Note [Declined calls]
// A plugin kernel may decline a call at run time (BP_DECLINED, ABI 1.7;
// bp::decline() in the SDK): a kernel that serves only some shapes, a
// softmax over the last dim only, a size its device cannot hold. The call
// then goes, with its arguments unchanged, to the record the slot would hold
// without that kernel: KernelRecord::declined, which the dispatcher keeps
// for every impl at a backend key (the one Note [Declared dtypes] follows
// for a dtype the kernel does not declare): an older impl for the key, the
// composite, the key's backend fallback, the CPU fallback, or the
// missing-kernel error. The meta kernel has run and written arguments'
// versions have been bumped once, as for any call; the kernel that declines
// must not have written anything.
// Reports count the call where it went: the op's declinedCalls(key)
// counter, the thread's DeclineNote (the profiler reports the call's kind
// as the record that served it, conformance counts each sample), and the
// CPU fallback's BACKPLANE_FALLBACK=warn|error messages and the
// missing-kernel error name the decline and its reason. Cost: finding the
// kernel's record (a walk from the slot) and one counter increment on top
// of the target's own call; a C++ SDK kernel also pays for the exception
// bp::decline() throws (docs/performance.md).
struct DeclineNote {
  const OperatorEntry* op = nullptr;  // the op of the latest decline on this thread
  KernelKind served_by = KernelKind::Missing;
  uint64_t count = 0;                   // declines on this thread so far
  const std::string* reason = nullptr;  // while the declined call runs
};
DeclineNote& threadDeclineNote();
// Notes a decline for the duration of the call it redirects.
class DeclineScope {
 public:
  DeclineScope(const OperatorEntry& op, const KernelRecord& from, const KernelRecord& to, const std::string& reason);
  ~DeclineScope();
  DeclineScope(const DeclineScope&) = delete;
  DeclineScope& operator=(const DeclineScope&) = delete;

 private:
  const OperatorEntry& op_;
  KernelKind kind_;
  const std::string* outer_reason_;
};
// The declining kernel's record (OperatorEntry::recordOf), or throws
// kUnavailable when the table changed under the call.
const KernelRecord& declinedRecord(const OperatorEntry& op, DispatchKeySet ks, const OperatorKernel* functor);

}  // namespace detail

// Produced by every registration; destroying it (or calling reset()) undoes
// the registration and restores what the table held before. Move-only.
class [[nodiscard]] RegistrationHandle {
 public:
  RegistrationHandle() = default;
  RegistrationHandle(RegistrationHandle&& o) noexcept : id_(std::exchange(o.id_, 0)) {}
  RegistrationHandle& operator=(RegistrationHandle&& o) noexcept {
    reset();
    id_ = std::exchange(o.id_, 0);
    return *this;
  }
  ~RegistrationHandle() { reset(); }
  void reset();
  bool active() const { return id_ != 0; }
  uint64_t id() const { return id_; }

 private:
  friend class Dispatcher;
  explicit RegistrationHandle(uint64_t id) : id_(id) {}
  uint64_t id_ = 0;
};

// A stable reference to one operator; cheap to copy, valid for the life of
// the process. Look it up once and keep it.
class OperatorHandle {
 public:
  const OperatorName& operatorName() const { return entry_->name(); }
  bool hasSchema() const { return entry_->schema() != nullptr; }
  // The schema; throws Error if the operator is not (or no longer) defined.
  const FunctionSchema& schema() const;

  // The typed handle for calls with the canonical C++ signature Sig (Note
  // [Canonical C++ signatures]). Throws Error if Sig does not match the
  // schema, naming both.
  template <typename Sig>
  TypedOperatorHandle<Sig> typed() const;

  // Calls the operator with the arguments on `stack` (the whole stack is
  // this call's arguments; trailing arguments with defaults may be left
  // off). Leaves the returns on `stack`. Argument types are checked against
  // the schema.
  void callBoxed(Stack& stack) const;
  // Calls the kernel for the highest key of `ks` without recomputing it:
  // how a kernel at key K reaches the kernels below K.
  void redispatchBoxed(DispatchKeySet ks, Stack& stack) const;
  // redispatchBoxed for a kernel that passes on, unchanged, the arguments of
  // the call it serves (the Autograd, Profiling and Tracing kernels, a
  // fallthrough): the op's accepted dtypes (Note [Dtypes an operator
  // accepts]) were checked when that call entered the op and are not
  // checked again; a kernel's declared dtypes still route the call (Note
  // [Declared dtypes]). A kernel that passes other arguments (a plugin's
  // op_redispatch) uses redispatchBoxed.
  void redispatchBoxedSameArguments(DispatchKeySet ks, Stack& stack) const;

  // What serves calls whose highest key is `k` (for a native kernel that
  // declares dtypes, the calls it accepts: Note [Declared dtypes]).
  KernelKind kernelKind(DispatchKey k) const { return entry_->slot(k).kind; }
  // The dtypes that the native kernel serving key `k` declared, or nullopt
  // if `k` has no native kernel or it serves every dtype.
  std::optional<DtypeSet> declaredDtypes(DispatchKey k) const;
  // Whether the native kernel serving key `k` takes 0-d CPU tensor operands
  // as they are (Note [CPU scalars as kernel arguments] in plugin_api.h), so
  // that a caller may pass one without putting it on the device: only a
  // kernel that serves every dtype (one that declares some could decline
  // the call, and what serves it then need not take CPU scalars). Lock-free.
  bool takesCpuScalars(DispatchKey k) const {
    const KernelRecord& r = entry_->slot(k);
    return r.kind == KernelKind::Native && r.cpu_scalars && r.dtypes == 0;
  }
  // What serves the calls at key `k` that its native kernel's declared
  // dtypes refuse (composite, backend fallback, CPU fallback or missing; or
  // an older native kernel), or nullopt if the kernel declares no dtypes.
  std::optional<KernelKind> declinedKind(DispatchKey k) const;
  // What serves a call at key `k` whose arguments are the top of `stack`:
  // kernelKind(k) after the dtype rule (Note [Declared dtypes]).
  KernelKind servingKind(DispatchKey k, const Stack& stack) const {
    return entry_->servingRecord(entry_->slot(k), stack).kind;
  }
  // Note [Declined calls]: runs a call that the native kernel whose state is
  // `functor` (reached with key set `ks`) declined at run time, with the
  // same arguments, on what would have served it without that kernel; the
  // decline is counted (declinedCalls) and noted for reports, with
  // `reason`. For kernel adapters (the plugin host's): call it instead of
  // returning, before anything was written.
  void serveDeclinedBoxed(DispatchKeySet ks, const OperatorKernel* functor, const std::string& reason,
                          Stack& stack) const;
  template <typename Ret, typename... Args>
  Ret serveDeclined(DispatchKeySet ks, const OperatorKernel* functor, const std::string& reason, Args... args) const;
  // Calls that the native kernel at backend key k declined at run time.
  uint64_t declinedCalls(DispatchKey k) const { return entry_->declinedCalls(k); }
  // Calls of this op that went through the CPU fallback from backend key k,
  // and the bytes those calls copied between devices.
  uint64_t fallbackCalls(DispatchKey k) const { return entry_->fallbackCalls(k); }
  uint64_t fallbackBytes(DispatchKey k) const { return entry_->fallbackBytes(k); }

  // Human-readable registrations and table, for debugging.
  std::string dumpState() const;

  OperatorEntry& entry() const { return *entry_; }
  friend bool operator==(const OperatorHandle& a, const OperatorHandle& b) { return a.entry_ == b.entry_; }

 protected:
  friend class Dispatcher;
  explicit OperatorHandle(OperatorEntry* e) : entry_(e) {}
  OperatorEntry* entry_;
};

template <typename Ret, typename... Args>
class TypedOperatorHandle<Ret(Args...)> : public OperatorHandle {
  static_assert((std::is_same_v<Args, detail::canonical_t<Args>> && ...),
                "typed<Sig>(): Sig must use the canonical parameter types: const Tensor&, "
                "const std::optional<Tensor>&, TensorList, int64_t, double, bool, IntArrayRef, "
                "std::string_view, const Scalar&, const std::optional<Scalar>&, ScalarType, Device, "
                "or std::optional of the by-value ones");

 public:
  // Dispatches on the arguments and calls the chosen kernel. No heap
  // allocation and no lock when the kernel is unboxed.
  Ret call(Args... args) const {
    DispatchKeySet ks = detail::computeDispatchKeySet<Args...>(args...);
    if (const uint64_t written = entry_->writtenArguments()) [[unlikely]]
      detail::bumpWrittenVersions<Args...>(written, args...);
    if (const KernelRecord* meta = entry_->meta()) [[unlikely]] {
      if (!meta->completes) {
        meta->kernel.template call<void, Args...>(*this, ks, args...);
      } else if (meta->kernel.template call<bool, Args...>(*this, ks, args...)) {
        // The meta computed the result into the out argument, the last one
        // (registerMeta checked that the schema returns it).
        if constexpr (detail::kReturnsLastArgument<Ret, Args...>) {
          return std::get<sizeof...(Args) - 1>(std::forward_as_tuple(args...));
        } else {
          detail::throwMetaCompletedWithoutOut(*entry_);
        }
      }
    }
    return entry_->lookup(ks, args...).kernel.template call<Ret, Args...>(*this, ks, args...);
  }
  // call() without the op's meta kernel (Note [Meta kernels]): for callers
  // that have made the arguments valid themselves, e.g. a composite that has
  // just allocated `out` from the same shape rule.
  Ret callSkippingMeta(Args... args) const {
    DispatchKeySet ks = detail::computeDispatchKeySet<Args...>(args...);
    if (const uint64_t written = entry_->writtenArguments()) [[unlikely]]
      detail::bumpWrittenVersions<Args...>(written, args...);
    return entry_->lookup(ks, args...).kernel.template call<Ret, Args...>(*this, ks, args...);
  }
  // Calls the kernel for the highest key of `ks` (already restricted by the
  // caller, usually to ks & DispatchKeySet::below(current key)).
  Ret redispatch(DispatchKeySet ks, Args... args) const {
    return entry_->lookup(ks, args...).kernel.template call<Ret, Args...>(*this, ks, args...);
  }

 private:
  friend class OperatorHandle;
  explicit TypedOperatorHandle(OperatorEntry* e) : OperatorHandle(e) {}
};

template <typename Sig>
TypedOperatorHandle<Sig> OperatorHandle::typed() const {
  using Traits = detail::FunctionTraits<Sig>;
  std::string sig = [&]<typename... P>(detail::TypeList<P...>) {
    return detail::cppSignatureString<typename Traits::ret, P...>();
  }(typename Traits::params());
  std::string mismatch = detail::typedSignatureMismatch(*entry_, sig);
  if (!mismatch.empty()) detail::throwError(absl::StatusCode::kInvalidArgument, std::move(mismatch));
  return TypedOperatorHandle<Sig>(entry_);
}

template <typename Ret, typename... Args>
Ret OperatorHandle::serveDeclined(DispatchKeySet ks, const OperatorKernel* functor, const std::string& reason,
                                  Args... args) const {
  const KernelRecord& from = detail::declinedRecord(*entry_, ks, functor);
  const KernelRecord& to = entry_->servingFrom(from.declined.load(std::memory_order_acquire), args...);
  detail::DeclineScope scope(*entry_, from, to, reason);
  return to.kernel.template call<Ret, Args...>(*this, ks, args...);
}

// How the CPU fallback behaves (BACKPLANE_FALLBACK=warn|silent|error).
enum class FallbackMode : uint8_t {
  Warn,    // run it; print a warning once per (op, device type)  [default]
  Silent,  // run it quietly
  Error,   // refuse: raise an error naming the op and device
};

class Dispatcher {
 public:
  // The process-wide dispatcher. Created on first use, reading
  // BACKPLANE_TRACE and BACKPLANE_FALLBACK; never destroyed (handles and
  // kernels may be used during static destruction).
  static Dispatcher& singleton();

  // --- Registration. Each returns a handle that undoes it.

  // Defines an operator from its schema text. Fails if the schema does not
  // parse or the operator (name and overload) is already defined.
  absl::StatusOr<RegistrationHandle> registerDef(std::string_view schema, std::string debug = "");
  // Registers `kernel` for `op` ("ns::name.overload") at `key`. The op must be
  // defined, and an unboxed kernel's C++ signature must match the schema.
  // `dtypes`: the dtypes the kernel serves (Note [Declared dtypes]);
  // `cpu_scalars`: it takes 0-d CPU tensor operands as they are (Note [CPU
  // scalars as kernel arguments] in plugin_api.h). Both only for native
  // kernels at backend keys.
  absl::StatusOr<RegistrationHandle> registerImpl(std::string_view op, DispatchKey key, KernelFunction kernel,
                                                  std::string debug = "", DtypeSet dtypes = DtypeSet::all(),
                                                  bool cpu_scalars = false);
  // registerImpl for an operator that another library or plugin defines,
  // possibly later (Note [Kernels for operators defined later]): if `op` is
  // defined this is registerImpl; if not, the kernel waits and serves calls
  // once a def of `op` arrives whose schema its C++ signature fits. Opt-in:
  // a misspelled name is not reported, so use it only for operators whose
  // definer may load after the caller.
  absl::StatusOr<RegistrationHandle> registerImplWhenDefined(std::string_view op, DispatchKey key,
                                                             KernelFunction kernel, std::string debug = "",
                                                             DtypeSet dtypes = DtypeSet::all(),
                                                             bool cpu_scalars = false);
  // Registers a backend-agnostic composite kernel for `op`: it serves every
  // backend key that has no native kernel.
  absl::StatusOr<RegistrationHandle> registerComposite(std::string_view op, KernelFunction kernel,
                                                       std::string debug = "");
  // Registers `op`'s meta kernel (Note [Meta kernels]): same parameters as
  // the schema, returning void. The newest registration wins.
  absl::StatusOr<RegistrationHandle> registerMeta(std::string_view op, KernelFunction kernel, std::string debug = "");
  // Registers a boxed fallback for every operator at `key` (or a fallthrough
  // from KernelFunction::makeFallthrough()).
  absl::StatusOr<RegistrationHandle> registerFallback(DispatchKey key, KernelFunction kernel, std::string debug = "");

  // --- Lookup.

  // The operator named "ns::name.overload" if it was ever registered.
  std::optional<OperatorHandle> findOp(std::string_view qualified_name);
  // Like findOp, but only defined operators; throws Error (with a hint if a
  // similar name exists) otherwise.
  OperatorHandle findOpOrThrow(std::string_view qualified_name);
  // " Did you mean ns::a, ns::b?": the defined operators closest to
  // `qualified_name` (Note [Did you mean]), for the error of a registrant
  // that names an undefined one; "" when none is close.
  std::string didYouMean(std::string_view qualified_name);
  // Every defined operator, sorted by name.
  std::vector<OperatorHandle> definedOperators();
  // The operator named "ns::name.overload", adding it undefined (no schema:
  // not callable, not in definedOperators()) if nothing has named it yet.
  // For registrants whose kernel must hold the handle before the operator is
  // defined (the plugin host, for registerImplWhenDefined). Fails only on a
  // malformed name.
  absl::StatusOr<OperatorHandle> findOrAddOp(std::string_view qualified_name);

  // An impl that serves no call because of its operator's definition: the
  // operator is not defined (yet), or the kernel's C++ signature does not fit
  // the schema (Note [Kernels for operators defined later]).
  struct InactiveKernel {
    std::string op;  // "ns::name.overload"
    DispatchKey key;
    std::string registrant;  // the registration's debug text, e.g. "plugin backplane_cuda"
    std::string reason;      // why it serves no call, in a sentence
  };
  // Every inactive impl, sorted by operator name, then key.
  std::vector<InactiveKernel> inactiveKernels();

  // --- Behaviour switches (thread-safe; take effect for the next call).

  FallbackMode fallbackMode() const { return fallback_mode_.load(std::memory_order_relaxed); }
  void setFallbackMode(FallbackMode m) { fallback_mode_.store(m, std::memory_order_relaxed); }
  // Adds the Tracing key to every call, which logs op, key set and chosen
  // kernel kind to stderr (what BACKPLANE_TRACE=1 turns on).
  void setTracing(bool on);
  bool tracing() const;
  // Adds the Profiling key to every call, which times it for the active
  // backplane::Profiler. Profiler turns it on and off; applications use
  // Profiler (profiler.h) rather than this.
  void setProfiling(bool on);
  bool profiling() const;

  // Verifies every operator's table equals what the registrations imply;
  // returns the first discrepancy. For tests and debugging.
  absl::Status checkInvariants();
  // The registrations and table of every defined operator.
  std::string dumpState();

 private:
  friend class RegistrationHandle;
  Dispatcher();
  void deregister(uint64_t id);
  // Adds `key` to (or removes it from) detail::g_global_included_keys.
  static void setGlobalKey(DispatchKey key, bool on);
  static bool hasGlobalKey(DispatchKey key);

  enum class RegistrationKind : uint8_t { Def, Impl, Composite, Meta, Fallback };
  struct Registration {
    RegistrationKind kind;
    OperatorEntry* op;             // Def, Impl, Composite, Meta
    DispatchKey key;               // Impl, Fallback
    const KernelRecord* record;    // Impl, Composite, Meta, Fallback
    const FunctionSchema* schema;  // Def
  };

  // The helpers below run under the registration lock,
  // detail::registrationMutex() (operator_entry.h).
  OperatorEntry& entryFor(const OperatorName& name)  // creates
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(detail::registrationMutex());
  absl::StatusOr<OperatorEntry*> definedEntry(std::string_view op, std::string_view action)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(detail::registrationMutex());
  // "ns::a, ns::b": the defined operators closest to `wanted` (Note [Did you
  // mean]), for the error of a lookup or registration that names none.
  std::string closestDefinedNames(const OperatorName& wanted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(detail::registrationMutex());
  // Puts a checked kernel on op's impl stack for `key`.
  RegistrationHandle addImpl(OperatorEntry& op, DispatchKey key, KernelFunction kernel, std::string debug,
                             DtypeSet dtypes, bool cpu_scalars, bool when_defined)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(detail::registrationMutex());
  // The newest impl for `key` that fits the schema, or nullptr.
  static const KernelRecord* newestFittingImpl(const OperatorEntry& op, DispatchKey key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(detail::registrationMutex());
  const KernelRecord* newRecord(KernelFunction kernel, KernelKind kind, DispatchKey key, std::string debug,
                                DtypeSet dtypes = DtypeSet::all(), bool completes = false, bool cpu_scalars = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(detail::registrationMutex());
  // What slot `key` holds (Note [Kernel precedence]); with skip_impls, what
  // it would hold if the key had no impls (where the oldest kernel that
  // declares dtypes sends the calls it declines).
  const KernelRecord* computeSlot(const OperatorEntry& op, DispatchKey key, bool skip_impls = false) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(detail::registrationMutex());
  // The record each impl of `key` that declares dtypes sends declined calls
  // to (Note [Declared dtypes]): the fitting impl below it, else
  // computeSlot(op, key, /*skip_impls=*/true). nullptr for impls that
  // declare none.
  const KernelRecord* computeDeclined(const OperatorEntry& op, DispatchKey key, const KernelRecord* impl) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(detail::registrationMutex());
  void updateTable(OperatorEntry& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(detail::registrationMutex());
  RegistrationHandle addRegistration(Registration r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(detail::registrationMutex());

  absl::flat_hash_map<std::string, std::unique_ptr<OperatorEntry>> ops_ ABSL_GUARDED_BY(detail::registrationMutex());
  std::array<std::vector<const KernelRecord*>, kNumDispatchKeys> fallbacks_
      ABSL_GUARDED_BY(detail::registrationMutex());
  absl::flat_hash_map<uint64_t, Registration> registrations_ ABSL_GUARDED_BY(detail::registrationMutex());
  // Every record and schema ever made, retired ones included (Note
  // [Lock-free dispatch]).
  std::deque<std::unique_ptr<KernelRecord>> records_ ABSL_GUARDED_BY(detail::registrationMutex());
  std::deque<std::unique_ptr<FunctionSchema>> schemas_ ABSL_GUARDED_BY(detail::registrationMutex());
  uint64_t next_id_ ABSL_GUARDED_BY(detail::registrationMutex()) = 1;
  // Set once by the constructor, constant afterwards.
  const KernelRecord* missing_;
  const KernelRecord* fallthrough_;
  const KernelRecord* cpu_fallback_;
  std::atomic<FallbackMode> fallback_mode_{FallbackMode::Warn};
  RegistrationHandle tracing_fallback_;
};

}  // namespace backplane
