// bp::detail::KernelTraits and kernelAdapter: the compile-time facts about a
// kernel `R f(P...)` (arity, signature string) and the BP_KernelFn that
// checks a call, converts its arguments, runs the kernel and stores its
// returns (Note [Borrowed kernel arguments]).
// Not part of the API: names in bp::detail may change in any release.
#ifndef BACKPLANE_PLUGIN_DETAIL_KERNEL_ADAPTER_HPP_
#define BACKPLANE_PLUGIN_DETAIL_KERNEL_ADAPTER_HPP_

#include <cstddef>
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

template <bool kTakesKeys, size_t I, class D, bool kByReference>
D convertArg(const BP_KernelCall* call) {
  if constexpr (kTakesKeys && I == 0) {
    return DispatchKeys{call->dispatch_keys};
  } else {
    constexpr size_t index = I - (kTakesKeys ? 1 : 0);
    const BP_Value& v = call->args[index];
    if (!ArgTraits<D>::accepts(v.tag)) argumentMismatch(call, index, ArgTraits<D>::name(), v.tag);
    return ArgFetch<D, kByReference>::get(v);
  }
}

// Inlined into each adapter, so that a kernel bound at compile time
// (bp::kernel<&f>()) is a direct call, or inlined, inside the one function
// the host calls.
// (clang-format 14 misreads the template arguments below the #if'd attribute.)
// clang-format off
template <class R, class... P, class F, size_t... I>
#if defined(__GNUC__)
[[gnu::always_inline]] inline
#endif
BP_Error* runKernel(F&& fn, const BP_KernelCall* call, std::index_sequence<I...>) noexcept {
  using Traits = KernelTraits<R, P...>;
  try {
    checkCall(call, Traits::kNumArgs, Traits::kNumReturns);
    // Braced initialization converts the arguments left to right, so the
    // first bad argument is the one reported.
    std::tuple<Decay<P>...> args{
        convertArg<Traits::kTakesKeys, I, Decay<P>,
                   std::is_lvalue_reference_v<P> && std::is_const_v<std::remove_reference_t<P>>>(call)...};
    (void)args;
    if constexpr (std::is_void_v<R>) {
      fn(std::get<I>(std::move(args))...);
    } else {
      ReturnTraits<R>::store(fn(std::get<I>(std::move(args))...), call);
    }
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
};
template <class R, class... P>
struct FunctionTraits<R (*)(P...) noexcept> : FunctionTraits<R (*)(P...)> {};

}  // namespace detail
}  // namespace bp

#endif  // BACKPLANE_PLUGIN_DETAIL_KERNEL_ADAPTER_HPP_
