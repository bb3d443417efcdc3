#pragma once
// OperatorEntry: one row of the operator x dispatch-key table.
//
// Note [Lock-free dispatch]
// Each slot of an operator's table is an atomic pointer to an immutable
// KernelRecord. Registration (under detail::registrationMutex()) builds records,
// recomputes the affected slots and publishes them with release stores; a
// call reads one slot with an acquire load and never takes a lock. A record
// that leaves the table is retired, not freed: a concurrent call may still be
// running it. Retired records (a few dozen bytes each) are freed with the
// Dispatcher, i.e. at process exit. So registration may run concurrently
// with dispatch, and the cost is memory proportional to the number of
// deregistrations.
//
// Note [Meta kernels]
// An operator may have one meta kernel: its shape/dtype rule run as a check
// before any kernel, with the op's own C++ signature and no return. Standard
// out= operators use it to validate their arguments and to check (or resize,
// when empty) the `out` tensor, so that every backend's kernel, a CPU
// fallback included, computes into an output that already has the right
// shape, dtype and device. call() and callBoxed() run it; redispatch() and
// callSkippingMeta() do not (the arguments were checked on the way in).
// A meta kernel of an out= operator whose one return is its last argument
// (`..., *, Tensor(a!) out) -> Tensor(a!)`) may instead return bool: true
// means the meta has computed the result into `out` itself, and the call
// returns `out` without running any other kernel. The standard ops use it
// for an `out` of another dtype than the one the op computes in (Note
// [out= of another dtype] in dispatcher/ops/src/meta.h): the meta computes
// into a temporary of the op's dtype through callSkippingMeta() and casts it
// into `out`, so no kernel ever sees a mixed-dtype `out`. A meta returning
// false, and every void meta, lets the call go on to the kernel.
//
// Note [Kernel precedence]
// For a backend key the slot holds, in order of preference: a native
// kernel, i.e. an impl registered for that key (the newest registration
// wins; removing it brings back the previous one), a composite
// (backend-agnostic) kernel, a backend fallback registered for the key, the
// CPU fallback (if the op has a native CPU kernel and the key is not CPU),
// or the missing-kernel error. For a functionality key: an impl for the key,
// a fallback for the key, else fallthrough (the key is skipped). An operator without a schema resolves every slot to
// the missing-kernel error. An impl that does not fit the schema (Note
// [Kernels for operators defined later]) is skipped as if it were absent.
// A native kernel that declares the dtypes it serves holds the slot, and the
// calls it refuses go on down this list (Note [Declared dtypes]).
//
// Note [Declared dtypes]
// A native kernel may declare the dtypes it serves (Library::impl's and
// registerImpl's DtypeSet, the plugin ABI's BP_KernelDesc.dtypes, plugin.hpp's
// bp::Dtypes); by default it serves every dtype. A call reaches a kernel with
// a declared set only if EVERY tensor argument's dtype is in the set: inputs
// and outputs (out=) alike, each element of a Tensor[] list, and optional
// tensors that are present (None and undefined tensors do not count), but
// for the arguments whose dtype the op fixes (setDtypeFixedArguments: an
// index, a mask, a bool result), which are skipped. Any
// other call goes to the record the slot would hold without that kernel:
// the impl registered before it for the key (itself subject to its own
// declared set), else, as Note [Kernel precedence] orders them, the
// composite, the key's backend fallback, the CPU fallback, or the
// missing-kernel error, which then names the op, the key, the dtypes the
// kernel declared and the dtype it refused. So a vendor kernel that serves
// float32 only leaves every other dtype to the CPU fallback, with no
// per-dtype code, and reports (the profiler, `backplane ops`, conformance)
// say which kernel served what.
// The record a declared set sends a refused call to is computed when the
// table is (under the registration lock) and kept in the kernel's record
// (KernelRecord::declined). The hot path loads the slot as before and only
// when the record declares dtypes ([[unlikely]]) tests the arguments' dtypes
// and follows `declined`: no lock, no allocation, and one compare more for
// every kernel that declares nothing. Only native kernels at backend keys may
// declare dtypes (a fallback or fallthrough serves every op, a functionality
// key wraps every call); a set naming every dtype is stored as "all".
//
// Note [Kernels for operators defined later]
// Dispatcher::registerImpl needs the operator defined: a kernel for a
// misspelled name fails at once, naming it. A device plugin that implements
// operators another plugin defines (the GPU plugins' spconv:: kernels) cannot
// rely on that order, since plugins load in an order the application picks.
// It opts in with registerImplWhenDefined (Library::implWhenDefined, the
// plugin ABI's impl_when_defined), PyTorch's TORCH_LIBRARY_IMPL before
// TORCH_LIBRARY:
// - The registration creates the operator's entry if need be, without a
//   schema, and puts the kernel on impls_ like any impl, also noting it in
//   when_defined_. While the op has no schema every slot is the
//   missing-kernel error, so the op is not callable: calls and
//   findOpOrThrow() fail as for any undefined op, and it is in neither
//   definedOperators() nor `backplane ops`.
// - If the op is defined already, the registration is exactly registerImpl:
//   a kernel whose C++ signature does not fit fails at once.
// - When a def arrives, each when_defined_ kernel whose signature does not
//   fit the schema goes on unfit_, with the reason: it stays registered but
//   no slot uses it (Note [Kernel precedence] skips it), the dispatcher logs
//   a warning naming both sides, and dumpState() and inactiveKernels() show
//   it. The def itself succeeds: failing it would blame the plugin that
//   defines the op for another plugin's stale kernel. (A plain impl kept
//   from an earlier definition still makes a def that it does not fit fail,
//   as before: its registrant asked for that definition.)
// - Removing the def (its plugin unloaded) clears unfit_: every kernel waits
//   again for the next def, which checks them anew. Removing a when-defined
//   kernel, before or after the def, is removing an impl.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "backplane/dispatch/dispatch_key.h"
#include "backplane/dispatch/dtype_set.h"
#include "backplane/dispatch/function_schema.h"
#include "backplane/dispatch/kernel_function.h"

