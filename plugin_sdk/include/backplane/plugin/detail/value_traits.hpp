// bp::detail::ArgTraits and ReturnTraits: how each kernel parameter type is
// read from a BP_Value and each return type stored into one (and read back
// from an op_call), with their spellings in the host's signature notation.
//
// Not part of the API: names in bp::detail may change in any release.
#ifndef BACKPLANE_PLUGIN_DETAIL_VALUE_TRAITS_HPP_
#define BACKPLANE_PLUGIN_DETAIL_VALUE_TRAITS_HPP_

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "backplane/plugin/detail/call_packing.hpp"
#include "backplane/plugin/detail/concat.hpp"
#include "backplane/plugin/detail/host_table.hpp"
#include "backplane/plugin/errors.hpp"
#include "backplane/plugin/scalar_type.hpp"
#include "backplane/plugin/tensor.hpp"
#include "backplane/plugin/value_types.hpp"
#include "backplane/plugin_api.h"

namespace bp {
namespace detail {

inline const char* tagName(BP_ValueTag tag) noexcept {
  switch (tag) {
    case BP_VALUE_NONE: return "none";
    case BP_VALUE_TENSOR: return "tensor";
    case BP_VALUE_INT: return "int";
    case BP_VALUE_DOUBLE: return "float";
    case BP_VALUE_BOOL: return "bool";
    case BP_VALUE_STRING: return "str";
    case BP_VALUE_SCALAR_TYPE: return "ScalarType";
    case BP_VALUE_DEVICE: return "Device";
    case BP_VALUE_INT_LIST: return "int[]";
    case BP_VALUE_DOUBLE_LIST: return "float[]";
    case BP_VALUE_BOOL_LIST: return "bool[]";
    case BP_VALUE_TENSOR_LIST: return "Tensor[]";
    case BP_VALUE_OPTIONAL_TENSOR_LIST: return "Tensor?[]";
    default: return "unknown value tag";
  }
}

inline const char* opName(const BP_Operator* op) noexcept {
  const char* n = nullptr;
  if (op != nullptr && g_host != nullptr && g_host->op_name != nullptr) n = g_host->op_name(op);
  return n != nullptr ? n : "<unknown operator>";
}

// Throws BP_INVALID_ARGUMENT "argument <index> of <op>: expected <type>, got
// <tag>"; `index` is 0-based, as in call->args.
[[noreturn]] inline void argumentMismatch(const BP_Operator* op, size_t index, const std::string& expected,
                                          BP_ValueTag got) {
  fail(BP_INVALID_ARGUMENT,
       concat("argument ", index, " of ", opName(op), ": expected ", expected, ", got ", tagName(got)));
}

// ArgTraits<T>: how a kernel parameter of (decayed) type T is read from a
// BP_Value. name() is its spelling in the host's signature notation;
// accepts() says which tags it takes; get() reads one (after accepts()).
template <class T>
struct ArgTraits {
  static_assert(!std::is_same_v<T, DispatchKeys>, "bp: bp::DispatchKeys may only be a kernel's FIRST parameter");
  static_assert(
      std::is_same_v<T, DispatchKeys> || kAlwaysFalse<T>,
      "bp: unsupported kernel parameter type. Supported (by value or const&): bp::Tensor, "
      "std::optional<bp::Tensor>, std::vector<bp::Tensor>, std::vector<std::optional<bp::Tensor>>, "
      "int64_t (not int), std::optional<int64_t>, bp::IntList, std::optional<bp::IntList>, double (not "
      "float), std::optional<double>, bp::DoubleList, bp::BoolList, bool, std::optional<bool>, std::string_view (not "
      "std::string), std::optional<std::string_view>, bp::Scalar, std::optional<bp::Scalar>, "
      "bp::ScalarType, std::optional<bp::ScalarType>, bp::Device, std::optional<bp::Device>; and "
      "bp::DispatchKeys as the first parameter only");
};

template <>
struct ArgTraits<Tensor> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "Tensor"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_TENSOR; }
  static Tensor get(const BP_Value& v) { return Tensor::borrow(v.u.tensor); }
};
template <>
struct ArgTraits<std::vector<Tensor>> {
  static constexpr bool kOptionalOk = false;
  static std::string name() { return "Tensor[]"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_TENSOR_LIST; }
  static std::vector<Tensor> get(const BP_Value& v) {
    std::vector<Tensor> r;
    r.reserve(v.u.tensor_list.size);
    for (size_t i = 0; i < v.u.tensor_list.size; ++i) r.push_back(Tensor::borrow(v.u.tensor_list.data[i]));
    return r;
  }
};
template <>
struct ArgTraits<std::vector<std::optional<Tensor>>> {
  static constexpr bool kOptionalOk = false;
  static std::string name() { return "Tensor?[]"; }
  static bool accepts(BP_ValueTag t) noexcept {
    return t == BP_VALUE_OPTIONAL_TENSOR_LIST || t == BP_VALUE_TENSOR_LIST;
  }
  static std::vector<std::optional<Tensor>> get(const BP_Value& v) {
    std::vector<std::optional<Tensor>> r;
    r.reserve(v.u.tensor_list.size);
    for (size_t i = 0; i < v.u.tensor_list.size; ++i) {
      BP_Tensor* t = v.u.tensor_list.data[i];
      if (t == nullptr)
        r.emplace_back(std::nullopt);
      else
        r.emplace_back(Tensor::borrow(t));
    }
    return r;
  }
};
template <>
struct ArgTraits<int64_t> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "int"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_INT; }
  static int64_t get(const BP_Value& v) noexcept { return v.u.i; }
};
template <>
struct ArgTraits<IntList> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "int[]"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_INT_LIST; }
  static IntList get(const BP_Value& v) noexcept { return IntList(v.u.int_list.data, v.u.int_list.size); }
};
template <>
struct ArgTraits<double> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "float"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_DOUBLE || t == BP_VALUE_INT; }
  static double get(const BP_Value& v) noexcept { return v.tag == BP_VALUE_INT ? static_cast<double>(v.u.i) : v.u.d; }
};
template <>
struct ArgTraits<DoubleList> {
  static constexpr bool kOptionalOk = false;
  static std::string name() { return "float[]"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_DOUBLE_LIST; }
  static DoubleList get(const BP_Value& v) noexcept { return DoubleList(v.u.double_list.data, v.u.double_list.size); }
};
template <>
struct ArgTraits<BoolList> {
  static constexpr bool kOptionalOk = false;
  static std::string name() { return "bool[]"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_BOOL_LIST; }
  static BoolList get(const BP_Value& v) noexcept { return BoolList(v.u.bool_list.data, v.u.bool_list.size); }
};
template <>
struct ArgTraits<bool> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "bool"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_BOOL; }
  static bool get(const BP_Value& v) noexcept { return v.u.b != 0; }
};
template <>
struct ArgTraits<std::string_view> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "str"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_STRING; }
  static std::string_view get(const BP_Value& v) noexcept {
    return v.u.str.size == 0 ? std::string_view() : std::string_view(v.u.str.data, v.u.str.size);
  }
};
template <>
struct ArgTraits<Scalar> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "Scalar"; }
  static bool accepts(BP_ValueTag t) noexcept {
    return t == BP_VALUE_INT || t == BP_VALUE_DOUBLE || t == BP_VALUE_BOOL;
  }
  static Scalar get(const BP_Value& v) noexcept {
    if (v.tag == BP_VALUE_INT) return Scalar(v.u.i);
    if (v.tag == BP_VALUE_DOUBLE) return Scalar(v.u.d);
    return Scalar(v.u.b != 0);
  }
};
template <>
struct ArgTraits<ScalarType> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "ScalarType"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_SCALAR_TYPE; }
  static ScalarType get(const BP_Value& v) noexcept { return static_cast<ScalarType>(v.u.scalar_type); }
};
template <>
struct ArgTraits<Device> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "Device"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_DEVICE; }
  static Device get(const BP_Value& v) noexcept { return Device::fromC(v.u.device); }
};
template <class T>
struct ArgTraits<std::optional<T>> {
  static_assert(ArgTraits<T>::kOptionalOk,
                "bp: std::optional of this parameter type has no schema spelling (no \"Tensor[]?\", \"float[]?\")");
  static constexpr bool kOptionalOk = false;
  static std::string name() { return ArgTraits<T>::name() + "?"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_NONE || ArgTraits<T>::accepts(t); }
  static std::optional<T> get(const BP_Value& v) {
    if (v.tag == BP_VALUE_NONE) return std::nullopt;
    return ArgTraits<T>::get(v);
  }
};

