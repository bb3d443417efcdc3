#pragma once
// KernelFunction: one kernel as the dispatch table stores it: an optional
// unboxed entry point (typed, called without boxing), a boxed entry point
// (always present), and the functor state both receive.

#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backplane/core/error.h"
#include "backplane/dispatch/boxing.h"
#include "backplane/dispatch/dispatch_key.h"
#include "backplane/dispatch/ivalue.h"

namespace backplane {

class OperatorHandle;

// Base of kernel state objects (lambdas with captures, plugin adapters).
class OperatorKernel {
 public:
  virtual ~OperatorKernel() = default;
};

// A boxed kernel: pops its arguments from the top of `stack` and pushes its
// returns. `ks` is the key set the call was dispatched with; a kernel that
// wraps a lower key redispatches with ks & DispatchKeySet::below(its key).
using BoxedKernelFn = void (*)(OperatorKernel* functor, const OperatorHandle& op, DispatchKeySet ks, Stack* stack);

// Wraps a function known at compile time: KernelFunction::makeFromFunction
// (BP_FN(my_kernel)) costs no indirection beyond the table lookup.
template <auto Fn>
struct CompileTimeFunction {};
#define BP_FN(fn) (::backplane::CompileTimeFunction<&(fn)>())

namespace detail {

template <typename... Ts>
struct TypeList {};

template <typename F>
struct FunctionTraits : FunctionTraits<decltype(&F::operator())> {};
template <typename R, typename... P>
struct FunctionTraits<R (*)(P...)> {
  using ret = R;
  using params = TypeList<P...>;
};
template <typename R, typename... P>
struct FunctionTraits<R(P...)> : FunctionTraits<R (*)(P...)> {};
template <typename C, typename R, typename... P>
struct FunctionTraits<R (C::*)(P...) const> : FunctionTraits<R (*)(P...)> {};
template <typename C, typename R, typename... P>
struct FunctionTraits<R (C::*)(P...)> : FunctionTraits<R (*)(P...)> {};

// Splits a leading DispatchKeySet parameter off a kernel's parameter list.
template <typename List>
struct KernelParams {
  static constexpr bool takes_keys = false;
  using args = List;
};
template <typename First, typename... Rest>
struct KernelParams<TypeList<First, Rest...>> {
  static constexpr bool takes_keys = std::is_same_v<std::decay_t<First>, DispatchKeySet>;
  using args = std::conditional_t<takes_keys, TypeList<Rest...>, TypeList<First, Rest...>>;
};

[[noreturn]] void throwBadReturnCount(const OperatorHandle& op, size_t expected, size_t got);
[[noreturn]] void throwBadArgumentCount(const OperatorHandle& op, size_t expected, size_t got);

// Note [Errors inside composites]
// Dispatcher::registerComposite gives a stateless composite kernel (BP_FN,
// a lambda without captures) a CompositeContext, naming its op, as the
// functor its adapter otherwise ignores. An error from inside the composite
// whose message names no op of the composite's namespace (a device's
// allocation or copy failing in the composite's own code, a core tensor
// helper) is rethrown with its code and "<op> on <dispatch key>: " in front,
// so that every error an op call raises names an op: the innermost that
// failed. Errors that name an op already are rethrown unchanged. The catch
// costs nothing unless something throws.
struct CompositeContext final : OperatorKernel {
  CompositeContext(std::string qualified_name, std::string namespace_prefix)
      : op(std::move(qualified_name)), ns_prefix(std::move(namespace_prefix)) {}
  std::string op;         // "bp::mm"
  std::string ns_prefix;  // "bp::"
};
// Rethrows the exception being handled, naming `context`'s op unless its
// message names one; call only inside a catch block.
[[noreturn]] void rethrowInComposite(const OperatorKernel* context, DispatchKeySet ks);

// Calls functor type F (stateless F is default-constructed at the call, so
// no state is read) and adapts it to the unboxed and boxed calling
// conventions.
template <typename F, typename Ret, typename ArgList, bool TakesKeys>
struct KernelAdapter;
template <typename F, typename Ret, typename... Params, bool TakesKeys>
struct KernelAdapter<F, Ret, TypeList<Params...>, TakesKeys> {
  static_assert(kAllArgsSupported<Params...>,
                "a kernel parameter type has no schema equivalent; use const Tensor& (backplane/ops/tensor.h), "
                "std::optional<Tensor>, TensorList, int64_t, double, bool, IntArrayRef, "
                "std::string_view, const Scalar&, ScalarType, Device or their optionals");
  static_assert(ReturnTraits<Ret>::supported,
                "a kernel must return void, Tensor, std::tuple<Tensor...>, std::vector<Tensor>, "
                "int64_t, double, bool or Scalar by value (Tensor, not TensorBase: a lambda that "
                "returns emptyTensor(...) or tensorFromVector(...) needs `-> Tensor`)");

