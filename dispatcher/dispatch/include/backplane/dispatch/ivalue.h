#pragma once
// IValue: one boxed value (an argument or a return of an operator), and
// Stack, the vector of IValues a boxed kernel reads its arguments from and
// pushes its returns onto. A tensor is held as a TensorBase: the dispatch
// layer sits below Tensor's operators (Note [Tensor and TensorBase] in
// backplane/ops/tensor.h); boxing.h builds the tensor type a kernel declares.

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "backplane/core/device.h"
#include "backplane/core/scalar.h"
#include "backplane/core/scalar_type.h"
#include "backplane/core/tensor_base.h"

namespace backplane {

class IValue {
 public:
  // The alternatives, in the order of Tag.
  enum class Tag : uint8_t {
    None,
    Tensor,
    Int,
    Double,
    Bool,
    String,
    Scalar,
    ScalarType,
    Device,
    IntList,
    DoubleList,
    BoolList,
    TensorList,
    OptionalTensorList,
  };

  IValue() = default;                                                     // None
  IValue(std::nullopt_t) {}                                               // NOLINT
  IValue(TensorBase t) : v_(std::move(t)) {}                              // NOLINT
  IValue(int64_t i) : v_(i) {}                                            // NOLINT
  IValue(int i) : v_(int64_t{i}) {}                                       // NOLINT
  IValue(double d) : v_(d) {}                                             // NOLINT
  IValue(bool b) : v_(b) {}                                               // NOLINT
  IValue(std::string s) : v_(std::move(s)) {}                             // NOLINT
  IValue(const char* s) : v_(std::string(s)) {}                           // NOLINT
  IValue(Scalar s) : v_(s) {}                                             // NOLINT
  IValue(ScalarType t) : v_(t) {}                                         // NOLINT
  IValue(Device d) : v_(d) {}                                             // NOLINT
  IValue(std::vector<int64_t> v) : v_(std::move(v)) {}                    // NOLINT
  IValue(std::vector<double> v) : v_(std::move(v)) {}                     // NOLINT
  IValue(std::vector<bool> v) : v_(std::move(v)) {}                       // NOLINT
  IValue(std::vector<TensorBase> v) : v_(std::move(v)) {}                 // NOLINT
  IValue(std::vector<std::optional<TensorBase>> v) : v_(std::move(v)) {}  // NOLINT
  // Lists of a class derived from TensorBase (Tensor).
  template <typename T>
  requires std::is_base_of_v<TensorBase, T> IValue(const std::vector<T>& v)
      : v_(std::vector<TensorBase>(v.begin(), v.end())) {}  // NOLINT
  template <typename T>
  requires std::is_base_of_v<TensorBase, T> IValue(const std::vector<std::optional<T>>& v)  // NOLINT
      : v_(std::vector<std::optional<TensorBase>>(v.begin(), v.end())) {}
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
  const TensorBase& toTensor() const& { return get<TensorBase>(Tag::Tensor); }
  TensorBase& toTensor() & { return const_cast<TensorBase&>(std::as_const(*this).toTensor()); }
  TensorBase toTensor() && { return std::move(toTensor()); }
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
  const std::vector<TensorBase>& toTensorList() const& { return get<std::vector<TensorBase>>(Tag::TensorList); }
  std::vector<TensorBase>& toTensorList() & {
    return const_cast<std::vector<TensorBase>&>(std::as_const(*this).toTensorList());
  }
  const std::vector<std::optional<TensorBase>>& toOptionalTensorList() const& {
    return get<std::vector<std::optional<TensorBase>>>(Tag::OptionalTensorList);
  }
  std::vector<std::optional<TensorBase>>& toOptionalTensorList() & {
    return const_cast<std::vector<std::optional<TensorBase>>&>(std::as_const(*this).toOptionalTensorList());
  }

  // A short description for messages: "Tensor[2, 3] float32 cpu", "5", "[1, 2]".
  std::string str() const;

 private:
  template <typename T>
  const T& get(Tag want) const {
    if (const T* p = std::get_if<T>(&v_)) [[likely]]
      return *p;
    throwWrongTag(want);
  }
  [[noreturn]] void throwWrongTag(Tag want) const;

  std::variant<std::monostate, TensorBase, int64_t, double, bool, std::string, Scalar, ScalarType, Device,
               std::vector<int64_t>, std::vector<double>, std::vector<bool>, std::vector<TensorBase>,
               std::vector<std::optional<TensorBase>>>
      v_;
};

using Stack = std::vector<IValue>;

}  // namespace backplane