namespace backplane {

namespace detail {
// The Dispatcher's registration lock (Note [Lock-free dispatch]): every
// registration, deregistration and lookup by name takes it; a call never
// does. Process-wide, as the Dispatcher is, and never destroyed (handles are
// reset during static destruction). It lives here so that OperatorEntry's
// registration state can name it in ABSL_GUARDED_BY; clang's
// -Wthread-safety (scripts/check_thread_safety.sh) checks every access.
absl::Mutex& registrationMutex();

// The first tensor among the top `num_args` values of `stack` (plain, in a
// list, or a present optional) whose dtype is not in `mask` (bit i =
// ScalarType i, nonzero), or nullopt if every one is (Note [Declared dtypes]).
// Arguments whose bit is set in `exempt` (argument i, counted from the
// first of the num_args) are skipped.
std::optional<ScalarType> firstRefusedDtype(uint64_t mask, const Stack& stack, size_t num_args, uint64_t exempt = 0);
}  // namespace detail

// What fills a slot; reported by tracing, the profiler, `backplane ops`,
// conformance reports and error messages, always under kernelKindName().
enum class KernelKind : uint8_t {
  Missing,          // no kernel: calling raises an error naming the op and key
  Native,           // an impl registered for this key
  Composite,        // a backend-agnostic kernel built from other ops
  BackendFallback,  // a boxed fallback registered for this key
  CpuFallback,      // the built-in CPU fallback: copy to host, run CPU kernel, copy back
  Fallthrough,      // functionality key with nothing to do: skipped
};
inline constexpr KernelKind kAllKernelKinds[] = {KernelKind::Missing,     KernelKind::Native,
                                                 KernelKind::Composite,   KernelKind::BackendFallback,
                                                 KernelKind::CpuFallback, KernelKind::Fallthrough};
static_assert(std::size(kAllKernelKinds) == static_cast<size_t>(KernelKind::Fallthrough) + 1,
              "kAllKernelKinds lists every KernelKind (Fallthrough is the last)");
// The one name of each kind, the same in text, JSON and JUnit: "missing",
// "native", "composite", "backend_fallback", "cpu_fallback", "fallthrough".
// One word each (no spaces), so a report's column, a JSON value and a
// command-line argument all spell it the same way.
const char* kernelKindName(KernelKind k);
// Parses kernelKindName()'s text.
std::optional<KernelKind> kernelKindFromName(std::string_view name);
// A backend fallback or the CPU fallback: the op has no kernel of its own
// for the backend (what `backplane conformance --strict` refuses).
inline bool isFallback(KernelKind k) { return k == KernelKind::BackendFallback || k == KernelKind::CpuFallback; }

struct KernelRecord {
  KernelFunction kernel;
  KernelKind kind;
  DispatchKey key;    // the key it was registered for (Undefined for composites)
  std::string debug;  // who registered it, for messages and dumpState()
  uint64_t id;        // registration id
  // The dtypes a native kernel serves, as DtypeSet::mask(): 0 = every dtype
  // (Note [Declared dtypes]). Constant.
  uint64_t dtypes = 0;
  // Where a call this kernel declines goes, for its declared dtypes (Note
  // [Declared dtypes]) or at run time (Note [Declined calls]): set under the
  // registration lock before the record is published in a slot, updated
  // when registrations change it, never null while an impl at a backend key
  // is in a table. nullptr for other records.
  mutable std::atomic<const KernelRecord*> declined{nullptr};
  // A meta kernel that returns bool: true when it has completed the call
  // itself (Note [Meta kernels]). Constant; false for every other record.
  bool completes = false;
  // A native kernel that takes 0-d CPU tensor operands as they are (Note
  // [CPU scalars as kernel arguments] in plugin_api.h). Constant.
  bool cpu_scalars = false;
};

class OperatorEntry {
 public:
  explicit OperatorEntry(OperatorName name);
  OperatorEntry(const OperatorEntry&) = delete;
  OperatorEntry& operator=(const OperatorEntry&) = delete;

