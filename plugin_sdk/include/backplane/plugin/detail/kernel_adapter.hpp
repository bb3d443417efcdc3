// bp::detail::KernelTraits and kernelAdapter: the compile-time facts about a
// kernel `R f(P...)` (arity, signature string), the BP_KernelFn that checks
// a call, converts its arguments, runs the kernel and stores its returns
// (Note [Borrowed kernel arguments]), and its typed entry (typedEntry, Note
// [Typed kernel entries] in plugin_api.h).
// Not part of the API: names in bp::detail may change in any release.
#ifndef BACKPLANE_PLUGIN_DETAIL_KERNEL_ADAPTER_HPP_
#define BACKPLANE_PLUGIN_DETAIL_KERNEL_ADAPTER_HPP_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backplane/plugin/detail/call_packing.hpp"
#include "backplane/plugin/detail/concat.hpp"
#include "backplane/plugin/detail/host_table.hpp"
#include "backplane/plugin/detail/value_traits.hpp"
#include "backplane/plugin/errors.hpp"
#include "backplane/plugin/tensor.hpp"
#include "backplane/plugin/value_types.hpp"
#include "backplane/plugin_api.h"

namespace bp {
namespace detail {

template <class... P>
struct FirstIsDispatchKeys : std::false_type {};
template <class P0, class... P>
struct FirstIsDispatchKeys<P0, P...> : std::is_same<std::remove_cv_t<std::remove_reference_t<P0>>, DispatchKeys> {};

template <class P>
using Decay = std::remove_cv_t<std::remove_reference_t<P>>;

template <class P>
struct IsValueOrConstRef
    : std::bool_constant<!std::is_lvalue_reference_v<P> || std::is_const_v<std::remove_reference_t<P>>> {};

// Compile-time facts about a kernel R(P...): arity and signature string.
template <class R, class... P>
struct KernelTraits {
  static_assert(std::conjunction_v<IsValueOrConstRef<P>...>,
                "bp: kernel parameters must be taken by value or by const reference");
  static constexpr bool kTakesKeys = FirstIsDispatchKeys<P...>::value;
  static constexpr size_t kNumArgs = sizeof...(P) - (kTakesKeys ? 1 : 0);
  static constexpr size_t kNumReturns = ReturnTraits<R>::kCount;

  // "(Tensor, Scalar) -> Tensor" (Note [Canonical C++ signatures] on the host).
  static std::string signature() {
    std::string s = "(";
    appendParams(s, std::index_sequence_for<P...>());
    return s + ") -> " + ReturnTraits<R>::name();
  }

