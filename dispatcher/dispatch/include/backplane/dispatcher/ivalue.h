#pragma once
// IValue: one boxed value (an argument or a return of an operator), and
// Stack, the vector of IValues a boxed kernel reads its arguments from and
// pushes its returns onto.

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "backplane/core/device.h"
#include "backplane/core/scalar.h"
#include "backplane/core/scalar_type.h"
#include "backplane/core/tensor.h"

namespace backplane {

class IValue {
 public:
  // The alternatives, in the order of Tag.
  enum class Tag : uint8_t {
    None, Tensor, Int, Double, Bool, String, Scalar, ScalarType, Device,
    IntList, DoubleList, BoolList, TensorList, OptionalTensorList,
  };

  IValue() = default;  // None
  IValue(std::nullopt_t) {}  // NOLINT
  IValue(Tensor t) : v_(std::move(t)) {}  // NOLINT
  IValue(int64_t i) : v_(i) {}  // NOLINT
  IValue(int i) : v_(int64_t{i}) {}  // NOLINT
  IValue(double d) : v_(d) {}  // NOLINT
  IValue(bool b) : v_(b) {}  // NOLINT
  IValue(std::string s) : v_(std::move(s)) {}  // NOLINT
  IValue(const char* s) : v_(std::string(s)) {}  // NOLINT
  IValue(Scalar s) : v_(s) {}  // NOLINT
  IValue(ScalarType t) : v_(t) {}  // NOLINT
  IValue(Device d) : v_(d) {}  // NOLINT
  IValue(std::vector<int64_t> v) : v_(std::move(v)) {}  // NOLINT
  IValue(std::vector<double> v) : v_(std::move(v)) {}  // NOLINT
  IValue(std::vector<bool> v) : v_(std::move(v)) {}  // NOLINT
  IValue(std::vector<Tensor> v) : v_(std::move(v)) {}  // NOLINT
  IValue(std::vector<std::optional<Tensor>> v) : v_(std::move(v)) {}  // NOLINT
  template <typename T>
  IValue(std::optional<T> o) {  // NOLINT
    if (o) *this = IValue(std::move(*o));
  }

  Tag tag() const { return static_cast<Tag>(v_.index()); }
  // "None", "Tensor", "int", "float", "bool", "str", "Scalar", ...
  static const char* tagName(Tag t);
  const char* tagName() const { return tagName(tag()); }

  bool isNone() const { return tag() == Tag::None; }
  bool isTensor() const { return tag() == Tag::Tensor; }
  bool isInt() const { return tag() == Tag::Int; }
  bool isDouble() const { return tag() == Tag::Double; }
  bool isBool() const { return tag() == Tag::Bool; }
  bool isString() const { return tag() == Tag::String; }
  bool isScalar() const { return tag() == Tag::Scalar; }
  bool isScalarType() const { return tag() == Tag::ScalarType; }
  bool isDevice() const { return tag() == Tag::Device; }
  bool isIntList() const { return tag() == Tag::IntList; }
  bool isDoubleList() const { return tag() == Tag::DoubleList; }
  bool isBoolList() const { return tag() == Tag::BoolList; }
  bool isTensorList() const { return tag() == Tag::TensorList; }
  bool isOptionalTensorList() const { return tag() == Tag::OptionalTensorList; }
  // Int, Double, Bool or Scalar: anything an argument of type Scalar accepts.
  bool isNumber() const { return isInt() || isDouble() || isBool() || isScalar(); }

  // Accessors throw Error("expected X but got Y") on the wrong alternative.
  const Tensor& toTensor() const& { return get<Tensor>(Tag::Tensor); }
  Tensor& toTensor() & { return const_cast<Tensor&>(std::as_const(*this).toTensor()); }
  Tensor toTensor() && { return std::move(toTensor()); }
  int64_t toInt() const { return get<int64_t>(Tag::Int); }
  double toDouble() const;  // also accepts Int
  bool toBool() const { return get<bool>(Tag::Bool); }
  const std::string& toString() const { return get<std::string>(Tag::String); }
  Scalar toScalar() const;  // accepts Int, Double, Bool, Scalar
  ScalarType toScalarType() const { return get<ScalarType>(Tag::ScalarType); }
  Device toDevice() const { return get<Device>(Tag::Device); }
  const std::vector<int64_t>& toIntList() const { return get<std::vector<int64_t>>(Tag::IntList); }
  const std::vector<double>& toDoubleList() const { return get<std::vector<double>>(Tag::DoubleList); }
  const std::vector<bool>& toBoolList() const { return get<std::vector<bool>>(Tag::BoolList); }
  const std::vector<Tensor>& toTensorList() const& { return get<std::vector<Tensor>>(Tag::TensorList); }
  std::vector<Tensor>& toTensorList() & { return const_cast<std::vector<Tensor>&>(std::as_const(*this).toTensorList()); }
  const std::vector<std::optional<Tensor>>& toOptionalTensorList() const& {
    return get<std::vector<std::optional<Tensor>>>(Tag::OptionalTensorList);
  }
  std::vector<std::optional<Tensor>>& toOptionalTensorList() & {
    return const_cast<std::vector<std::optional<Tensor>>&>(std::as_const(*this).toOptionalTensorList());
  }

  // A short description for messages: "Tensor[2, 3] float32 cpu", "5", "[1, 2]".
  std::string str() const;

 private:
  template <typename T>
  const T& get(Tag want) const {
    if (const T* p = std::get_if<T>(&v_)) [[likely]] return *p;
    throwWrongTag(want);
  }
  [[noreturn]] void throwWrongTag(Tag want) const;

  std::variant<std::monostate, Tensor, int64_t, double, bool, std::string, Scalar, ScalarType,
               Device, std::vector<int64_t>, std::vector<double>, std::vector<bool>,
               std::vector<Tensor>, std::vector<std::optional<Tensor>>>
      v_;
};

using Stack = std::vector<IValue>;

}  // namespace backplane