  const OperatorName& name() const { return name_; }
  // "ns::name.overload", kept so that it can be handed out as a C string.
  const std::string& qualifiedName() const { return qualified_name_; }
  // The schema, or nullptr while the op is not defined.
  const FunctionSchema* schema() const { return schema_.load(std::memory_order_acquire); }

  // The record in the slot of the highest key of `ks` that is not a
  // fallthrough for this op, before the dtype rule (Note [Declared dtypes]):
  // what serves calls in general, not necessarily this call. To run a
  // kernel, use lookup(). Lock-free (Note [Lock-free dispatch]).
  const KernelRecord& slotFor(DispatchKeySet ks) const {
    uint64_t bits = ks.raw() & dispatchable_.load(std::memory_order_relaxed);
    int slot = bits ? 63 - __builtin_clzll(bits) : 0;
    return *table_[slot].load(std::memory_order_acquire);
  }
  // The hot path: the record that serves a call with key set `ks` and these
  // (unboxed) arguments: slotFor(ks), unless its kernel declares dtypes
  // that some tensor argument's dtype is not in (Note [Declared dtypes]).
  template <typename... Args>
  const KernelRecord& lookup(DispatchKeySet ks, const Args&... args) const {
    if (const uint64_t a = accepted_dtypes_.load(std::memory_order_relaxed); a != 0) [[unlikely]] {
      if (!detail::argsDtypesIn(a, args...)) refuseUnboxed(args...);
    }
    return servingFrom(&slotFor(ks), args...);
  }
  // lookup() for a boxed call whose arguments are the top of `stack` (as
  // many as the schema has); without `check_accepted`, for arguments this
  // op has already checked (OperatorHandle::redispatchBoxedSameArguments).
  const KernelRecord& lookupBoxed(DispatchKeySet ks, const Stack& stack, bool check_accepted = true) const {
    if (check_accepted && accepted_dtypes_.load(std::memory_order_relaxed) != 0) [[unlikely]]
      checkAcceptedDtypes(stack);
    const KernelRecord& r = slotFor(ks);
    if (r.dtypes != 0) [[unlikely]]
      return servingRecord(r, stack);
    return r;
  }
  // The record that serves a boxed call with these arguments when `slot` is
  // what the slot holds: `slot`, or where its declared dtypes send the call.
  const KernelRecord& servingRecord(const KernelRecord& slot, const Stack& stack) const;
  // lookup()'s dtype rule from record `r` on: `r`, or where the declared
  // dtypes of `r` (and of the records it sends refused calls to) send a
  // call with these arguments.
  template <typename... Args>
  const KernelRecord& servingFrom(const KernelRecord* r, const Args&... args) const {
    if (r->dtypes != 0) [[unlikely]] {
      const uint64_t exempt = dtype_fixed_args_.load(std::memory_order_relaxed);
      while (r->dtypes != 0 && !detail::argsDtypesIn(r->dtypes, exempt, args...))
        r = r->declined.load(std::memory_order_acquire);
    }
    return *r;
  }
  // Note [Declined calls]: the record of the native kernel whose state is
  // `functor`, found the way the call reached it (slotFor(ks), then records'
  // `declined`, which a declared dtype or an earlier decline followed), or
  // nullptr if it is no longer there (the table changed while it ran).
  const KernelRecord* recordOf(DispatchKeySet ks, const OperatorKernel* functor) const {
    for (const KernelRecord* r = &slotFor(ks); r != nullptr; r = r->declined.load(std::memory_order_acquire))
      if (r->kernel.functor() == functor) return r;
    return nullptr;
  }
  // Calls that the native kernel at backend key k declined at run time.
  uint64_t declinedCalls(DispatchKey k) const { return stats_[static_cast<int>(k)].declined.load(); }
  void recordDecline(DispatchKey k) const {
    stats_[static_cast<int>(k)].declined.fetch_add(1, std::memory_order_relaxed);
  }
  // Note [Dtypes an operator accepts]
  // An operator may refuse tensor arguments of some dtypes whatever kernel
  // would serve them: every call (typed, boxed, redispatched, skipping the
  // meta) checks its tensor arguments (plain, in lists, present optionals)
  // against the mask before choosing a kernel (once: a kernel that passes
  // its call's own arguments on uses
  // OperatorHandle::redispatchBoxedSameArguments), and throws
  // kInvalidArgument naming the op, the argument, its dtype, the accepted
  // dtypes and `note` (what to do instead). The standard operators use it for uint16, uint32
  // and uint64, which only some of them serve (docs/operators.md, "Dtypes"); 0 (the
  // default) accepts every dtype. Set while the op is registered, before it
  // is called; `note` must outlive the process (a literal).
  void setAcceptedDtypes(uint64_t mask, const char* note) {
    accepted_note_.store(note, std::memory_order_relaxed);
    accepted_dtypes_.store(mask, std::memory_order_release);
  }
  uint64_t acceptedDtypes() const { return accepted_dtypes_.load(std::memory_order_acquire); }

