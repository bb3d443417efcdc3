#pragma once
// The host's side of Note [Typed kernel entries] (plugin_api.h): the
// signatures whose plugin kernels are called unboxed, and the C function
// type a kernel's typed entry has for each. plugin_host.cc calls typed
// entries through TypedFn; abi_rules_test.cc checks at compile time that
// TypedFn is the type the SDK generates for every signature listed here.
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>

#include "backplane/ops/tensor.h"
#include "backplane/plugin_api.h"

namespace backplane::plugin_detail {

template <typename... Sigs>
struct SignatureList {};

// Signatures whose plugin kernels are called without boxing (through
// typed_fn where the kernel has one, else through fn with BP_Values).
// Others are called boxed. docs/plugins.md lists them for vendors.
namespace fast_signature_types {
using T = const Tensor&;
using S = const Scalar&;
using FastSignatures =
    SignatureList<Tensor(T), Tensor(T, T), Tensor(T, T, S), Tensor(T, S), Tensor(T, S, S), Tensor(T, T, T),
                  Tensor(T, T, S, T), Tensor(T, T, T, S, S), Tensor(T, int64_t), Tensor(T, int64_t, bool),
                  Tensor(T, double), Tensor(T, IntArrayRef), Tensor(T, int64_t, int64_t), Tensor(TensorList, int64_t),
                  Tensor(T, bool), Tensor(T, T, T, T), std::tuple<Tensor, Tensor>(T, int64_t, bool), int64_t(T),
                  double(T), bool(T)>;
}  // namespace fast_signature_types
using fast_signature_types::FastSignatures;

// The C type an argument of (decayed) C++ type A is passed as: Tensor and
// Tensor? as BP_Tensor* (NULL when undefined or None), int, float and bool
// as themselves (bool as uint8_t), anything else as a const BP_Value*.
template <typename A>
struct TypedCArg {
  using type = const BP_Value*;
};
template <>
struct TypedCArg<Tensor> {
  using type = BP_Tensor*;
};
template <>
struct TypedCArg<std::optional<Tensor>> {
  using type = BP_Tensor*;
};
template <>
struct TypedCArg<int64_t> {
  using type = int64_t;
};
template <>
struct TypedCArg<double> {
  using type = double;
};
template <>
struct TypedCArg<bool> {
  using type = uint8_t;
};

// The pointer a return of C++ type R is stored through.
template <typename R>
struct TypedCOut;
template <>
struct TypedCOut<Tensor> {
  using type = BP_Tensor**;
};
template <>
struct TypedCOut<int64_t> {
  using type = int64_t*;
};
template <>
struct TypedCOut<double> {
  using type = double*;
};
template <>
struct TypedCOut<bool> {
  using type = uint8_t*;
};

// BP_Error* (void* ctx, const BP_Operator* op, uint64_t dispatch_keys,
// C(A1)..., Out(R0)...) for a kernel Ret(Args...).
template <typename Outs, typename... CArgs>
struct MakeTypedFn;
template <typename... Outs, typename... CArgs>
struct MakeTypedFn<std::tuple<Outs...>, CArgs...> {
  using type = BP_Error* (*)(void*, const BP_Operator*, uint64_t, CArgs..., Outs...);
};
template <typename Ret>
struct TypedCOuts {
  using type = std::tuple<typename TypedCOut<Ret>::type>;
};
template <>
struct TypedCOuts<void> {
  using type = std::tuple<>;
};
template <typename... Rs>
struct TypedCOuts<std::tuple<Rs...>> {
  using type = std::tuple<typename TypedCOut<Rs>::type...>;
};
template <typename Ret, typename... Args>
using TypedFn =
    typename MakeTypedFn<typename TypedCOuts<Ret>::type, typename TypedCArg<std::decay_t<Args>>::type...>::type;

}  // namespace backplane::plugin_detail