// ReturnTraits<R>: how a kernel's return value is stored into the call's
// returns (store; `op` names the call's operator in errors) and how an
// op_call's returns are read back (load).
template <class R>
struct ReturnTraits {
  static_assert(kAlwaysFalse<R>,
                "bp: unsupported kernel return type. Supported: bp::Tensor, std::tuple<bp::Tensor, ...>, void, "
                "int64_t, double, bool, bp::Scalar");
};

inline void storeTensor(Tensor& t, BP_Value& out) noexcept {
  out.tag = BP_VALUE_TENSOR;
  out.reserved = 0;
  out.u.tensor = t.release();  // a new reference, adopted by the host
}
[[noreturn]] inline void undefinedReturn(const BP_Operator* op, size_t index) {
  fail(BP_INTERNAL, concat("the kernel for ", opName(op), " returned an undefined bp::Tensor as return ", index));
}
[[noreturn]] inline void wrongReturn(const char* op, size_t index, const char* expected, BP_ValueTag got) {
  fail(BP_INTERNAL, concat(op, " return ", index, ": expected ", expected, ", got ", tagName(got)));
}

template <>
struct ReturnTraits<void> {
  static constexpr size_t kCount = 0;
  static std::string name() { return "()"; }
};
template <>
struct ReturnTraits<Tensor> {
  static constexpr size_t kCount = 1;
  static std::string name() { return "Tensor"; }
  static void store(Tensor r, BP_Value* returns, const BP_Operator* op) {
    if (!r.defined()) undefinedReturn(op, 0);
    storeTensor(r, returns[0]);
  }
  static Tensor load(std::array<Tensor, 1>& owned, const BP_Value* rets, const char* op) {
    if (rets[0].tag != BP_VALUE_TENSOR || !owned[0].defined()) wrongReturn(op, 0, "Tensor", rets[0].tag);
    return std::move(owned[0]);
  }
};
template <class... T>
struct ReturnTraits<std::tuple<T...>> {
  static_assert(sizeof...(T) > 0 && (std::is_same_v<T, Tensor> && ...),
                "bp: a tuple return must hold bp::Tensor only: std::tuple<bp::Tensor, bp::Tensor, ...>");
  static constexpr size_t kCount = sizeof...(T);
  static std::string name() {
    std::string s = "(";
    for (size_t i = 0; i < kCount; ++i) s += i ? ", Tensor" : "Tensor";
    return s + ")";
  }
  static void store(std::tuple<T...> r, BP_Value* returns, const BP_Operator*) {
    storeAll(r, returns, std::index_sequence_for<T...>());
  }
  static std::tuple<T...> load(std::array<Tensor, kCount>& owned, const BP_Value* rets, const char* op) {
    for (size_t i = 0; i < kCount; ++i) {
      // None: a return an output_mask left out (Note [Masked returns]); the
      // host has refused any other missing one.
      if (rets[i].tag == BP_VALUE_NONE) continue;
      if (rets[i].tag != BP_VALUE_TENSOR || !owned[i].defined()) wrongReturn(op, i, "Tensor", rets[i].tag);
    }
    return loadAll(owned, std::index_sequence_for<T...>());
  }

