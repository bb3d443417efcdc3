#pragma once
// Scalar: a number passed to an operator (alpha, fill value, clamp bound):
// a bool, an int64 or a double, remembering which.

#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>

#include "backplane/core/scalar_type.h"

namespace backplane {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Double };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool) { v_.i = v; }  // NOLINT: implicit, like a number literal
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int) {  // NOLINT
    v_.i = static_cast<int64_t>(v);
  }
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Double) {  // NOLINT
    v_.d = static_cast<double>(v);
  }
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}      // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool isBool() const { return kind_ == Kind::Bool; }
  bool isIntegral() const { return kind_ == Kind::Int; }
  bool isFloatingPoint() const { return kind_ == Kind::Double; }

  double toDouble() const { return kind_ == Kind::Double ? v_.d : static_cast<double>(v_.i); }
  int64_t toInt() const { return kind_ == Kind::Double ? static_cast<int64_t>(v_.d) : v_.i; }
  bool toBool() const { return kind_ == Kind::Double ? v_.d != 0.0 : v_.i != 0; }
  // The value converted to T with static_cast semantics (float16 and
  // bfloat16 round to nearest even).
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>)
      return toBool();
    else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
      return T(static_cast<float>(toDouble()));
    else if constexpr (std::is_floating_point_v<T>)
      return static_cast<T>(toDouble());
    else
      return kind_ == Kind::Double ? static_cast<T>(v_.d) : static_cast<T>(v_.i);
  }
  // The dtype a 0-d tensor made from this scalar gets by default: bool,
  // int64 or float32 (PyTorch's default floating dtype is float32).
  ScalarType defaultType() const {
    return kind_ == Kind::Bool ? ScalarType::Bool : kind_ == Kind::Int ? ScalarType::Int64 : ScalarType::Float32;
  }
  std::string str() const;
  friend bool operator==(const Scalar& a, const Scalar& b) {
    return a.kind_ == b.kind_ && (a.kind_ == Kind::Double ? a.v_.d == b.v_.d : a.v_.i == b.v_.i);
  }

 private:
  Kind kind_;
  union {
    int64_t i;
    double d;
  } v_;
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

}  // namespace backplane