 private:
  template <size_t... I>
  static void appendParams(std::string& s, std::index_sequence<I...>) {
    bool first = true;
    (appendParam<I, Decay<P>>(s, first), ...);
    (void)first;
  }
  template <size_t I, class D>
  static void appendParam(std::string& s, bool& first) {
    if constexpr (!(kTakesKeys && I == 0)) {
      if (!first) s += ", ";
      s += ArgTraits<D>::name();
      first = false;
    }
  }
};

// Throws the error for a call whose shape does not fit the kernel's arity
// (checkCall found one): out of line, so that the check itself stays a few
// compares inside each adapter.
#if defined(__GNUC__)
[[gnu::cold, gnu::noinline]]
#endif
[[noreturn]] inline void
badCall(const BP_KernelCall* call, size_t num_args, size_t num_returns) {
  if (call == nullptr) fail(BP_INTERNAL, "a kernel was called with a NULL BP_KernelCall");
  if (call->struct_size < BP_KernelCall_STRUCT_SIZE) {
    fail(BP_INTERNAL, concat("BP_KernelCall.struct_size is ", call->struct_size, ", expected at least ",
                             size_t{BP_KernelCall_STRUCT_SIZE}));
  }
  if (call->num_args != num_args || call->num_returns != num_returns) {
    fail(BP_INTERNAL, concat("the kernel for ", opName(call->op), " takes ", num_args, " arguments and returns ",
                             num_returns, " values, but was called with ", call->num_args, " arguments and room for ",
                             call->num_returns, " returns; the kernel's C++ signature does not match the schema"));
  }
  if ((num_args != 0 && call->args == nullptr) || (num_returns != 0 && call->returns == nullptr)) {
    fail(BP_INTERNAL, concat("the kernel for ", opName(call->op), " was called with NULL args or returns"));
  }
  fail(BP_INTERNAL, "a kernel's call failed its shape check");  // unreachable while checkCall's test matches
}

// Validates a call's shape against the kernel's arity.
inline void checkCall(const BP_KernelCall* call, size_t num_args, size_t num_returns) {
  if (call == nullptr || call->struct_size < BP_KernelCall_STRUCT_SIZE || call->num_args != num_args ||
      call->num_returns != num_returns || (num_args != 0 && call->args == nullptr) ||
      (num_returns != 0 && call->returns == nullptr))
    badCall(call, num_args, num_returns);
}

// Parameter I of a kernel: the call's keys, or argument I (- 1 with keys).
// Note [Borrowed kernel arguments]
// The host keeps every argument alive for the duration of a kernel call, so
// a `const bp::Tensor&` parameter is handed a non-owning view: no retain and
// no release, which keeps crossing the ABI as cheap as a native call. A
// by-value parameter (which the kernel may keep) gets its own reference.
template <class D, bool kByReference>
struct ArgFetch {
  static D get(const BP_Value& v) { return ArgTraits<D>::get(v); }
};
template <>
struct ArgFetch<Tensor, true> {
  static Tensor get(const BP_Value& v) { return Tensor::unowned(v.u.tensor); }
};

// Argument i of a call: from a BP_KernelCall's array, or made from the C
// argument of a typed entry (Note [Typed kernel entries]; typedValue below),
// so that one convertArg() checks and converts both alike.
template <size_t i>
const BP_Value& argValue(const BP_Value* args) {
  return args[i];
}
template <size_t i, class... C>
decltype(auto) argValue(const std::tuple<C...>& args);

template <bool kTakesKeys, size_t I, class D, bool kByReference, class Args>
D convertArg(const BP_Operator* op, uint64_t keys, const Args& args) {
  if constexpr (kTakesKeys && I == 0) {
    (void)op;
    (void)args;
    return DispatchKeys{keys};
  } else {
    constexpr size_t index = I - (kTakesKeys ? 1 : 0);
    const BP_Value& v = argValue<index>(args);
    if (!ArgTraits<D>::accepts(v.tag)) argumentMismatch(op, index, ArgTraits<D>::name(), v.tag);
    return ArgFetch<D, kByReference>::get(v);
  }
}

// Converts the arguments, runs the kernel and stores its returns; throws.
// Inlined into each adapter, so that a kernel bound at compile time
// (bp::kernel<&f>()) is a direct call, or inlined, inside the one function
// the host calls.
// (clang-format 14 misreads the template arguments below the #if'd attribute.)
// clang-format off
template <class R, class... P, class F, class Args, size_t... I>
#if defined(__GNUC__)
[[gnu::always_inline]] inline
#endif
void runKernelOn(F&& fn, const BP_Operator* op, uint64_t keys, const Args& args, BP_Value* rets,
                 std::index_sequence<I...>) {
  using Traits = KernelTraits<R, P...>;
  (void)op, (void)keys, (void)args, (void)rets;  // unused by a kernel without parameters or returns
  // Braced initialization converts the arguments left to right, so the
  // first bad argument is the one reported.
  std::tuple<Decay<P>...> a{
      convertArg<Traits::kTakesKeys, I, Decay<P>,
                 std::is_lvalue_reference_v<P> && std::is_const_v<std::remove_reference_t<P>>>(op, keys, args)...};
  (void)a;
  if constexpr (std::is_void_v<R>) {
    fn(std::get<I>(std::move(a))...);
  } else {
    ReturnTraits<R>::store(fn(std::get<I>(std::move(a))...), rets, op);
  }
}

// The body of a BP_KernelFn: checks the call's shape, then runKernelOn().
template <class R, class... P, class F, size_t... I>
#if defined(__GNUC__)
[[gnu::always_inline]] inline
#endif
BP_Error* runKernel(F&& fn, const BP_KernelCall* call, std::index_sequence<I...> seq) noexcept {
  using Traits = KernelTraits<R, P...>;
  try {
    checkCall(call, Traits::kNumArgs, Traits::kNumReturns);
    runKernelOn<R, P...>(fn, call->op, call->dispatch_keys, call->args, call->returns, seq);
    return nullptr;
  } catch (...) {
    return currentExceptionToError();
  }
}
// clang-format on

// The BP_KernelFn for kernel type R(P...): `ctx` is the kernel's function
// pointer (reinterpret_cast to void*). Checks the call's arity, converts each
// argument (a wrong tag is BP_INVALID_ARGUMENT naming the argument and the
// op), calls the kernel, stores its returns (new tensor references for the
// host) and turns exceptions into errors. Reentrant; no shared state.
template <class R, class... P>
BP_Error* kernelAdapter(void* ctx, const BP_KernelCall* call) noexcept {
  auto fn = reinterpret_cast<R (*)(P...)>(ctx);
  return runKernel<R, P...>(fn, call, std::index_sequence_for<P...>());
}

// ---------------------------------------------- typed entries (ABI 1.14)
// Note [Typed kernel entries] in plugin_api.h: the same kernel taking its
// arguments as C arguments. Each C argument is read as the BP_Value a
// BP_KernelCall would carry (argValue), so that one runKernelOn() converts and
// checks both ways alike (the compiler folds the constant tags away); the
// returns go from BP_Values to the host's pointers.

template <class... T>
struct TypeList {};

// TypedParam<D>::type: the C type of an argument of (decayed) kernel type
// D; typedValue(): the BP_Value a C argument other than a BP_Value* stands
// for.
template <class D>
struct TypedParam {
  using type = const BP_Value*;
};
template <>
struct TypedParam<Tensor> {
  using type = BP_Tensor*;
};
template <>
struct TypedParam<std::optional<Tensor>> {
  using type = BP_Tensor*;
};
template <>
struct TypedParam<int64_t> {
  using type = int64_t;
};
template <>
struct TypedParam<double> {
  using type = double;
};
template <>
struct TypedParam<bool> {
  using type = uint8_t;
};
inline BP_Value typedValue(BP_Tensor* t) noexcept {
  BP_Value v{};
  v.tag = t != nullptr ? BP_VALUE_TENSOR : BP_VALUE_NONE;
  v.u.tensor = t;
  return v;
}
inline BP_Value typedValue(int64_t i) noexcept {
  BP_Value v{};
  v.tag = BP_VALUE_INT;
  v.u.i = i;
  return v;
}
inline BP_Value typedValue(double d) noexcept {
  BP_Value v{};
  v.tag = BP_VALUE_DOUBLE;
  v.u.d = d;
  return v;
}
inline BP_Value typedValue(uint8_t b) noexcept {
  BP_Value v{};
  v.tag = BP_VALUE_BOOL;
  v.u.b = b;
  return v;
}

// A typed entry's argument i: the host's BP_Value itself where it passes
// one (read in place, field by field, as from a BP_KernelCall: no copy of
// the whole value that a store of its fields cannot forward to), else the
// value its C argument stands for.
inline constexpr BP_Value kNoneValue{};
template <size_t i, class... C>
decltype(auto) argValue(const std::tuple<C...>& args) {
  const auto& c = std::get<i>(args);
  if constexpr (std::is_same_v<std::remove_cv_t<std::remove_reference_t<decltype(c)>>, const BP_Value*>) {
    return static_cast<const BP_Value&>(c != nullptr ? *c : kNoneValue);
  } else {
    return typedValue(c);
  }
}

// TypedOut<T>::type: the C pointer a return of type T is stored through;
// putTyped(): stores the BP_Value the kernel's return became through it.
template <class T>
struct TypedOut {
  using type = BP_Value*;  // bp::Scalar
};
template <>
struct TypedOut<Tensor> {
  using type = BP_Tensor**;
};
template <>
struct TypedOut<int64_t> {
  using type = int64_t*;
};
template <>
struct TypedOut<double> {
  using type = double*;
};
template <>
struct TypedOut<bool> {
  using type = uint8_t*;
};
inline void putTyped(const BP_Value& v, BP_Value* out) noexcept { *out = v; }
inline void putTyped(const BP_Value& v, BP_Tensor** out) noexcept {
  *out = v.tag == BP_VALUE_TENSOR ? v.u.tensor : nullptr;  // NONE: a masked-out return
}
inline void putTyped(const BP_Value& v, int64_t* out) noexcept { *out = v.u.i; }
inline void putTyped(const BP_Value& v, double* out) noexcept { *out = v.u.d; }
inline void putTyped(const BP_Value& v, uint8_t* out) noexcept { *out = v.u.b; }

template <class R>
struct TypedReturn {
  using Outs = TypeList<typename TypedOut<R>::type>;
};
template <>
struct TypedReturn<void> {
  using Outs = TypeList<>;
};
template <class... T>
struct TypedReturn<std::tuple<T...>> {
  using Outs = TypeList<typename TypedOut<T>::type...>;
};

// The kernel's parameters as the typed entry lists them: without a leading
// bp::DispatchKeys (the keys always come as dispatch_keys).
template <bool kTakesKeys, class... D>
struct TypedParams {
  using type = TypeList<D...>;
};
template <class D0, class... D>
struct TypedParams<true, D0, D...> {
  using type = TypeList<D...>;
};

// The typed entry of `Run` (a struct whose static run() is runKernelOn()
// for one kernel), given its parameter and out-pointer lists.
template <class Run, class Params, class Outs>
struct TypedEntry;
template <class Run, class... D, class... O>
struct TypedEntry<Run, TypeList<D...>, TypeList<O...>> {
  static BP_Error* fn(void* ctx, const BP_Operator* op, uint64_t keys, typename TypedParam<D>::type... a,
                      O... out) noexcept {
    const std::tuple<typename TypedParam<D>::type...> args{a...};
    BP_Value rets[sizeof...(O) + 1] = {};
    try {
      Run::run(ctx, op, keys, args, rets);
    } catch (...) {
      return currentExceptionToError();
    }
    put(rets, std::index_sequence_for<O...>(), out...);
    return nullptr;
  }

