#pragma once
// The host's side of Note [Typed kernel entries] (plugin_api.h): the
// signatures whose plugin kernels are called unboxed, and the C function
// type a kernel's typed entry has for each. plugin_host.cc calls typed
// entries through TypedFn; abi_rules_test.cc checks at compile time that
// TypedFn is the type the SDK generates for every signature listed here.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "absl/container/flat_hash_map.h"
#include "backplane/dispatch/boxing.h"
#include "backplane/ops/tensor.h"
#include "backplane/plugin_api.h"

namespace backplane::plugin_detail {

template <typename... Sigs>
struct SignatureList {};

// Sig's signature string ("(Tensor, Scalar) -> Tensor", the notation of
// cppSignatureString and of a plugin kernel's cpp_signature).
template <typename Sig>
struct SignatureOf;
template <typename Ret, typename... Args>
struct SignatureOf<Ret(Args...)> {
  // A caller's typed<Sig>() spells the canonical types, and the host's
  // adapters are called through a pointer of the caller's type.
  static_assert((std::is_same_v<Args, backplane::detail::canonical_t<Args>> && ...),
                "typed_calls.h lists a signature with a parameter type that is not canonical");
  static std::string string() { return backplane::detail::cppSignatureString<Ret, Args...>(); }
};

// Adapter<Sig>::value() for each listed signature, by its signature string:
// plugin_host.cc's unboxed adapters, typed_calls_from_stack.cc's typed
// calls from a stack.
template <typename Value, template <typename> class Adapter, typename... Sigs>
absl::flat_hash_map<std::string, Value> makeSignatureTable(SignatureList<Sigs...>) {
  absl::flat_hash_map<std::string, Value> table;
  (table.emplace(SignatureOf<Sigs>::string(), Adapter<Sigs>::value()), ...);
  return table;
}

// Signatures whose plugin kernels are called without boxing (through
// typed_fn where the kernel has one, else through fn with BP_Values): the
// canonical signature (Note [Canonical C++ signatures]) of every op the
// host defines, the standard table's (bp::) and the collectives'
// (comm::), so that a plugin kernel of one never pays for a Stack;
// abi_rules_test.cc walks those ops and fails on one whose signature is
// missing here. Also (Tensor) -> int, float and bool, for plugins' own
// queries. Not listed, so called boxed:
// - bool[] arguments (batch_norm_backward, conv2d_backward and their out=
//   forms): "bool[]" names std::array<bool, N> for every N, so the
//   signature string cannot tell which array type a caller passes;
// - Tensor?[] arguments (index, index_put): their tensors are not
//   contiguous BP_Tensor* in the caller's ArrayRef, so the call would
//   need an array built for it.
// Plugin-defined operators' signatures are called boxed unless they match
// one of these. docs/plugins.md says which for vendors.
namespace fast_signature_types {
using T = const Tensor&;
using OT = const std::optional<Tensor>&;
using S = const Scalar&;
using OS = const std::optional<Scalar>&;
// clang-format off
using FastSignatures = SignatureList<
    Tensor(T),
    Tensor(IntArrayRef, T),
    Tensor(S, T),
    Tensor(T, IntArrayRef),
    Tensor(T, S),
    Tensor(T, T),
    Tensor(T, bool),
    Tensor(T, double),
    Tensor(T, int64_t),
    Tensor(T, std::optional<ScalarType>),
    Tensor(T, std::optional<int64_t>),
    Tensor(T, std::string_view),
    Tensor(TensorList, int64_t),
    Tensor(int64_t, T),
    Tensor(IntArrayRef, S, T),
    Tensor(IntArrayRef, std::optional<ScalarType>, std::optional<Device>),
    Tensor(S, std::optional<ScalarType>, std::optional<Device>),
    Tensor(T, IntArrayRef, IntArrayRef),
    Tensor(T, IntArrayRef, S),
    Tensor(T, IntArrayRef, T),
    Tensor(T, IntArrayRef, bool),
    Tensor(T, OS, OS),
    Tensor(T, S, S),
    Tensor(T, S, T),
    Tensor(T, S, std::optional<std::string_view>),
    Tensor(T, T, OT),
    Tensor(T, T, S),
    Tensor(T, T, T),
    Tensor(T, T, bool),
    Tensor(T, T, std::optional<std::string_view>),
    Tensor(T, T, std::string_view),
    Tensor(T, double, T),
    Tensor(T, double, bool),
    Tensor(T, double, double),
    Tensor(T, int64_t, T),
    Tensor(T, int64_t, bool),
    Tensor(T, int64_t, std::optional<ScalarType>),
    Tensor(T, std::optional<IntArrayRef>, bool),
    Tensor(T, std::optional<ScalarType>, T),
    Tensor(T, std::optional<ScalarType>, std::optional<Device>),
    Tensor(T, std::optional<int64_t>, T),
    Tensor(T, std::optional<int64_t>, bool),
    Tensor(T, std::string_view, T),
    Tensor(TensorList, int64_t, T),
    Tensor(int64_t, int64_t, T),
    Tensor(int64_t, std::optional<ScalarType>, std::optional<Device>),
    Tensor(std::string_view, TensorList, std::optional<IntArrayRef>),
    Tensor(IntArrayRef, IntArrayRef, std::optional<ScalarType>, std::optional<Device>),
    Tensor(IntArrayRef, S, std::optional<ScalarType>, std::optional<Device>),
    Tensor(S, S, S, T),
    Tensor(S, S, int64_t, T),
    Tensor(S, S, std::optional<ScalarType>, std::optional<Device>),
    Tensor(T, IntArrayRef, IntArrayRef, T),
    Tensor(T, IntArrayRef, S, T),
    Tensor(T, IntArrayRef, bool, T),
    Tensor(T, IntArrayRef, std::string_view, std::optional<double>),
    Tensor(T, OS, OS, T),
    Tensor(T, S, S, S),
    Tensor(T, S, S, T),
    Tensor(T, S, std::optional<ScalarType>, std::optional<Device>),
    Tensor(T, S, std::optional<std::string_view>, T),
    Tensor(T, ScalarType, bool, bool),
    Tensor(T, T, OT, T),
    Tensor(T, T, S, T),
    Tensor(T, T, T, T),
    Tensor(T, T, bool, T),
    Tensor(T, T, bool, bool),
    Tensor(T, T, int64_t, ScalarType),
    Tensor(T, T, std::optional<int64_t>, std::optional<int64_t>),
    Tensor(T, T, std::optional<std::string_view>, T),
    Tensor(T, T, std::string_view, T),
    Tensor(T, bool, int64_t, bool),
    Tensor(T, double, double, T),
    Tensor(T, double, int64_t, int64_t),
    Tensor(T, double, std::optional<IntArrayRef>, bool),
    Tensor(T, int64_t, T, S),
    Tensor(T, int64_t, T, T),
    Tensor(T, int64_t, T, bool),
    Tensor(T, int64_t, bool, T),
    Tensor(T, int64_t, bool, std::optional<ScalarType>),
    Tensor(T, int64_t, std::optional<ScalarType>, T),
    Tensor(T, int64_t, std::optional<int64_t>, std::optional<int64_t>),
    Tensor(T, std::optional<IntArrayRef>, OS, bool),
    Tensor(T, std::optional<IntArrayRef>, bool, T),
    Tensor(T, std::optional<IntArrayRef>, bool, bool),
    Tensor(T, std::optional<IntArrayRef>, bool, std::optional<ScalarType>),
    Tensor(T, std::optional<double>, std::optional<double>, std::optional<double>),
    Tensor(T, std::optional<int64_t>, bool, T),
    Tensor(int64_t, int64_t, std::optional<ScalarType>, std::optional<Device>),
    Tensor(S, S, S, std::optional<ScalarType>, std::optional<Device>),
    Tensor(S, S, int64_t, std::optional<ScalarType>, std::optional<Device>),
    Tensor(T, Device, ScalarType, bool, bool),
    Tensor(T, S, S, S, T),
    Tensor(T, T, T, S, S),
    Tensor(T, T, double, double, bool),
    Tensor(T, T, int64_t, ScalarType, T),
    Tensor(T, T, int64_t, bool, bool),
    Tensor(T, T, int64_t, int64_t, bool),
    Tensor(T, bool, int64_t, bool, T),
    Tensor(T, double, double, int64_t, int64_t),
    Tensor(T, double, std::optional<IntArrayRef>, bool, T),
    Tensor(T, int64_t, T, S, T),
    Tensor(T, int64_t, T, T, S),
    Tensor(T, int64_t, T, T, T),
    Tensor(T, int64_t, T, bool, T),
    Tensor(T, int64_t, bool, std::optional<ScalarType>, T),
    Tensor(T, std::optional<IntArrayRef>, OS, bool, T),
    Tensor(T, std::optional<IntArrayRef>, bool, bool, T),
    Tensor(T, std::optional<IntArrayRef>, bool, std::optional<ScalarType>, T),
    Tensor(T, std::optional<ScalarType>, std::optional<Device>, bool, bool),
    Tensor(T, std::optional<double>, std::optional<double>, std::optional<double>, T),
    Tensor(T, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool),
    Tensor(T, IntArrayRef, OT, OT, double, bool),
    Tensor(T, T, T, S, S, T),
    Tensor(T, T, T, S, S, bool),
    Tensor(T, T, int64_t, bool, bool, T),
    Tensor(T, T, int64_t, int64_t, bool, T),
    Tensor(T, int64_t, T, T, S, T),
    Tensor(T, IntArrayRef, IntArrayRef, IntArrayRef, bool, bool, std::optional<int64_t>),
    Tensor(T, IntArrayRef, OT, OT, double, bool, T),
    Tensor(T, T, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool),
    Tensor(T, T, OT, IntArrayRef, IntArrayRef, IntArrayRef, int64_t),
    Tensor(T, T, T, S, S, bool, T),
    Tensor(T, IntArrayRef, IntArrayRef, IntArrayRef, bool, bool, std::optional<int64_t>, T),
    Tensor(T, T, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool, T),
    Tensor(T, T, IntArrayRef, IntArrayRef, IntArrayRef, bool, bool, std::optional<int64_t>),
    Tensor(T, OT, OT, OT, OT, bool, double, double, bool),
    Tensor(T, T, IntArrayRef, IntArrayRef, IntArrayRef, bool, bool, std::optional<int64_t>, T),
    std::tuple<Tensor, Tensor>(T, int64_t, bool),
    std::tuple<Tensor, Tensor>(T, std::optional<bool>, int64_t, bool),
    std::tuple<Tensor, Tensor>(T, int64_t, bool, T, T),
    std::tuple<Tensor, Tensor>(T, int64_t, int64_t, bool, bool),
    std::tuple<Tensor, Tensor>(T, std::optional<bool>, int64_t, bool, T, T),
    std::tuple<Tensor, Tensor>(T, int64_t, int64_t, bool, bool, T, T),
    std::tuple<Tensor, Tensor, Tensor>(T, bool, bool, bool),
    std::tuple<Tensor, Tensor, Tensor>(T, T, IntArrayRef, OT, double),
    std::tuple<Tensor, Tensor, Tensor>(T, bool, bool, bool, T, T, T),
    std::tuple<Tensor, Tensor, Tensor>(T, T, IntArrayRef, OT, double, T, T, T),
    void(TensorList, TensorList, TensorList, double, double, double, double, bool, bool, bool),
    void(TensorList, TensorList, TensorList, TensorList, TensorList, int64_t, double, double, double, double, double, bool, bool),
    // comm:: (collectives.cc) beyond the standard table's signatures.
    Tensor(T, int64_t, int64_t),
    Tensor(T, int64_t, int64_t, int64_t),
    Tensor(T, std::string_view, int64_t),
    Tensor(T, std::string_view, int64_t, T),
    void(T, int64_t, int64_t, int64_t),
    void(int64_t),
    int64_t(T),
    double(T),
    bool(T)>;
// clang-format on
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