 private:
  template <size_t... I>
  static void storeAll(std::tuple<T...>& r, BP_Value* returns, std::index_sequence<I...>) {
    // An undefined tensor is passed as None: a backward op with an
    // output_mask leaves the returns its mask does not ask for undefined
    // (the host's Note [Masked returns]); the host refuses any other.
    ((std::get<I>(r).defined() ? storeTensor(std::get<I>(r), returns[I]) : void(returns[I].tag = BP_VALUE_NONE)), ...);
  }
  template <size_t... I>
  static std::tuple<T...> loadAll(std::array<Tensor, kCount>& owned, std::index_sequence<I...>) {
    return std::tuple<T...>(std::move(owned[I])...);
  }
};
template <>
struct ReturnTraits<int64_t> {
  static constexpr size_t kCount = 1;
  static std::string name() { return "int"; }
  static void store(int64_t r, BP_Value* returns, const BP_Operator*) noexcept {
    returns[0].tag = BP_VALUE_INT;
    returns[0].u.i = r;
  }
  static int64_t load(std::array<Tensor, 1>&, const BP_Value* rets, const char* op) {
    if (rets[0].tag != BP_VALUE_INT) wrongReturn(op, 0, "int", rets[0].tag);
    return rets[0].u.i;
  }
};
template <>
struct ReturnTraits<double> {
  static constexpr size_t kCount = 1;
  static std::string name() { return "float"; }
  static void store(double r, BP_Value* returns, const BP_Operator*) noexcept {
    returns[0].tag = BP_VALUE_DOUBLE;
    returns[0].u.d = r;
  }
  static double load(std::array<Tensor, 1>&, const BP_Value* rets, const char* op) {
    if (rets[0].tag == BP_VALUE_INT) return static_cast<double>(rets[0].u.i);
    if (rets[0].tag != BP_VALUE_DOUBLE) wrongReturn(op, 0, "float", rets[0].tag);
    return rets[0].u.d;
  }
};
template <>
struct ReturnTraits<bool> {
  static constexpr size_t kCount = 1;
  static std::string name() { return "bool"; }
  static void store(bool r, BP_Value* returns, const BP_Operator*) noexcept {
    returns[0].tag = BP_VALUE_BOOL;
    returns[0].u.b = r ? 1 : 0;
  }
  static bool load(std::array<Tensor, 1>&, const BP_Value* rets, const char* op) {
    if (rets[0].tag != BP_VALUE_BOOL) wrongReturn(op, 0, "bool", rets[0].tag);
    return rets[0].u.b != 0;
  }
};
template <>
struct ReturnTraits<Scalar> {
  static constexpr size_t kCount = 1;
  static std::string name() { return "Scalar"; }
  static void store(const Scalar& r, BP_Value* returns, const BP_Operator*) {
    CallStorage unused;
    returns[0] = packValue(r, unused);
  }
  static Scalar load(std::array<Tensor, 1>&, const BP_Value* rets, const char* op) {
    if (!ArgTraits<Scalar>::accepts(rets[0].tag)) wrongReturn(op, 0, "Scalar", rets[0].tag);
    return ArgTraits<Scalar>::get(rets[0]);
  }
};

}  // namespace detail
}  // namespace bp

#endif  // BACKPLANE_PLUGIN_DETAIL_VALUE_TRAITS_HPP_