 private:
  template <size_t... I>
  static void put(const BP_Value* rets, std::index_sequence<I...>, O... out) noexcept {
    (putTyped(rets[I], out), ...);
    (void)rets;
  }
};

// The typed entry of a kernel R(P...) run by `Run`.
template <class Run, class R, class... P>
BP_TypedKernelFn typedEntry() {
  using Params = typename TypedParams<KernelTraits<R, P...>::kTakesKeys, Decay<P>...>::type;
  return reinterpret_cast<BP_TypedKernelFn>(&TypedEntry<Run, Params, typename TypedReturn<R>::Outs>::fn);
}

// Run for a kernel whose function pointer is the call's ctx (bp::kernel(&f)).
template <class R, class... P>
struct RunThroughCtx {
  template <class Args>
  static void run(void* ctx, const BP_Operator* op, uint64_t keys, const Args& args, BP_Value* rets) {
    runKernelOn<R, P...>(reinterpret_cast<R (*)(P...)>(ctx), op, keys, args, rets, std::index_sequence_for<P...>());
  }
};

template <class F>
struct FunctionTraits {
  static_assert(kAlwaysFalse<F>, "bp::kernel<F>: F must be a pointer to a function, e.g. bp::kernel<&myKernel>()");
};
template <class R, class... P>
struct FunctionTraits<R (*)(P...)> {
  using Traits = KernelTraits<R, P...>;
  template <auto F>
  static BP_Error* adapter(void*, const BP_KernelCall* call) noexcept {
    return runKernel<R, P...>(F, call, std::index_sequence_for<P...>());
  }
  // Run for the kernel F bound at compile time (bp::kernel<&f>()).
  template <auto F>
  struct Run {
    template <class Args>
    static void run(void*, const BP_Operator* op, uint64_t keys, const Args& args, BP_Value* rets) {
      runKernelOn<R, P...>(F, op, keys, args, rets, std::index_sequence_for<P...>());
    }
  };
  template <auto F>
  static BP_TypedKernelFn typed() {
    return typedEntry<Run<F>, R, P...>();
  }
};
template <class R, class... P>
struct FunctionTraits<R (*)(P...) noexcept> : FunctionTraits<R (*)(P...)> {};

}  // namespace detail
}  // namespace bp

#endif  // BACKPLANE_PLUGIN_DETAIL_KERNEL_ADAPTER_HPP_
