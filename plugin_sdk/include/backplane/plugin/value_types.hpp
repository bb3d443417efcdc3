// The small values kernels take and operators are called with: bp::Device,
// bp::ArrayView (IntList, DoubleList), bp::BoolList, bp::Scalar and bp::DispatchKeys.
// Part of <backplane/plugin.hpp>; compiles on its own.
#ifndef BACKPLANE_PLUGIN_VALUE_TYPES_HPP_
#define BACKPLANE_PLUGIN_VALUE_TYPES_HPP_

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <ostream>
#include <type_traits>
#include <vector>

#include "backplane/plugin/detail/concat.hpp"
#include "backplane/plugin/element_types.hpp"
#include "backplane/plugin/errors.hpp"
#include "backplane/plugin_api.h"

namespace bp {

// A device: a device type number (0 is cpu; others from registerDevice or
// findDeviceType) and an index within the type. Layout matches BP_Device.
struct Device {
  int32_t type;
  int32_t index;

  static constexpr Device cpu() noexcept { return Device{0, 0}; }
  static constexpr Device fromC(BP_Device d) noexcept { return Device{d.type, d.index}; }
  constexpr BP_Device toC() const noexcept { return BP_Device{type, index}; }
  friend constexpr bool operator==(Device a, Device b) noexcept { return a.type == b.type && a.index == b.index; }
  friend constexpr bool operator!=(Device a, Device b) noexcept { return !(a == b); }
};

inline std::ostream& operator<<(std::ostream& os, Device d) { return os << d.type << ':' << d.index; }

// A borrowed view of a contiguous array: {pointer, size}. Never owns; the
// array must outlive the view. Constructible from a braced list (valid until
// the end of the full expression, i.e. for a call), a std::vector, a C array
// or (pointer, size).
template <class T>
class ArrayView {
 public:
  constexpr ArrayView() noexcept = default;
  constexpr ArrayView(const T* data, size_t size) noexcept : data_(data), size_(size) {}
  // Views the list's array, which lives until the end of the full
  // expression that wrote the braces: fine for an argument, dangling if
  // stored (as with C++26 std::span's initializer_list constructor).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  ArrayView(std::initializer_list<T> list) noexcept : data_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  ArrayView(const std::vector<T>& v) noexcept : data_(v.data()), size_(v.size()) {}
  template <size_t N>
  constexpr ArrayView(const T (&a)[N]) noexcept : data_(a), size_(N) {}
  template <size_t N>
  constexpr ArrayView(const std::array<T, N>& a) noexcept : data_(a.data()), size_(N) {}

  constexpr const T* data() const noexcept { return data_; }
  constexpr size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr const T* begin() const noexcept { return data_; }
  constexpr const T* end() const noexcept { return data_ + size_; }
  constexpr const T& operator[](size_t i) const noexcept { return data_[i]; }
  // Bounds-checked element; throws bp::Error(BP_OUT_OF_RANGE).
  const T& at(size_t i) const {
    if (i >= size_) fail(BP_OUT_OF_RANGE, detail::concat("index ", i, " out of range for a list of ", size_));
    return data_[i];
  }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

  friend bool operator==(ArrayView a, ArrayView b) noexcept {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i) {
      if (!(a.data_[i] == b.data_[i])) return false;
    }
    return true;
  }
  friend bool operator!=(ArrayView a, ArrayView b) noexcept { return !(a == b); }
  friend std::ostream& operator<<(std::ostream& os, ArrayView a) {
    os << '[';
    for (size_t i = 0; i < a.size_; ++i) os << (i ? ", " : "") << a.data_[i];
    return os << ']';
  }

 private:
  const T* data_ = nullptr;
  size_t size_ = 0;
};

// Sizes, strides, "int[]" arguments.
using IntList = ArrayView<int64_t>;
// "float[]" arguments.
using DoubleList = ArrayView<double>;

