// bp::Kernel and bp::kernel(): a typed C++ kernel `R f(P...)` turned into a
// BP_KernelFn with its signature, ready for Library::impl. Which parameter
// and return types a kernel may use, and how each is read from the call, is
// detail::ArgTraits / ReturnTraits (detail/value_traits.hpp); a kernel with
// any other type fails to compile with a message that lists them. Part of
// <backplane/plugin.hpp>; compiles on its own.
#ifndef BACKPLANE_PLUGIN_KERNEL_HPP_
#define BACKPLANE_PLUGIN_KERNEL_HPP_

#include <string>

#include "backplane/plugin/detail/kernel_adapter.hpp"
#include "backplane/plugin_api.h"

namespace bp {

// A kernel ready to register: the BP_KernelFn, its ctx, its C++ signature
// in the host's notation and its typed entry. Made by bp::kernel().
struct Kernel {
  BP_KernelFn fn;
  void* ctx;
  std::string cpp_signature;
  // BP_KernelDesc.flags (ABI 1.13): BP_KERNEL_* bits.
  uint64_t flags = 0;
  // BP_KernelDesc.typed_fn (ABI 1.14, Note [Typed kernel entries]): the
  // same kernel taking its arguments as C arguments, which the host calls
  // instead of fn where it can. Registered only by a plugin built for 1.14
  // or newer.
  BP_TypedKernelFn typed_fn = nullptr;

  // This kernel with BP_KERNEL_CPU_SCALARS (Note [CPU scalars as kernel
  // arguments] in plugin_api.h): it takes a 0-d cpu tensor operand as it is,
  //   m.impl("mul.out", gpu, bp::kernel(&mul_out).takingCpuScalars());
  Kernel takingCpuScalars() const {
    Kernel k = *this;
    k.flags |= BP_KERNEL_CPU_SCALARS;
    return k;
  }
};

// The signature string of kernel type R(P...), e.g. "(Tensor, Scalar) -> Tensor".
template <class R, class... P>
std::string kernelSignature(R (*)(P...)) {
  return detail::KernelTraits<R, P...>::signature();
}

// A typed kernel called through detail::kernelAdapter with ctx = `fn`.
template <class R, class... P>
Kernel kernel(R (*fn)(P...)) {
  return Kernel{&detail::kernelAdapter<R, P...>, reinterpret_cast<void*>(fn),
                detail::KernelTraits<R, P...>::signature(), 0,
                detail::typedEntry<detail::RunThroughCtx<R, P...>, R, P...>()};
}

// The same kernel with the function bound at compile time (no indirect
// call, ctx unused): m.impl("ns::op", dev, bp::kernel<&myKernel>()).
template <auto F>
Kernel kernel() {
  using FT = detail::FunctionTraits<decltype(F)>;
  return Kernel{&FT::template adapter<F>, nullptr, FT::Traits::signature(), 0, FT::template typed<F>()};
}

}  // namespace bp

#endif  // BACKPLANE_PLUGIN_KERNEL_HPP_
