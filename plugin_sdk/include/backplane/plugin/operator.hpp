// bp::Operator: find an operator by name and call it through the host's
// dispatcher, typed or boxed, or redispatch below a kernel's own key. Part
// of <backplane/plugin.hpp>; compiles on its own.
#ifndef BACKPLANE_PLUGIN_OPERATOR_HPP_
#define BACKPLANE_PLUGIN_OPERATOR_HPP_

#include <array>
#include <cstddef>
#include <string>
#include <type_traits>

#include "backplane/plugin/detail/call_packing.hpp"
#include "backplane/plugin/detail/value_traits.hpp"
#include "backplane/plugin/errors.hpp"
#include "backplane/plugin/host.hpp"
#include "backplane/plugin/tensor.hpp"
#include "backplane/plugin/value_types.hpp"
#include "backplane/plugin_api.h"

namespace bp {

// An operator known to the host, called through the dispatcher. Immutable
// and thread-safe; the handle is valid for the life of the process.
class Operator {
 public:
  Operator() noexcept = default;
  explicit Operator(const BP_Operator* op) noexcept : op_(op) {}

  // The operator "ns::name.overload" ("name.overload" in the standard
  // namespace). Throws bp::Error (BP_NOT_FOUND) if the host has none.
  static Operator find(const char* qualified_name) {
    const BP_Operator* op = nullptr;
    throwIfError(detail::hostSlot(host().op_find, "op_find")(qualified_name, &op));
    if (op == nullptr) fail(BP_NOT_FOUND, concatName("operator not found: ", qualified_name));
    return Operator(op);
  }

  const BP_Operator* get() const noexcept { return op_; }
  // "ns::name.overload"; lives as long as the process.
  const char* name() const { return detail::hostSlot(host().op_name, "op_name")(checked()); }

  // Raw call: `args` borrowed; on success tensor returns are new references
  // the caller owns (Tensor::adopt them). On error the host has released and
  // cleared the returns; this throws bp::Error.
  void callBoxed(const BP_Value* args, size_t num_args, BP_Value* returns, size_t num_returns) const {
    throwIfError(detail::hostSlot(host().op_call, "op_call")(checked(), args, num_args, returns, num_returns));
  }
  // As callBoxed, for the kernel of the highest key in `keys` (how a kernel
  // reaches the kernels below its own key).
  void redispatchBoxed(DispatchKeys keys, const BP_Value* args, size_t num_args, BP_Value* returns,
                       size_t num_returns) const {
    throwIfError(detail::hostSlot(host().op_redispatch, "op_redispatch")(checked(), keys.bits, args, num_args, returns,
                                                                         num_returns));
  }

  // Typed call: packs `args` (Tensor, std::optional<Tensor>/std::nullopt ->
  // None, integers, double, bool, Scalar, IntList, std::vector<int64_t>,
  // ScalarType, Device, strings, std::vector<Tensor>) into BP_Values and
  // returns R: Tensor (default), std::tuple<Tensor...>, void, int64_t,
  // double, bool or Scalar. Throws bp::Error if the call fails or returns
  // something else.
  template <class R = Tensor, class... Args>
  R call(Args&&... args) const {
    return invoke<R>(nullptr, args...);
  }
  template <class... Args>
  Tensor callTensor(Args&&... args) const {
    return invoke<Tensor>(nullptr, args...);
  }
  template <class R = Tensor, class... Args>
  R redispatch(DispatchKeys keys, Args&&... args) const {
    return invoke<R>(&keys, args...);
  }
  template <class... Args>
  Tensor redispatchTensor(DispatchKeys keys, Args&&... args) const {
    return invoke<Tensor>(&keys, args...);
  }

 private:
  const BP_Operator* checked() const {
    if (op_ == nullptr) fail(BP_FAILED_PRECONDITION, "call through an empty bp::Operator");
    return op_;
  }
  static std::string concatName(const char* what, const char* n) { return std::string(what) + (n ? n : "(null)"); }

  template <class R, class... Args>
  R invoke(const DispatchKeys* keys, const Args&... args) const {
    constexpr size_t kRet = detail::ReturnTraits<R>::kCount;
    detail::CallStorage storage;
    constexpr size_t kLists = (size_t{0} + ... + (detail::kNeedsStorage<Args> ? 1 : 0));
    if constexpr (kLists > 0) storage.tensor_lists.reserve(kLists);
    std::array<BP_Value, sizeof...(Args)> values{detail::packValue(args, storage)...};
    std::array<BP_Value, kRet> rets;
    for (BP_Value& r : rets) r = detail::noneValue();
    if (keys != nullptr)
      redispatchBoxed(*keys, values.data(), values.size(), rets.data(), kRet);
    else
      callBoxed(values.data(), values.size(), rets.data(), kRet);
    // Own every returned tensor first, so none leaks if the kinds are wrong.
    std::array<Tensor, kRet> owned;
    if constexpr (kRet > 0) {  // not a loop over nothing, which nvcc warns about (#186)
      for (size_t i = 0; i < kRet; ++i) {
        if (rets[i].tag == BP_VALUE_TENSOR) owned[i] = Tensor::adopt(rets[i].u.tensor);
      }
    }
    if constexpr (std::is_void_v<R>) {
      return;
    } else {
      return detail::ReturnTraits<R>::load(owned, rets.data(), detail::opName(op_));
    }
  }

  const BP_Operator* op_ = nullptr;
};

}  // namespace bp

#endif  // BACKPLANE_PLUGIN_OPERATOR_HPP_