  // What to do when a call finds no kernel for its key: appended to the
  // missing-kernel error ("the collectives' CPU engine is the mpi plugin;
  // ..."). Set by the op's definer while it is registered; `hint` must
  // outlive the process (a literal). Empty: the generic advice only.
  void setMissingKernelHint(const char* hint) { missing_hint_.store(hint, std::memory_order_release); }
  const char* missingKernelHint() const { return missing_hint_.load(std::memory_order_acquire); }
  // Throws as above if a tensor among the top (schema's argument count)
  // values of `stack` has a dtype the op does not accept.
  void checkAcceptedDtypes(const Stack& stack) const;

  // Note [Declared dtypes]: bit i set iff argument i's dtype is fixed by the
  // op's rule (an index, a mask, a bool or int64 result), not chosen by the
  // caller: a kernel's declared dtypes do not apply to it, so an
  // index_select.out declaring float32 serves a float32 self with its int64
  // index. Set by the op's definer before it is called (the standard
  // operators: dispatcher/ops, Note [Dtype-fixed arguments]).
  void setDtypeFixedArguments(uint64_t mask) { dtype_fixed_args_.store(mask, std::memory_order_release); }
  uint64_t dtypeFixedArguments() const { return dtype_fixed_args_.load(std::memory_order_acquire); }