  static decltype(auto) invoke(OperatorKernel* k, DispatchKeySet ks, canonical_t<Params>... args) {
    auto call = [&](auto& f) -> Ret {
      if constexpr (TakesKeys)
        return f(ks, toUserArg<Params>(args)...);
      else
        return f(toUserArg<Params>(args)...);
    };
    if constexpr (std::is_empty_v<F> && std::is_default_constructible_v<F>) {
      F f{};
      return call(f);
    } else {
      return call(*static_cast<F*>(k));
    }
  }
  static constexpr bool kStateless = std::is_empty_v<F> && std::is_default_constructible_v<F>;
  static Ret unboxed(OperatorKernel* k, DispatchKeySet ks, canonical_t<Params>... args) {
    if constexpr (kStateless) {
      // k is null, or a CompositeContext (Note [Errors inside composites]).
      try {
        return invoke(k, ks, args...);
      } catch (...) {
        if (k != nullptr) rethrowInComposite(k, ks);
        throw;
      }
    } else {
      return invoke(k, ks, args...);
    }
  }
  static void boxed(OperatorKernel* k, const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
    constexpr size_t n = sizeof...(Params);
    if (stack->size() < n) [[unlikely]]
      throwBadArgumentCount(op, n, stack->size());
    if constexpr (kStateless) {
      try {
        boxedImpl(k, ks, stack, stack->data() + (stack->size() - n), std::index_sequence_for<Params...>());
      } catch (...) {
        if (k != nullptr) rethrowInComposite(k, ks);
        throw;
      }
    } else {
      boxedImpl(k, ks, stack, stack->data() + (stack->size() - n), std::index_sequence_for<Params...>());
    }
  }
  // The arguments are popped after the call, so unboxing may take their
  // tensors (ArgTraits::fromIValue) instead of copying them.
  template <size_t... I>
  static void boxedImpl(OperatorKernel* k, DispatchKeySet ks, Stack* stack, IValue* args, std::index_sequence<I...>) {
    constexpr size_t n = sizeof...(Params);
    if constexpr (std::is_void_v<Ret>) {
      invoke(k, ks, ArgTraits<arg_key_t<Params>>::fromIValue(args[I])...);
      stack->resize(stack->size() - n);
    } else {
      Ret r = invoke(k, ks, ArgTraits<arg_key_t<Params>>::fromIValue(args[I])...);
      stack->resize(stack->size() - n);
      ReturnTraits<Ret>::push(*stack, std::move(r));
    }
  }
};

// Functor holders for the ways a kernel can be given.
template <auto Fn>
struct StaticFunction {
  template <typename... A>
  decltype(auto) operator()(A&&... a) const {
    return Fn(std::forward<A>(a)...);
  }
};
template <typename FnPtr>
struct RuntimeFunction final : OperatorKernel {
  explicit RuntimeFunction(FnPtr f) : fn(f) {}
  template <typename... A>
  decltype(auto) operator()(A&&... a) const {
    return fn(std::forward<A>(a)...);
  }
  FnPtr fn;
};
template <typename L>
struct LambdaHolder final : OperatorKernel {
  explicit LambdaHolder(L l) : lambda(std::move(l)) {}
  template <typename... A>
  decltype(auto) operator()(A&&... a) {
    return lambda(std::forward<A>(a)...);
  }
  L lambda;
};

template <typename T>
struct IsCompileTimeFunction : std::false_type {};
template <auto Fn>
struct IsCompileTimeFunction<CompileTimeFunction<Fn>> : std::true_type {};

// Note [Scratch stacks]
// An unboxed call of a kernel that is only boxed (the Autograd fallback, a
// plugin's boxed kernel) boxes its arguments into a Stack. Each thread keeps
// a few such stacks and reuses them, so that boxing allocates nothing once
// a thread has made a call as deep as the current one. The stack comes back
// emptied (its IValues released) whether the call returns or throws.
Stack* acquireScratchStack();
void releaseScratchStack(Stack* stack) noexcept;
class ScratchStack {
 public:
  ScratchStack() : stack_(acquireScratchStack()) {}
  ~ScratchStack() { releaseScratchStack(stack_); }
  ScratchStack(const ScratchStack&) = delete;
  ScratchStack& operator=(const ScratchStack&) = delete;
  Stack& get() { return *stack_; }