// "bool[]" arguments (e.g. a backward op's output_mask): a view of the host's
// bytes, one per value, read as bools. Valid for the call it arrives in; to
// pass one to bp::Operator::call, build it over your own bytes.
class BoolList {
 public:
  constexpr BoolList() noexcept = default;
  constexpr BoolList(const uint8_t* data, size_t size) noexcept : data_(size ? data : nullptr), size_(size) {}
  constexpr size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr const uint8_t* data() const noexcept { return data_; }
  constexpr bool operator[](size_t i) const noexcept { return data_[i] != 0; }
  // Bounds-checked value; throws bp::Error(BP_OUT_OF_RANGE).
  bool at(size_t i) const {
    if (i >= size_) fail(BP_OUT_OF_RANGE, detail::concat("index ", i, " out of range for a bool list of ", size_));
    return data_[i] != 0;
  }
  std::vector<bool> vec() const {
    std::vector<bool> v(size_);
    for (size_t i = 0; i < size_; ++i) v[i] = data_[i] != 0;
    return v;
  }
  friend std::ostream& operator<<(std::ostream& os, BoolList l) {
    os << '[';
    for (size_t i = 0; i < l.size_; ++i) os << (i ? ", " : "") << (l[i] ? "True" : "False");
    return os << ']';
  }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// A number that remembers whether it is a bool, an integer or a double, as
// "Scalar" arguments arrive (BP_VALUE_BOOL / INT / DOUBLE).
class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Double };

  Scalar() noexcept : Scalar(int64_t{0}) {}
  Scalar(bool v) noexcept : kind_(Kind::Bool) { u_.b = v; }
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
      if (v > static_cast<T>(std::numeric_limits<int64_t>::max())) {
        fail(BP_OUT_OF_RANGE, detail::concat("integer ", v, " does not fit a Scalar (int64)"));
      }
    }
    u_.i = static_cast<int64_t>(v);
  }
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) noexcept : kind_(Kind::Double) {
    u_.d = static_cast<double>(v);
  }
  Scalar(Half v) noexcept : Scalar(static_cast<float>(v)) {}
  Scalar(BFloat16 v) noexcept : Scalar(static_cast<float>(v)) {}

  Kind kind() const noexcept { return kind_; }
  bool isBool() const noexcept { return kind_ == Kind::Bool; }
  bool isIntegral() const noexcept { return kind_ == Kind::Int; }  // false for bool, as in PyTorch
  bool isFloatingPoint() const noexcept { return kind_ == Kind::Double; }

  double toDouble() const noexcept {
    switch (kind_) {
      case Kind::Bool: return u_.b ? 1.0 : 0.0;
      case Kind::Int: return static_cast<double>(u_.i);
      case Kind::Double: break;
    }
    return u_.d;
  }
  // A double is truncated toward zero; throws bp::Error(BP_OUT_OF_RANGE) for
  // NaN or a double outside int64.
  int64_t toInt() const {
    switch (kind_) {
      case Kind::Bool: return u_.b ? 1 : 0;
      case Kind::Int: return u_.i;
      case Kind::Double: break;
    }
    // -2^63 <= d < 2^63, written so that NaN fails.
    if (!(u_.d >= -9223372036854775808.0 && u_.d < 9223372036854775808.0)) {
      fail(BP_OUT_OF_RANGE, detail::concat("Scalar ", u_.d, " cannot be converted to int64 without overflow"));
    }
    return static_cast<int64_t>(u_.d);
  }
  bool toBool() const noexcept {
    switch (kind_) {
      case Kind::Bool: return u_.b;
      case Kind::Int: return u_.i != 0;
      case Kind::Double: break;
    }
    return u_.d != 0.0;
  }
  // The value as T: bool, any integer type (throws bp::Error(BP_OUT_OF_RANGE)
  // if it does not fit), float, double, Half or BFloat16.
  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) {
      return toBool();
    } else if constexpr (std::is_integral_v<T>) {
      const int64_t v = toInt();
      bool fits;
      if constexpr (std::is_signed_v<T>) {
        fits = v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
               v <= static_cast<int64_t>(std::numeric_limits<T>::max());
      } else {
        fits = v >= 0 && static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
      }
      if (!fits) fail(BP_OUT_OF_RANGE, detail::concat("Scalar ", v, " does not fit the requested integer type"));
      return static_cast<T>(v);
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(toDouble());
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      return T(static_cast<float>(toDouble()));
    } else {
      static_assert(std::is_same_v<T, bool>,
                    "bp::Scalar::to<T>: T must be bool, an integer type, float, double, bp::Half or bp::BFloat16");
    }
  }

 private:
  Kind kind_;
  union {
    bool b;
    int64_t i;
    double d;
  } u_;
};

inline std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: return os << (s.toBool() ? "true" : "false");
    case Scalar::Kind::Int: return os << s.toInt();
    case Scalar::Kind::Double: break;
  }
  return os << s.toDouble();
}

// A call's dispatch key set. A kernel that declares it as its FIRST
// parameter receives call->dispatch_keys (it is not part of the signature);
// pass it, minus the caller's own key and those above, to
// Operator::redispatch.
struct DispatchKeys {
  uint64_t bits;
};

}  // namespace bp

#endif  // BACKPLANE_PLUGIN_VALUE_TYPES_HPP_