  // Bit i set iff argument i is a tensor (or tensor list) the op writes
  // through an alias, `Tensor(a!)`: the arguments whose version counters
  // each call bumps (Note [Version counters]). 0 while the op is undefined.
  uint64_t writtenArguments() const { return written_args_.load(std::memory_order_relaxed); }

  // The op's meta kernel (Note [Meta kernels]), or nullptr.
  const KernelRecord* meta() const { return meta_.load(std::memory_order_acquire); }
  const KernelRecord& slot(DispatchKey k) const { return *table_[static_cast<int>(k)].load(std::memory_order_acquire); }

  // CPU-fallback statistics for calls that arrived with backend key `k`.
  uint64_t fallbackCalls(DispatchKey k) const { return stats_[static_cast<int>(k)].calls.load(); }
  uint64_t fallbackBytes(DispatchKey k) const { return stats_[static_cast<int>(k)].bytes.load(); }
  // Counts one CPU-fallback call from backend key k that moved `bytes`.
  void recordFallback(DispatchKey k, uint64_t bytes) const {
    stats_[static_cast<int>(k)].calls.fetch_add(1, std::memory_order_relaxed);
    stats_[static_cast<int>(k)].bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  // True exactly once per (op, key): whoever gets true prints the warning.
  bool claimFallbackWarning(DispatchKey k) const {
    return !stats_[static_cast<int>(k)].warned.exchange(true, std::memory_order_relaxed);
  }
  // The key whose slot serves `ks` (what lookup() would pick).
  DispatchKey resolveKey(DispatchKeySet ks) const {
    return (ks & DispatchKeySet::fromRaw(dispatchable_.load(std::memory_order_relaxed))).highestPriorityKey();
  }

 private:
  friend class Dispatcher;

  struct FallbackStats {
    std::atomic<uint64_t> calls{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> declined{0};  // Note [Declined calls]
    std::atomic<bool> warned{false};
  };

  const OperatorName name_;
  const std::string qualified_name_;
  std::atomic<const FunctionSchema*> schema_{nullptr};
  std::array<std::atomic<const KernelRecord*>, kNumDispatchKeys> table_;
  // Bit k set iff slot k is not a fallthrough.
  std::atomic<uint64_t> dispatchable_{0};
  std::atomic<const KernelRecord*> meta_{nullptr};
  std::atomic<uint64_t> written_args_{0};
  std::atomic<uint64_t> accepted_dtypes_{0};   // Note [Dtypes an operator accepts]
  std::atomic<uint64_t> dtype_fixed_args_{0};  // setDtypeFixedArguments
  std::atomic<const char*> accepted_note_{""};
  std::atomic<const char*> missing_hint_{""};
  template <typename... Args>
  [[noreturn, gnu::cold, gnu::noinline]] void refuseUnboxed(const Args&... args) const {
    Stack stack;
    stack.reserve(sizeof...(Args));
    (detail::ArgTraits<std::decay_t<Args>>::push(stack, args), ...);
    checkAcceptedDtypes(stack);
    std::abort();  // unreachable: the arguments that failed argsDtypesIn fail here too
  }
  mutable std::array<FallbackStats, kNumDispatchKeys> stats_;

  // Registration state: only the Dispatcher reads or writes it, under its lock.
  std::string def_debug_ ABSL_GUARDED_BY(detail::registrationMutex());
  std::array<std::vector<const KernelRecord*>, kNumDispatchKeys> impls_ ABSL_GUARDED_BY(detail::registrationMutex());
  std::vector<const KernelRecord*> composites_ ABSL_GUARDED_BY(detail::registrationMutex());
  std::vector<const KernelRecord*> metas_ ABSL_GUARDED_BY(detail::registrationMutex());  // the newest is meta_
  // Note [Kernels for operators defined later]: the impls_ registered with
  // registerImplWhenDefined, and those of them that do not fit the current
  // schema, with why (empty while the op has no schema).
  std::vector<const KernelRecord*> when_defined_ ABSL_GUARDED_BY(detail::registrationMutex());
  std::vector<std::pair<const KernelRecord*, std::string>> unfit_ ABSL_GUARDED_BY(detail::registrationMutex());
};

}  // namespace backplane