 private:
  Stack* stack_;
};

template <typename Ret>
Ret popReturn(const OperatorHandle& op, Stack& stack) {
  constexpr size_t n = ReturnTraits<Ret>::count;
  if (stack.size() != n) [[unlikely]]
    throwBadReturnCount(op, n, stack.size());
  if constexpr (std::is_void_v<Ret>) {
    return;
  } else if constexpr (n == 1) {
    return ReturnTraits<Ret>::pop(stack[0]);
  } else {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return Ret(ReturnTraits<std::tuple_element_t<I, Ret>>::pop(stack[I])...);
    }
    (std::make_index_sequence<n>());
  }
}

}  // namespace detail

class KernelFunction {
 public:
  // An invalid kernel (what an empty table slot would hold).
  KernelFunction() = default;

  bool isValid() const { return boxed_ != nullptr; }
  bool isFallthrough() const { return boxed_ == &fallthroughKernel; }
  bool hasUnboxed() const { return unboxed_ != nullptr; }
  // "(Tensor, Scalar) -> Tensor" for unboxed kernels and for boxed ones made
  // from parts that declare one (the dispatcher checks it against the
  // schema); empty for other boxed kernels, which take any stack.
  const std::string& cppSignature() const { return cpp_signature_; }
  // The state passed to the kernel on every call (may be null): identifies
  // the kernel (Note [Declined calls]).
  const OperatorKernel* functor() const { return functor_.get(); }

  // A kernel that skips its key: dispatch continues with the next key down.
  static KernelFunction makeFallthrough();

  // A boxed kernel. `functor` (may be null) is passed to `fn` on every call.
  static KernelFunction makeFromBoxedFunction(BoxedKernelFn fn, std::shared_ptr<OperatorKernel> functor = nullptr) {
    KernelFunction k;
    k.boxed_ = fn;
    k.functor_ = std::move(functor);
    return k;
  }

  // A kernel from its parts, for adapters that produce their own entry
  // points (plugin kernels). `unboxed` may be null; if not, it must have the
  // type Ret(*)(OperatorKernel*, DispatchKeySet, Args...) of the canonical
  // signature that `cpp_signature` names (Note [Canonical C++ signatures]).
  // A boxed-only kernel may still name the signature it was written for, to
  // have it checked; empty means it takes any stack.
  static KernelFunction makeFromParts(std::shared_ptr<OperatorKernel> functor, BoxedKernelFn boxed, void* unboxed,
                                      std::string cpp_signature) {
    KernelFunction k;
    k.functor_ = std::move(functor);
    k.boxed_ = boxed;
    k.unboxed_ = unboxed;
    k.cpp_signature_ = std::move(cpp_signature);
    return k;
  }

