// bp::detail::packValue: one argument of Operator::call as a BP_Value that
// borrows from it.
// Not part of the API: names in bp::detail may change in any release.
#ifndef BACKPLANE_PLUGIN_DETAIL_CALL_PACKING_HPP_
#define BACKPLANE_PLUGIN_DETAIL_CALL_PACKING_HPP_

#include <cstddef>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "backplane/plugin/detail/concat.hpp"
#include "backplane/plugin/element_types.hpp"
#include "backplane/plugin/errors.hpp"
#include "backplane/plugin/scalar_type.hpp"
#include "backplane/plugin/tensor.hpp"
#include "backplane/plugin/value_types.hpp"
#include "backplane/plugin_api.h"

namespace bp {
namespace detail {

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <class T>
inline constexpr bool kAlwaysFalse = false;

// Arrays that BP_Values point into while a call packs std::vector<Tensor>.
struct CallStorage {
  std::vector<std::vector<BP_Tensor*>> tensor_lists;
};

template <class T>
inline constexpr bool kNeedsStorage = std::is_same_v<std::decay_t<T>, std::vector<Tensor>> ||
                                      std::is_same_v<std::decay_t<T>, std::vector<std::optional<Tensor>>>;

inline BP_Value noneValue() noexcept {
  BP_Value v;
  std::memset(&v, 0, sizeof v);  // BP_VALUE_NONE, reserved 0
  return v;
}

// One call argument as a BP_Value that borrows from `v` (and `storage`).
template <class T>
BP_Value packValue(const T& v, CallStorage& storage) {
  using D = std::decay_t<T>;
  BP_Value out = noneValue();
  if constexpr (std::is_same_v<D, Tensor>) {
    if (v.defined()) {  // an undefined Tensor is passed as None
      out.tag = BP_VALUE_TENSOR;
      out.u.tensor = v.get();
    }
  } else if constexpr (std::is_same_v<D, std::nullopt_t> || std::is_same_v<D, std::nullptr_t>) {
    // None
  } else if constexpr (IsOptional<D>::value) {
    if (v.has_value()) out = packValue(*v, storage);
  } else if constexpr (std::is_same_v<D, bool>) {
    out.tag = BP_VALUE_BOOL;
    out.u.b = v ? 1 : 0;
  } else if constexpr (std::is_integral_v<D>) {
    if constexpr (std::is_unsigned_v<D> && sizeof(D) >= sizeof(int64_t)) {
      if (v > static_cast<D>(std::numeric_limits<int64_t>::max())) {
        fail(BP_OUT_OF_RANGE, concat("integer argument ", v, " does not fit int64"));
      }
    }
    out.tag = BP_VALUE_INT;
    out.u.i = static_cast<int64_t>(v);
  } else if constexpr (std::is_floating_point_v<D> || std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
    out.tag = BP_VALUE_DOUBLE;
    out.u.d = static_cast<double>(v);
  } else if constexpr (std::is_same_v<D, Scalar>) {
    switch (v.kind()) {
      case Scalar::Kind::Bool:
        out.tag = BP_VALUE_BOOL;
        out.u.b = v.toBool() ? 1 : 0;
        break;
      case Scalar::Kind::Int:
        out.tag = BP_VALUE_INT;
        out.u.i = v.toInt();
        break;
      case Scalar::Kind::Double:
        out.tag = BP_VALUE_DOUBLE;
        out.u.d = v.toDouble();
        break;
    }
  } else if constexpr (std::is_same_v<D, IntList> || std::is_same_v<D, std::vector<int64_t>>) {
    IntList l(v);
    out.tag = BP_VALUE_INT_LIST;
    out.u.int_list.data = l.data();
    out.u.int_list.size = l.size();
  } else if constexpr (std::is_same_v<D, DoubleList> || std::is_same_v<D, std::vector<double>>) {
    DoubleList l(v);
    out.tag = BP_VALUE_DOUBLE_LIST;
    out.u.double_list.data = l.data();
    out.u.double_list.size = l.size();
  } else if constexpr (std::is_same_v<D, BoolList>) {
    out.tag = BP_VALUE_BOOL_LIST;
    out.u.bool_list.data = v.data();
    out.u.bool_list.size = v.size();
  } else if constexpr (std::is_same_v<D, ScalarType>) {
    out.tag = BP_VALUE_SCALAR_TYPE;
    out.u.scalar_type = static_cast<BP_ScalarType>(v);
  } else if constexpr (std::is_same_v<D, Device> || std::is_same_v<D, BP_Device>) {
    out.tag = BP_VALUE_DEVICE;
    out.u.device.type = v.type;
    out.u.device.index = v.index;
  } else if constexpr (std::is_same_v<D, std::vector<Tensor>> ||
                       std::is_same_v<D, std::vector<std::optional<Tensor>>>) {
    constexpr bool kOptional = std::is_same_v<D, std::vector<std::optional<Tensor>>>;
    std::vector<BP_Tensor*> ptrs;
    ptrs.reserve(v.size());
    for (const auto& t : v) {
      BP_Tensor* p;
      if constexpr (kOptional)
        p = (t.has_value() && t->defined()) ? t->get() : nullptr;
      else
        p = t.get();
      if (!kOptional && p == nullptr) fail(BP_INVALID_ARGUMENT, "an undefined bp::Tensor in a Tensor[] argument");
      ptrs.push_back(p);
    }
    storage.tensor_lists.push_back(std::move(ptrs));  // reserved: no reallocation, pointers stay valid
    out.tag = kOptional ? BP_VALUE_OPTIONAL_TENSOR_LIST : BP_VALUE_TENSOR_LIST;
    out.u.tensor_list.data = storage.tensor_lists.back().data();
    out.u.tensor_list.size = storage.tensor_lists.back().size();
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    if constexpr (std::is_pointer_v<T>) {
      if (v == nullptr) fail(BP_INVALID_ARGUMENT, "a NULL const char* passed as a str argument");
    }
    std::string_view s(v);
    out.tag = BP_VALUE_STRING;
    out.u.str.data = s.data();
    out.u.str.size = s.size();
  } else {
    static_assert(
        kAlwaysFalse<T>,
        "bp::Operator::call: unsupported argument type. Supported: bp::Tensor, std::optional<...>, "
        "std::nullopt, integers, bool, float/double, bp::Scalar, bp::IntList, std::vector<int64_t>, "
        "bp::DoubleList, std::vector<double>, bp::BoolList, bp::ScalarType, bp::Device, std::vector<bp::Tensor>, "
        "std::vector<std::optional<bp::Tensor>>, and strings (std::string_view, std::string, const char*)");
  }
  return out;
}

}  // namespace detail
}  // namespace bp

#endif  // BACKPLANE_PLUGIN_DETAIL_CALL_PACKING_HPP_