  // An unboxed kernel given as BP_FN(fn): the fastest form.
  template <auto Fn>
  static KernelFunction makeFromFunction(CompileTimeFunction<Fn> = {}) {
    using Traits = detail::FunctionTraits<decltype(Fn)>;
    return makeFromFunctor<detail::StaticFunction<Fn>, Traits>(nullptr);
  }
  // An unboxed kernel given as a function pointer known at run time.
  template <typename R, typename... P>
  static KernelFunction makeFromFunctionPointer(R (*fn)(P...)) {
    BP_CHECK(fn != nullptr, "makeFromFunctionPointer: null function pointer");
    using Holder = detail::RuntimeFunction<R (*)(P...)>;
    return makeFromFunctor<Holder, detail::FunctionTraits<R (*)(P...)>>(std::make_shared<Holder>(fn));
  }
  // An unboxed kernel given as a lambda (with or without captures).
  template <typename L>
  static KernelFunction makeFromLambda(L&& lambda) {
    using D = std::decay_t<L>;
    using Traits = detail::FunctionTraits<D>;
    if constexpr (std::is_empty_v<D> && std::is_default_constructible_v<D>) {
      return makeFromFunctor<D, Traits>(nullptr);
    } else {
      using Holder = detail::LambdaHolder<D>;
      return makeFromFunctor<Holder, Traits>(std::make_shared<Holder>(std::forward<L>(lambda)));
    }
  }
  // Any of the above, chosen by the argument's type.
  template <typename F>
  static KernelFunction make(F&& f) {
    using D = std::decay_t<F>;
    if constexpr (std::is_same_v<D, KernelFunction>)
      return std::forward<F>(f);
    else if constexpr (std::is_pointer_v<D> && std::is_function_v<std::remove_pointer_t<D>>)
      return makeFromFunctionPointer(f);
    else if constexpr (std::is_function_v<std::remove_reference_t<F>>)
      return makeFromFunctionPointer(&f);
    else if constexpr (detail::IsCompileTimeFunction<D>::value)
      return makeFromFunction(D());
    else
      return makeFromLambda(std::forward<F>(f));
  }

  // Calls the kernel unboxed when it has an unboxed entry, else boxes the
  // arguments. Args must be the canonical signature (Note [Canonical C++
  // signatures]); OperatorHandle::typed checks that.
  template <typename Ret, typename... Args>
  Ret call(const OperatorHandle& op, DispatchKeySet ks, Args... args) const {
    if (unboxed_) [[likely]] {
      using Fn = Ret (*)(OperatorKernel*, DispatchKeySet, Args...);
      return reinterpret_cast<Fn>(unboxed_)(functor_.get(), ks, args...);
    }
    detail::ScratchStack scratch;  // Note [Scratch stacks]
    Stack& stack = scratch.get();
    (detail::ArgTraits<std::decay_t<Args>>::push(stack, args), ...);
    boxed_(functor_.get(), op, ks, &stack);
    return detail::popReturn<Ret>(op, stack);
  }

  void callBoxed(const OperatorHandle& op, DispatchKeySet ks, Stack* stack) const {
    boxed_(functor_.get(), op, ks, stack);
  }

  // For Dispatcher::registerComposite (Note [Errors inside composites]):
  // gives a stateless kernel a CompositeContext; other kernels keep their
  // functor (their errors are not renamed).
  void setCompositeContext(std::string qualified_name, std::string namespace_prefix) {
    if (stateless_ && !functor_)
      functor_ = std::make_shared<detail::CompositeContext>(std::move(qualified_name), std::move(namespace_prefix));
  }

 private:
  template <typename F, typename Traits>
  static KernelFunction makeFromFunctor(std::shared_ptr<OperatorKernel> functor) {
    using Params = detail::KernelParams<typename Traits::params>;
    using Adapter = detail::KernelAdapter<F, typename Traits::ret, typename Params::args, Params::takes_keys>;
    KernelFunction k;
    k.functor_ = std::move(functor);
    k.boxed_ = &Adapter::boxed;
    k.unboxed_ = reinterpret_cast<void*>(&Adapter::unboxed);
    k.cpp_signature_ = signatureOf<typename Traits::ret>(typename Params::args());
    k.stateless_ = Adapter::kStateless;
    return k;
  }
  template <typename Ret, typename... P>
  static std::string signatureOf(detail::TypeList<P...>) {
    return detail::cppSignatureString<Ret, P...>();
  }
  static void fallthroughKernel(OperatorKernel*, const OperatorHandle& op, DispatchKeySet ks, Stack* stack);

  std::shared_ptr<OperatorKernel> functor_;
  BoxedKernelFn boxed_ = nullptr;
  void* unboxed_ = nullptr;
  std::string cpp_signature_;
  bool stateless_ = false;  // an adapter of a stateless functor (Note [Errors inside composites])
};

}  // namespace backplane
